"""Reference name (st_rl/compat.py): :class:`~st_rl.runners.dagger_saver.DaggerSaver`."""

from st_rl.runners.dagger_saver import DaggerSaver

__all__ = ["DaggerSaver"]
