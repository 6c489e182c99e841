"""RolloutDataset waits for a collector that has not written yet (missing or empty data directory), and only
when one will write: ``wait_for_data_s`` given, or a collector has started writing there (``metadata.json`` /
``trajectory_*`` directories). A directory nobody writes is an error at once; every wait has a time limit.

Deterministic: the writer thread starts only once the dataset signals that it is waiting
(``waiting_for_data``), and wakes it (``wake()``) after writing; the poll interval is far longer than any
test, so correctness never depends on a sleep. Time limits are monkeypatched to a microsecond.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import torch

import st_rl.storage.rollout_files.rollout_dataset as rollout_dataset
from st_rl.storage.rollout_files.rollout_dataset import (
    DEFAULT_POLL_INTERVAL_S,
    DEFAULT_WAIT_FOR_DATA_S,
    RolloutDataset,
    rollout_dataset_from_config,
)
from st_rl.storage.rollout_files.trajectory_files import trajectory_file_name, write_trajectory_file

LONG_POLL = 3600.0  # a poll never elapses within a test: only wake() ends a wait


def write_trajectory(root: str, k: int, length: int, obs_dim: int = 2, act_dim: int = 1) -> None:
    """Trajectory ``k`` of ``length`` frames (observation ``[k, f, 0...]``), ending with a timeout."""
    d = os.path.join(root, f"trajectory_{k}")
    os.makedirs(d, exist_ok=True)
    frames = np.arange(length)
    obs = np.zeros((length, obs_dim), np.float32)
    obs[:, 0], obs[:, 1] = k, frames
    dones = np.zeros(length, bool)
    dones[-1] = True
    write_trajectory_file(
        os.path.join(d, trajectory_file_name(0, length, "npz")),
        {
            "observations": obs,
            "privileged_observations": obs.copy(),
            "actions": np.zeros((length, act_dim), np.float32),
            "rewards": np.ones(length, np.float32),
            "dones": dones,
            "timeouts": dones.copy(),
        },
    )


def start_collector(dataset: RolloutDataset, write: object) -> tuple[threading.Thread, list[BaseException]]:
    """A thread that writes (``write()``) once ``dataset`` waits, then wakes it; returns (thread, errors)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            if not dataset.waiting_for_data.wait(timeout=60):
                raise TimeoutError("the dataset never started waiting")
            write()  # type: ignore[operator]
        except BaseException as e:  # reported by the test
            errors.append(e)
        finally:
            dataset.wake()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def test_defaults():
    ds = RolloutDataset("unused", num_envs=1, device="cpu")
    assert ds.wait_for_data_s is None  # wait for a collector that has started writing, not for nobody
    assert DEFAULT_WAIT_FOR_DATA_S == 600.0  # ... up to 10 minutes
    assert ds.poll_interval_s == DEFAULT_POLL_INTERVAL_S == 10.0
    assert not ds.waiting_for_data.is_set()
    with pytest.raises(ValueError, match="wait_for_data_s"):
        RolloutDataset("unused", num_envs=1, device="cpu", wait_for_data_s=-1)
    with pytest.raises(ValueError, match="poll_interval_s"):
        RolloutDataset("unused", num_envs=1, device="cpu", poll_interval_s=0)


@pytest.mark.parametrize("exists", [False, True], ids=["missing-dir", "empty-dir"])
def test_nothing_to_wait_for_is_an_error_at_once(tmp_path, exists):
    """No wait_for_data_s and no collector has written anything there: nothing will arrive."""
    root = tmp_path / "demos"
    if exists:
        root.mkdir()
        (root / "notes.txt").write_text("not a dataset")
    ds = RolloutDataset(str(root), num_envs=2, device="cpu", poll_interval_s=LONG_POLL)
    with pytest.raises(FileNotFoundError) as info:
        ds.get_batch()
    message = str(info.value)
    assert str(root) in message and "trajectory_<k>/traj_<a>_<b>.npz" in message
    assert "no collector has started writing there" in message and "wait_for_data_s" in message
    assert ("does not exist" in message) != exists
    assert not ds.waiting_for_data.is_set() and root.exists() == exists  # no directory created


