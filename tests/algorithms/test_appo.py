"""AMP: discriminator math, APPO/ATPPO losses and bookkeeping, storage, replay, motion loader, configs."""

import math
import pickle
import warnings

import pytest
import torch

from st_rl.algorithms import APPO, ATPPO
from st_rl.algorithms.appo import MissingAmpDataError
from st_rl.config.errors import ConfigError
from st_rl.datasets import AmpObservationWrapper, MotionLoader
from st_rl.modules import (
    ActorCritic,
    AmpActorCritic,
    AmpActorCriticRecurrent,
    AMPDiscriminator,
    EncoderAmpActorCriticRecurrent,
)
from st_rl.storage import AmpRolloutStorage, ReplayBuffer
from st_rl.tasks import make_env
from st_rl.tasks.motion_recorder import save_motion_file
from st_rl.utils.checkpoint import save_checkpoint

NUM_OBS, NUM_ACT, AMP_DIM = 4, 2, 2


def linear_discriminator(w=(1.0, 2.0), b=0.5, **kw):
    disc = AMPDiscriminator(input_dim=len(w), hidden_dims=[], **kw)
    with torch.no_grad():
        disc.amp_linear.weight.copy_(torch.tensor([w]))
        disc.amp_linear.bias.fill_(b)
    return disc


# ------------------------------------------------------------------ discriminator math
def test_discriminator_output_and_gradient_penalty_by_hand():
    disc = linear_discriminator(discriminator_grad_pen=10.0)
    x = torch.tensor([[1.0, 1.0], [0.0, -1.0]])
    torch.testing.assert_close(disc(x), torch.tensor([[3.5], [-1.5]]))
    # dD/dx = w = (1, 2) for every sample: ||w||^2 = 5, times the weight 10.
    assert float(disc.compute_grad_pen(x).detach()) == pytest.approx(50.0)


def test_gradient_penalty_of_nonlinear_discriminator_matches_finite_differences():
    torch.manual_seed(0)
    disc = AMPDiscriminator(input_dim=3, hidden_dims=[8], discriminator_grad_pen=1.0, activation="tanh")
    x = torch.randn(4, 3, dtype=torch.float64)
    disc = disc.double()
    eps = 1e-6
    grads = torch.zeros_like(x)
    for i in range(3):
        dx = torch.zeros_like(x)
        dx[:, i] = eps
        grads[:, i] = ((disc(x + dx) - disc(x - dx)) / (2 * eps)).squeeze(-1)
    assert float(disc.compute_grad_pen(x).detach()) == pytest.approx(
        float(grads.pow(2).sum(-1).mean()), rel=1e-6
    )


def test_style_reward_and_combination_by_hand():
    # d = x0 (w = (1, 0), b = 0): style = max(0, 1 - (d - 1)^2 / 4).
    disc = linear_discriminator(w=(1.0, 0.0), b=0.0, style_reward_coef=2.0)
    x = torch.tensor([[1.0, 0.0], [0.0, 0.0], [-1.0, 0.0], [3.5, 0.0]])
    task = torch.tensor([1.0, 1.0, 1.0, 1.0])
    style, task_out, combined = disc.predict_style_reward(x, task)
    torch.testing.assert_close(style, 2.0 * torch.tensor([1.0, 0.75, 0.0, 0.0]))
    torch.testing.assert_close(task_out, task)
    torch.testing.assert_close(combined, task + style)  # task_reward_lerp = 0: added
    lerp = linear_discriminator(w=(1.0, 0.0), b=0.0, task_reward_lerp=0.25)
    style, _, combined = lerp.predict_style_reward(x, task)
    torch.testing.assert_close(combined, 0.75 * style + 0.25 * task)


def test_discriminator_rejects_missing_input_dim_and_bad_lerp():
    with pytest.raises(ValueError, match="input_dim"):
        AMPDiscriminator(input_dim=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="task_reward_lerp"):
        AMPDiscriminator(input_dim=2, task_reward_lerp=1.5)


# ------------------------------------------------------------------ policies
@pytest.mark.parametrize("cls", [AmpActorCritic, AmpActorCriticRecurrent])
def test_amp_policies_build_but_do_not_carry_the_discriminator(cls):
    ac = cls(NUM_OBS, NUM_OBS, NUM_ACT, amp_discriminator={"input_dim": AMP_DIM, "hidden_dims": [8]})
    assert isinstance(ac.discriminator, AMPDiscriminator) and ac.discriminator is ac.discriminator
    # the AMP extension owns it: not in the policy's state, parameters or exported modules
    assert not any(k.startswith("discriminator.") for k in ac.state_dict())
    assert not {id(p) for p in ac.discriminator.parameters()} & {id(p) for p in ac.parameters()}
    with pytest.raises(ValueError, match="amp_discriminator"):
        cls(NUM_OBS, NUM_OBS, NUM_ACT)


