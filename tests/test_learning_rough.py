"""Rough terrain learns: the ``quadruped_rough`` preset (an ``EncoderActorCritic`` whose MLP encoder reads the
(1, 7, 5) height scan) learns to stay on its feet on the random height field and collects reward.

A CI-sized piece of the run recorded in benchmarks/RESULTS.md ("bench_locomotion.py on rough terrain"), where
the first 5 minutes (163 iterations of 512 robots) are spent learning not to fall (command tracking follows
from minute 10 on). Here: the preset config with 256 robots for 60 iterations; the runner's per-iteration
episode statistics (the ``trial_metric`` hook) must show episodes that went from falling within a second to
lasting several seconds, and the mean episode return turning clearly positive. Measured on the 2-core VM
(seed 1, one thread): mean episode length 48 -> 144 steps, return -0.46 -> 1.04; the test asks for 2x and
+0.75. About 90 s alone, 4 minutes on a loaded machine.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("mujoco")
pytest.importorskip("mujoco.batch")

from st_rl.configs import get_preset  # noqa: E402
from st_rl.modules import EncoderActorCritic  # noqa: E402
from st_rl.runners import build_runner  # noqa: E402
from st_rl.tasks import make_env  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")

TASK = "quadruped_rough"
NUM_ENVS, ITERATIONS, SEED = 256, 60, 1


class _Recorder:
    """A trial that keeps the runner's per-iteration metrics (mean episode length, return, velrmsd...)."""

    def __init__(self) -> None:
        self.history: list[dict[str, float]] = []

    def metric(self, metrics: dict[str, float]) -> float:
        self.history.append(dict(metrics))
        return 0.0

    def report(self, value: float, step: int) -> None:
        """Nothing to do: :meth:`metric` kept the values."""


@pytest.mark.slow
def test_rough_terrain_preset_learns_to_stay_up_and_collect_reward(one_thread):
    preset = get_preset(TASK)
    cfg = preset.train.to_dict()
    cfg.update(seed=SEED, logger="none")
    env = make_env(TASK, NUM_ENVS, seed=SEED, **preset.env_kwargs)
    runner: Any = build_runner("OnPolicyRunner", env, cfg, log_dir=None)
    policy = runner.alg.actor_critic
    assert isinstance(policy, EncoderActorCritic)
    assert policy.actor_layout.component_names == ["height_measurements"]

    trial = _Recorder()
    runner.learn(ITERATIONS, init_at_random_ep_len=True, trial=trial, trial_metric=trial.metric)
    first = [h for h in trial.history[:10] if h["mean_episode_length"] == h["mean_episode_length"]]
    last = trial.history[-1]
    first_len = sum(h["mean_episode_length"] for h in first) / len(first)
    first_return = sum(h["mean_reward"] for h in first) / len(first)
    print(
        f"quadruped_rough, {NUM_ENVS} robots: mean episode length {first_len:.0f} -> "
        f"{last['mean_episode_length']:.0f} steps, return {first_return:.2f} -> {last['mean_reward']:.2f}"
    )
    assert first_len < 100  # the untrained policy falls within two seconds
    assert last["mean_episode_length"] > 2.0 * first_len  # measured: 3.0x
    assert last["mean_reward"] > first_return + 0.75  # measured: +1.5
