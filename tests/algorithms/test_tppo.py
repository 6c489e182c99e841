"""TPPO: schedules, teacher construction and loading, action mixing, distillation losses, configs."""

import math
import warnings

import pytest
import torch

from st_rl.algorithms import GET_PROB_FUNC, TPPO, EstimatorTPPO
from st_rl.algorithms.schedules import as_schedule
from st_rl.modules import ActorCritic, ActorCriticRecurrent, EmpiricalNormalization, EncoderActorCritic
from st_rl.storage.rollout_storage import MiniBatch
from st_rl.utils.checkpoint import save_checkpoint

NUM_OBS, NUM_CRITIC, NUM_ACT = 4, 6, 2


def teacher_ckpt(tmp_path, seed=3, with_norm=True, name="teacher.pt"):
    """A teacher ActorCritic on the critic observations, saved like our runner saves it."""
    torch.manual_seed(seed)
    teacher = ActorCritic(NUM_CRITIC, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8])
    state = {"model_state_dict": teacher.state_dict(), "iter": 10}
    norm = None
    if with_norm:
        norm = EmpiricalNormalization([NUM_CRITIC])
        norm.update(torch.randn(64, NUM_CRITIC) * 3 + 1)
        state["obs_norm_state_dict"] = norm.state_dict()
    path = tmp_path / name
    save_checkpoint(str(path), state)
    return str(path), teacher, norm


def make_tppo(tmp_path, num_envs=4, steps=3, recurrent=False, student_norm=False, **kwargs):
    path, teacher, norm = teacher_ckpt(tmp_path)
    torch.manual_seed(0)
    if recurrent:
        student = ActorCriticRecurrent(
            NUM_OBS,
            NUM_CRITIC,
            NUM_ACT,
            actor_hidden_dims=[8],
            critic_hidden_dims=[8],
            rnn_type="gru",
            rnn_hidden_size=8,
        )
    else:
        student = ActorCritic(NUM_OBS, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8])
    kwargs.setdefault(
        "teacher_policy", {"actor_hidden_dims": [8], "critic_hidden_dims": [8], "teacher_ac_path": path}
    )
    alg = TPPO(student, empirical_normalization=student_norm, **kwargs)
    alg.init_obs_norm(NUM_OBS, NUM_CRITIC)
    alg.init_storage(num_envs, steps, [NUM_OBS], [NUM_CRITIC], [NUM_ACT])
    return alg, teacher, norm


def collect(alg, num_envs=4, steps=3):
    with torch.inference_mode():
        for _ in range(steps):
            obs, critic = torch.randn(num_envs, NUM_OBS), torch.randn(num_envs, NUM_CRITIC)
            alg.act(obs, critic)
            dones = torch.rand(num_envs) < 0.3
            alg.process_env_step(
                torch.randn(num_envs), dones, {"time_outs": torch.zeros(num_envs, dtype=torch.bool)}
            )
        alg.compute_returns(torch.randn(num_envs, NUM_CRITIC))


# ------------------------------------------------------------------ schedules
def test_prob_schedules_by_hand():
    assert GET_PROB_FUNC("linear", 100)(50) == pytest.approx(0.5)
    assert GET_PROB_FUNC("linear", 100)(150) == 0.0
    assert GET_PROB_FUNC("exp", 100)(2) == pytest.approx(0.99**2)
    assert GET_PROB_FUNC("tanh", 100)(100) == pytest.approx(0.5)
    assert GET_PROB_FUNC("tanh", 100)(0) == pytest.approx(0.5 * (1 + math.tanh(1.0)))  # floats, no TypeError
    assert as_schedule(0.25, 100)(7) == 0.25
    assert as_schedule(lambda it: 1.0 / (it + 1), 100)(3) == 0.25
    with pytest.raises(ValueError, match="Unknown probability schedule"):
        GET_PROB_FUNC("cosine", 10)


# ------------------------------------------------------------------ construction
def test_ppo_subconfig_merged_explicit_wins(tmp_path):
    alg, _, _ = make_tppo(
        tmp_path,
        ppo={"class_name": "PPO", "learning_rate": 3e-4, "num_learning_epochs": 3, "gamma": 0.9},
        learning_rate=1e-3,
    )
    assert alg.num_learning_epochs == 3 and alg.gamma == 0.9
    assert alg.learning_rate == 1e-3


