"""st_rl.export / st_rl.deploy / `st-rl export` / `st-rl play --policy`: exported files match the eager policy."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest
import torch
import torch.nn as nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from conftest import SMALL_CFG  # noqa: E402

from st_rl.cli import main  # noqa: E402
from st_rl.deploy import METADATA_KEY, OnnxPolicy, TorchScriptPolicy, load_exported_policy  # noqa: E402
from st_rl.export import ExportError, export_policy  # noqa: E402
from st_rl.modules.memory import Memory  # noqa: E402
from st_rl.play import play, play_exported  # noqa: E402
from st_rl.runners import OnPolicyRunner  # noqa: E402
from st_rl.tasks import make_env  # noqa: E402

# The tests call torch.jit.load directly (as a libtorch user would); torch 2.13 marks TorchScript deprecated.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
TOL = 1e-5
SLOTS = {"actor_dynamics_slots": True}  # velocity_tracking with zero mass/friction slots in the actor obs
RNN = {"actor_hidden_dims": [32, 32], "critic_hidden_dims": [32, 32], "rnn_hidden_size": 16}
POLICIES = {
    "mlp": ({**SMALL_CFG["policy"]}, "PPO", SLOTS),
    "lstm": (
        {"class_name": "ActorCriticRecurrent", "rnn_type": "lstm", "rnn_num_layers": 2, **RNN},
        "PPO",
        {},
    ),
    "gru": ({"class_name": "ActorCriticRecurrent", "rnn_type": "gru", **RNN}, "PPO", {}),
    # Estimator with its own LSTM feeding a GRU policy; the estimate replaces the mass/friction slots.
    "estimator": (
        {
            "class_name": "StateAcRecurrent",
            "rnn_type": "gru",
            "estimator_obs_components": ["base_lin_vel", "last_actions"],
            "estimator_target_components": ["mass", "friction"],
            "estimator_kwargs": {"hidden_sizes": [16], "rnn_type": "lstm", "rnn_hidden_size": 8},
            "replace_state_prob": 1.0,
            **RNN,
        },
        "EstimatorPPO",
        SLOTS,
    ),
    "encoder": (
        {
            "class_name": "EncoderActorCritic",
            "actor_hidden_dims": [32],
            "critic_hidden_dims": [32],
            "encoder_component_names": ["commands"],
            "encoder_kwargs": {"hidden_sizes": [8]},
            "encoder_output_size": 4,
        },
        "PPO",
        {},
    ),
}


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def _train(kind: str, log_dir: str) -> OnPolicyRunner:
    policy, algorithm, env_cfg = POLICIES[kind]
    cfg = copy.deepcopy(SMALL_CFG)
    cfg.update(task="velocity_tracking", logger="none", policy=copy.deepcopy(policy))
    cfg["algorithm"]["class_name"] = algorithm
    env = make_env("velocity_tracking", num_envs=8, seed=0, **env_cfg)
    runner = OnPolicyRunner(env, cfg, log_dir=log_dir, device="cpu")
    runner.learn(2)
    return runner


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Trained runners by kind (trained on first use), with their run directories."""
    cache: dict[str, tuple[OnPolicyRunner, str]] = {}
    root = tmp_path_factory.mktemp("export_runs")

    def get(kind: str) -> tuple[OnPolicyRunner, str]:
        if kind not in cache:
            torch.set_num_threads(1)
            log_dir = str(root / kind)
            cache[kind] = (_train(kind, log_dir), log_dir)
        return cache[kind]

    return get  # type: ignore[return-value]


def _forget_memories(runner: OnPolicyRunner) -> None:
    for module in runner.alg.actor_critic.modules():
        if isinstance(module, Memory):
            module.hidden_states = None


def _observation_sequence(kind: str, runner: OnPolicyRunner, batch: int, steps: int) -> list[torch.Tensor]:
    """Raw observations of ``batch`` envs driven by the eager policy (which starts from zero memory)."""
    env = make_env("velocity_tracking", num_envs=batch, seed=5, **POLICIES[kind][2])
    policy = runner.get_inference_policy()
    _forget_memories(runner)
    obs = env.get_observations()[0]
    out = []
    with torch.no_grad():
        for _ in range(steps):
            out.append(obs.clone())
            obs = env.step(policy(obs))[0]
    return out


