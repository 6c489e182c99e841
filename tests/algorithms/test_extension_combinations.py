"""Every subset of {AMP, distillation, estimator, RND, symmetry} combines on PPO, on a feed-forward and on a
recurrent policy: one rollout, one update, and a checkpoint round trip. On CUDA too, where there is a GPU."""

from __future__ import annotations

import itertools

import pytest
import torch

from st_rl.algorithms import PPO
from st_rl.algorithms.extensions import (
    AdversarialMotionPrior,
    Distillation,
    RandomNetworkDistillation,
    StateEstimation,
    Symmetry,
)
from st_rl.datasets import AmpObservationWrapper, MotionLoader
from st_rl.env import EnvAdapter
from st_rl.modules import ActorCritic, ActorCriticRecurrent, AMPDiscriminator, StateAc, StateAcRecurrent
from st_rl.tasks import make_env
from st_rl.utils.checkpoint import save_checkpoint

FEATURES = ("amp", "distillation", "estimator", "rnd", "symmetry")
SUBSETS = [s for r in range(len(FEATURES) + 1) for s in itertools.combinations(FEATURES, r)]
N, T = 8, 4
LOSSES = {
    "amp": {"discriminator_expert_loss", "discriminator_policy_loss", "discriminator_grad_pen_loss"},
    "distillation": {"distillation_loss"},
    "estimator": {"estimator_loss"},
    "rnd": {"rnd_loss"},
    "symmetry": {"symmetry_loss"},
}
ENTRIES = {"amp": "amp_norm_state_dict", "rnd": "rnd_state_dict"}

# velocity_tracking with mass/friction slots: [vx, vy, cmd_x, cmd_y, last_ax, last_ay, mass, friction].
_FLIP_OBS = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0])
_FLIP_ACT = torch.tensor([1.0, -1.0])


def mirror_obs(x: torch.Tensor) -> torch.Tensor:
    return x * _FLIP_OBS.to(x.device)


def mirror_actions(x: torch.Tensor) -> torch.Tensor:
    return x * _FLIP_ACT.to(x.device)


DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")),
]


def _env(device: str = "cpu"):
    loader = MotionLoader.__new__(MotionLoader)  # constant reference windows
    loader.amp_obs_frame_num, loader.style_fields = 2, ["vx", "vy"]
    loader.sample_windows = lambda k: torch.full((k, 4), 0.5, device=device)  # type: ignore[method-assign]
    base = make_env("velocity_tracking", num_envs=N, device=device, seed=0, actor_dynamics_slots=True)
    return EnvAdapter(AmpObservationWrapper(base, loader, lambda e: e.base_lin_vel), device=device)


def _policy(env: EnvAdapter, recurrent: bool, estimator: bool, amp: bool):
    kwargs = dict(
        num_actor_obs=env.num_obs,
        num_critic_obs=env.num_critic_obs,
        num_actions=env.num_actions,
        actor_hidden_dims=[16],
        critic_hidden_dims=[16],
        obs_segments=env.obs_segments,
        privileged_obs_segments=env.critic_obs_segments,
        actor_obs_normalization=True,
    )
    if recurrent:
        kwargs.update(rnn_type="gru", rnn_hidden_size=8)
    if estimator:
        kwargs.update(
            estimator_obs_components=["base_lin_vel", "last_actions"],
            estimator_target_components=["mass", "friction"],
            estimator_kwargs={"hidden_sizes": [8], "rnn_hidden_size": 4},
            replace_state_prob=0.5,
        )
        cls = StateAcRecurrent if recurrent else StateAc
    else:
        cls = ActorCriticRecurrent if recurrent else ActorCritic
    policy = cls(**kwargs)
    if amp:  # any policy takes the discriminator part
        policy.discriminator = AMPDiscriminator(input_dim=4, hidden_dims=[8])
    return policy


@pytest.fixture(scope="module")
def teacher_path(tmp_path_factory):
    env = EnvAdapter(make_env("velocity_tracking", num_envs=N, seed=0, actor_dynamics_slots=True))
    teacher = ActorCritic(env.num_critic_obs, env.num_critic_obs, env.num_actions, [16], [16],
                          actor_obs_normalization=True)  # fmt: skip
    teacher.update_normalization(torch.randn(32, env.num_critic_obs))
    path = str(tmp_path_factory.mktemp("teacher") / "model_1.pt")
    config = {"policy": {"class_name": "ActorCritic", "actor_hidden_dims": [16], "critic_hidden_dims": [16]}}
    save_checkpoint(path, {"model_state_dict": teacher.state_dict(), "config": config})
    return path


