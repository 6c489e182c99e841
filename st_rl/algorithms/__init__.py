"""Learning algorithms. Every class usable as an ``algorithm.class_name`` is exported here.

:class:`PPO` is the one algorithm; ``APPO``, ``ATPPO``, ``TPPO``, ``EstimatorPPO`` and ``EstimatorTPPO`` are
presets that assemble it with extensions (:mod:`st_rl.algorithms.extensions`).
"""

from st_rl.algorithms import extensions, functional
from st_rl.algorithms.appo import APPO, ATPPO
from st_rl.algorithms.estimator import EstimatorPPO, EstimatorTPPO
from st_rl.algorithms.ppo import PPO, NonFiniteLossError
from st_rl.algorithms.schedules import GET_PROB_FUNC
from st_rl.algorithms.tppo import TPPO

__all__ = [
    "APPO",
    "ATPPO",
    "GET_PROB_FUNC",
    "PPO",
    "TPPO",
    "EstimatorPPO",
    "EstimatorTPPO",
    "NonFiniteLossError",
    "extensions",
    "functional",
]
