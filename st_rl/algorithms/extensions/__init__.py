"""PPO extensions: each optional feature of the algorithm is one object in one file."""

from st_rl.algorithms.extensions.amp import AdversarialMotionPrior, MissingAmpDataError
from st_rl.algorithms.extensions.base import Extension, StorageLayout
from st_rl.algorithms.extensions.distillation import Distillation
from st_rl.algorithms.extensions.estimator import StateEstimation
from st_rl.algorithms.extensions.rnd import RandomNetworkDistillation
from st_rl.algorithms.extensions.symmetry import Symmetry

__all__ = [
    "AdversarialMotionPrior",
    "Distillation",
    "Extension",
    "MissingAmpDataError",
    "RandomNetworkDistillation",
    "StateEstimation",
    "Symmetry",
    "StorageLayout",
]