@pytest.mark.parametrize("trace", ["metadata", "trajectory-dir"])
def test_waits_for_a_collector_that_has_started(tmp_path, trace):
    """A collector has started writing (metadata.json / an empty trajectory_* directory): the default waits."""
    root = tmp_path / "demos"
    if trace == "metadata":
        root.mkdir()
        (root / "metadata.json").write_text("{}")
    else:
        (root / "trajectory_0").mkdir(parents=True)
    ds = RolloutDataset(str(root), num_envs=2, device="cpu", poll_interval_s=LONG_POLL)
    thread, errors = start_collector(ds, lambda: write_trajectory(str(root), 0, 3))
    batch = ds.get_batch()
    thread.join(timeout=60)
    assert not errors and batch.observation[:, 1].tolist() == [0.0, 0.0]


def test_the_default_wait_has_a_time_limit(tmp_path, monkeypatch):
    root = tmp_path / "demos"
    (root / "trajectory_0").mkdir(parents=True)  # a collector started, then wrote nothing
    monkeypatch.setattr(rollout_dataset, "DEFAULT_WAIT_FOR_DATA_S", 1e-6)
    with pytest.raises(FileNotFoundError) as info:
        RolloutDataset(str(root), num_envs=1, device="cpu", poll_interval_s=LONG_POLL).get_batch()
    message = str(info.value)
    assert f"no trajectory in {[str(root)]} after waiting 1e-06 s" in message
    assert "a collector had started writing there" in message and "wait_for_data_s" in message


@pytest.mark.parametrize("exists", [False, True], ids=["missing-dir", "empty-dir"])
def test_waits_for_the_first_trajectory(tmp_path, exists):
    root = str(tmp_path / "live" / "dagger")
    if exists:
        os.makedirs(root)
    ds = RolloutDataset(root, num_envs=2, device="cpu", wait_for_data_s=3600, poll_interval_s=LONG_POLL)
    created: list[bool] = []

    def write() -> None:
        created.append(os.path.isdir(root))  # the dataset created the directory for the collector
        write_trajectory(root, 0, 3)

    thread, errors = start_collector(ds, write)
    batch = ds.get_batch()
    thread.join(timeout=60)
    assert not errors and created == [True]
    assert batch.observation[:, 0].tolist() == [0.0, 0.0] and batch.observation[:, 1].tolist() == [0.0, 0.0]
    assert not ds.waiting_for_data.is_set()


def test_waits_for_keep_latest_n_trajs(tmp_path):
    root = str(tmp_path)
    write_trajectory(root, 0, 2)
    ds = RolloutDataset(root, num_envs=2, device="cpu", keep_latest_n_trajs=2, poll_interval_s=LONG_POLL)
    thread, errors = start_collector(ds, lambda: write_trajectory(root, 1, 2))
    ds.get_batch()
    thread.join(timeout=60)
    assert not errors and ds.num_trajectories == 2


def test_timeout_ends_the_wait_with_a_clear_error(tmp_path):
    root = str(tmp_path / "never")
    ds = RolloutDataset(root, num_envs=1, device="cpu", wait_for_data_s=1e-6, poll_interval_s=LONG_POLL)
    with pytest.raises(FileNotFoundError, match="no trajectory in"):
        ds.get_batch()
    assert os.path.isdir(root)  # created while waiting, for the collector
    ds0 = RolloutDataset(str(tmp_path / "nope"), num_envs=1, device="cpu", wait_for_data_s=0)
    with pytest.raises(FileNotFoundError, match="does not exist.*wait_for_data_s"):
        ds0.get_batch()
    assert not os.path.exists(tmp_path / "nope")


def test_config_accepts_the_wait_keys(tmp_path):
    ds = rollout_dataset_from_config(
        {"data_dir": str(tmp_path), "wait_for_data_s": 5, "poll_interval_s": 1}, num_envs=1, device="cpu"
    )
    assert (ds.wait_for_data_s, ds.poll_interval_s) == (5.0, 1.0)


