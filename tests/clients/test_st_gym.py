"""st_gym, the real client: its config classes, its train / play / export calls, untouched.

Each test drives st_rl exactly as st_gym's ``scripts/st_rl/train.py`` and ``play.py`` and its
``wrappers/st_rl/exporter.py`` do (restated in the helpers below), with configs made by st_gym's config classes
(``clients/st_gym_cfg.py``) on a held-out task behind st_gym's wrapper API (``clients/st_gym_env.py``):

* train: ``build_runner(runner_class_name, env, agent_cfg.to_dict(), log_dir=..., device=agent_cfg.device)``,
  ``add_git_repo_to_log``, then (``resume``) the newest checkpoint under the log root by Isaac Lab's
  ``get_checkpoint_path(log_root, load_run, load_checkpoint)`` and ``runner.load``; ``params/agent.yaml`` is
  written into the run directory; ``velrmsd, CoT = runner.learn(num_learning_iterations=...,
  init_at_random_ep_len=True)``, both turned into lists by ``.cpu().numpy().tolist()``;
* play: ``OnPolicyRunner(env, agent_cfg.to_dict(), log_dir=None, device=...)``, ``load(path,
  map_location={"cuda:1": device})``, ``get_inference_policy(device=env.unwrapped.device)`` on one robot
  (play.py's default ``--num_envs 1``), ``obs, _, _, extras = env.step(policy(obs))``;
* export: ``export_policy_as_jit(alg.actor_critic, alg.obs_normalizer, ...)`` and
  ``export_policy_as_onnx(alg.actor_critic, normalizer=alg.obs_normalizer, obs_slices=...)`` with the slices
  from ``st_rl.utils.utils.get_obs_slice`` when the policy has ``encoders``; the exported files must act as
  the inference policy does.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from clients.st_gym_cfg import StRlOnPolicyRunnerCfg, StRlPpoActorCriticCfg, st_gym_runner_cfg
from clients.st_gym_env import CRITIC_OBS_SEGMENTS, OBS_SEGMENTS, STYLE_WIDTH, StGymLikeEnv
from clients.st_gym_exporter import export_policy_as_jit, export_policy_as_onnx, onnx_input_names

from st_rl.config import ConfigError
from st_rl.runners import OnPolicyRunner, build_runner
from st_rl.utils.config import resolve_train_cfg
from st_rl.utils.utils import get_obs_slice

REPO = Path(__file__).resolve().parents[2]
SMALL = [32, 32]
ENCODED = ["joint_obs"]

pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.filterwarnings(
        "ignore:`torch.jit.(load|script|save)` is deprecated:DeprecationWarning",
        "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning",
    ),
]


# --------------------------------------------------------------------------- st_gym's calls, restated
def get_checkpoint_path(log_path: str, run_dir: str = ".*", checkpoint: str = ".*") -> str:
    """Isaac Lab's lookup: the newest (sorted) run directory matching ``run_dir``, then its checkpoint matching
    ``checkpoint`` that sorts last when zero-padded to 15 characters."""
    runs = sorted(e.name for e in os.scandir(log_path) if e.is_dir() and re.match(run_dir, e.name))
    if not runs:
        raise ValueError(f"No runs present in the directory: '{log_path}' match: '{run_dir}'.")
    run_path = os.path.join(log_path, runs[-1])
    models = [f for f in os.listdir(run_path) if re.match(checkpoint, f)]
    if not models:
        raise ValueError(f"No checkpoints in the directory: '{run_path}' match '{checkpoint}'.")
    models.sort(key=lambda m: f"{m:0>15}")
    return os.path.join(run_path, models[-1])


def st_gym_train(env: Any, agent_cfg: StRlOnPolicyRunnerCfg, log_root: Path, stamp: str, iterations: int):
    """``scripts/st_rl/train.py``'s ``Train`` and ``run()``."""
    agent_cfg.max_iterations = iterations
    log_dir = os.path.join(str(log_root), stamp + (f"_{agent_cfg.run_name}" if agent_cfg.run_name else ""))
    runner = build_runner(
        getattr(agent_cfg, "runner_class_name", "OnPolicyRunner"),
        env,
        agent_cfg.to_dict(),
        log_dir=log_dir,
        device=agent_cfg.device,
    )
    runner.add_git_repo_to_log(str(REPO))
    if agent_cfg.resume:
        resume_path = get_checkpoint_path(str(log_root), agent_cfg.load_run, agent_cfg.load_checkpoint)
        runner.load(resume_path)
    os.makedirs(os.path.join(log_dir, "params"), exist_ok=True)
    with open(os.path.join(log_dir, "params", "agent.yaml"), "w") as f:
        yaml.dump(agent_cfg.to_dict(), f)  # Isaac Lab's dump_yaml
    velrmsd, cot = runner.learn(num_learning_iterations=agent_cfg.max_iterations, init_at_random_ep_len=True)
    results = {"metrics_velrmsd": velrmsd.cpu().numpy().tolist(), "metrics_CoT": cot.cpu().numpy().tolist()}
    json.dumps(results)
    env.close()
    return runner, log_dir, results


