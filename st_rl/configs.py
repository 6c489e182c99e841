"""The training presets at their former path (docs and scripts import them from here): :mod:`st_rl.config.presets`."""

from st_rl.config.presets import *  # noqa: F403
from st_rl.config.presets import __all__ as __all__