def test_encoder_amp_recurrent_builds_with_default_encoder_kwargs():
    ac = EncoderAmpActorCriticRecurrent(
        7,
        7,
        NUM_ACT,
        obs_segments={"proprio": (3,), "scan": (4,)},
        encoder_component_names=["scan"],
        amp_discriminator={"input_dim": AMP_DIM},
        rnn_type="gru",
    )
    out = ac.act(torch.randn(5, 7))
    assert out.shape == (5, NUM_ACT) and ac.discriminator.input_dim == AMP_DIM


# ------------------------------------------------------------------ APPO
def make_appo(num_envs=4, steps=3, cls=APPO, **kwargs):
    torch.manual_seed(0)
    ac = AmpActorCritic(
        NUM_OBS,
        NUM_OBS,
        NUM_ACT,
        actor_hidden_dims=[8],
        critic_hidden_dims=[8],
        amp_discriminator={"input_dim": AMP_DIM, "hidden_dims": [], "discriminator_grad_pen": 10.0},
    )
    alg = cls(ac, **kwargs)
    alg.init_obs_norm(NUM_OBS, NUM_OBS)
    alg.init_storage(num_envs, steps, [NUM_OBS], [None], [NUM_ACT])
    return alg


def make_appo_with_window(width, **kwargs):
    ac = AmpActorCritic(NUM_OBS, NUM_OBS, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8],
                        amp_discriminator={"input_dim": width, "hidden_dims": []})  # fmt: skip
    with pytest.warns(UserWarning, match=f"placeholder default; using the width of one AMP window, {width}"):
        alg = APPO(ac, **kwargs)
    alg.init_storage(4, 3, [NUM_OBS], [None], [NUM_ACT])
    return alg


def test_policy_and_discriminator_gradients_are_clipped_separately():
    alg = make_appo(max_grad_norm=1.0, amp_preset="st_rl")  # the reference clips them together
    groups = alg._grad_clip_groups()
    disc = {id(p) for p in alg.actor_critic.discriminator.parameters()}
    assert [id(p) for p in groups[1]] == [id(p) for p in alg.actor_critic.discriminator.parameters()]
    assert not {id(p) for p in groups[0]} & disc
    assert len(groups[0]) + len(groups[1]) == len(list(alg.actor_critic.parameters())) + len(disc)
    # A huge discriminator gradient leaves a small policy gradient untouched by clipping.
    for p in groups[0]:
        p.grad = torch.full_like(p, 1e-4)
    for p in groups[1]:
        p.grad = torch.full_like(p, 100.0)
    before = [p.grad.clone() for p in groups[0]]
    for group in groups:
        torch.nn.utils.clip_grad_norm_(group, alg.max_grad_norm)
    assert all(torch.equal(b, p.grad) for b, p in zip(before, groups[0]))
    assert float(torch.nn.utils.get_total_norm([p.grad for p in groups[1]])) == pytest.approx(1.0, rel=1e-5)


def _trained_appo():
    alg = make_appo(amp_preset="st_rl")
    with torch.no_grad():
        for p in list(alg.actor_critic.parameters()) + list(alg.amp.discriminator.parameters()):
            p.add_(torch.randn_like(p))
    alg.amp_normalizer.update(torch.randn(8, AMP_DIM))
    return alg


def _assert_same_weights(a, b):
    for mine, theirs in ((a.actor_critic, b.actor_critic), (a.amp.discriminator, b.amp.discriminator)):
        for (key, x), y in zip(mine.state_dict().items(), theirs.state_dict().values()):
            assert torch.equal(x, y), key


def test_discriminator_saved_and_restored_by_the_amp_extension():
    alg = _trained_appo()
    state = alg.state_dict()
    assert set(state["amp_discriminator_state_dict"]) == set(alg.amp.discriminator.state_dict())
    assert not any(k.startswith("discriminator.") for k in state["model_state_dict"])
    # the policy optimizer trains the discriminator, after the policy's parameters (the old order)
    params = state["optimizer_state_dict"]["param_groups"][0]["params"]
    assert len(params) == len(list(alg.actor_critic.parameters())) + len(
        list(alg.amp.discriminator.parameters())
    )
    fresh = make_appo(amp_preset="st_rl")
    fresh.load_state_dict(state)
    _assert_same_weights(alg, fresh)
    assert fresh.optimizer.state_dict()["param_groups"][0]["params"] == params


