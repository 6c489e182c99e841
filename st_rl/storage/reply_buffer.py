"""Alias of :mod:`st_rl.storage.replay_buffer` under the reference's file name (``reply_buffer.py``)."""

from st_rl.storage.replay_buffer import ReplayBuffer

__all__ = ["ReplayBuffer"]
