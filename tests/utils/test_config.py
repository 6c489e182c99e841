"""Training-config resolution (flat st_gym form, nested legged_gym form) and class-name lookup."""

import copy
import warnings
from dataclasses import dataclass, field

import pytest
import torch.nn as nn

import st_rl.algorithms as algorithms
import st_rl.modules as modules
from st_rl.algorithms import PPO
from st_rl.config import ConfigError
from st_rl.modules import ActorCritic, MlpModel
from st_rl.utils.config import resolve_class, resolve_train_cfg


def flat_cfg():
    """What st_gym's ``RslRlOnPolicyRunnerCfg.to_dict()`` produces."""
    return {
        "seed": 42,
        "device": "cuda:0",
        "num_steps_per_env": 24,
        "max_iterations": 1500,
        "empirical_normalization": True,
        "save_interval": 50,
        "experiment_name": "go2_flat",
        "run_name": "",
        "logger": "tensorboard",
        "neptune_project": "isaaclab",
        "wandb_project": "isaaclab",
        "resume": False,
        "load_run": ".*",
        "load_checkpoint": "model_.*.pt",
        "runner_class_name": "OnPolicyRunner",
        "log_interval": 1,
        "storage": {"amp_obs_shape": [10]},
        "policy": {
            "class_name": "ActorCritic",
            "init_noise_std": 1.0,
            "actor_hidden_dims": [512, 256, 128],
            "critic_hidden_dims": [512, 256, 128],
            "activation": "elu",
            "num_actor_obs": None,
            "num_critic_obs": None,
            "num_actions": None,
            "obs_segments": {"base": [3], "joints": [12]},
        },
        "algorithm": {
            "class_name": "PPO",
            "value_loss_coef": 1.0,
            "use_clipped_value_loss": True,
            "clip_param": 0.2,
            "entropy_coef": 0.01,
            "num_learning_epochs": 5,
            "num_mini_batches": 4,
            "learning_rate": 1e-3,
            "schedule": "adaptive",
            "gamma": 0.99,
            "lam": 0.95,
            "desired_kl": 0.01,
            "max_grad_norm": 1.0,
            "bc_loss_coef": 0.001,
        },
    }


def nested_cfg():
    """What legged_gym's ``class_to_dict(LeggedRobotCfgPPO)`` produces."""
    return {
        "seed": 1,
        "runner_class_name": "OnPolicyRunner",
        "policy": {
            "init_noise_std": 1.0,
            "actor_hidden_dims": [128, 64],
            "critic_hidden_dims": [128, 64],
            "activation": "elu",
            "encoder_kwargs": {"hidden_sizes": [128, 64], "nonlinearity": "CELU"},
        },
        "algorithm": {"value_loss_coef": 1.0, "clip_param": 0.2, "gamma": 0.99, "lam": 0.95},
        "runner": {
            "policy_class_name": "ActorCritic",
            "algorithm_class_name": "PPO",
            "num_steps_per_env": 24,
            "max_iterations": 1500,
            "save_interval": 50,
            "experiment_name": "rough_go2",
            "run_name": "",
            "resume": False,
            "load_run": -1,
            "checkpoint": -1,
            "resume_path": None,
        },
    }


def _resolve_quietly(cfg):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return resolve_train_cfg(cfg)


def test_flat_form():
    cfg = flat_cfg()
    snapshot = copy.deepcopy(cfg)
    tc = _resolve_quietly(cfg)
    assert cfg == snapshot
    assert tc.source_format == "flat"
    assert tc.policy_class_name == "ActorCritic" and tc.algorithm_class_name == "PPO"
    assert "class_name" not in tc.policy and "class_name" not in tc.algorithm
    assert tc.policy["actor_hidden_dims"] == [512, 256, 128]
    assert tc.storage == {"amp_obs_shape": [10]}
    assert "storage" not in tc.runner and "policy" not in tc.runner and "algorithm" not in tc.runner
    assert tc.runner["seed"] == 42 and tc.runner["num_steps_per_env"] == 24
    assert tc.runner["runner_class_name"] == "OnPolicyRunner"
    # the runner-level switch reaches the algorithm when the algorithm does not set it
    assert tc.algorithm["empirical_normalization"] is True
    # private copies: editing the result does not reach the user's config
    tc.policy["actor_hidden_dims"].append(1)
    tc.policy["obs_segments"]["base"].append(1)
    tc.storage["amp_obs_shape"].append(1)
    assert cfg == snapshot


