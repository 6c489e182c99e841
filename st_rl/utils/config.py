"""Config resolution at its former path (docs and user scripts import it from here): :mod:`st_rl.config.resolve`
and :mod:`st_rl.registry`. Nothing inside st_rl imports this module."""

from st_rl import registry as _registry
from st_rl.config import resolve as _resolve
from st_rl.config.resolve import *  # noqa: F403
from st_rl.registry import *  # noqa: F403

__all__ = []
__all__ += _resolve.__all__
__all__ += _registry.__all__