def test_teacher_loaded_with_its_normaliser_in_eval_mode(tmp_path):
    alg, teacher, norm = make_tppo(tmp_path)
    for k, v in teacher.state_dict().items():
        assert torch.equal(alg.teacher_actor_critic.state_dict()[k], v)
    assert not alg.teacher_actor_critic.training
    assert isinstance(alg.teacher_obs_normalizer, EmpiricalNormalization)
    torch.testing.assert_close(alg.teacher_obs_normalizer.mean, norm.mean)
    alg.train_mode()
    assert not alg.teacher_actor_critic.training and not alg.teacher_obs_normalizer.training
    assert all(not p.requires_grad for p in alg.teacher_actor_critic.parameters())


def test_teacher_dims_from_student_and_missing_path_warns():
    student = ActorCritic(NUM_OBS, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8])
    with pytest.warns(UserWarning, match="no teacher checkpoint"):
        alg = TPPO(student, teacher_policy={"class_name": "ActorCritic", "actor_hidden_dims": [16]})
    assert alg.teacher_actor_critic.num_actor_obs == NUM_CRITIC  # labels use critic observations
    assert alg.teacher_actor_critic.actor[0].out_features == 16


def test_teacher_config_taken_from_its_checkpoint(tmp_path):
    torch.manual_seed(1)
    teacher = ActorCritic(NUM_CRITIC, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[12, 12], critic_hidden_dims=[5])
    path = tmp_path / "t.pt"
    save_checkpoint(
        str(path),
        {
            "model_state_dict": teacher.state_dict(),
            "config": {
                "policy": {
                    "class_name": "ActorCritic",
                    "actor_hidden_dims": [12, 12],
                    "critic_hidden_dims": [5],
                }
            },
        },
    )
    student = ActorCritic(NUM_OBS, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8])
    alg = TPPO(student, teacher_ac_path=str(path))  # legged_gym's top-level key
    x = torch.randn(3, NUM_CRITIC)
    torch.testing.assert_close(alg.teacher_actor_critic.act_inference(x), teacher.act_inference(x))


def test_rsl_rl_checkpoint_with_log_std_and_inner_normaliser(tmp_path):
    torch.manual_seed(2)
    teacher = ActorCritic(NUM_CRITIC, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8])
    sd = {k: v for k, v in teacher.state_dict().items() if k != "std"}
    sd["log_std"] = torch.log(torch.tensor([0.5, 0.25]))
    norm = EmpiricalNormalization([NUM_CRITIC])
    norm.update(torch.randn(32, NUM_CRITIC) + 2)
    for k, v in norm.state_dict().items():
        sd[f"actor_obs_normalizer.{k}"] = v
    path = tmp_path / "rsl.pt"
    save_checkpoint(str(path), {"model_state_dict": sd, "optimizer_state_dict": {}, "iter": 5, "infos": None})
    student = ActorCritic(NUM_OBS, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8])
    alg = TPPO(
        student,
        teacher_policy={"teacher_ac_path": str(path), "actor_hidden_dims": [8], "critic_hidden_dims": [8]},
    )
    torch.testing.assert_close(alg.teacher_actor_critic.std.detach(), torch.tensor([0.5, 0.25]))
    torch.testing.assert_close(alg.teacher_obs_normalizer.mean, norm.mean)


def test_teacher_checkpoint_mismatch_is_explained(tmp_path):
    path, _, _ = teacher_ckpt(tmp_path)
    student = ActorCritic(NUM_OBS, NUM_CRITIC, NUM_ACT)
    with pytest.raises(ValueError, match="does not fit"):
        TPPO(student, teacher_policy={"teacher_ac_path": path, "actor_hidden_dims": [64]})


def test_unknown_distill_target_and_kl_rejected(tmp_path):
    with pytest.raises(ValueError, match="choose one of"):
        make_tppo(tmp_path, distill_target="huber")
    with pytest.raises(ValueError, match="not supported"):
        make_tppo(tmp_path, distill_target="kl")