def _extensions(subset, teacher_path):
    made = []
    for name in subset:
        if name == "amp":
            made.append(AdversarialMotionPrior(amp_replay_buffer_size=64))
        elif name == "distillation":
            made.append(
                Distillation(teacher_ac_path=teacher_path, teacher_act_prob=0.5, dagger_loss_coef=0.1)
            )
        elif name == "estimator":
            made.append(StateEstimation())
        elif name == "rnd":
            made.append(
                RandomNetworkDistillation(weight=0.1, predictor_hidden_dims=[8], target_hidden_dims=[8])
            )
        else:
            made.append(Symmetry(mirror_obs=mirror_obs, mirror_actions=mirror_actions))
    return made


def _build(subset, recurrent, teacher_path, seed=0, device="cpu"):
    torch.manual_seed(seed)
    env = _env(device)
    policy = _policy(env, recurrent, "estimator" in subset, "amp" in subset).to(device)
    alg = PPO(policy, num_learning_epochs=1, num_mini_batches=2, learning_rate=1e-3, device=device,
              extensions=_extensions(subset, teacher_path))  # fmt: skip
    alg.attach_env(env.env)
    critic_shape = [env.num_critic_obs] if env.has_critic_group else [None]
    alg.init_storage(N, T, [env.num_obs], critic_shape, [env.num_actions])
    return env, alg


def _rollout(env, alg):
    obs, critic_obs, _ = env.get_observations()
    alg.train_mode()
    with torch.inference_mode():
        for _ in range(T):
            actions = alg.act(obs, critic_obs)
            obs, critic_obs, rewards, dones, infos = env.step(actions)
            alg.process_env_step(rewards, dones, infos, obs, critic_obs)
        alg.compute_returns(critic_obs)
    return obs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("recurrent", [False, True], ids=["mlp", "gru"])
@pytest.mark.parametrize("subset", SUBSETS, ids=lambda s: "+".join(s) or "ppo")
def test_every_subset_updates_and_round_trips(subset, recurrent, device, teacher_path, tmp_path):
    env, alg = _build(subset, recurrent, teacher_path, device=device)
    assert set(alg.extensions) == set(subset)
    before = {k: v.clone() for k, v in alg.actor_critic.state_dict().items()}
    obs = _rollout(env, alg)
    losses, stats = alg.update()
    expected = {"surrogate_loss", "value_loss", "entropy", "total_loss"}.union(*(LOSSES[f] for f in subset))
    assert expected <= set(losses), f"missing {expected - set(losses)}"
    assert all(v == v for v in losses.values()), losses  # no NaN
    after = alg.actor_critic.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before), "the update changed no parameter"

    state = alg.state_dict()
    for feature, entry in ENTRIES.items():
        assert (entry in state) == (feature in subset)
    path = str(tmp_path / "model.pt")
    save_checkpoint(path, state)
    from st_rl.utils.checkpoint import load_checkpoint

    _, fresh = _build(subset, recurrent, teacher_path, seed=1, device=device)
    fresh.load_state_dict(load_checkpoint(path, map_location=device))
    for key, value in alg.actor_critic.state_dict().items():
        torch.testing.assert_close(fresh.actor_critic.state_dict()[key], value, msg=key)
    for key, value in fresh.state_dict().items():
        if key.endswith("_state_dict") and key not in ("model_state_dict", "optimizer_state_dict"):
            assert _tree_equal(value, state[key]), key
    alg.eval_mode()
    fresh.eval_mode()
    for policy in (alg.actor_critic, fresh.actor_critic):
        policy.reset()
    with torch.no_grad():
        torch.testing.assert_close(fresh.actor_critic.act_inference(obs), alg.actor_critic.act_inference(obs))


def _tree_equal(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_tree_equal(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):  # Adam keeps its step count on the CPU, a loaded one where mapped
        return torch.equal(a.cpu(), b.cpu())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_tree_equal(x, y) for x, y in zip(a, b))
    return a == b