def test_old_layout_checkpoint_discriminator_in_the_policy_state_loads():
    alg = _trained_appo()
    state = alg.state_dict()
    disc = state.pop("amp_discriminator_state_dict")  # ours and the reference's layout before: a policy part
    state["model_state_dict"] = {
        **state["model_state_dict"],
        **{f"discriminator.{k}": v for k, v in disc.items()},
    }
    fresh = make_appo(amp_preset="st_rl")
    fresh.load_state_dict(state)
    _assert_same_weights(alg, fresh)
    # a policy alone loads it too (play, export, a teacher): the discriminator's keys are left to AMP
    policy = AmpActorCritic(NUM_OBS, NUM_OBS, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8],
                            amp_discriminator={"input_dim": AMP_DIM, "hidden_dims": []})  # fmt: skip
    policy.load_state_dict(state["model_state_dict"])
    ActorCritic(NUM_OBS, NUM_OBS, NUM_ACT, [8], [8]).load_state_dict(state["model_state_dict"])
    with pytest.raises(KeyError, match="add_amp_discriminator"):  # a PPO checkpoint: no discriminator
        fresh.load_state_dict({**state, "model_state_dict": alg.actor_critic.state_dict()})


def amp_infos(ref_obs, ref_motion, **extra):
    return {"observations": {"ref_obs": ref_obs}, "ref_motion": ref_motion, **extra}


def test_shared_normaliser_fed_by_both_streams_and_saved():
    alg = make_appo()
    with torch.inference_mode():
        alg.act(torch.randn(4, NUM_OBS), torch.randn(4, NUM_OBS))
        alg.process_env_step(
            torch.zeros(4),
            torch.zeros(4, dtype=torch.bool),
            amp_infos(torch.zeros(4, 1, 2), torch.full((4, 2), 2.0)),
        )
    torch.testing.assert_close(alg.amp_normalizer.mean, torch.ones(2))  # mean of 0s and 2s
    assert alg.ref_obs_normalizer is alg.ref_motion_normalizer is alg.amp_normalizer
    state = alg.state_dict()
    assert "amp_norm_state_dict" in state and int(state["amp_norm_state_dict"]["count"]) == 8
    other = make_appo()
    other.load_state_dict(state)
    torch.testing.assert_close(other.amp_normalizer.mean, torch.ones(2))


def test_rewards_are_combined_and_logged():
    alg = make_appo()
    infos = amp_infos(torch.zeros(4, 2), torch.zeros(4, 2), log={"Episode_Reward/track": torch.tensor(0.3)})
    with torch.inference_mode():
        alg.act(torch.randn(4, NUM_OBS), torch.randn(4, NUM_OBS))
        alg.process_env_step(torch.ones(4), torch.zeros(4, dtype=torch.bool), infos)
    log = infos["log"]
    assert {"Episode_Reward/style_reward", "Episode_Reward/task_reward", "Episode_Reward/track"} <= set(log)
    assert float(log["Episode_Reward/task_reward"]) == 1.0
    style = float(log["Episode_Reward/style_reward"])
    # The stored reward is task + style (lerp 0): 1 + style for every env.
    torch.testing.assert_close(alg.storage.rewards[0, :, 0], torch.full((4,), 1.0 + style))
    assert not alg.storage.has_field("action_labels")  # plain APPO records no teacher labels


def test_style_reward_ramp_weights_by_hand():
    alg = make_appo(style_reward_ramp=[2, 6])
    assert [alg.style_reward_weight(it) for it in (0, 2, 3, 4, 6, 9)] == [0.0, 0.0, 0.25, 0.5, 1.0, 1.0]
    step = make_appo(style_reward_ramp=(3, 3))
    assert [step.style_reward_weight(it) for it in (2, 3)] == [0.0, 1.0]
    assert make_appo().style_reward_weight(0) == 1.0
    for bad in ([3, 2], [-1, 2], [1], "0,5", [0.5, 2]):
        with pytest.raises(ValueError, match="style_reward_ramp"):
            make_appo(style_reward_ramp=bad)