# ------------------------------------------------------------------ rollout
def test_teacher_sees_raw_observations_through_its_own_normaliser(tmp_path):
    alg, teacher, norm = make_tppo(tmp_path, student_norm=True)
    raw_critic = torch.randn(4, NUM_CRITIC) * 2 + 3
    alg.actor_critic.update_normalization(torch.zeros(4, NUM_OBS), raw_critic)  # the student's own statistics
    labels = alg.teacher_actions(torch.zeros(4, NUM_OBS), raw_critic)  # the algorithm gets raw observations
    norm.eval()
    torch.testing.assert_close(labels, teacher.act_inference(norm(raw_critic)), atol=1e-5, rtol=1e-5)


def test_teacher_actions_replace_student_actions_with_consistent_log_prob(tmp_path):
    alg, _, _ = make_tppo(tmp_path)
    obs, critic = torch.randn(4, NUM_OBS), torch.randn(4, NUM_CRITIC)
    alg.use_teacher_act_mask = torch.tensor([True, False, True, False])
    with torch.inference_mode():
        actions = alg.act(obs, critic)
    labels = alg.transition.action_labels
    torch.testing.assert_close(actions[[0, 2]], labels[[0, 2]])
    assert not torch.allclose(actions[[1, 3]], labels[[1, 3]])
    # The stored log-prob is the student's rollout distribution evaluated at the executed action.
    mu, sigma = alg.transition.action_mean, alg.transition.action_sigma
    expected = torch.distributions.Normal(mu, sigma).log_prob(actions).sum(-1)
    torch.testing.assert_close(alg.transition.actions_log_prob.reshape(-1), expected)


def test_mask_resampled_only_for_done_envs(tmp_path):
    alg, _, _ = make_tppo(tmp_path, teacher_act_prob=0.0)
    assert alg.use_teacher_act_mask.all()  # every env starts with the teacher
    with torch.inference_mode():
        alg.act(torch.randn(4, NUM_OBS), torch.randn(4, NUM_CRITIC))
        alg.process_env_step(torch.zeros(4), torch.tensor([True, False, True, False]), {})
    assert alg.use_teacher_act_mask.tolist() == [False, True, False, True]


def test_schedule_prob_uses_learning_iteration(tmp_path):
    alg, _, _ = make_tppo(tmp_path, teacher_act_prob="linear", update_times_scale=10)
    alg.current_learning_iteration = 10  # linear schedule reaches 0
    with torch.inference_mode():
        alg.act(torch.randn(4, NUM_OBS), torch.randn(4, NUM_CRITIC))
        alg.process_env_step(torch.zeros(4), torch.ones(4, dtype=torch.bool), {})
    assert not alg.use_teacher_act_mask.any()


# ------------------------------------------------------------------ losses
def _fixed_minibatch(mean_labels):
    n = mean_labels.shape[0]
    z = torch.zeros(n, 1)
    return MiniBatch(
        obs=torch.zeros(n, NUM_OBS),
        critic_obs=torch.zeros(n, NUM_CRITIC),
        actions=torch.zeros(n, NUM_ACT),
        values=z,
        advantages=z,
        returns=z,
        old_actions_log_prob=z.squeeze(-1),
        old_mu=torch.zeros(n, NUM_ACT),
        old_sigma=torch.ones(n, NUM_ACT),
        action_labels=mean_labels,
    )


def _zero_output_student(alg):
    with torch.no_grad():
        for p in alg.actor_critic.actor.parameters():
            p.zero_()
        alg.actor_critic.std.fill_(1.0)


@pytest.mark.parametrize(
    "target,expected",
    [
        ("real", 5.0),  # |(0,0) - (3,4)|_2
        ("mse_sum", 25.0),
        ("l1", 7.0),
        ("max_log_prob", 0.5 * 25 + math.log(2 * math.pi)),  # -log N((3,4); 0, I)
    ],
)
def test_distill_targets_by_hand(tmp_path, target, expected):
    alg, _, _ = make_tppo(tmp_path, distill_target=target, using_ppo=False)
    _zero_output_student(alg)
    losses, _, _ = alg.compute_losses(_fixed_minibatch(torch.tensor([[3.0, 4.0], [3.0, 4.0]])))
    assert set(losses) == {"distillation_loss"}
    assert float(losses["distillation_loss"].detach()) == pytest.approx(expected, rel=1e-5)


