"""Simulator adapters (st_rl.env.adapters): Gymnasium, Isaac Lab (fakes of both generations), Genesis, mjlab.

Fast tests use Gymnasium's classic-control tasks, a tiny Gymnasium env defined here and fakes; the MuJoCo,
learning and real-simulator tests are marked ``slow`` (and ``sim`` for mjlab / Genesis, skipped when that
package is not installed).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from st_rl.env import EnvAdapter

gym = pytest.importorskip(
    "gymnasium", minversion="1.1", reason='needs gymnasium>=1.1: pip install "st-rl[gymnasium]"'
)

from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402
from gymnasium.wrappers import TimeLimit  # noqa: E402

from st_rl.env.adapters import GymnasiumVecEnv, make_gymnasium_env  # noqa: E402


# ---------------------------------------------------------------------------------------------- Gymnasium
class _Countdown(gym.Env):
    """obs = [steps in episode, episodes started]; reward = 1 + action (action space [-0.5, 0.5]).

    Terminates at ``terminate_at`` steps when given; a ``TimeLimit`` adds truncation.
    """

    def __init__(self, terminate_at: int | None = None) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.action_space = gym.spaces.Box(-0.5, 0.5, (1,), np.float32)
        self.terminate_at = terminate_at
        self.t = 0
        self.episodes = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.episodes], dtype=np.float64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.episodes += 1
        return self._obs(), {}

    def step(self, action: np.ndarray):
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return self._obs(), 1.0 + float(action[0]), terminated, False, {}


def _countdown_vec(mode: AutoresetMode) -> SyncVectorEnv:
    # env 0 terminates after 3 steps, env 1 is truncated after 5 steps.
    return SyncVectorEnv(
        [lambda: TimeLimit(_Countdown(3), 5), lambda: TimeLimit(_Countdown(None), 5)], autoreset_mode=mode
    )


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED])
def test_gymnasium_contract_terminated_truncated_and_autoreset(mode):
    env = GymnasiumVecEnv(_countdown_vec(mode), seed=0)
    adapter = EnvAdapter(env)
    assert adapter.api == "rsl_rl2" and (adapter.num_obs, adapter.num_actions) == (2, 1)
    obs, critic, _ = adapter.get_observations()
    assert obs.dtype == torch.float32 and obs.tolist() == [[0.0, 1.0], [0.0, 1.0]]
    assert torch.equal(obs, critic)
    logs, dones_seen, timeouts_seen = [], [], []
    for _ in range(10):
        # 2.0 is clipped to the action bound 0.5, so every real step is worth exactly 1.5.
        obs, _, rew, dones, infos = adapter.step(torch.full((2, 1), 2.0))
        assert rew.dtype == torch.float32 and dones.dtype == torch.bool
        assert infos["time_outs"].dtype == torch.bool
        assert rew.tolist() == [1.5, 1.5], (
            "a reset step's reward (0) was passed on, or the action was not clipped"
        )
        dones_seen.append(dones.tolist())
        timeouts_seen.append(infos["time_outs"].tolist())
        logs.append(infos.get("log"))
    # env 0 ends at steps 3, 6, 9 (terminated: no time-out); env 1 at steps 5 and 10 (truncated: time-out).
    assert [i + 1 for i, d in enumerate(dones_seen) if d[0]] == [3, 6, 9]
    assert [i + 1 for i, d in enumerate(dones_seen) if d[1]] == [5, 10]
    assert [i + 1 for i, t in enumerate(timeouts_seen) if t[0]] == []
    assert [i + 1 for i, t in enumerate(timeouts_seen) if t[1]] == [5, 10]
    # The observation after the last step: env 0 is 1 step into its 4th episode, env 1 just reset (3rd episode).
    assert obs.tolist() == [[1.0, 4.0], [0.0, 3.0]]
    assert logs[2] == {"Episode/return": 4.5, "Episode/length": 3.0}
    assert logs[4] == {"Episode/return": 7.5, "Episode/length": 5.0}
    assert logs[0] is None and logs[3] is None
    assert list(env.episode_returns) == [4.5, 7.5, 4.5, 4.5, 7.5]
    assert list(env.episode_lengths) == [3, 5, 3, 3, 5]
    assert env.num_episodes == 5 and env.total_steps == 20


def test_gymnasium_next_step_env_matches_same_step_env_on_pendulum():
    """Gymnasium's default NEXT_STEP vector env gives the same transitions as SAME_STEP (no reset steps)."""
    same = make_gymnasium_env("Pendulum-v1", num_envs=2, seed=3)
    nxt = GymnasiumVecEnv(gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync"), seed=3)
    assert nxt.autoreset_mode == AutoresetMode.NEXT_STEP and same.autoreset_mode == AutoresetMode.SAME_STEP
    assert same.max_episode_length == 200
    gen = torch.Generator().manual_seed(0)
    all_rewards = []
    for _ in range(450):
        a = torch.rand(2, 1, generator=gen) * 6 - 3  # beyond the +-2 bounds: clipped
        o1, r1, d1, e1 = same.step(a)
        o2, r2, d2, e2 = nxt.step(a)
        assert torch.equal(o1, o2) and torch.equal(r1, r2) and torch.equal(d1, d2)
        assert torch.equal(e1["time_outs"], e2["time_outs"])
        all_rewards.append(r1)
    rewards = torch.stack(all_rewards)
    assert bool((rewards < 0).all()), "Pendulum rewards are negative: a 0 would be a counted reset step"
    assert same.num_episodes == 4 and list(same.episode_lengths) == [200] * 4
    # The logged returns are the sums of the rewards the adapter returned.
    sums = rewards[:200].sum(0).double()
    assert list(same.episode_returns)[:2] == pytest.approx(sums.tolist(), rel=1e-5)
    assert list(same.episode_returns) == list(nxt.episode_returns)


def test_gymnasium_reward_normalisation_and_state_dict():
    env = GymnasiumVecEnv(_countdown_vec(AutoresetMode.SAME_STEP), normalize_reward=True, reward_gamma=0.9)
    rewards = [env.step(torch.zeros(2, 1))[1] for _ in range(20)]
    # Raw reward is 1 every step; normalised rewards are 1 / std(discounted return) > 0 and not 1.
    assert all(bool((r > 0).all()) and not torch.allclose(r, torch.ones(2)) for r in rewards[1:])
    assert list(env.episode_returns)[:2] == [3.0, 5.0], "episode statistics use the raw rewards"
    state = env.state_dict()
    twin = GymnasiumVecEnv(_countdown_vec(AutoresetMode.SAME_STEP), normalize_reward=True, reward_gamma=0.9)
    for _ in range(20):  # same position in the episodes as env
        twin.step(torch.zeros(2, 1))
    twin.load_state_dict(state)
    assert torch.equal(env.step(torch.zeros(2, 1))[1], twin.step(torch.zeros(2, 1))[1])


def test_gymnasium_clear_errors():
    with pytest.raises(TypeError, match="Box action space"):
        make_gymnasium_env("CartPole-v1", num_envs=1)
    with pytest.raises(TypeError, match="vector env"):
        GymnasiumVecEnv(gym.make("Pendulum-v1"))
    with pytest.raises(ValueError, match="vectorization_mode"):
        make_gymnasium_env("Pendulum-v1", vectorization_mode="threads")
    dict_obs = SyncVectorEnv(
        [
            lambda: gym.wrappers.TransformObservation(
                gym.make("Pendulum-v1"),
                lambda o: {"x": o},
                gym.spaces.Dict({"x": gym.spaces.Box(-8, 8, (3,))}),
            )
        ]
    )
    with pytest.raises(TypeError, match="FlattenObservation"):
        GymnasiumVecEnv(dict_obs)


def test_gymnasium_preset_and_make_env_route():
    from st_rl.configs import get_preset, gymnasium_mujoco_preset
    from st_rl.tasks import make_env

    preset = get_preset("gym:HalfCheetah-v5")
    cfg = preset.train.to_dict()
    assert preset.task == "gym:HalfCheetah-v5" and preset.num_envs == 8
    assert cfg["num_steps_per_env"] == 256 and cfg["max_iterations"] == 489  # ceil(1e6 / 2048)
    assert cfg["empirical_normalization"] is True
    alg = cfg["algorithm"]
    assert (alg["learning_rate"], alg["gamma"], alg["lam"], alg["clip_param"]) == (3e-4, 0.99, 0.95, 0.2)
    assert (alg["num_learning_epochs"], alg["num_mini_batches"], alg["schedule"]) == (10, 32, "linear")
    single = gymnasium_mujoco_preset("HalfCheetah-v5", num_envs=1)
    assert single.num_envs == 1 and single.train.num_steps_per_env == 2048  # CleanRL's layout
    with pytest.raises(ValueError, match="divisor of 2048"):
        gymnasium_mujoco_preset("HalfCheetah-v5", num_envs=3)
    assert preset.env_kwargs["normalize_reward"] is True
    env = make_env("gym:Pendulum-v1", num_envs=3, seed=0, normalize_reward=True)
    assert isinstance(env, GymnasiumVecEnv) and env.num_envs == 3 and env.normalize_reward


@pytest.mark.slow
def test_gymnasium_mujoco_halfcheetah_contract():
    env = make_gymnasium_env("HalfCheetah-v5", num_envs=2, seed=0)
    adapter = EnvAdapter(env)
    assert (adapter.num_obs, adapter.num_actions, env.max_episode_length) == (17, 6, 1000)
    obs, _, rew, dones, infos = adapter.step(torch.zeros(2, 6))
    assert obs.shape == (2, 17) and obs.dtype == torch.float32 and rew.shape == (2,)
    assert not bool(dones.any()) and not bool(infos["time_outs"].any())
    env.close()


@pytest.mark.slow
def test_ppo_learns_inverted_pendulum_through_the_runner():
    """PPO through OnPolicyRunner on InvertedPendulum-v5: ~18k steps lift the return far above random's (~5)."""
    from st_rl.runners import OnPolicyRunner

    torch.manual_seed(0)
    env = make_gymnasium_env("InvertedPendulum-v5", num_envs=16, seed=1)
    for _ in range(200):  # random-policy baseline
        env.step(torch.rand(16, 1) * 6 - 3)
    random_return = float(np.mean(env.episode_returns))
    env.reset()
    env.episode_returns.clear()
    cfg = {
        "seed": 1,
        "num_steps_per_env": 64,
        "empirical_normalization": True,
        "policy": {"actor_hidden_dims": [64, 64], "critic_hidden_dims": [64, 64], "activation": "tanh"},
        "algorithm": {
            "learning_rate": 1e-3,
            "num_learning_epochs": 5,
            "num_mini_batches": 4,
            "gamma": 0.99,
            "lam": 0.95,
            "entropy_coef": 0.0,
            "schedule": "fixed",
            "max_grad_norm": 0.5,
        },
    }
    runner = OnPolicyRunner(env, cfg, log_dir=None)
    runner.learn(15)
    learned = float(np.mean(list(env.episode_returns)[-20:]))
    assert random_return < 15
    assert learned > max(5 * random_return, 40.0), (random_return, learned)


# ---------------------------------------------------------------------------------------------- Isaac Lab
class _FakeIsaacLabBase:
    """A point-mass task with the attributes of Isaac Lab's RslRlVecEnvWrapper."""

    def __init__(self, num_envs: int = 6, with_critic: bool = True) -> None:
        self.num_envs = num_envs
        self.num_actions = 2
        self.device = torch.device("cpu")
        self.max_episode_length = 20
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.with_critic = with_critic
        self.pos = torch.zeros(num_envs, 2)
        self.goal = torch.ones(num_envs, 2)
        self.unwrapped = self
        self.cfg = {"is_finite_horizon": False}

    def _groups(self) -> dict[str, torch.Tensor]:
        groups = {"policy": self.goal - self.pos}
        if self.with_critic:
            groups["critic"] = torch.cat([self.goal - self.pos, self.pos], dim=-1)
        return groups

    def _advance(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        self.pos += 0.1 * actions.clamp(-1, 1)
        rew = -(self.goal - self.pos).norm(dim=-1)
        self.episode_length_buf += 1
        failed = self.pos.abs().max(dim=-1).values > 3
        time_outs = self.episode_length_buf >= self.max_episode_length
        dones = (failed | time_outs).to(torch.long)  # Isaac Lab returns 0/1 longs
        self.pos[dones.bool()] = 0.0
        self.episode_length_buf[dones.bool()] = 0
        extras = {"time_outs": time_outs & ~failed, "log": {"Episode_Reward/distance": rew.mean()}}
        return rew, dones, extras

    def seed(self, seed: int = -1) -> int:
        return seed

    def close(self) -> None:
        pass


class FakeIsaacLabRslRl2(_FakeIsaacLabBase):
    """rsl_rl 2.x generation: ``(obs, extras)`` observations, ``num_obs`` / ``num_privileged_obs`` (0 if none)."""

    @property
    def num_obs(self) -> int:
        return 2

    @property
    def num_privileged_obs(self) -> int:
        return 4 if self.with_critic else 0

    def get_observations(self) -> tuple[torch.Tensor, dict[str, Any]]:
        groups = self._groups()
        return groups["policy"], {"observations": groups}

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        self.pos.zero_()
        return self.get_observations()

    def step(self, actions: torch.Tensor):
        rew, dones, extras = self._advance(actions)
        groups = self._groups()
        extras["observations"] = groups
        return groups["policy"], rew, dones, extras


class FakeIsaacLabTensorDict(_FakeIsaacLabBase):
    """TensorDict generation: observations are a TensorDict of groups; no num_obs attributes."""

    def get_observations(self) -> Any:
        from tensordict import TensorDict

        return TensorDict(self._groups(), batch_size=[self.num_envs])

    def reset(self) -> tuple[Any, dict[str, Any]]:
        self.pos.zero_()
        return self.get_observations(), {}

    def step(self, actions: torch.Tensor):
        rew, dones, extras = self._advance(actions)
        return self.get_observations(), rew, dones, extras


@pytest.mark.parametrize(
    "fake,api", [(FakeIsaacLabRslRl2, "rsl_rl2"), (FakeIsaacLabTensorDict, "tensordict")]
)
def test_isaaclab_both_generations_train_through_the_runner(fake, api):
    if api == "tensordict":
        pytest.importorskip("tensordict")
    from st_rl.env.adapters import isaaclab_generation, wrap_isaaclab
    from st_rl.runners import OnPolicyRunner

    env = wrap_isaaclab(fake())
    assert isaaclab_generation(env) == api
    adapter = EnvAdapter(env)
    assert adapter.api == api and adapter.has_critic_group
    assert (adapter.num_obs, adapter.num_critic_obs) == (2, 4)
    env.episode_length_buf[:] = env.max_episode_length - 1
    _, critic, _, dones, infos = adapter.step(torch.zeros(6, 2))
    assert critic.shape == (6, 4) and dones.dtype == torch.bool and bool(dones.all())
    assert infos["time_outs"].dtype == torch.bool and bool(infos["time_outs"].all())
    cfg = {
        "num_steps_per_env": 8,
        "policy": {"actor_hidden_dims": [16], "critic_hidden_dims": [16]},
        "algorithm": {"num_mini_batches": 2, "num_learning_epochs": 1},
    }
    runner = OnPolicyRunner(fake(), cfg, log_dir=None)
    runner.learn(2)
    assert runner.current_learning_iteration == 2 and runner.tot_timesteps == 2 * 8 * 6


def test_isaaclab_obs_groups_and_clear_errors():
    from st_rl.env.adapters import wrap_isaaclab

    adapter = EnvAdapter(wrap_isaaclab(FakeIsaacLabRslRl2(with_critic=False)))
    assert not adapter.has_critic_group and adapter.num_critic_obs == 2
    selected = EnvAdapter(
        FakeIsaacLabRslRl2(), obs_groups={"policy": ["policy", "critic"], "critic": ["critic"]}
    )
    assert selected.num_obs == 6

    class RawIsaacLabEnv:
        def __init__(self) -> None:
            self.unwrapped = type("ManagerBasedRLEnv", (), {"observation_manager": object()})()

    with pytest.raises(TypeError, match="RslRlVecEnvWrapper"):
        wrap_isaaclab(RawIsaacLabEnv())
    incomplete = FakeIsaacLabRslRl2()
    del incomplete.max_episode_length
    with pytest.raises(TypeError, match="max_episode_length"):
        wrap_isaaclab(incomplete)


# ---------------------------------------------------------------------------------------------- Genesis
class FakeGenesisGo2Env:
    """The interface of Genesis's examples/locomotion/go2_env.py (shared, mutated ``extras``; float time-outs)."""

    def __init__(self, num_envs: int = 4) -> None:
        self.num_envs, self.num_obs, self.num_privileged_obs, self.num_actions = num_envs, 5, None, 3
        self.device = torch.device("cpu")
        self.max_episode_length = 4
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.int32)
        self.obs_buf = torch.zeros(num_envs, 5)
        self.extras: dict[str, Any] = {"observations": {}}

    def get_observations(self):
        self.extras["observations"]["critic"] = self.obs_buf
        return self.obs_buf, self.extras

    def reset(self):
        self.episode_length_buf.zero_()
        return self.obs_buf, None

    def step(self, actions: torch.Tensor):
        self.episode_length_buf += 1
        reset_buf = self.episode_length_buf > self.max_episode_length
        self.extras["time_outs"] = reset_buf.float()
        if reset_buf.any():
            self.episode_length_buf[reset_buf] = 0
            self.extras["episode"] = {"rew_tracking": 0.5}
        self.obs_buf = torch.randn(self.num_envs, 5)
        self.extras["observations"]["critic"] = self.obs_buf
        return self.obs_buf, torch.ones(self.num_envs), reset_buf, self.extras


def test_genesis_wrapper_on_the_example_interface():
    from st_rl.env.adapters import wrap_genesis

    env = wrap_genesis(FakeGenesisGo2Env())
    adapter = EnvAdapter(env)
    assert adapter.api == "rsl_rl2" and adapter.num_obs == 5 and env.num_privileged_obs is None
    episode_logged = []
    for _ in range(10):
        _, _, _, dones, infos = adapter.step(torch.zeros(4, 3))
        assert infos["time_outs"].dtype == torch.bool
        assert torch.equal(infos["time_outs"], dones)
        episode_logged.append("episode" in infos)
    # Episodes end at steps 5 and 10; the stale extras["episode"] of the example is not logged in between.
    assert [i + 1 for i, e in enumerate(episode_logged) if e] == [5, 10]
    env.episode_length_buf = torch.tensor([1, 2, 3, 4])
    assert env.unwrapped.episode_length_buf.dtype == torch.int32
    with pytest.raises(TypeError, match="has no num_envs, num_actions, get_observations"):
        wrap_genesis(object())


# ---------------------------------------------------------------------------------------------- real simulators
@pytest.mark.slow
@pytest.mark.sim
def test_mjlab_go1_velocity_one_training_iteration_on_cpu():
    pytest.importorskip("mjlab", reason='mjlab is not installed (pip install "st-rl[mjlab]")')
    from st_rl.env.adapters import make_mjlab_env, mjlab_train_config
    from st_rl.runners import OnPolicyRunner

    task = "Mjlab-Velocity-Flat-Unitree-Go1"
    env = make_mjlab_env(task, num_envs=4, device="cpu", seed=0)
    cfg = mjlab_train_config(task)
    assert cfg["obs_groups"]["policy"] == ["actor"] and cfg["obs_groups"]["critic"] == ["critic"]
    cfg.update(num_steps_per_env=4)
    cfg["algorithm"].update(num_mini_batches=1, num_learning_epochs=1)
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    adapter = runner.env_adapter
    assert adapter.api == "tensordict" and adapter.num_actions == 12
    assert adapter.num_critic_obs > adapter.num_obs > 0
    runner.learn(1)
    assert runner.current_learning_iteration == 1 and runner.tot_timesteps == 16
    obs, critic, _ = adapter.get_observations()
    assert bool(torch.isfinite(obs).all()) and bool(torch.isfinite(critic).all())


@pytest.mark.slow
@pytest.mark.sim
def test_genesis_go2_one_training_iteration_on_cpu():
    gs = pytest.importorskip(
        "genesis", reason='genesis-world is not installed (pip install "st-rl[genesis]")'
    )
    from genesis_go2 import make_go2_env  # tests/env/genesis_go2.py

    from st_rl.env.adapters import wrap_genesis
    from st_rl.runners import OnPolicyRunner

    env = wrap_genesis(make_go2_env(gs, num_envs=4))
    cfg = {
        "num_steps_per_env": 4,
        "policy": {"actor_hidden_dims": [32], "critic_hidden_dims": [32]},
        "algorithm": {"num_mini_batches": 1, "num_learning_epochs": 1},
    }
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    assert runner.env_adapter.api == "rsl_rl2"
    assert (runner.env_adapter.num_obs, runner.env_adapter.num_actions) == (45, 12)
    runner.learn(1)
    assert runner.current_learning_iteration == 1 and runner.tot_timesteps == 16
    obs, _, _ = runner.env_adapter.get_observations()
    assert bool(torch.isfinite(obs).all()) and not math.isnan(float(obs.abs().sum()))
