"""The env cfg of every kind round-trips through ``config.json`` and the Mutex reads its action scale.

Kinds (issue 16, item 5): legged_gym class-based cfgs (nested classes, as a class and as an instance), plain
dataclasses, Isaac Lab configclass-like objects (dataclasses with ``to_dict()``) and plain dicts. A run whose
config holds no action scale makes the Mutex use its ``env_action_scale``, or fail naming what to set.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from typing import Any

import pytest
import torch

from st_rl.modules.actor_critic_mutex import ActorCriticMutex
from st_rl.runners import OnPolicyRunner
from st_rl.tasks.velocity_tracking import VelocityTracking
from st_rl.utils.config import env_cfg_to_jsonable
from st_rl.utils.utils import read_run_config

NUM_ENVS = 4


# ---------------------------------------------------------------------------- the cfg kinds
class BaseConfig:
    """legged_gym's BaseConfig: instantiates the nested classes recursively."""

    def __init__(self) -> None:
        self.init_member_classes(self)

    @staticmethod
    def init_member_classes(obj: Any) -> None:
        for key in dir(obj):
            if key == "__class__":
                continue
            var = getattr(obj, key)
            if inspect.isclass(var):
                i_var = var()
                setattr(obj, key, i_var)
                BaseConfig.init_member_classes(i_var)


class LeggedRobotCfg(BaseConfig):
    class env:
        num_envs = 4096
        num_observations = 48

    class control:
        action_scale = 0.5
        stiffness = {"joint": 20.0}
        decimation = 4

    class normalization:
        class obs_scales:
            lin_vel = 2.0
            ang_vel = 0.25

        clip_actions = 100.0


class Go1Cfg(LeggedRobotCfg):
    class control(LeggedRobotCfg.control):
        action_scale = 0.25  # overridden in a subclass, as robot configs do


@dataclasses.dataclass
class ObsScales:
    lin_vel: float = 2.0


@dataclasses.dataclass
class DataclassEnvCfg:
    action_scale: float = 0.3
    obs_scales: ObsScales = dataclasses.field(default_factory=ObsScales)
    command_range: tuple[float, float] = (-1.0, 1.0)


def reward_fn(x: Any) -> Any:
    return x


@dataclasses.dataclass
class JointPositionActionCfg:
    class_type: type = torch.nn.Identity  # Isaac Lab stores classes and functions in its cfgs
    joint_names: list[str] = dataclasses.field(default_factory=lambda: [".*"])
    scale: float = 0.35


@dataclasses.dataclass
class ActionsCfg:
    joint_pos: JointPositionActionCfg = dataclasses.field(default_factory=JointPositionActionCfg)


@dataclasses.dataclass
class ConfigclassEnvCfg:
    """An Isaac Lab configclass stand-in: a dataclass with ``to_dict()`` (functions become names)."""

    decimation: int = 4
    actions: ActionsCfg = dataclasses.field(default_factory=ActionsCfg)
    reward_func: Any = reward_fn

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["reward_func"] = f"{reward_fn.__module__}:{reward_fn.__name__}"
        return data


KINDS = {
    # name: (cfg object, the action scale the Mutex must read)
    "legged_gym_instance": (lambda: Go1Cfg(), 0.25),
    "legged_gym_class": (lambda: Go1Cfg, 0.25),
    "dataclass": (lambda: DataclassEnvCfg(), 0.3),
    "configclass": (lambda: ConfigclassEnvCfg(), 0.35),
    "dict": (lambda: {"action_scale": 0.4, "obs_scales": {"lin_vel": 2.0}}, 0.4),
}


class CfgEnv:
    """VelocityTracking seen through a ``cfg`` of a chosen kind (everything else is delegated)."""

    def __init__(self, cfg: Any, seed: int = 0) -> None:
        self._inner = VelocityTracking(num_envs=NUM_ENVS, device="cpu", seed=seed, episode_length_s=1.0)
        self.cfg = cfg

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def train_cfg() -> dict[str, Any]:
    return {
        "seed": 1,
        "num_steps_per_env": 4,
        "save_interval": 1000,
        "logger": "none",
        "policy": {"class_name": "ActorCritic", "actor_hidden_dims": [8], "critic_hidden_dims": [8]},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 1},
    }


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def train_run(tmp_path, name: str, cfg: Any) -> str:
    run_dir = str(tmp_path / name)
    OnPolicyRunner(CfgEnv(cfg), train_cfg(), log_dir=run_dir).learn(1)
    return run_dir