def test_tanh_target_by_hand(tmp_path):
    alg, _, _ = make_tppo(tmp_path, distill_target="tanh", using_ppo=False)
    _zero_output_student(alg)
    labels = torch.tensor([[0.0, 0.6]])  # p = 0.5 vs targets 0.5 and 0.8
    losses, _, _ = alg.compute_losses(_fixed_minibatch(labels))
    stats = alg.distillation.log_scalars()
    bce = -(0.5 * math.log(0.5) * 2) / 2 - (0.8 * math.log(0.5) + 0.2 * math.log(0.5)) / 2
    assert float(losses["distillation_loss"].detach()) == pytest.approx(2 * bce, rel=1e-5)
    assert float(stats["l1distance"]) == pytest.approx(0.6, rel=1e-5)
    assert float(stats["l1_before_tanh"]) == pytest.approx(math.atanh(0.6), rel=1e-4)


def test_scheduled_distillation_coefficient(tmp_path):
    alg, _, _ = make_tppo(tmp_path, distillation_loss_coef="linear", update_times_scale=4)
    alg.current_learning_iteration = 1
    assert alg.distillation_loss_coef == pytest.approx(0.75)


def test_ppo_plus_distillation_update(tmp_path):
    alg, _, _ = make_tppo(tmp_path)
    collect(alg)
    losses, _ = alg.update(0)
    assert {"surrogate_loss", "value_loss", "entropy", "distillation_loss", "total_loss"} <= set(losses)


def test_pure_dagger_feed_forward_update_reduces_distillation_loss(tmp_path):
    alg, _, _ = make_tppo(tmp_path, using_ppo=False, num_learning_epochs=1, learning_rate=1e-2)
    first = None
    for it in range(30):
        collect(alg)
        losses, _ = alg.update(it)
        assert set(losses) == {"distillation_loss", "total_loss"}
        first = first if first is not None else losses["distillation_loss"]
    assert losses["distillation_loss"] < 0.5 * first


def test_recurrent_student_with_hidden_state_resampling(tmp_path, monkeypatch):
    from st_rl.algorithms.ppo import PPO

    alg, _, _ = make_tppo(tmp_path, recurrent=True, hidden_state_resample_prob=1.0, num_mini_batches=2)
    collect(alg)
    seen = []
    original = PPO.compute_losses

    def spy(self, mb):
        seen.append(mb.hidden_states)  # what PPO receives after TPPO resampled them
        return original(self, mb)

    monkeypatch.setattr(PPO, "compute_losses", spy)
    losses, _ = alg.update(0)
    assert "distillation_loss" in losses
    assert len(seen) == 2 and all(hasattr(h, "actor") and hasattr(h, "critic") for h in seen)
    # Probability 1: every initial state is U(-1, 1) noise, not the (near-zero) rollout state.
    assert all(float(h.actor.abs().max()) <= 1.0 and float(h.actor.abs().mean()) > 0.2 for h in seen)


def test_lr_scheduler_stepped_and_synced(tmp_path):
    alg, _, _ = make_tppo(
        tmp_path,
        lr_scheduler_class_name="StepLR",
        lr_scheduler={"step_size": 1, "gamma": 0.5},
        learning_rate=1e-3,
    )
    collect(alg)
    alg.update(0)
    assert alg.learning_rate == pytest.approx(5e-4)
    assert alg.optimizer.param_groups[0]["lr"] == pytest.approx(5e-4)
    assert "lr_scheduler_state_dict" in alg.state_dict()


