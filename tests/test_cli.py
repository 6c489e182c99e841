"""The st-rl command: train the built-in default task, resume, list tasks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import torch

from st_rl.cli import main


def test_train_writes_logs_checkpoints_and_config(tmp_path, capsys):
    log_dir = tmp_path / "run"
    rc = main(
        [
            "train",
            "--task",
            "point_mass",
            "--num-envs",
            "16",
            "--iterations",
            "3",
            "--device",
            "cpu",
            "--seed",
            "7",
            "--log-dir",
            str(log_dir),
        ]
    )
    assert rc == 0
    files = os.listdir(log_dir)
    assert "config.json" in files and "model_3.pt" in files
    assert any(f.startswith("events.out.tfevents") for f in files)
    cfg = json.loads((log_dir / "config.json").read_text())
    assert cfg["runner"]["seed"] == 7
    out = capsys.readouterr().out
    assert "Learning iteration 3/3" in out and '"iterations": 3' in out

    resumed = tmp_path / "resumed"
    rc = main(
        [
            "train",
            "--task",
            "point_mass",
            "--num-envs",
            "16",
            "--iterations",
            "2",
            "--device",
            "cpu",
            "--log-dir",
            str(resumed),
            "--resume",
            str(log_dir),
        ]
    )
    assert rc == 0
    assert "model_5.pt" in os.listdir(resumed)
    assert "resuming from" in capsys.readouterr().out


def test_tasks_lists_default(capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "quadruped_flat (default)" in out and "point_mass" in out


def test_console_script_is_installed():
    exe = shutil.which("st-rl")
    cmd = [exe, "tasks"] if exe else [sys.executable, "-m", "st_rl", "tasks"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "point_mass" in result.stdout


def test_record_motion_then_train_with_amp_then_play(tmp_path, capsys):
    motion = tmp_path / "trot.motion"
    rc = main(
        ["record-motion", "--scripted-trot", "--fields", "joints", "--duration", "1", "--num-trajectories", "2",
         "--out", str(motion)]
    )  # fmt: skip
    assert rc == 0 and motion.exists()
    from st_rl.tasks.motion_recorder import load_motion_file

    traj = next(iter(load_motion_file(str(motion)).values()))
    assert len(traj["Fields"]) == 24 and all(f.endswith(("_dof_pos", "_dof_vel")) for f in traj["Fields"])
    log_dir = tmp_path / "amp"
    rc = main(
        ["train", "--task", "quadruped_flat", "--num-envs", "16", "--iterations", "2", "--device", "cpu",
         "--log-dir", str(log_dir), "--motion", str(motion), "--style-ramp", "1", "3"]
    )  # fmt: skip
    assert rc == 0
    cfg = json.loads((log_dir / "config.json").read_text())
    assert (
        cfg["runner"]["runner_class_name"] == "AmpPolicyRunner" and cfg["algorithm"]["class_name"] == "APPO"
    )
    assert cfg["algorithm"]["style_reward_ramp"] == [1, 3]
    assert cfg["policy"]["amp_discriminator"]["input_dim"] == 48  # 2 frames x 24 joint fields, from the env
    assert "AMP towards" in capsys.readouterr().out
    rc = main(
        [
            "play",
            "--checkpoint",
            str(log_dir),
            "--num-envs",
            "2",
            "--duration",
            "1",
            "--no-video",
            "--no-plot",
        ]
    )
    assert rc == 0


def test_train_with_motion_from_a_ppo_run_adds_amp_then_resumes_it(tmp_path, capsys):
    from st_rl.utils.checkpoint import load_checkpoint

    motion, ppo_dir, amp_dir = tmp_path / "trot.motion", tmp_path / "ppo", tmp_path / "amp"
    assert main(["record-motion", "--scripted-trot", "--duration", "1", "--num-trajectories", "2",
                 "--out", str(motion)]) == 0  # fmt: skip
    common = ["train", "--task", "quadruped_flat", "--num-envs", "16", "--device", "cpu"]
    assert main([*common, "--iterations", "2", "--log-dir", str(ppo_dir)]) == 0
    capsys.readouterr()
    rc = main([*common, "--iterations", "1", "--log-dir", str(amp_dir), "--motion", str(motion),
               "--resume", str(ppo_dir)])  # fmt: skip
    assert rc == 0
    assert "adding AMP to the policy in" in capsys.readouterr().out
    ppo, amp = load_checkpoint(str(ppo_dir / "model_2.pt")), load_checkpoint(str(amp_dir / "model_3.pt"))
    assert amp["iter"] == 3 and "amp_discriminator_state_dict" in amp
    assert set(ppo["model_state_dict"]) == set(amp["model_state_dict"])
    assert (amp_dir / "loaded_2_manipulated.pt").exists()  # what was loaded, for reproducibility
    # An AMP run resumes as usual (its discriminator and optimizer included).
    assert main([*common, "--iterations", "1", "--log-dir", str(amp_dir), "--motion", str(motion),
                 "--resume", str(amp_dir)]) == 0  # fmt: skip
    assert "resuming from" in capsys.readouterr().out
    assert load_checkpoint(str(amp_dir / "model_4.pt"))["iter"] == 4


def test_record_motion_scripted_walk_spreads_strides(tmp_path):
    motion = tmp_path / "walk.motion"
    rc = main(
        ["record-motion", "--scripted-walk", "--duration", "1", "--num-trajectories", "3", "--out", str(motion)]
    )  # fmt: skip
    assert rc == 0
    from st_rl.tasks.motion_recorder import load_motion_file

    trajectories = load_motion_file(str(motion))
    assert 1 <= len(trajectories) <= 3
    frames = [torch.tensor(t["Frames"]) for t in trajectories.values()]
    assert all(0 < f.shape[0] <= 50 for f in frames)  # 1 s at the task's 50 Hz, cut if the robot fell


def test_record_motion_over_a_command_grid(tmp_path, capsys):
    motion = tmp_path / "grid.motion"
    rc = main(
        ["record-motion", "--scripted-trot", "--duration", "0.5", "--grid-vx", "-0.5", "0.5",
         "--grid-yaw", "0", "1", "--out", str(motion)]
    )  # fmt: skip
    assert rc == 0
    from st_rl.tasks.motion_recorder import load_motion_file

    trajectories = load_motion_file(str(motion))
    commands = sorted(tuple(t["Command"]) for t in trajectories.values())
    assert commands == [(-0.5, 0.0, 0.0), (-0.5, 0.0, 1.0), (0.5, 0.0, 0.0), (0.5, 0.0, 1.0)]
    assert all(len(t["Fields"]) == 43 for t in trajectories.values())  # default fields: base, joints, feet
    rc = main(
        [
            "record-motion",
            "--scripted-trot",
            "--grid-vx",
            "1",
            "--command",
            "1",
            "0",
            "0",
            "--out",
            str(motion),
        ]
    )
    assert rc == 2 and "either --command or --grid" in capsys.readouterr().err


def test_record_motion_from_a_trained_run_over_a_command_grid(tmp_path):
    """A run of ``st-rl train`` (nested config in config.json and the checkpoint) records a reference over a
    grid of commands: the recipe of docs/amp.md with the gait preset."""
    run = tmp_path / "gait"
    assert main(["train", "--task", "quadruped_gait", "--num-envs", "16", "--iterations", "1", "--device", "cpu",
                 "--log-dir", str(run)]) == 0  # fmt: skip
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["env"]["reward_scales"]["trot"] == 0.5 and cfg["env"]["reward_scales"]["feet_air_time"] == 0.5
    motion = tmp_path / "gait.motion"
    rc = main(["record-motion", "--checkpoint", str(run), "--task", "quadruped_gait", "--duration", "0.5",
               "--grid-vx", "0", "0.5", "--grid-yaw", "-0.5", "0.5", "--out", str(motion)])  # fmt: skip
    assert rc == 0
    from st_rl.tasks.motion_recorder import load_motion_file

    trajectories = load_motion_file(str(motion))
    assert len(trajectories) <= 4 and {tuple(t["Command"]) for t in trajectories.values()} <= {
        (vx, 0.0, w) for vx in (0.0, 0.5) for w in (-0.5, 0.5)
    }