@pytest.mark.parametrize(("iteration", "weight"), [(1, 0.0), (4, 0.5), (8, 1.0)])
def test_style_reward_ramp_scales_the_trained_reward_not_the_logged_style(iteration, weight):
    alg = make_appo(style_reward_ramp=[2, 6])
    alg.current_learning_iteration = iteration  # the runner sets it before each rollout
    infos = amp_infos(torch.zeros(4, 2), torch.zeros(4, 2))
    with torch.inference_mode():
        alg.act(torch.randn(4, NUM_OBS), torch.randn(4, NUM_OBS))
        alg.process_env_step(torch.ones(4), torch.zeros(4, dtype=torch.bool), infos)
    style = float(infos["log"]["Episode_Reward/style_reward"])
    assert style > 0.1  # the discriminator's reward, logged before the ramp weight
    torch.testing.assert_close(alg.storage.rewards[0, :, 0], torch.full((4,), 1.0 + weight * style))
    _, stats = alg.update(iteration)
    assert stats["style_reward_weight"] == weight


def test_discriminator_losses_by_hand_and_weighted():
    alg = make_appo(discriminator_loss_coef=0.5, amp_replay_buffer_size=0)
    for name in ("discriminator_expert_loss", "discriminator_policy_loss", "discriminator_grad_pen_loss"):
        assert alg.loss_weight(name) == 0.5
    disc = alg.actor_critic.discriminator
    with torch.no_grad():
        disc.amp_linear.weight.copy_(torch.tensor([[1.0, 2.0]]))
        disc.amp_linear.bias.fill_(0.5)
    alg.amp_normalizer.eps = 0.0  # fresh statistics (mean 0, std 1): normalisation is the identity
    ref_obs = torch.tensor([[1.0, 1.0], [0.0, 0.0]])  # d = 3.5, 0.5
    ref_motion = torch.tensor([[0.0, 0.0], [1.0, 0.0]])  # d = 0.5, 1.5
    from st_rl.storage.rollout_storage import MiniBatch

    z = torch.zeros(2, 1)
    mb = MiniBatch(
        obs=torch.zeros(2, NUM_OBS), critic_obs=torch.zeros(2, NUM_OBS), actions=torch.zeros(2, NUM_ACT),
        values=z, advantages=z, returns=z, old_actions_log_prob=z.squeeze(-1), old_mu=torch.zeros(2, NUM_ACT),
        old_sigma=torch.ones(2, NUM_ACT), action_labels=torch.zeros(2, NUM_ACT), ref_obs=ref_obs, ref_motion=ref_motion,
    )  # fmt: skip
    losses, _, _ = alg.compute_losses(mb)
    stats = alg.amp.log_scalars()
    assert float(losses["discriminator_expert_loss"].detach()) == pytest.approx(
        0.5 * ((0.5 - 1) ** 2 + (1.5 - 1) ** 2) / 2
    )
    assert float(losses["discriminator_policy_loss"].detach()) == pytest.approx(
        0.5 * ((3.5 + 1) ** 2 + (0.5 + 1) ** 2) / 2
    )
    assert float(losses["discriminator_grad_pen_loss"].detach()) == pytest.approx(50.0)
    assert float(stats["discriminator_accuracy"]) == pytest.approx(0.5)  # experts right, policy wrong
    assert "mimic_loss" not in losses and "dagger_loss" not in losses
    alg.amp.mimic_loss_coef = 1.0
    losses, _, _ = alg.compute_losses(mb)
    assert float(losses["mimic_loss"]) == pytest.approx((math.sqrt(2) + 1.0) / 2)
    assert alg.loss_weight("mimic_loss") == 1.0
    alg.amp.discriminator_loss_coef = 0.0
    losses, _, _ = alg.compute_losses(mb)
    assert not any(k.startswith("discriminator") for k in losses)


def test_update_trains_discriminator_and_fills_replay():
    alg = make_appo(num_envs=8, steps=4, num_learning_epochs=4, learning_rate=1e-2, amp_replay_buffer_size=64)
    for it in range(15):
        with torch.inference_mode():
            for _ in range(4):
                alg.act(torch.randn(8, NUM_OBS), torch.randn(8, NUM_OBS))
                # Policy windows near (-1, -1), reference windows near (+1, +1): separable.
                infos = amp_infos(torch.randn(8, 2) * 0.1 - 1, torch.randn(8, 2) * 0.1 + 1)
                alg.process_env_step(torch.zeros(8), torch.zeros(8, dtype=torch.bool), infos)
            alg.compute_returns(torch.randn(8, NUM_OBS))
        _, stats = alg.update(it)
    assert stats["discriminator_accuracy"] == 1.0
    # The gradient penalty (weight 10) keeps the linear discriminator's slope small, but the sign is right.
    assert stats["discriminator_expert_d"] > 0.05 and stats["discriminator_policy_d"] < -0.05
    assert alg.amp_replay.num_samples == 64


