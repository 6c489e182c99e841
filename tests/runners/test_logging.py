"""What the runner writes: TensorBoard scalars from both episode-info styles, console progress."""

from __future__ import annotations

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from st_rl.runners import OnPolicyRunner
from st_rl.tasks import VelocityTracking
from st_rl.tasks.api_shims import LeggedGymStyle
from st_rl.utils.logger import aggregate_episode_infos


def _scalars(log_dir) -> dict[str, list[float]]:
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@pytest.mark.parametrize(
    "wrap,episode_key",
    [(None, "Episode_Reward/track_lin_vel"), (LeggedGymStyle, "Episode/rew_track_lin_vel")],
)
def test_tensorboard_scalars(small_cfg, tmp_path, capsys, wrap, episode_key):
    base = VelocityTracking(num_envs=32, seed=0)
    env = base if wrap is None else wrap(base)
    small_cfg["num_steps_per_env"] = 40  # > a few episodes end (init_at_random_ep_len)
    runner = OnPolicyRunner(env, small_cfg, log_dir=str(tmp_path))
    runner.learn(3, init_at_random_ep_len=True)
    runner.writer.flush()
    scalars = _scalars(tmp_path)
    for tag in (
        "Loss/surrogate_loss",
        "Loss/value_loss",
        "Loss/entropy",
        "Loss/total_loss",
        "Loss/learning_rate",
        "Policy/mean_noise_std",
        "Perf/total_fps",
        "Perf/collection time",
        "Perf/learning_time",
        "Train/mean_reward",
        "Train/mean_episode_length",
        "Train/mean_reward_each_timestep",
        "Eval/velrmsd",
        "Eval/CoT",
        episode_key,
    ):
        assert tag in scalars, f"missing {tag}; have {sorted(scalars)}"
    assert len(scalars["Loss/value_loss"]) == 3
    out = capsys.readouterr().out
    assert "Learning iteration 3/3" in out and "steps/s" in out and "ETA" in out


def test_logging_works_before_any_episode_ends(small_cfg, tmp_path, capsys):
    runner = OnPolicyRunner(VelocityTracking(num_envs=4, seed=0), small_cfg, log_dir=str(tmp_path))
    runner.learn(1)  # 16 steps < 160-step episodes: no episode finished yet
    assert "Learning iteration 1/1" in capsys.readouterr().out


def test_episode_info_aggregation_rules():
    import torch

    infos = [
        {"terrain_level_max": torch.tensor([1.0, 5.0]), "rew_x": torch.tensor(1.0), "Metrics/a": 2.0},
        {
            "terrain_level_max": torch.tensor(3.0),
            "rew_x": torch.tensor(float("nan")),
            "Metrics/a": 4.0,
            "dist_min": torch.tensor([0.5, -1.0]),
        },
    ]
    out = aggregate_episode_infos(infos)
    assert out == {
        "Episode/terrain_level_max": 5.0,
        "Episode/rew_x": 1.0,
        "Metrics/a": 3.0,
        "Episode/dist_min": -1.0,
    }
