"""Learning algorithms. Every class usable as an ``algorithm.class_name`` is exported here."""

from st_rl.algorithms import functional
from st_rl.algorithms.estimator import EstimatorPPO
from st_rl.algorithms.ppo import PPO, NonFiniteLossError

__all__ = ["PPO", "EstimatorPPO", "NonFiniteLossError", "functional"]