def st_gym_play(env: Any, agent_cfg: StRlOnPolicyRunnerCfg, log_root: Path):
    """``scripts/st_rl/play.py``: load the newest checkpoint, export it, return the runner, policy and files."""
    resume_path = get_checkpoint_path(str(log_root), agent_cfg.load_run, agent_cfg.load_checkpoint)
    runner = OnPolicyRunner(env, agent_cfg.to_dict(), log_dir=None, device=agent_cfg.device)
    runner.load(resume_path, map_location={"cuda:1": agent_cfg.device})
    policy = runner.get_inference_policy(device=env.unwrapped.device)
    export_dir = os.path.join(os.path.dirname(resume_path), "exported")
    actor_critic = runner.alg.actor_critic
    obs_slices = None
    if hasattr(actor_critic, "encoders"):
        obs_slices = [get_obs_slice(OBS_SEGMENTS, name) for name in ENCODED]
    onnx_file = export_policy_as_onnx(
        actor_critic,
        normalizer=runner.alg.obs_normalizer,
        path=export_dir,
        filename="policy.onnx",
        obs_slices=obs_slices,
    )
    jit_file = export_policy_as_jit(
        actor_critic, runner.alg.obs_normalizer, path=export_dir, filename="policy.pt"
    )
    return runner, policy, resume_path, jit_file, onnx_file


# ------------------------------------------------------------------------------------------- the runs
def _teacher(tmp_path: Path) -> StRlPpoActorCriticCfg:
    """A privileged teacher (its actor reads the critic observations), trained by st_gym's PPO flow."""
    cfg = st_gym_runner_cfg("PPO", "ActorCriticRecurrent", hidden_dims=SMALL, num_steps_per_env=8)
    root = tmp_path / "teacher"
    _, log_dir, _ = st_gym_train(StGymLikeEnv(16, teacher_obs=True), cfg, root, "2025-07-01_10-00-00", 1)
    path = get_checkpoint_path(str(root), ".*", "model_.*.pt")
    width = (
        CRITIC_OBS_SEGMENTS["obs"] + CRITIC_OBS_SEGMENTS["joint_obs"] + CRITIC_OBS_SEGMENTS["privileged_obs"]
    )
    return StRlPpoActorCriticCfg(
        teacher_ac_path=path,
        num_actor_obs=width,
        num_critic_obs=width,
        num_actions=4,
        class_name="ActorCriticRecurrent",
        init_noise_std=1.0,
        actor_hidden_dims=SMALL,
        critic_hidden_dims=SMALL,
        activation="elu",
        rnn_type="lstm",
    )


