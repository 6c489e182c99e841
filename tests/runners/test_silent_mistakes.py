"""Inputs that used to train silently wrong now say so: a motion file whose ``Fields`` are not the task's style
fields is refused (naming the file and the fields), and a resume that cannot be exact (a checkpoint without
``rng_state`` or ``env_state``) says so once, in one warning naming the file and what is missing."""

from __future__ import annotations

import copy
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from st_rl.datasets import MotionLoader
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env
from st_rl.tasks.motion_recorder import save_motion_file
from st_rl.utils.checkpoint import load_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

TINY: dict[str, Any] = {
    "seed": 1,
    "num_steps_per_env": 4,
    "save_interval": 1,
    "logger": "none",
    "policy": {"class_name": "ActorCritic", "actor_hidden_dims": [16], "critic_hidden_dims": [16]},
    "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 1},
}


# ---------------------------------------------------------------------- motion files


@pytest.fixture(scope="module")
def quadruped() -> Any:
    return make_env("quadruped_flat", num_envs=1, seed=0, amp_obs_frame_num=2)


def _motion(path: Path, fields: list[str]) -> str:
    frames = torch.zeros(8, len(fields))
    save_motion_file(
        {"walk": {"Fields": fields, "Frames": frames.tolist(), "FrameDuration": 0.02, "MotionWeight": 1.0}},
        str(path),
    )
    return str(path)


def _loader(path: str, env: Any) -> MotionLoader:
    return MotionLoader(path, amp_obs_frame_num=2, time_between_frames=env.dt)


def test_a_motion_with_the_task_fields_is_accepted(tmp_path, quadruped):
    path = _motion(tmp_path / "walk.pkl", list(quadruped.style_fields))
    loader = _loader(path, quadruped)
    quadruped.set_ref_motion_source(loader)
    assert quadruped.ref_motion_source is loader
    quadruped.set_ref_motion_source(None)


def test_a_motion_with_other_fields_is_refused_naming_the_file_and_fields(tmp_path, quadruped):
    task_fields = list(quadruped.style_fields)
    fields = [*task_fields[:-3], "root_rot_w", "root_rot_x"]  # three foot fields gone, two others added
    path = _motion(tmp_path / "other_robot.pkl", fields)
    with pytest.raises(ValueError) as info:
        quadruped.set_ref_motion_source(_loader(path, quadruped))
    message = str(info.value)
    assert message.startswith(f"Motion file {path} does not match the task's style fields")
    assert f"missing from the motion: {task_fields[-3:]}" in message
    assert "(extra): ['root_rot_w', 'root_rot_x']" in message and "st-rl record-motion" in message
    assert quadruped.ref_motion_source is None  # nothing half-set


def test_a_motion_with_the_fields_in_another_order_is_refused(tmp_path, quadruped):
    fields = list(reversed(quadruped.style_fields))
    path = _motion(tmp_path / "reversed.pkl", fields)
    with pytest.raises(
        ValueError, match=re.escape(f"Motion file {path}") + ".*the same fields in another order"
    ):
        quadruped.set_ref_motion_source(_loader(path, quadruped))


def test_a_motion_with_another_window_length_is_refused(tmp_path, quadruped):
    path = _motion(tmp_path / "walk.pkl", list(quadruped.style_fields))
    loader = MotionLoader(path, amp_obs_frame_num=3, time_between_frames=quadruped.dt)
    with pytest.raises(
        ValueError, match="windows of 3 frames but the task's ref_obs holds amp_obs_frame_num=2"
    ):
        quadruped.set_ref_motion_source(loader)


# ---------------------------------------------------------------------- inexact resumes


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    run = tmp_path / "run"
    runner = OnPolicyRunner(make_env("velocity_tracking", num_envs=4, seed=0), copy.deepcopy(TINY), str(run))
    runner.learn(1)
    runner.close()
    return run / "model_1.pt"


def _without(path: Path, *keys: str) -> Path:
    state = load_checkpoint(str(path))
    for key in keys:
        state.pop(key)
    out = path.with_name(f"without_{'_'.join(keys)}.pt")
    torch.save(state, out)
    return out


def _fresh() -> OnPolicyRunner:
    return OnPolicyRunner(make_env("velocity_tracking", num_envs=4, seed=3), copy.deepcopy(TINY))


def _notes(path: Path, **load: Any) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fresh().load(str(path), **load)
    return [str(w.message) for w in caught if "not restored" in str(w.message)]


def test_a_complete_checkpoint_resumes_without_a_note(checkpoint):
    assert _notes(checkpoint) == []


@pytest.mark.parametrize(
    ("keys", "named"),
    [
        (("rng_state",), ["the random number generators (the file has no rng_state)"]),
        (("env_state",), ["the environment's episodes (the file has no env_state)"]),
        (
            ("rng_state", "env_state"),
            ["the file has no rng_state", "the file has no env_state"],
        ),
    ],
    ids=["rng_state", "env_state", "both"],
)
def test_a_resume_that_cannot_be_exact_says_so_once(checkpoint, keys, named):
    path = _without(checkpoint, *keys)
    notes = _notes(path)
    assert len(notes) == 1, notes  # one warning for everything missing
    assert notes[0].startswith(f"Checkpoint {path}: not restored, so training does not continue exactly")
    assert all(text in notes[0] for text in named), notes[0]
    assert "number of environments" not in notes[0]  # nothing about a mismatch: the file lacks them
    assert _notes(path, load_optimizer=False) == []  # evaluation / fine-tuning restores no RNG or env state


def test_the_inexact_resume_still_loads(checkpoint):
    runner = _fresh()
    with pytest.warns(UserWarning, match="no rng_state"):
        runner.load(str(_without(checkpoint, "rng_state")))
    assert runner.current_learning_iteration == 1
    runner.learn(1)
    assert runner.current_learning_iteration == 2
