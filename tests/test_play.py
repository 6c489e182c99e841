"""st_rl.play / st_rl.plotting / `st-rl play|plot`: evaluation metrics, MP4 video, tracking and training plots."""

from __future__ import annotations

import math
import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports MuJoCo (it reads the variable on import)

import pytest
import torch

from st_rl.cli import main
from st_rl.play import evaluate_policy, play
from st_rl.plotting import plot_training
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env

TASK = "quadruped_flat"
TINY_CFG = {
    "seed": 3,
    "task": TASK,
    "num_steps_per_env": 8,
    "save_interval": 100,
    "empirical_normalization": True,
    "logger": "tensorboard",
    "policy": {"class_name": "ActorCritic", "actor_hidden_dims": [32, 32], "critic_hidden_dims": [32, 32]},
    "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 1},
}


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny networks and 2-8 MuJoCo envs: one thread is fastest, and much faster on a busy machine.
    torch.set_num_threads(1)
    yield


SCALAR_KEYS = (
    "velrmsd",
    "yaw_rmsd",
    "cmd_rms_xy",
    "CoT",
    "survival",
    "falls_per_env_min",
    "mean_reward_per_step",
)


def _rendering_error() -> str | None:
    try:
        import mujoco

        model = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>")
        renderer = mujoco.Renderer(model, height=16, width=16)
        renderer.update_scene(mujoco.MjData(model))
        renderer.render()
        renderer.close()
        import imageio_ffmpeg  # noqa: F401
    except Exception as e:  # any backend failure means no video here
        return f"{type(e).__name__}: {e}"
    return None