def test_latent_distillation_loss_names(tmp_path):
    segments = {"proprio": (2,), "scan": (4,)}
    torch.manual_seed(0)
    teacher = EncoderActorCritic(
        6,
        6,
        NUM_ACT,
        obs_segments=segments,
        encoder_component_names=["scan"],
        actor_hidden_dims=[8],
        critic_hidden_dims=[8],
    )
    path = tmp_path / "enc_teacher.pt"
    save_checkpoint(str(path), {"model_state_dict": teacher.state_dict()})
    student = EncoderActorCritic(
        6,
        6,
        NUM_ACT,
        obs_segments=segments,
        encoder_component_names=["scan"],
        actor_hidden_dims=[8],
        critic_hidden_dims=[8],
    )
    alg = TPPO(
        student,
        teacher_policy={
            "class_name": "EncoderActorCritic",
            "teacher_ac_path": str(path),
            "encoder_component_names": ["scan"],
            "actor_hidden_dims": [8],
            "critic_hidden_dims": [8],
        },
        label_action_with_critic_obs=False,
        distill_latent_obs_component_mapping={"scan": "scan"},
        distill_latent_coef=0.3,
    )
    alg.init_obs_norm(6, 6)
    alg.init_storage(4, 3, [6], [None], [NUM_ACT])
    assert alg.loss_weight("distill_latent_scan") == 0.3
    with torch.inference_mode():
        for _ in range(3):
            obs = torch.randn(4, 6)
            alg.act(obs, obs)
            alg.process_env_step(torch.zeros(4), torch.zeros(4, dtype=torch.bool), {})
        alg.compute_returns(torch.randn(4, 6))
    mb = next(alg.storage.mini_batch_generator(1, 1))
    losses, _, _ = alg.compute_losses(mb)
    with torch.no_grad():
        expected = torch.norm(
            student.get_encoder_latent(mb.obs, "scan") - teacher.get_encoder_latent(mb.obs, "scan"), dim=-1
        ).mean()
    torch.testing.assert_close(losses["distill_latent_scan"], expected)
    with pytest.raises(ValueError, match="no encoder on component"):
        TPPO(
            student,
            teacher_policy={
                "teacher_ac_path": str(path),
                "class_name": "EncoderActorCritic",
                "encoder_component_names": ["scan"],
                "actor_hidden_dims": [8],
                "critic_hidden_dims": [8],
            },
            distill_latent_obs_component_mapping={"proprio": "scan"},
        )


def test_collect_transition_from_dataset_uses_dataset_actions(tmp_path):
    from st_rl.utils.collections import namedarraytuple

    Tr = namedarraytuple("Tr", ["observation", "privileged_observation", "action", "reward", "done"])
    alg, _, _ = make_tppo(tmp_path)
    acts = torch.randn(4, NUM_ACT)
    with torch.inference_mode():
        alg.collect_transition_from_dataset(
            Tr(
                torch.randn(4, NUM_OBS),
                torch.randn(4, NUM_CRITIC),
                acts,
                torch.ones(4),
                torch.zeros(4, dtype=torch.bool),
            ),
            {},
        )
    torch.testing.assert_close(alg.storage.action_labels[0], acts)
    assert torch.all(alg.storage.rewards[0] == 1.0)


def test_estimator_tppo_trains_estimator_and_distils(tmp_path):
    path, _, _ = teacher_ckpt(tmp_path)
    segments = {"vel": (2,), "cmd": (2,)}
    critic_segments = {"vel": (2,), "cmd": (2,), "mass": (1,), "friction": (1,)}
    from st_rl.modules import StateAcRecurrent

    student = StateAcRecurrent(
        NUM_OBS + 2,
        NUM_CRITIC,
        NUM_ACT,
        obs_segments={**segments, "mass": (1,), "friction": (1,)},
        privileged_obs_segments=critic_segments,
        estimator_obs_components=["vel", "cmd"],
        estimator_target_components=["mass", "friction"],
        actor_hidden_dims=[8],
        critic_hidden_dims=[8],
        rnn_type="gru",
        rnn_hidden_size=8,
    )
    alg = EstimatorTPPO(
        student,
        using_ppo=False,
        teacher_policy={"teacher_ac_path": path, "actor_hidden_dims": [8], "critic_hidden_dims": [8]},
    )
    alg.init_obs_norm(NUM_OBS + 2, NUM_CRITIC)
    alg.init_storage(4, 3, [NUM_OBS + 2], [NUM_CRITIC], [NUM_ACT])
    with torch.inference_mode():
        for _ in range(3):
            alg.act(torch.randn(4, NUM_OBS + 2), torch.randn(4, NUM_CRITIC))
            alg.process_env_step(torch.zeros(4), torch.zeros(4, dtype=torch.bool), {})
    losses, _ = alg.update(0)
    assert set(losses) == {"distillation_loss", "estimator_loss", "total_loss"}


def test_no_warning_for_documented_arguments(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_tppo(
            tmp_path,
            teacher_policy_class_name="ActorCritic",
            label_action_with_critic_obs=True,
            teacher_act_prob="tanh",
            update_times_scale=50,
            using_ppo=True,
            distillation_loss_coef=0.5,
            distill_target="l1",
            distill_latent_coef=1.0,
            distill_latent_target="real",
            buffer_dilation_ratio=2.0,
            hidden_state_resample_prob=0.1,
            action_labels_from_sample=True,
        )
