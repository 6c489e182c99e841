"""Reference name (st_rl/compat.py): :mod:`st_rl.storage.replay_buffer` under the reference's file name."""

from st_rl.storage.replay_buffer import ReplayBuffer

__all__ = ["ReplayBuffer"]
