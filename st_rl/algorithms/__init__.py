"""Learning algorithms: :class:`PPO` and its presets with extensions; every ``algorithm.class_name`` is here."""

from st_rl.algorithms import extensions, functional
from st_rl.algorithms.appo import APPO, ATPPO, APPOAlgoMixin
from st_rl.algorithms.estimator import EstimatorAlgoMixin, EstimatorPPO, EstimatorTPPO
from st_rl.algorithms.ppo import PPO, NonFiniteLossError
from st_rl.algorithms.schedules import GET_PROB_FUNC
from st_rl.algorithms.tppo import TPPO

__all__ = [
    "APPO",
    "APPOAlgoMixin",
    "ATPPO",
    "GET_PROB_FUNC",
    "PPO",
    "TPPO",
    "EstimatorAlgoMixin",
    "EstimatorPPO",
    "EstimatorTPPO",
    "NonFiniteLossError",
    "extensions",
    "functional",
]
