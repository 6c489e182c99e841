"""Learning algorithms: :class:`PPO` and its presets with extensions; every ``algorithm.class_name`` is here."""

# ruff: noqa: F401 - the imports are the exports (__all__ below lists them)
from types import ModuleType as _ModuleType

from st_rl.algorithms import extensions, functional
from st_rl.algorithms.appo import APPO, ATPPO, APPOAlgoMixin
from st_rl.algorithms.estimator import EstimatorAlgoMixin, EstimatorPPO, EstimatorTPPO
from st_rl.algorithms.ppo import PPO, NonFiniteLossError
from st_rl.algorithms.schedules import GET_PROB_FUNC
from st_rl.algorithms.tppo import TPPO

__all__ = [n for n, v in globals().items() if n[0] != "_" and not isinstance(v, _ModuleType)]  # pyright: ignore[reportUnsupportedDunderAll]
__all__ += ["extensions", "functional"]