def two_stage_cfg(tmp_path, pretrain_dataset: dict, num_envs: int) -> dict:
    """A velocity_tracking TPPO config for a TwoStageRunner (an untrained privileged teacher, saved)."""
    from st_rl.configs import get_preset
    from st_rl.runners import OnPolicyRunner
    from st_rl.tasks import make_env

    teacher_cfg = get_preset("velocity_tracking").train.to_dict()
    teacher_cfg.update(logger="none", num_steps_per_env=4)
    teacher_cfg["obs_groups"] = {"policy": ["critic"], "critic": ["critic"]}  # the teacher is privileged
    teacher = OnPolicyRunner(make_env("velocity_tracking", num_envs=num_envs, seed=1), teacher_cfg)
    teacher_ckpt = str(tmp_path / "teacher.pt")
    teacher.save(teacher_ckpt)

    cfg = get_preset("velocity_tracking").train.to_dict()
    ppo = dict(cfg["algorithm"], num_mini_batches=1, num_learning_epochs=1)
    ppo.pop("class_name", None)
    cfg.update(logger="none", log_interval=1000, num_steps_per_env=4, save_interval=1000)
    cfg["policy"] = {"class_name": "ActorCritic", "actor_hidden_dims": [16], "critic_hidden_dims": [16]}
    cfg["algorithm"] = {
        "class_name": "TPPO",
        "ppo": ppo,
        "teacher_policy": {"teacher_ac_path": teacher_ckpt},
        "teacher_act_prob": 0.0,
        "using_ppo": True,
    }
    cfg["pretrain_dataset"] = pretrain_dataset
    return cfg


def test_two_stage_runner_starts_before_its_collector_writes(tmp_path):
    """A TwoStageRunner whose DAgger collector has not written yet waits, then pretrains from the data."""
    from st_rl.runners import build_runner
    from st_rl.runners.two_stage_runner import TwoStageRunner
    from st_rl.tasks import make_env

    torch.manual_seed(0)
    num_envs = 4
    data_dir = str(tmp_path / "dagger")  # does not exist yet: the collector has not started writing
    dataset_cfg = {
        "data_dir": data_dir,
        "dataset_loops": -1,
        "wait_for_data_s": 3600,  # the collector starts after the trainer
        "poll_interval_s": LONG_POLL,
    }
    cfg = two_stage_cfg(tmp_path, dataset_cfg, num_envs)
    cfg["pretrain_iterations"] = 1
    env = make_env("velocity_tracking", num_envs=num_envs, seed=2)
    runner = build_runner("TwoStageRunner", env, cfg)
    assert isinstance(runner, TwoStageRunner)
    dataset = runner.rollout_dataset
    assert dataset.wait_for_data_s == 3600
    num_obs, num_critic, num_actions = (
        runner.env_adapter.num_obs,
        runner.env_adapter.num_critic_obs,
        runner.env_adapter.num_actions,
    )

    def write() -> None:
        d = os.path.join(data_dir, "trajectory_0")
        os.makedirs(d, exist_ok=True)
        length = 16
        dones = np.zeros(length, bool)
        write_trajectory_file(
            os.path.join(d, trajectory_file_name(0, length, "npz")),
            {
                "observations": np.zeros((length, num_obs), np.float32),
                "privileged_observations": np.zeros((length, num_critic), np.float32),
                "actions": np.full((length, num_actions), 0.25, np.float32),
                "rewards": np.ones(length, np.float32),
                "dones": dones,
                "timeouts": dones.copy(),
            },
        )

    thread, errors = start_collector(dataset, write)
    runner.learn(2)
    thread.join(timeout=60)
    assert not errors
    assert runner.current_learning_iteration == 2
    assert dataset.num_trajectories == 1


def test_a_seeded_two_stage_runner_replays_its_dataset_in_one_order(tmp_path):
    """The runner's ``seed`` sets the order of a shuffled dataset that gives no seed (CI once failed on an
    order drawn from OS entropy)."""
    from st_rl.runners import build_runner
    from st_rl.tasks import make_env

    root = str(tmp_path / "data")
    for k in range(8):
        write_trajectory(root, k, 3)

    def first_trajectories(run_seed: int, dataset_seed: int | None = None) -> list[int]:
        dataset_cfg = {"data_dir": root, "random_shuffle_traj_order": True}
        if dataset_seed is not None:
            dataset_cfg["seed"] = dataset_seed
        cfg = two_stage_cfg(tmp_path, dataset_cfg, num_envs=4)
        cfg["seed"] = run_seed
        runner = build_runner("TwoStageRunner", make_env("velocity_tracking", num_envs=4, seed=2), cfg)
        return runner.rollout_dataset.get_batch().observation[:, 0].int().tolist()

    order = first_trajectories(3)
    assert order == first_trajectories(3)
    assert first_trajectories(3, dataset_seed=5) == first_trajectories(4, dataset_seed=5)  # its own seed wins
    assert order != first_trajectories(4)
    assert sorted(set(order)) == sorted(order)  # four different trajectories out of eight