def _run_train_resume_play_export(tmp_path: Path, make_cfg: Any, amp: bool) -> dict[str, Any]:
    root = tmp_path / "logs" / "st_rl" / "client_rough"
    # train
    runner, first_dir, results = st_gym_train(
        StGymLikeEnv(16, amp=amp), make_cfg(), root, "2025-07-27_09-48-34", 2
    )
    assert isinstance(results["metrics_velrmsd"], float) and isinstance(results["metrics_CoT"], float)
    assert sorted(p for p in os.listdir(first_dir) if p.startswith("model_")) == ["model_2.pt"]
    assert os.path.isfile(os.path.join(first_dir, "params", "agent.yaml"))
    runner.close()
    # resume with st_gym's default lookup (load_run=".*": the newest run directory under the log root)
    cfg = make_cfg()
    cfg.resume = True
    runner, second_dir, _ = st_gym_train(
        StGymLikeEnv(16, amp=amp, seed=1), cfg, root, "2025-07-27_15-13-37", 1
    )
    assert runner.current_learning_iteration == 3
    assert os.path.isfile(os.path.join(second_dir, "model_3.pt"))
    runner.close()
    # play on one robot, export, and compare
    cfg = make_cfg()
    env = StGymLikeEnv(1, amp=amp, seed=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner, policy, path, jit_file, onnx_file = st_gym_play(env, cfg, root)
    assert path.endswith(os.path.join("2025-07-27_15-13-37", "model_3.pt"))
    restore_notes = [w for w in caught if "restor" in str(w.message).lower()]
    assert len(restore_notes) <= 1, [str(w.message) for w in restore_notes]
    _check_exports_act_as_the_policy(env, runner, policy, jit_file, onnx_file)
    return {"runner": runner, "results": results}


def _check_exports_act_as_the_policy(
    env: Any, runner: Any, policy: Any, jit_file: str, onnx_file: str
) -> None:
    ort = pytest.importorskip("onnxruntime")
    actor_critic = runner.alg.actor_critic
    actor_critic.reset()
    scripted = torch.jit.load(jit_file)
    session = ort.InferenceSession(onnx_file, providers=["CPUExecutionProvider"])
    inputs, _ = onnx_input_names(actor_critic)
    state = {name: None for name in inputs[1:]}
    obs, _ = env.get_observations()
    for _ in range(6):
        with torch.inference_mode():
            actions = policy(obs)
        scripted_actions = scripted(obs)
        feed = {"obs": obs.numpy()}
        for name in inputs[1:]:
            shape = (actor_critic.memory_a.rnn.num_layers, 1, actor_critic.memory_a.rnn.hidden_size)
            feed[name] = state[name] if state[name] is not None else torch.zeros(shape).numpy()
        outputs = session.run(None, feed)
        for name, value in zip(inputs[1:], outputs[1:]):
            state[name] = value
        torch.testing.assert_close(scripted_actions, actions, rtol=0, atol=1e-6)
        torch.testing.assert_close(torch.from_numpy(outputs[0]), actions, rtol=0, atol=1e-5)
        with torch.inference_mode():
            obs, _, _, _ = env.step(actions)


PPO_POLICIES = {
    "mlp": dict(policy_name="ActorCritic", rnn_type=None),
    "lstm": dict(policy_name="ActorCriticRecurrent", rnn_type="lstm"),
    "gru": dict(policy_name="ActorCriticRecurrent", rnn_type="gru"),
    "encoder": dict(
        policy_name="EncoderActorCritic",
        rnn_type=None,
        obs_segments=OBS_SEGMENTS,
        encoder_component_names=ENCODED,
        critic_obs_segments=CRITIC_OBS_SEGMENTS,
        critic_encoder_component_names=["privileged_obs"],
    ),
    "encoder_lstm": dict(
        policy_name="EncoderActorCriticRecurrent",
        rnn_type="lstm",
        obs_segments=OBS_SEGMENTS,
        encoder_component_names=ENCODED,
        critic_obs_segments=CRITIC_OBS_SEGMENTS,
        critic_encoder_component_names=["privileged_obs"],
    ),
}


@pytest.mark.parametrize("kind", list(PPO_POLICIES))
def test_ppo_trains_resumes_plays_and_exports(kind, tmp_path):
    def make_cfg():
        return st_gym_runner_cfg("PPO", hidden_dims=SMALL, num_steps_per_env=8, **PPO_POLICIES[kind])

    _run_train_resume_play_export(tmp_path, make_cfg, amp=False)


@pytest.mark.parametrize("policy_name", ["AmpActorCritic", "AmpActorCriticRecurrent"])
def test_appo_with_amp_runner_trains_resumes_plays_and_exports(policy_name, tmp_path):
    def make_cfg():
        return st_gym_runner_cfg(
            "APPO", policy_name, "AmpPolicyRunner", hidden_dims=SMALL, num_steps_per_env=8,
            style_width=STYLE_WIDTH, rnn_type="lstm",
        )  # fmt: skip

    cfg = make_cfg().to_dict()
    # what st_gym sends for AMP: the discriminator's MISSING amp_obs_dim as {}, the algorithm's real width
    assert cfg["policy"]["amp_discriminator"]["amp_obs_dim"] == {}
    assert cfg["algorithm"]["amp_obs_dim"] == STYLE_WIDTH and cfg["algorithm"]["mimic_loss_coef"] == 0.0
    run = _run_train_resume_play_export(tmp_path, make_cfg, amp=True)
    assert run["runner"].alg.actor_critic.discriminator.input_dim == STYLE_WIDTH


@pytest.mark.parametrize(
    "algorithm_name, policy_name", [("TPPO", "ActorCriticRecurrent"), ("ATPPO", "AmpActorCriticRecurrent")]
)
def test_tppo_and_atppo_train_resume_play_and_export(algorithm_name, policy_name, tmp_path):
    teacher = _teacher(tmp_path)

    def make_cfg():
        return st_gym_runner_cfg(
            algorithm_name, policy_name, "AmpPolicyRunner" if "A" in algorithm_name else "OnPolicyRunner",
            hidden_dims=SMALL, num_steps_per_env=8, teacher_policy=teacher, style_width=STYLE_WIDTH,
        )  # fmt: skip

    cfg = make_cfg().to_dict()
    assert (
        cfg["algorithm"]["ppo"]["mimic_loss_coef"] == 0.0 and cfg["algorithm"]["ppo"]["class_name"] == "PPO"
    )
    run = _run_train_resume_play_export(tmp_path, make_cfg, amp=algorithm_name == "ATPPO")
    alg = run["runner"].alg
    assert alg.distillation.teacher is not None
    assert alg.num_learning_epochs == 5 and alg.num_mini_batches == 4  # from the nested ppo config


@pytest.mark.parametrize("algorithm_name", ["PPO", "TPPO"])
def test_default_ppo_and_tppo_configs_untouched(algorithm_name, tmp_path):
    """lus2's agent config as st_gym ships it (LSTM 512-256-128, 24 steps, 5 epochs x 4 minibatches, adaptive
    KL, empirical normalisation): trains, resumes, plays and exports. TPPO distils from a teacher trained with
    the same untouched PPO config on the privileged observations. Only the iteration counts are the test's."""
    teacher = None
    if algorithm_name == "TPPO":
        root = tmp_path / "teacher"
        runner, _, _ = st_gym_train(
            StGymLikeEnv(16, teacher_obs=True), st_gym_runner_cfg("PPO"), root, "t0", 1
        )
        assert runner.alg.actor_critic.actor_hidden_dims == [512, 256, 128] and runner.num_steps_per_env == 24
        runner.close()
        width = StGymLikeEnv(1, teacher_obs=True).num_obs
        teacher = StRlPpoActorCriticCfg(
            teacher_ac_path=get_checkpoint_path(str(root), ".*", "model_.*.pt"),
            num_actor_obs=width, num_critic_obs=width, num_actions=4, class_name="ActorCriticRecurrent",
            init_noise_std=1.0, actor_hidden_dims=[512, 256, 128], critic_hidden_dims=[512, 256, 128],
            activation="elu", rnn_type="lstm",
        )  # fmt: skip

    def make_cfg():
        return st_gym_runner_cfg(algorithm_name, teacher_policy=teacher)

    run = _run_train_resume_play_export(tmp_path, make_cfg, amp=False)
    alg = run["runner"].alg
    assert alg.actor_critic.rnn_type == "lstm" and alg.actor_critic.actor_hidden_dims == [512, 256, 128]
    assert (alg.num_learning_epochs, alg.num_mini_batches, alg.schedule) == (5, 4, "adaptive")


# --------------------------------------------------------------------------------- the schema's answer
def test_st_gym_fields_are_all_accepted_and_a_nonzero_unbuilt_loss_weight_is_not():
    for algorithm_name, policy_name in [
        ("PPO", "ActorCritic"),
        ("PPO", "ActorCriticRecurrent"),
        ("APPO", "AmpActorCriticRecurrent"),
        ("TPPO", "ActorCriticRecurrent"),
        ("ATPPO", "AmpActorCriticRecurrent"),
    ]:
        teacher = StRlPpoActorCriticCfg(
            class_name="ActorCritic", init_noise_std=1.0, actor_hidden_dims=SMALL, critic_hidden_dims=SMALL,
            activation="elu", rnn_type=None, teacher_ac_path="teacher.pt",
        )  # fmt: skip
        cfg = st_gym_runner_cfg(algorithm_name, policy_name, teacher_policy=teacher).to_dict()
        resolve_train_cfg(cfg)  # no error
    cfg = st_gym_runner_cfg("PPO", "ActorCritic", rnn_type=None).to_dict()
    cfg["algorithm"]["mimic_loss_coef"] = 0.5  # PPO builds no mimic loss: a real weight for it is a mistake
    with pytest.raises(ConfigError, match=r"algorithm\.mimic_loss_coef = 0\.5: unknown key"):
        resolve_train_cfg(cfg)
    cfg = st_gym_runner_cfg("PPO", "ActorCriticRecurrent", rnn_type=None).to_dict()
    with pytest.raises(
        ConfigError, match=r"policy\.rnn_type = None: ActorCriticRecurrent is a recurrent policy"
    ):
        resolve_train_cfg(cfg)
