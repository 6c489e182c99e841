"""The env adapter on one small environment of each API, plus bad-input errors."""

from __future__ import annotations

import pytest
import torch

from st_rl.env import EnvAdapter, NonFiniteError
from st_rl.tasks import PointMass, VelocityTracking
from st_rl.tasks.api_shims import IsaacLabStyle, LeggedGymStyle, TensorDictStyle


def _check_step(adapter: EnvAdapter, critic_width: int) -> None:
    n = adapter.num_envs
    obs, critic, extras = adapter.get_observations()
    assert obs.shape == (n, adapter.num_obs) and obs.dtype == torch.float32
    assert critic.shape == (n, critic_width)
    actions = torch.zeros(n, adapter.num_actions)
    adapter.env.episode_length_buf[:] = adapter.env.max_episode_length - 1
    obs, critic, rewards, dones, infos = adapter.step(actions)
    assert obs.shape == (n, adapter.num_obs)
    assert critic.shape == (n, critic_width)
    assert rewards.shape == (n,) and rewards.dtype == torch.float32
    assert dones.dtype == torch.bool and bool(dones.all()), "every env timed out"
    assert infos["time_outs"].dtype == torch.bool and bool(infos["time_outs"].all())


@pytest.mark.parametrize("shim", [None, LeggedGymStyle, IsaacLabStyle, TensorDictStyle])
def test_adapter_privileged_critic_every_api(shim):
    base = VelocityTracking(num_envs=8, seed=0)
    env = base if shim is None else shim(base)
    adapter = EnvAdapter(env)
    expected_api = {
        None: "rsl_rl2",
        LeggedGymStyle: "legged_gym",
        IsaacLabStyle: "rsl_rl2",
        TensorDictStyle: "tensordict",
    }[shim]
    assert adapter.api == expected_api
    assert adapter.has_critic_group
    assert adapter.num_critic_obs == base.num_privileged_obs > adapter.num_obs == base.num_obs
    _check_step(adapter, base.num_privileged_obs)


@pytest.mark.parametrize("shim", [None, LeggedGymStyle, IsaacLabStyle, TensorDictStyle])
def test_adapter_without_critic_group_uses_actor_obs(shim):
    base = PointMass(num_envs=4, seed=0)
    env = base if shim is None else shim(base)
    adapter = EnvAdapter(env)
    assert not adapter.has_critic_group
    obs, critic, _ = adapter.get_observations()
    assert torch.equal(obs, critic)
    _check_step(adapter, base.num_obs)


def test_isaaclab_long_dones_become_bool_before_indexing():
    env = IsaacLabStyle(PointMass(num_envs=4, seed=0))
    env.episode_length_buf[:] = torch.tensor([0, env.max_episode_length - 1, 0, 0])
    raw = env.step(torch.zeros(4, 2))
    assert raw[2].dtype == torch.long  # the shim returns Isaac Lab's 0/1 longs
    env2 = IsaacLabStyle(PointMass(num_envs=4, seed=0))
    adapter = EnvAdapter(env2)
    env2.episode_length_buf[:] = torch.tensor([0, env2.max_episode_length - 1, 0, 0])
    _, _, _, dones, _ = adapter.step(torch.zeros(4, 2))
    assert dones.tolist() == [False, True, False, False]


def test_layout_comes_from_env_or_groups():
    base = VelocityTracking(num_envs=2, seed=0)
    adapter = EnvAdapter(LeggedGymStyle(base))
    assert list(adapter.obs_segments) == list(base.obs_segments)
    assert list(adapter.critic_obs_segments) == list(base.privileged_obs_segments)
    td_adapter = EnvAdapter(TensorDictStyle(base))
    # TensorDict envs have no segments: each group is one component.
    assert list(td_adapter.obs_segments) == ["policy"]
    assert td_adapter.obs_segments["policy"] == (base.num_obs,)


def test_obs_groups_select_and_concatenate_groups():
    base = VelocityTracking(num_envs=3, seed=0)
    adapter = EnvAdapter(
        TensorDictStyle(base), obs_groups={"policy": ["policy", "critic"], "critic": ["critic"]}
    )
    obs, critic, _ = adapter.get_observations()
    assert obs.shape == (3, base.num_obs + base.num_privileged_obs)
    assert torch.equal(obs[:, base.num_obs :], critic)
    with pytest.raises(ValueError, match="available groups"):
        EnvAdapter(TensorDictStyle(base), obs_groups={"policy": ["camera"]})


