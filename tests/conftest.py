"""Shared fixtures: small built-in environments and a small training config."""

from __future__ import annotations

import copy
import signal
from collections.abc import Iterator

import pytest
import torch

from st_rl.evaluation.rendering import set_default_gl_backend

# Offscreen rendering on headless machines: MuJoCo picks its GL backend when first imported.
set_default_gl_backend("egl")

# The signal tests send SIGINT / SIGHUP as a terminal does. Started under `nohup` or as a background job, this
# process (and every process it starts) would inherit them ignored; give them their terminal dispositions.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

SMALL_CFG = {
    "seed": 1,
    "num_steps_per_env": 16,
    "save_interval": 2,
    "empirical_normalization": True,
    "logger": "tensorboard",
    "policy": {
        "class_name": "ActorCritic",
        "actor_hidden_dims": [32, 32],
        "critic_hidden_dims": [32, 32],
        "activation": "elu",
        "init_noise_std": 1.0,
    },
    "algorithm": {
        "class_name": "PPO",
        "num_learning_epochs": 2,
        "num_mini_batches": 2,
        "learning_rate": 1e-3,
        "schedule": "adaptive",
        "gamma": 0.99,
        "lam": 0.95,
    },
}


# The legged_gym nested form (``class_to_dict(LeggedRobotCfgPPO)``): runner keys inside ``runner``.
NESTED_CFG: dict = {
    "seed": 3,
    "runner_class_name": "OnPolicyRunner",
    "policy": {
        "init_noise_std": 0.8,
        "actor_hidden_dims": [32, 32],
        "critic_hidden_dims": [32],
        "activation": "elu",
    },
    "algorithm": {
        "value_loss_coef": 1.0,
        "use_clipped_value_loss": True,
        "clip_param": 0.2,
        "entropy_coef": 0.01,
        "num_learning_epochs": 2,
        "num_mini_batches": 2,
        "learning_rate": 1e-3,
        "schedule": "adaptive",
        "gamma": 0.99,
        "lam": 0.95,
        "desired_kl": 0.01,
        "max_grad_norm": 1.0,
    },
    "runner": {
        "policy_class_name": "ActorCritic",
        "algorithm_class_name": "PPO",
        "num_steps_per_env": 8,
        "max_iterations": 10,
        "save_interval": 5,
        "experiment_name": "test",
        "run_name": "",
        "resume": False,
        "load_run": -1,
        "checkpoint": -1,
        "resume_path": None,
    },
}


@pytest.fixture
def small_cfg() -> dict:
    """A flat (st_gym-form) config for fast runner tests."""
    return copy.deepcopy(SMALL_CFG)


@pytest.fixture(autouse=True)
def _few_threads():
    torch.set_num_threads(2)
    yield


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread (and so one MuJoCo thread) for the test: the same arithmetic on every machine, and on
    a shared 2-core machine the thread pool's synchronisation costs more than it saves for small batches."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
