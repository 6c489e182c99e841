"""Learning algorithms. Every class usable as an ``algorithm.class_name`` is exported here.

:class:`PPO` is the one algorithm; ``APPO``, ``ATPPO``, ``TPPO``, ``EstimatorPPO`` and ``EstimatorTPPO`` are
presets that assemble it with extensions (:mod:`st_rl.algorithms.extensions`). The reference's algorithm
mixins :class:`APPOAlgoMixin` and :class:`EstimatorAlgoMixin` add those extensions to any of them
(``class MyAlgo(APPOAlgoMixin, TPPO)`` is :class:`ATPPO`).
"""

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