@pytest.mark.parametrize("kind", list(POLICIES))
def test_exported_files_match_eager_policy(kind, runs, tmp_path):
    runner, run_dir = runs(kind)
    result = export_policy(run_dir, str(tmp_path / "export"))  # rebuilt from the checkpoint
    meta = result.metadata
    assert set(result.files) == {"onnx", "torchscript"}
    assert all(err <= 1e-4 for err in result.max_abs_error.values()), result.max_abs_error
    states = meta["states"]
    recurrent = kind in ("lstm", "gru", "estimator")
    assert meta["recurrent"] is recurrent and bool(states) is recurrent

    session = ort.InferenceSession(result.files["onnx"], providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == [s["name"] for s in meta["inputs"]]
    assert [o.name for o in session.get_outputs()] == [s["name"] for s in meta["outputs"]]
    scripted = torch.jit.load(result.files["torchscript"])
    eager = runner.get_inference_policy()

    for batch in (1, 64):
        seq = _observation_sequence(kind, runner, batch, steps=6)
        _forget_memories(runner)
        hidden_onnx = {
            s["input"]: np.zeros((s["shape"][0], batch, s["shape"][2]), np.float32) for s in states
        }
        hidden_ts = {k: torch.from_numpy(v.copy()) for k, v in hidden_onnx.items()}
        for obs in seq:
            with torch.no_grad():
                ref = eager(obs)
                out_ts = scripted(obs, *[hidden_ts[s["input"]] for s in states])
            out_ts = out_ts if isinstance(out_ts, tuple) else (out_ts,)
            out_onnx = session.run(None, {"obs": obs.numpy(), **hidden_onnx})
            assert ref.shape == (batch, 2) and out_onnx[0].shape == (batch, 2)
            assert torch.allclose(torch.from_numpy(out_onnx[0]), ref, atol=TOL, rtol=0), float(
                (torch.from_numpy(out_onnx[0]) - ref).abs().max()
            )
            assert torch.allclose(out_ts[0], ref, atol=TOL, rtol=0)
            # Feed the returned hidden state back (outputs 1.. are the states in metadata order).
            hidden_onnx = {s["input"]: out_onnx[1 + i] for i, s in enumerate(states)}
            hidden_ts = {s["input"]: out_ts[1 + i] for i, s in enumerate(states)}
        if recurrent:
            # The carried state is the eager memory's, and it is not trivially zero.
            actor = runner.alg.actor_critic.memory_a.hidden_states
            h_eager = actor.hidden if kind == "lstm" else actor
            assert torch.allclose(torch.from_numpy(hidden_onnx["h_in"]), h_eager, atol=TOL, rtol=0)
            assert float(h_eager.abs().max()) > 1e-3
        assert float(ref.abs().max()) > 1e-3  # real actions, not zeros


def test_deploy_wrappers_carry_and_reset_state(runs, tmp_path):
    runner, _ = runs("lstm")
    result = export_policy(runner, str(tmp_path / "export"))
    onnx_policy = load_exported_policy(result.files["onnx"])
    ts_policy = load_exported_policy(result.files["torchscript"])
    assert isinstance(onnx_policy, OnnxPolicy) and isinstance(onnx_policy.session, ort.InferenceSession)
    assert isinstance(ts_policy, TorchScriptPolicy) and isinstance(ts_policy.module, torch.jit.ScriptModule)
    seq = _observation_sequence("lstm", runner, 16, steps=8)
    eager = runner.get_inference_policy()
    _forget_memories(runner)
    dones = torch.zeros(16, dtype=torch.bool)
    dones[::3] = True
    for t, obs in enumerate(seq):
        with torch.no_grad():
            ref = eager(obs)
        assert torch.allclose(onnx_policy(obs), ref, atol=TOL, rtol=0)
        assert torch.allclose(ts_policy(obs), ref, atol=TOL, rtol=0)
        if t == 3:  # some episodes end: all three forget exactly those envs
            for p in (eager, onnx_policy, ts_policy):
                p.reset(dones)
            assert np.all(onnx_policy.states["h_in"][:, dones.numpy()] == 0)
            assert np.any(onnx_policy.states["h_in"][:, ~dones.numpy()] != 0)


def test_metadata_and_embedded_copies(runs, tmp_path):
    runner, run_dir = runs("lstm")
    result = export_policy(run_dir, str(tmp_path / "export"))
    with open(result.metadata_path, encoding="utf-8") as f:
        meta = json.load(f)
    assert meta == result.metadata
    assert meta["task"] == "velocity_tracking" and meta["iteration"] == 2 and meta["seed"] == 1
    assert meta["source_checkpoint"] == os.path.join(run_dir, "model_2.pt")
    assert meta["policy_class"] == "ActorCriticRecurrent" and meta["obs_normalization"] == "empirical"
    assert (meta["num_obs"], meta["num_actions"]) == (6, 2)
    assert meta["obs_segments"] == {"base_lin_vel": [2], "commands": [2], "last_actions": [2]}
    assert (meta["rnn_type"], meta["rnn_hidden_size"], meta["rnn_num_layers"]) == ("lstm", 16, 2)
    assert [s["name"] for s in meta["inputs"]] == ["obs", "h_in", "c_in"]
    assert [s["name"] for s in meta["outputs"]] == ["actions", "h_out", "c_out"]
    assert meta["inputs"][1]["shape"] == [2, "batch", 16]
    assert meta["dt"] == pytest.approx(0.05) and meta["clip_actions"] == 1.0
    assert meta["env_cfg"]["dt"] == 0.05 and meta["policy_cfg"]["rnn_type"] == "lstm"
    assert meta["files"] == {"onnx": "policy.onnx", "torchscript": "policy.pt"}
    model = onnx.load(result.files["onnx"])
    props = {p.key: p.value for p in model.metadata_props}
    assert json.loads(props[METADATA_KEY]) == meta
    assert props["task"] == "velocity_tracking" and json.loads(props["num_obs"]) == 6
    extra = {METADATA_KEY: ""}
    torch.jit.load(result.files["torchscript"], _extra_files=extra)
    assert json.loads(extra[METADATA_KEY]) == meta
    # Without the sidecar the embedded copy is used.
    os.remove(result.metadata_path)
    assert load_exported_policy(result.files["onnx"]).metadata == meta
    assert load_exported_policy(result.files["torchscript"]).metadata == meta


def test_export_errors(runs, tmp_path):
    runner, run_dir = runs("mlp")
    with pytest.raises(ExportError, match="unknown export format"):
        export_policy(runner, str(tmp_path / "x"), formats=["tflite"])
    # A checkpoint without any stored config (and no config.json): the message says what is missing.
    state = torch.load(os.path.join(run_dir, "model_2.pt"), weights_only=True)
    state.pop("config")
    lone = tmp_path / "lone"
    lone.mkdir()
    torch.save(state, lone / "model_2.pt")
    with pytest.raises(ExportError, match="no stored training config"):
        export_policy(str(lone / "model_2.pt"), str(tmp_path / "y"))
    # A multi-skill Mutex is refused with the workaround.
    from st_rl.modules import ActorCriticMutex

    env = runner.env
    mutex = ActorCriticMutex(
        num_actor_obs=env.num_obs,
        num_critic_obs=env.num_privileged_obs,
        num_actions=env.num_actions,
        sub_policy_paths=[run_dir],
        obs_segments=env.obs_segments,
        skill_selection_component="mass",
        env_action_scale=0.5,  # the run's config.json has no action scale (a pure-PyTorch task)
    )
    fake = SimpleNamespace(
        alg=SimpleNamespace(actor_critic=mutex, obs_normalizer=nn.Identity()), env=env, cfg={}
    )
    with pytest.raises(ExportError, match="Mutex.*Export each skill"):
        export_policy(fake, str(tmp_path / "z"))


@pytest.fixture(scope="module")
def quadruped_export(tmp_path_factory) -> tuple[str, str]:
    """A 1-iteration quadruped_flat run exported with `st-rl export`; returns (run_dir, export_dir)."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("quad")
    run_dir, out = str(root / "run"), str(root / "exported")
    cfg = copy.deepcopy(SMALL_CFG)
    cfg.update(task="quadruped_flat", logger="none", num_steps_per_env=8)
    runner = OnPolicyRunner(
        make_env("quadruped_flat", num_envs=8, seed=3), cfg, log_dir=run_dir, device="cpu"
    )
    runner.learn(1)
    assert main(["export", "--checkpoint", run_dir, "--out", out]) == 0
    return run_dir, out


def test_cli_export_writes_files_with_robot_metadata(quadruped_export, capsys):
    run_dir, out = quadruped_export
    assert sorted(os.listdir(out)) == ["policy.json", "policy.onnx", "policy.pt"]
    with open(os.path.join(out, "policy.json"), encoding="utf-8") as f:
        meta = json.load(f)
    assert meta["task"] == "quadruped_flat" and (meta["num_obs"], meta["num_actions"]) == (45, 12)
    assert meta["action_scale"] == 0.25 and meta["dt"] == pytest.approx(0.02)
    assert len(meta["joint_names"]) == 12 and meta["joint_names"][0] == "FR_hip_joint"
    assert len(meta["default_joint_pos"]) == 12 and meta["default_joint_pos"][1] == pytest.approx(0.9)
    assert sum(math.prod(s) for s in meta["obs_segments"].values()) == 45
    assert list(meta["obs_segments"])[:3] == ["base_ang_vel", "projected_gravity", "commands"]
    assert meta["recurrent"] is False and meta["states"] == []
    # Only the TorchScript file this time, into another folder: the printed report names it.
    capsys.readouterr()
    other = os.path.join(os.path.dirname(out), "ts_only")
    assert main(["export", "--checkpoint", run_dir, "--out", other, "--format", "torchscript"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote torchscript: {os.path.join(other, 'policy.pt')}" in printed
    assert "obs -> actions" in printed and "45 observations, 12 actions" in printed
    assert sorted(os.listdir(other)) == ["policy.json", "policy.pt"]


def test_cli_play_exported_policy_on_quadruped(quadruped_export, capsys):
    _, out = quadruped_export
    capsys.readouterr()
    args = ["play", "--policy", os.path.join(out, "policy.onnx"), "--num-envs", "2", "--duration", "1.2"]
    assert main(args + ["--no-video", "--no-plot"]) == 0
    printed = capsys.readouterr().out
    done = json.loads(printed.split("[st-rl] done: ")[1])
    assert done["task"] == "quadruped_flat" and done["format"] == "onnx" and done["num_envs"] == 2
    assert done["num_steps"] == 60 and done["num_samples"] > 0
    for key in ("velrmsd", "yaw_rmsd", "cmd_rms_xy", "CoT", "survival", "mean_reward_per_step"):
        assert math.isfinite(done[key]), key
    assert 0.0 <= done["survival"] <= 1.0 and done["velrmsd"] > 0


def test_play_exported_uses_no_st_rl_model_classes(quadruped_export):
    """In a fresh interpreter: the policy is an onnxruntime session wrapper and no st_rl model module loads."""
    _, out = quadruped_export
    code = textwrap.dedent(
        f"""
        import json, sys
        import onnxruntime
        import st_rl.deploy as deploy
        seen = []
        original = deploy.load_exported_policy
        def spy(path, *a, **k):
            p = original(path, *a, **k)
            seen.append(p)
            return p
        deploy.load_exported_policy = spy
        from st_rl.deploy import play_exported
        m = play_exported({os.path.join(out, "policy.onnx")!r}, num_envs=2, duration_s=1.2, verbose=False)
        loaded = sorted(n for n in sys.modules if n.startswith(("st_rl.modules", "st_rl.runners", "st_rl.algorithms")))
        print(json.dumps({{"policy": type(seen[0]).__name__,
                          "session": isinstance(seen[0].session, onnxruntime.InferenceSession),
                          "loaded": loaded, "velrmsd": m["velrmsd"]}}))
        """
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["policy"] == "OnnxPolicy" and report["session"] is True
    assert report["loaded"] == []
    assert math.isfinite(report["velrmsd"])


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_play_exported_recurrent_matches_checkpoint_play(fmt, runs, tmp_path):
    """The GRU policy played from its exported file measures what checkpoint play measures (same seed)."""
    _, run_dir = runs("gru")
    result = export_policy(run_dir, str(tmp_path / "export"), formats=[fmt])
    kw = {"num_envs": 4, "duration_s": 3.0, "seed": 7, "verbose": False}
    exported = play_exported(result.files[fmt], **kw)
    reference = play(run_dir, **kw)
    assert exported["task"] == "velocity_tracking" and exported["format"] == fmt
    assert exported["num_samples"] == reference["num_samples"] > 0
    for key in ("velrmsd", "cmd_rms_xy", "mean_reward_per_step", "survival"):
        assert exported[key] == pytest.approx(reference[key], rel=1e-4, abs=1e-6), key
    with pytest.warns(UserWarning, match="playing task"), pytest.raises(ValueError, match="observations"):
        play_exported(result.files[fmt], task="point_mass", num_envs=2, duration_s=0.5)