def test_missing_amp_data_is_explained():
    alg = make_appo()
    with torch.inference_mode():
        alg.act(torch.randn(4, NUM_OBS), torch.randn(4, NUM_OBS))
        with pytest.raises(MissingAmpDataError, match="AmpObservationWrapper"):
            alg.process_env_step(torch.zeros(4), torch.zeros(4, dtype=torch.bool), {})
        with pytest.raises(MissingAmpDataError, match="ref_motion"):
            alg.process_env_step(
                torch.zeros(4),
                torch.zeros(4, dtype=torch.bool),
                {"observations": {"ref_obs": torch.zeros(4, 2)}},
            )
        with pytest.raises(ValueError, match="discriminator expects"):
            alg.process_env_step(
                torch.zeros(4),
                torch.zeros(4, dtype=torch.bool),
                amp_infos(torch.zeros(4, 3), torch.zeros(4, 3)),
            )


def test_amp_obs_dim_checked_and_st_gym_placeholder_tolerated():
    # AMP_DIM = 2 here: the given width agrees, no word.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert make_appo(amp_obs_dim=2, bc_loss_coef=0.001).amp_obs_dim == 2
    # A width that is not the window's is a mistake, named with the value to write.
    with pytest.raises(ConfigError, match=r"algorithm.amp_obs_dim = 7: .*set algorithm.amp_obs_dim=2"):
        make_appo(amp_obs_dim=7)
    # st_gym's dataclass default (2) left in place while the window is wider: a warning, the window's width.
    alg = make_appo_with_window(6, amp_obs_dim=2)
    assert alg.amp_obs_dim == 6 and alg.storage.ref_obs.shape[-1] == 6
    with pytest.raises(ValueError, match="AMP discriminator"):
        APPO(ActorCritic(NUM_OBS, NUM_OBS, NUM_ACT))


def test_atppo_keeps_teacher_labels_and_dilation(tmp_path):
    torch.manual_seed(5)
    teacher = ActorCritic(NUM_OBS, NUM_OBS, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8])
    path = tmp_path / "teacher.pt"
    save_checkpoint(str(path), {"model_state_dict": teacher.state_dict()})
    alg = make_appo(
        cls=ATPPO,
        teacher_policy={"teacher_ac_path": str(path), "actor_hidden_dims": [8], "critic_hidden_dims": [8]},
        teacher_act_prob=0.0,
        buffer_dilation_ratio=2.0,
    )
    assert alg.storage.has_field("action_labels") and alg.storage.has_field("ref_obs")
    assert alg.storage.max_length == 6
    alg.use_teacher_act_mask = torch.zeros(4, dtype=torch.bool)  # the student acts
    obs = torch.randn(4, NUM_OBS)
    with torch.inference_mode():
        actions = alg.act(obs, obs)
        alg.process_env_step(
            torch.zeros(4), torch.zeros(4, dtype=torch.bool), amp_infos(torch.zeros(4, 2), torch.ones(4, 2))
        )
    torch.testing.assert_close(alg.storage.action_labels[0], teacher.act_inference(obs))
    assert not torch.allclose(alg.storage.action_labels[0], actions)


# ------------------------------------------------------------------ storage and replay
def test_amp_storage_minibatches_carry_windows():
    st = AmpRolloutStorage(4, 3, [NUM_OBS], [None], [NUM_ACT], amp_obs_shape=(AMP_DIM,))
    for t in range(3):
        tr = st.Transition()
        tr.observations = torch.full((4, NUM_OBS), float(t))
        tr.actions = torch.zeros(4, NUM_ACT)
        tr.action_labels = torch.zeros(4, NUM_ACT)
        tr.rewards, tr.dones, tr.values = torch.zeros(4), torch.zeros(4, dtype=torch.bool), torch.zeros(4, 1)
        tr.actions_log_prob, tr.action_mean, tr.action_sigma = (
            torch.zeros(4),
            torch.zeros(4, 2),
            torch.ones(4, 2),
        )
        tr.ref_obs = torch.full((4, 1, AMP_DIM), float(t))
        tr.ref_motion = torch.full((4, AMP_DIM), -float(t))
        st.add_transitions(tr)
    for mb in st.mini_batch_generator(2, 1):
        torch.testing.assert_close(mb.ref_obs[:, 0], mb.obs[:, 0])
        torch.testing.assert_close(mb.ref_motion[:, 0], -mb.obs[:, 0])
    for mb in st.recurrent_mini_batch_generator(2, 1):
        assert mb.ref_obs.shape == (3, 2, AMP_DIM)
    with pytest.raises(ValueError, match="amp_obs_shape"):
        AmpRolloutStorage(4, 3, [NUM_OBS], [None], [NUM_ACT])