def test_flat_form_algorithm_key_wins():
    cfg = flat_cfg()
    cfg["algorithm"]["empirical_normalization"] = False
    assert _resolve_quietly(cfg).algorithm["empirical_normalization"] is False


def test_nested_form():
    cfg = nested_cfg()
    snapshot = copy.deepcopy(cfg)
    tc = _resolve_quietly(cfg)
    assert cfg == snapshot
    assert tc.source_format == "nested"
    assert tc.policy_class_name == "ActorCritic" and tc.algorithm_class_name == "PPO"
    assert tc.runner["seed"] == 1 and tc.runner["runner_class_name"] == "OnPolicyRunner"
    assert tc.runner["num_steps_per_env"] == 24 and tc.runner["checkpoint"] == -1
    assert tc.policy["encoder_kwargs"] == {"hidden_sizes": [128, 64], "nonlinearity": "CELU"}
    assert tc.algorithm == {"value_loss_coef": 1.0, "clip_param": 0.2, "gamma": 0.99, "lam": 0.95}
    tc.policy["encoder_kwargs"]["hidden_sizes"].append(3)
    assert cfg == snapshot


def test_nested_class_names_must_agree():
    cfg = nested_cfg()
    cfg["policy"]["class_name"] = cfg["runner"]["policy_class_name"]
    tc = _resolve_quietly(cfg)
    assert tc.policy_class_name == cfg["runner"]["policy_class_name"] and tc.algorithm_class_name == "PPO"
    cfg["policy"]["class_name"] = "ActorCriticRecurrent"
    with pytest.raises(
        ConfigError, match="policy.class_name = 'ActorCriticRecurrent': conflicts with runner"
    ):
        resolve_train_cfg(cfg)


def test_defaults_when_class_names_absent():
    tc = _resolve_quietly({"policy": {}, "algorithm": {}})
    assert tc.policy_class_name == "ActorCritic" and tc.algorithm_class_name == "PPO"


def test_unknown_runner_key_is_an_error_with_close_match():
    cfg = flat_cfg()
    cfg["num_step_per_env"] = 24
    with pytest.raises(ConfigError, match="num_step_per_env") as err:
        resolve_train_cfg(cfg)
    assert "did you mean 'num_steps_per_env'" in str(err.value)
    assert err.value.paths == ["num_step_per_env"]
    assert "num_step_per_env" in cfg  # not mutated


def test_unknown_nested_runner_key_is_an_error():
    cfg = nested_cfg()
    cfg["runner"]["save_intervall"] = 10
    with pytest.raises(ConfigError, match=r"runner\.save_intervall.*save_interval"):
        resolve_train_cfg(cfg)


@pytest.mark.parametrize("drop", ["policy", "algorithm"])
def test_missing_policy_or_algorithm_raises(drop):
    cfg = flat_cfg()
    del cfg[drop]
    with pytest.raises(ConfigError, match="'policy' and an 'algorithm'"):
        resolve_train_cfg(cfg)


def test_policy_not_a_dict_raises():
    with pytest.raises(ValueError):
        resolve_train_cfg({"policy": "ActorCritic", "algorithm": {}})


# ---------------------------------------------------------------------------- other config carriers
@dataclass
class PolicyDC:
    class_name: str = "ActorCritic"
    init_noise_std: float = 0.5
    actor_hidden_dims: list = field(default_factory=lambda: [32, 32])


@dataclass
class AlgorithmDC:
    class_name: str = "PPO"
    gamma: float = 0.97


@dataclass
class RunnerDC:
    seed: int = 3
    num_steps_per_env: int = 16
    policy: PolicyDC = field(default_factory=PolicyDC)
    algorithm: AlgorithmDC = field(default_factory=AlgorithmDC)