RENDER_ERROR = _rendering_error()
needs_rendering = pytest.mark.skipif(
    RENDER_ERROR is not None, reason=f"MuJoCo offscreen rendering unavailable: {RENDER_ERROR}"
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> str:
    """A 1-iteration quadruped run: config.json, model_1.pt and TensorBoard events."""
    torch.set_num_threads(1)
    log_dir = str(tmp_path_factory.mktemp("play") / "run")
    env = make_env(TASK, num_envs=8, seed=3)
    runner = OnPolicyRunner(env, TINY_CFG, log_dir=log_dir, device="cpu")
    runner.learn(1)
    runner.writer.flush()
    files = os.listdir(log_dir)
    assert "config.json" in files and "model_1.pt" in files
    return log_dir


def _check_metrics(metrics: dict) -> None:
    for key in SCALAR_KEYS:
        assert key in metrics and math.isfinite(metrics[key]), key
    assert 0.0 <= metrics["survival"] <= 1.0
    assert metrics["num_samples"] > 0
    trace = metrics["trace"]
    assert trace["cmd"].shape == trace["vel"].shape == (metrics["num_steps"], 3)


@needs_rendering
def test_play_writes_video_plot_and_metrics(run_dir, tmp_path, capsys):
    import imageio.v2 as iio

    video, plot = tmp_path / "play.mp4", tmp_path / "play.png"
    metrics = play(
        os.path.join(run_dir, "model_1.pt"),
        num_envs=8,
        duration_s=2.0,
        video=str(video),
        plot=str(plot),
        video_quality="fast",
    )
    assert metrics["task"] == TASK and metrics["iteration"] == 1  # the task came from config.json
    _check_metrics(metrics)
    assert video.stat().st_size > 10_000 and plot.stat().st_size > 1_000
    reader = iio.get_reader(str(video), format="FFMPEG")  # type: ignore[arg-type]
    frames = [frame for _, frame in zip(range(5), reader)]
    reader.close()
    assert len(frames) >= 2 and frames[0].shape == (360, 640, 3)
    assert metrics["video_frames"] == 51  # 2 s at 25 fps plus the initial frame
    assert "velocity tracking RMSD" in capsys.readouterr().out


def test_zero_policy_tracking_error_is_the_command_rms():
    env = make_env(TASK, num_envs=4, seed=5)

    def zero(obs: torch.Tensor) -> torch.Tensor:
        return torch.zeros(obs.shape[0], env.num_actions)

    metrics = evaluate_policy(env, zero, 2.0)
    _check_metrics(metrics)
    assert metrics["survival"] == 1.0 and metrics["falls"] == 0
    # 2 s < the 10 s resampling time and nobody fell: every env kept its first command all along.
    trace = metrics["trace"]
    assert torch.allclose(torch.as_tensor(trace["cmd"][-1]), env.commands[0])
    expected = math.sqrt(float(env.commands[:, :2].square().sum(dim=1).mean()))
    assert metrics["cmd_rms_xy"] == pytest.approx(expected, rel=1e-5)
    # A standing robot: the tracking RMSD is the RMS of the commands, up to residual sway.
    assert metrics["velrmsd"] == pytest.approx(expected, abs=0.05 + 0.1 * expected)
    # 1 s warm-up excluded: 50 of the 100 steps of each env are scored.
    assert metrics["num_samples"] == 4 * 50


def test_fixed_command_and_errors(run_dir, tmp_path):
    env = make_env(TASK, num_envs=2, seed=1)

    def zero(obs: torch.Tensor) -> torch.Tensor:
        assert torch.allclose(obs[:, 6:9], torch.tensor([0.4, 0.0, 0.2]) * torch.tensor([2.0, 2.0, 0.25]))
        return torch.zeros(obs.shape[0], env.num_actions)

    metrics = evaluate_policy(env, zero, 1.2, command=(0.4, 0.0, 0.2))
    assert (metrics["trace"]["cmd"] == torch.tensor([0.4, 0.0, 0.2]).numpy()).all()
    assert metrics["cmd_rms_xy"] == pytest.approx(0.4, rel=1e-5)

    with pytest.raises(ValueError, match="velocity-command task"):
        evaluate_policy(make_env("point_mass", num_envs=2, seed=0), zero, 1.0)

    # A checkpoint without any task information: the error names the fix.
    state = torch.load(os.path.join(run_dir, "model_1.pt"), weights_only=True)
    state["config"]["runner"].pop("task")
    lone = tmp_path / "lone"
    lone.mkdir()
    torch.save(state, lone / "model_1.pt")
    with pytest.raises(ValueError, match="task="):
        play(str(lone / "model_1.pt"), num_envs=2, duration_s=0.5)
    metrics = play(str(lone / "model_1.pt"), task=TASK, num_envs=2, duration_s=1.2, verbose=False)
    assert metrics["task"] == TASK and math.isfinite(metrics["velrmsd"])


def test_plot_training_and_cli(run_dir, tmp_path, capsys):
    out = plot_training(run_dir)
    assert out == os.path.join(run_dir, "training_curves.png") and os.path.getsize(out) > 1_000
    with pytest.raises(FileNotFoundError, match="event files"):
        plot_training(str(tmp_path))

    png = tmp_path / "curves.png"
    assert main(["plot", run_dir, "--out", str(png)]) == 0
    assert png.stat().st_size > 1_000

    assert main(["play", "--checkpoint", run_dir, "--num-envs", "2", "--duration", "1.2", "--no-video"]) == 0
    assert os.path.isfile(os.path.join(run_dir, "play_1.png"))  # default plot path next to the checkpoint
    assert not os.path.exists(os.path.join(run_dir, "play_1.mp4"))
    out_text = capsys.readouterr().out
    assert "velocity tracking RMSD" in out_text and '"task": "quadruped_flat"' in out_text


@pytest.mark.parametrize("policy_class", ["ActorCritic", "ActorCriticRecurrent"])
def test_play_on_fewer_envs_than_training_gives_no_repeated_restore_warning(tmp_path, capfd, policy_class):
    """`st-rl play --num-envs 1` of a 16-env run: play starts fresh episodes (the training environment's
    episode state and the policy's rollout memories are not restored), so nothing about restoring them is
    said, and no warning is given twice."""
    import warnings

    cfg = {
        **TINY_CFG,
        "task": "velocity_tracking",
        "policy": {**TINY_CFG["policy"], "class_name": policy_class},
    }
    log_dir = str(tmp_path / "run")
    OnPolicyRunner(
        make_env("velocity_tracking", num_envs=16, seed=3), cfg, log_dir=log_dir, device="cpu"
    ).learn(1)
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = [
            "play",
            "--checkpoint",
            os.path.join(log_dir, "model_1.pt"),
            "--num-envs",
            "1",
            "--duration",
            "1.5",
        ]
        assert main([*args, "--no-video", "--no-plot"]) == 0
    captured = capfd.readouterr()
    messages = [str(w.message) for w in caught]
    text = "\n".join([*messages, captured.out, captured.err])
    for phrase in ("not restored", "episodes", "rollout memories", "episode_length"):
        assert phrase not in text, text  # play does not restore the training episodes: not even once
    assert len(messages) == len(set(messages)), messages  # no warning given twice
    assert '"num_envs": 1' in captured.out