def test_replay_buffer_ring_insert_and_sampling():
    buf = ReplayBuffer(2, 5)
    buf.insert(torch.arange(6.0).reshape(3, 2))
    assert buf.num_samples == 3 and buf.step == 3
    buf.insert(torch.arange(6.0, 14.0).reshape(4, 2), -torch.arange(6.0, 14.0).reshape(4, 2))
    assert buf.num_samples == 5 and buf.step == 2
    # Rows 0..1 were overwritten by the last two inserted states (10, 11) and (12, 13).
    assert buf.states[:, 0].tolist() == [10.0, 12.0, 4.0, 6.0, 8.0]
    s, s2 = next(buf.feed_forward_generator(1, 50))
    assert s.shape == (50, 2)
    assert set(s[:, 0].tolist()) <= {10.0, 12.0, 4.0, 6.0, 8.0}
    from st_rl.storage.reply_buffer import ReplayBuffer as Alias

    assert Alias is ReplayBuffer


# ------------------------------------------------------------------ motion data
def write_motion(tmp_path, name="m.pkl", frames=None, weight=1.0, dt=0.1):
    frames = frames if frames is not None else [[float(i), 10.0 * i, 0.5] for i in range(5)]
    motion = {
        "walk": {"Fields": ["a", "b", "c"], "Frames": frames, "FrameDuration": dt, "MotionWeight": weight}
    }
    path = str(tmp_path / name)
    save_motion_file(motion, path)
    return path


def test_motion_loader_interpolates_windows_by_hand(tmp_path):
    loader = MotionLoader(
        write_motion(tmp_path), style_fields=["b", "a"], amp_obs_frame_num=3, time_between_frames=0.05
    )
    traj = torch.zeros(2, dtype=torch.long)
    frames = loader.get_frames(traj, torch.tensor([0.125, 0.4]))
    # t = 0.125 s is frame 1.25: a = 1.25, b = 12.5; t = 0.4 is the last frame.
    torch.testing.assert_close(frames, torch.tensor([[12.5, 1.25], [40.0, 4.0]]))
    windows = loader.sample_windows(64)
    assert windows.shape == (64, 6) and loader.amp_obs_dim == 6
    w = windows.reshape(64, 3, 2)
    torch.testing.assert_close(w[:, 1, 1] - w[:, 0, 1], torch.full((64,), 0.5))  # 0.05 s apart = half a frame
    assert float(w[:, -1, 1].max()) <= 4.0 + 1e-6  # windows fit inside the trajectory


def test_motion_loader_weights_and_errors(tmp_path):
    a = write_motion(tmp_path, "a.pkl", frames=[[0.0, 0.0, 0.0]] * 4, weight=3.0)
    b = write_motion(tmp_path, "b.pkl", frames=[[1.0, 1.0, 1.0]] * 4, weight=1.0)
    loader = MotionLoader(
        [a, b], amp_obs_frame_num=2, time_between_frames=0.1, generator=torch.Generator().manual_seed(0)
    )
    share = float(loader.sample_windows(4000)[:, 0].mean())
    assert share == pytest.approx(0.25, abs=0.03)
    assert MotionLoader(str(tmp_path), amp_obs_frame_num=2, time_between_frames=0.1).frames.shape[0] == 8
    with pytest.raises(ValueError, match="lacks style fields"):
        MotionLoader(a, style_fields=["zzz"])
    with pytest.raises(ValueError, match="shorter than one window"):
        MotionLoader(a, amp_obs_frame_num=10, time_between_frames=0.1)
    with pytest.raises(FileNotFoundError):
        MotionLoader(str(tmp_path / "none.pkl"))