def test_dataclass_config():
    cfg = RunnerDC()
    tc = _resolve_quietly(cfg)
    assert tc.policy_class_name == "ActorCritic" and tc.algorithm_class_name == "PPO"
    assert tc.policy == {"init_noise_std": 0.5, "actor_hidden_dims": [32, 32]}
    assert tc.algorithm == {"gamma": 0.97}
    assert tc.runner == {"seed": 3, "num_steps_per_env": 16}
    tc.policy["actor_hidden_dims"].append(1)
    assert cfg.policy.class_name == "ActorCritic" and cfg.policy.actor_hidden_dims == [32, 32]


class LeggedCfgPPO:
    """legged_gym style: class attributes and nested classes."""

    seed = 5
    runner_class_name = "OnPolicyRunner"

    class policy:  # noqa: N801
        init_noise_std = 0.8
        actor_hidden_dims = [64, 32]

        class encoder_kwargs:  # noqa: N801
            hidden_sizes = [16]

    class algorithm:  # noqa: N801
        gamma = 0.98

    class runner:  # noqa: N801
        policy_class_name = "ActorCritic"
        algorithm_class_name = "PPO"
        num_steps_per_env = 48
        experiment_name = "legged"


@pytest.mark.parametrize("as_instance", [False, True])
def test_legged_gym_class_config(as_instance):
    cfg = LeggedCfgPPO() if as_instance else LeggedCfgPPO
    tc = _resolve_quietly(cfg)
    assert tc.source_format == "nested"
    assert tc.policy_class_name == "ActorCritic" and tc.algorithm_class_name == "PPO"
    assert tc.policy == {
        "init_noise_std": 0.8,
        "actor_hidden_dims": [64, 32],
        "encoder_kwargs": {"hidden_sizes": [16]},
    }
    assert tc.algorithm == {"gamma": 0.98}
    assert tc.runner["seed"] == 5 and tc.runner["num_steps_per_env"] == 48
    tc.policy["actor_hidden_dims"].append(1)
    tc.policy["encoder_kwargs"]["hidden_sizes"].append(1)
    assert LeggedCfgPPO.policy.actor_hidden_dims == [64, 32]
    assert LeggedCfgPPO.policy.encoder_kwargs.hidden_sizes == [16]


def test_object_with_to_dict_is_copied():
    inner = flat_cfg()
    snapshot = copy.deepcopy(inner)

    class Carrier:
        def to_dict(self):
            return inner

    tc = _resolve_quietly(Carrier())
    tc.policy["actor_hidden_dims"].append(1)
    assert inner == snapshot


# ---------------------------------------------------------------------------- resolve_class
def test_resolve_class_short_name_and_class():
    assert resolve_class("ActorCritic", modules, "policy", nn.Module) is ActorCritic
    assert resolve_class("PPO", algorithms, "algorithm") is PPO
    assert resolve_class(MlpModel, modules, "policy") is MlpModel


@pytest.mark.parametrize("name", ["st_rl.modules.mlp:MlpModel", "st_rl.modules.mlp.MlpModel"])
def test_resolve_class_module_path(name):
    assert resolve_class(name, modules, "policy", nn.Module) is MlpModel


def test_resolve_class_unknown_lists_names():
    with pytest.raises(ValueError, match="ActorCritc") as info:
        resolve_class("ActorCritc", modules, "policy", nn.Module)
    msg = str(info.value)
    assert "ActorCritic" in msg and "MlpModel" in msg and "EmpiricalNormalization" in msg
    assert "Did you mean ['ActorCritic'" in msg


@pytest.mark.parametrize("name", ["st_rl.modules.mlp:NoSuchClass", "no_such_pkg.mod:Thing", "", None])
def test_resolve_class_bad_inputs(name):
    with pytest.raises(ValueError):
        resolve_class(name, modules, "policy")


def test_resolve_class_respects_base():
    # a function exported by the namespace is not a class; the base filter applies to short names
    with pytest.raises(ValueError):
        resolve_class("build_actor_critic", modules, "policy", nn.Module)
    with pytest.raises(ValueError):
        resolve_class("PPO", algorithms, "algorithm", nn.Module)
