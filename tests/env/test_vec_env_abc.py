"""The reference's abstract ``VecEnv`` (legged_gym API): a user's subclass trains through the runner, and a
subclass that leaves an abstract method out cannot be instantiated. ``VecEnvLike`` is the typing protocol of
the native API the built-in tasks implement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import torch

from st_rl.env import VecEnv, VecEnvLike
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


class GoalReaching(VecEnv):
    """A 1-D point mass pushed towards a goal, written against the reference's abstract class.

    Actor observations: (position - goal, velocity); privileged (critic) observations add the goal itself.
    """

    def __init__(self, num_envs: int = 8, privileged: bool = True, seed: int = 0) -> None:
        self.num_envs = num_envs
        self.num_obs = 2
        self.num_privileged_obs = 3 if privileged else None
        self.num_actions = 1
        self.max_episode_length = 12
        self.device = torch.device("cpu")
        self.generator = torch.Generator().manual_seed(seed)
        self.pos = torch.zeros(num_envs)
        self.vel = torch.zeros(num_envs)
        self.goal = torch.zeros(num_envs)
        self.obs_buf = torch.zeros(num_envs, self.num_obs)
        self.privileged_obs_buf = torch.zeros(num_envs, 3) if privileged else None
        self.rew_buf = torch.zeros(num_envs)
        self.reset_buf = torch.zeros(num_envs, dtype=torch.bool)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.extras: dict[str, Any] = {}
        self.reset()

    def _observe(self) -> None:
        self.obs_buf = torch.stack([self.pos - self.goal, self.vel], dim=1)
        if self.privileged_obs_buf is not None:
            self.privileged_obs_buf = torch.cat([self.obs_buf, self.goal[:, None]], dim=1)

    def _reset_where(self, mask: torch.Tensor) -> None:
        goal = torch.rand(self.num_envs, generator=self.generator) * 2 - 1
        self.goal = torch.where(mask, goal, self.goal)
        self.pos = torch.where(mask, torch.zeros_like(self.pos), self.pos)
        self.vel = torch.where(mask, torch.zeros_like(self.vel), self.vel)
        self.episode_length_buf = torch.where(
            mask, torch.zeros_like(self.episode_length_buf), self.episode_length_buf
        )

    def get_observations(self) -> torch.Tensor:
        return self.obs_buf

    def get_privileged_observations(self) -> torch.Tensor | None:
        return self.privileged_obs_buf

    def reset(self, env_ids: Sequence[int] | torch.Tensor | None = None) -> Any:
        mask = torch.ones(self.num_envs, dtype=torch.bool)
        if env_ids is not None:
            mask = torch.zeros(self.num_envs, dtype=torch.bool)
            mask[torch.as_tensor(env_ids, dtype=torch.long)] = True
        self._reset_where(mask)
        self._observe()
        return self.obs_buf, self.privileged_obs_buf

    def step(self, actions: torch.Tensor) -> tuple[Any, ...]:
        self.vel = self.vel + 0.1 * actions[:, 0].clamp(-1.0, 1.0)
        self.pos = self.pos + 0.1 * self.vel
        self.rew_buf = -(self.pos - self.goal).abs()
        self.episode_length_buf = self.episode_length_buf + 1
        self.reset_buf = self.episode_length_buf >= self.max_episode_length
        self.extras = {"time_outs": self.reset_buf.clone(), "episode": {"rew_distance": self.rew_buf.mean()}}
        self._reset_where(self.reset_buf)
        self._observe()
        return self.obs_buf, self.privileged_obs_buf, self.rew_buf, self.reset_buf, self.extras


def _cfg() -> dict[str, Any]:
    return {
        "seed": 0,
        "num_steps_per_env": 8,
        "save_interval": 1000,
        "logger": "none",
        "policy": {"class_name": "ActorCritic", "actor_hidden_dims": [16], "critic_hidden_dims": [16]},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 2},
    }


@pytest.mark.parametrize("privileged", [True, False], ids=["privileged", "shared"])
def test_a_subclass_of_the_abstract_vec_env_trains_one_ppo_iteration(privileged):
    env = GoalReaching(privileged=privileged)
    assert isinstance(env, VecEnv)
    runner = OnPolicyRunner(env, _cfg())
    assert runner.env_adapter.api == "legged_gym"
    assert runner.env_adapter.num_critic_obs == (3 if privileged else 2)
    ac = runner.alg.actor_critic
    before = {k: p.detach().clone() for k, p in ac.named_parameters()}
    runner.learn(1)
    assert runner.current_learning_iteration == 1
    changed = [k for k, p in ac.named_parameters() if not torch.equal(p.detach(), before[k])]
    assert "actor.0.weight" in changed and "critic.0.weight" in changed and "std" in changed


def test_reset_takes_env_ids():
    env = GoalReaching(num_envs=4)
    env.step(torch.ones(4, 1))
    env.reset([1, 3])
    assert env.episode_length_buf.tolist() == [1, 0, 1, 0]
    assert env.pos[[1, 3]].tolist() == [0.0, 0.0] and (env.pos[[0, 2]] != 0).all()


def test_a_subclass_missing_an_abstract_method_cannot_be_instantiated():
    class NoStep(VecEnv):
        def get_observations(self) -> torch.Tensor:
            return torch.zeros(1, 1)

        def reset(self, env_ids: Any = None) -> Any:
            return None

    with pytest.raises(TypeError, match="step"):
        NoStep()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        VecEnv()  # type: ignore[abstract]


def test_st_gym_wrapper_shape_subclass_needs_no_privileged_method():
    # st_gym's StRlVecEnvWrapper derives from st_rl.env.VecEnv and implements only get_observations, step and
    # reset (4-tuple API, sizes as properties); it must be instantiable.
    class Wrapper(VecEnv):
        @property
        def num_envs(self) -> int:  # type: ignore[override]
            return 3

        def get_observations(self) -> Any:
            return torch.zeros(3, 2), {"observations": {}}

        def step(self, actions: torch.Tensor) -> Any:
            return torch.zeros(3, 2), torch.zeros(3), torch.zeros(3, dtype=torch.long), {}

        def reset(self) -> Any:  # type: ignore[override]
            return self.get_observations()

    env = Wrapper()
    assert env.num_envs == 3 and env.get_privileged_observations() is None
    env.privileged_obs_buf = torch.ones(3, 4)
    assert env.get_privileged_observations() is env.privileged_obs_buf


def test_reference_import_paths_and_the_typing_protocol():
    from st_rl.env.vec_env import VecEnv as from_module
    from st_rl.env.vec_env import VecEnvLike as protocol

    assert from_module is VecEnv and protocol is VecEnvLike
    assert {"step", "reset", "get_observations"} == VecEnv.__abstractmethods__
    assert isinstance(make_env("point_mass", num_envs=2), VecEnvLike)  # the built-in tasks: native API
    assert not isinstance(make_env("point_mass", num_envs=2), VecEnv)