class _Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_motion_loader_never_runs_code_from_files(tmp_path):
    path = tmp_path / "evil.pkl"
    with open(path, "wb") as f:
        pickle.dump({"walk": {"Fields": ["a"], "Frames": [[0.0]], "FrameDuration": 0.1, "x": _Evil()}}, f)
    with pytest.raises(pickle.UnpicklingError, match="plain data"):
        MotionLoader(str(path))


def test_amp_observation_wrapper_supplies_windows(tmp_path):
    path = write_motion(tmp_path, frames=[[0.1 * i, -0.1 * i, 0.0] for i in range(30)], dt=0.05)
    loader = MotionLoader(path, style_fields=["a", "b"], amp_obs_frame_num=3, time_between_frames=0.05)
    env = AmpObservationWrapper(
        make_env("velocity_tracking", num_envs=4, seed=0), loader, lambda e: e.base_lin_vel
    )
    assert env.num_envs == 4  # attributes pass through
    _, extras = env.get_observations()
    assert extras["observations"]["ref_obs"].shape == (4, 3, 2) and extras["ref_motion"].shape == (4, 6)
    before = env.base_lin_vel.clone()
    _, _, dones, extras = env.step(torch.zeros(4, 2))
    ref = extras["observations"]["ref_obs"]
    torch.testing.assert_close(ref[:, -1], env.base_lin_vel)
    torch.testing.assert_close(ref[~dones, -2], before[~dones])
    with pytest.raises(ValueError, match="features"):
        AmpObservationWrapper(env.env, loader, lambda e: torch.zeros(4, 5))


# ------------------------------------------------------------------ runner with the st_gym config form
def test_st_gym_amp_config_builds_and_trains(tmp_path):
    from st_rl.runners import AmpPolicyRunner, build_runner

    path = write_motion(tmp_path, frames=[[0.5, 0.0, 0.0]] * 40, dt=0.05)
    loader = MotionLoader(path, style_fields=["a", "b"], amp_obs_frame_num=2, time_between_frames=0.05)
    env = AmpObservationWrapper(
        make_env("velocity_tracking", num_envs=16, seed=0), loader, lambda e: e.base_lin_vel
    )
    cfg = {
        "runner_class_name": "AmpPolicyRunner",
        "seed": 1,
        "num_steps_per_env": 8,
        "save_interval": 50,
        "empirical_normalization": True,
        "logger": "tensorboard",
        "storage": {"amp_obs_shape": (4,)},
        "policy": {
            "class_name": "AmpActorCriticRecurrent",
            "init_noise_std": 1.2,
            "actor_hidden_dims": [32, 16],
            "critic_hidden_dims": [32, 16],
            "activation": "elu",
            "rnn_type": "lstm",
            "num_actor_obs": None,
            "num_critic_obs": None,
            "num_actions": None,
            "amp_discriminator": {
                "input_dim": None,
                "style_reward_coef": 1.0,
                "discriminator_grad_pen": 10.0,
                "hidden_dims": [32, 32],
                "task_reward_lerp": 0.0,
            },
        },
        "algorithm": {
            "class_name": "APPO",
            "num_learning_epochs": 2,
            "num_mini_batches": 2,
            "learning_rate": 1e-3,
            "schedule": "adaptive",
            "gamma": 0.99,
            "lam": 0.95,
            "entropy_coef": 0.01,
            "discriminator_loss_coef": 1.0,
            "mimic_loss_coef": 0.0,
            "amp_obs_dim": 2,
            "bc_loss_coef": 0.001,
        },
    }
    runner = build_runner(cfg["runner_class_name"], env, cfg, log_dir=str(tmp_path / "run"))
    assert isinstance(runner, AmpPolicyRunner)
    assert runner.alg.actor_critic.discriminator.input_dim == 4  # filled from ref_obs (2 frames x 2 features)
    runner.learn(3)
    ckpt = torch.load(str(tmp_path / "run" / "model_3.pt"), weights_only=True)
    assert {"amp_norm_state_dict", "amp_discriminator_state_dict"} <= set(ckpt)
    assert not any(k.startswith("discriminator.") for k in ckpt["model_state_dict"])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "run"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {
        "Episode_Reward/style_reward",
        "Episode_Reward/task_reward",
        "Loss/discriminator_expert_loss",
    } <= set(tags)
    with pytest.raises(ValueError, match="AMP algorithms"):
        bad = dict(cfg, algorithm={"class_name": "PPO"}, policy=dict(cfg["policy"], class_name="ActorCritic"))
        build_runner("AmpPolicyRunner", make_env("velocity_tracking", num_envs=4, seed=0), bad)