class _NaNEnv:
    """A native-API env that emits NaN in its critic group after the first step."""

    def __init__(self, where: str) -> None:
        self.inner = VelocityTracking(num_envs=4, seed=0)
        self.where = where
        for k in ("num_envs", "num_obs", "num_privileged_obs", "num_actions", "max_episode_length", "device"):
            setattr(self, k, getattr(self.inner, k))
        self.episode_length_buf = self.inner.episode_length_buf

    def get_observations(self):
        return self.inner.get_observations()

    def step(self, actions):
        obs, rew, dones, extras = self.inner.step(actions)
        extras = dict(extras)
        groups = dict(extras["observations"])
        if self.where == "critic":
            groups["critic"] = groups["critic"].clone()
            groups["critic"][1, 0] = float("nan")
        elif self.where == "rewards":
            rew = rew.clone()
            rew[0] = float("inf")
        extras["observations"] = groups
        return obs, rew, dones, extras


@pytest.mark.parametrize("where,pattern", [("critic", "observation group 'critic'"), ("rewards", "rewards")])
def test_nonfinite_env_output_raises_naming_the_group(where, pattern):
    adapter = EnvAdapter(_NaNEnv(where))
    adapter.step(torch.zeros(4, adapter.num_actions))  # accumulated, no host sync yet
    with pytest.raises(NonFiniteError, match=pattern):
        adapter.raise_if_nonfinite()
    step_adapter = EnvAdapter(_NaNEnv(where), check_finite="step")
    with pytest.raises(NonFiniteError, match=pattern):
        step_adapter.step(torch.zeros(4, step_adapter.num_actions))


def test_adapter_rejects_non_env():
    with pytest.raises(TypeError, match="vectorised environment"):
        EnvAdapter(object())


# ------------------------------------------------------------------ task metrics
def test_task_metrics_from_the_declared_hook_and_from_st_gym_attributes():
    from st_rl.tasks import make_env

    env = make_env("velocity_tracking", num_envs=4, seed=0)
    declared = EnvAdapter(env).task_metrics()
    assert set(declared) == {"velrmsd", "CoT"}
    torch.testing.assert_close(declared["velrmsd"], env.tracking_error.mean())
    # legged_gym-style wrappers expose the st_gym attributes only: the adapter reads those
    legacy = EnvAdapter(LeggedGymStyle(make_env("velocity_tracking", num_envs=4, seed=0))).task_metrics()
    assert set(legacy) == {"velrmsd", "CoT"}
    torch.testing.assert_close(legacy["velrmsd"], declared["velrmsd"])
    # an environment without metrics reports none, and learn() returns zeros for the two st_gym reads
    plain = EnvAdapter(make_env("point_mass", num_envs=4, seed=0))
    assert plain.task_metrics() == {}
    assert [float(v) for v in plain.returned_metrics({})] == [0.0, 0.0]


def test_optional_environment_attributes_through_the_adapter():
    base = VelocityTracking(num_envs=4, seed=0)
    adapter = EnvAdapter(base)
    assert adapter.dt == pytest.approx(base.dt) and adapter.cfg == base.cfg
    assert adapter.env_device == torch.device(base.device)
    assert adapter.joint_names is None and adapter.default_joint_pos is None  # not declared by this task
    state = adapter.state_dict()
    assert state is not None and adapter.load_state_dict(state)

    # An environment without the optional attributes: None / False, never an AttributeError.
    bare = _NaNEnv("none")
    del bare.device
    adapter = EnvAdapter(bare, device=None)
    assert adapter.device == torch.device("cpu") and adapter.env_device is None
    assert adapter.dt is None and adapter.cfg is None
    assert adapter.state_dict() is None and not adapter.load_state_dict({})


def test_env_spec_from_env_attributes():
    from types import SimpleNamespace

    from st_rl.env import EnvSpec

    spec = EnvSpec.from_env(
        SimpleNamespace(num_obs=6, num_privileged_obs=0, num_actions=2, obs_segments={"p": 6})
    )
    assert (spec.num_obs, spec.num_critic_obs, spec.num_actions) == (6, 6, 2)
    assert spec.obs_segments == {"p": 6} and spec.critic_obs_segments is None and spec.amp_obs_dim is None
    spec = EnvSpec.from_env(SimpleNamespace(num_obs=6, num_critic_obs=9, num_actions=2, amp_obs_dim=4))
    assert spec.num_critic_obs == 9 and spec.amp_obs_dim == 4
    with pytest.raises(TypeError, match="num_actions"):
        EnvSpec.from_env(SimpleNamespace(num_obs=6))