def mutex(paths: list[str], **kw: Any) -> ActorCriticMutex:
    env = VelocityTracking(num_envs=NUM_ENVS, device="cpu")
    return ActorCriticMutex(
        env.num_obs, int(env.num_privileged_obs or env.num_obs), env.num_actions, sub_policy_paths=paths, **kw
    )


# ---------------------------------------------------------------------------- tests
def test_conversion_of_each_kind():
    lg = env_cfg_to_jsonable(Go1Cfg())
    assert lg["control"] == {"action_scale": 0.25, "decimation": 4, "stiffness": {"joint": 20.0}}
    assert lg["normalization"]["obs_scales"] == {"lin_vel": 2.0, "ang_vel": 0.25}
    assert "init_member_classes" not in lg  # methods are not config data
    assert env_cfg_to_jsonable(Go1Cfg) == lg  # the class itself converts the same way
    dc = env_cfg_to_jsonable(DataclassEnvCfg())
    assert dc == {"action_scale": 0.3, "obs_scales": {"lin_vel": 2.0}, "command_range": [-1.0, 1.0]}
    cc = env_cfg_to_jsonable(ConfigclassEnvCfg())
    assert cc["actions"]["joint_pos"]["scale"] == 0.35
    assert cc["reward_func"].endswith(":reward_fn")
    assert isinstance(cc["actions"]["joint_pos"]["class_type"], str)
    assert env_cfg_to_jsonable({"a": (1, 2), 3: torch.tensor([1.5])}) == {"a": [1, 2], "3": [1.5]}
    for kind, (make, _) in KINDS.items():
        data = env_cfg_to_jsonable(make())
        assert json.loads(json.dumps(data)) == data, kind  # plain JSON data


@pytest.mark.parametrize("kind", list(KINDS))
def test_kind_round_trips_and_the_mutex_reads_the_scale(tmp_path, kind):
    make, scale = KINDS[kind]
    run_dir = train_run(tmp_path, kind, make())
    stored = read_run_config(run_dir)["env"]
    assert stored == env_cfg_to_jsonable(make())
    m = mutex([run_dir], env_action_scale=0.5)
    assert math.isclose(float(m.subpolicy_action_scale(0)), scale, rel_tol=1e-6)
    assert math.isclose(float(m.action_scale_ratios()[0, 0]), scale / 0.5, rel_tol=1e-6)
    # without env_action_scale the env is taken to use the sub-policy's (stored) scale: never 1.0
    m2 = mutex([run_dir])
    assert math.isclose(float(m2.env_action_scale), scale, rel_tol=1e-6)


def test_missing_scale_uses_env_action_scale_or_is_an_error(tmp_path):
    run_dir = train_run(tmp_path, "noscale", {"obs_scales": {"lin_vel": 2.0}})
    with pytest.raises(ValueError, match=r"no action scale.*Set env_action_scale.*control\.action_scale"):
        mutex([run_dir])
    m = mutex([run_dir], env_action_scale=0.2)
    assert math.isclose(float(m.subpolicy_action_scale(0)), 0.2, rel_tol=1e-6)
    torch.testing.assert_close(m.action_scale_ratios(), torch.ones(1, 2))


def test_different_scales_need_env_action_scale(tmp_path):
    a = train_run(tmp_path, "a", DataclassEnvCfg())
    b = train_run(tmp_path, "b", Go1Cfg())
    with pytest.raises(ValueError, match="different action scales.*set env_action_scale"):
        mutex([a, b])
    m = mutex([a, b], env_action_scale=0.5)
    assert m.action_scale_ratios()[:, 0].tolist() == pytest.approx([0.6, 0.5])