def _amp_flat_cfg(algorithm: dict) -> dict:
    return {
        "seed": 3,
        "num_steps_per_env": 8,
        "logger": "none",
        "policy": {
            "class_name": "AmpActorCritic",
            "actor_hidden_dims": [16],
            "critic_hidden_dims": [16],
            "amp_discriminator": {"input_dim": None, "hidden_dims": [16]},
        },
        "algorithm": {"num_learning_epochs": 1, "num_mini_batches": 2, **algorithm},
    }


def _wrapped(api_shim=None, n=8):
    loader = MotionLoader.__new__(MotionLoader)  # a tiny in-memory loader: constant reference windows
    loader.amp_obs_frame_num, loader.style_fields = 2, ["vx", "vy"]
    loader.sample_windows = lambda k: torch.full((k, 4), 0.5)  # type: ignore[method-assign]
    base = make_env("velocity_tracking", num_envs=n, seed=0)
    env = api_shim(base) if api_shim is not None else base
    return AmpObservationWrapper(
        env, loader, lambda e: e.unwrapped.base_lin_vel if hasattr(e, "unwrapped") else e.base_lin_vel
    )


def test_amp_runner_on_legged_gym_api_with_trial_reports():
    from st_rl.runners import AmpPolicyRunner
    from st_rl.tasks.api_shims import LeggedGymStyle

    class Trial:
        def __init__(self):
            self.reports = []

        def report(self, value, step):
            self.reports.append((value, step))

    env = _wrapped(LeggedGymStyle)
    runner = AmpPolicyRunner(env, _amp_flat_cfg({"class_name": "APPO"}))
    assert runner.env_adapter.api == "legged_gym" and runner.alg.amp_obs_dim == 4
    trial = Trial()
    runner.learn(2, trial=trial)
    assert [s for _, s in trial.reports] == [0, 1]
    assert runner.alg.amp_normalizer.count > 0


def test_amp_runner_with_atppo(tmp_path):
    from st_rl.runners import AmpPolicyRunner

    torch.manual_seed(5)
    teacher = ActorCritic(8, 8, 2, actor_hidden_dims=[16], critic_hidden_dims=[16])
    path = tmp_path / "teacher.pt"
    save_checkpoint(str(path), {"model_state_dict": teacher.state_dict()})
    cfg = _amp_flat_cfg(
        {
            "class_name": "ATPPO",
            "teacher_policy": {
                "teacher_ac_path": str(path),
                "actor_hidden_dims": [16],
                "critic_hidden_dims": [16],
            },
            "buffer_dilation_ratio": 2.0,
        }
    )
    runner = AmpPolicyRunner(_wrapped(), cfg)
    runner.learn(2)
    assert isinstance(runner.alg, ATPPO) and runner.alg.storage.num_transitions_per_env == 16


def test_amp_train_config_sets_the_tuned_defaults_and_leaves_the_users_config_alone():
    import copy

    from st_rl.configs import amp_train_config, get_preset

    base = get_preset("quadruped_flat").train.to_dict()
    before = copy.deepcopy(base)
    cfg = amp_train_config(base)
    assert base == before, "amp_train_config must not mutate its input"
    disc = cfg["policy"]["amp_discriminator"]
    assert (disc["style_reward_coef"], disc["discriminator_grad_pen"], disc["hidden_dims"]) == (
        0.03,
        2.0,
        [256, 128],
    )
    assert cfg["algorithm"]["learning_rate"] == 4e-4 and cfg["algorithm"]["class_name"] == "APPO"
    assert "amp_replay_buffer_size" not in cfg["algorithm"]  # the st_rl preset's replay (100,000 windows)
    assert cfg["runner_class_name"] == "AmpPolicyRunner" and cfg["policy"]["class_name"] == "AmpActorCritic"
    kept = amp_train_config(base, learning_rate=None, amp_replay_buffer_size=0)
    assert kept["algorithm"]["learning_rate"] == base["algorithm"]["learning_rate"]
    # the tuned defaults bring the update settings of their study (4 minibatches, KL 0.01, entropy 0.01), not the
    # preset's 8, 0.02, 0.0025
    update = ("num_mini_batches", "desired_kl", "entropy_coef")
    assert tuple(cfg["algorithm"][k] for k in update) == (4, 0.01, 0.01)
    assert tuple(kept["algorithm"][k] for k in update) == (8, 0.02, 0.0025)
    assert kept["algorithm"]["amp_replay_buffer_size"] == 0
