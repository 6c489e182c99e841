"""PPO extensions: each optional feature of the algorithm is one object in one file."""

# ruff: noqa: F401 - the imports are the exports (__all__ below lists them)
from types import ModuleType as _ModuleType

from st_rl.algorithms.extensions.amp import AdversarialMotionPrior, MissingAmpDataError
from st_rl.algorithms.extensions.base import Extension, StorageLayout
from st_rl.algorithms.extensions.distillation import Distillation
from st_rl.algorithms.extensions.estimator import StateEstimation
from st_rl.algorithms.extensions.rnd import RandomNetworkDistillation
from st_rl.algorithms.extensions.symmetry import Symmetry

__all__ = [n for n, v in globals().items() if n[0] != "_" and not isinstance(v, _ModuleType)]  # pyright: ignore[reportUnsupportedDunderAll]
