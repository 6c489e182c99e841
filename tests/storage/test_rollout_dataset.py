"""RolloutDataset on hand-made trajectory files: frame alignment, dones/timeouts, loops, safety, errors."""

from __future__ import annotations

import json
import os
import pickle
import re
import threading
import time

import numpy as np
import pytest
import torch

from st_rl.storage.rollout_files.base import RolloutFileBase
from st_rl.storage.rollout_files.rollout_dataset import (
    RolloutDataset,
    TrajectoryFileError,
    get_frame_range,
    load_legacy_pickle,
    read_trajectory_file,
    rollout_dataset_from_config,
)
from st_rl.storage.rollout_files.trajectory_files import trajectory_file_name, write_trajectory_file
from st_rl.utils.data_compresser import (
    compress_normalized_image,
    decompress_normalized_image,
    get_compresser,
)


def _frame_arrays(k: int, frames: np.ndarray) -> dict[str, np.ndarray]:
    """Frame ``f`` of trajectory ``k``: obs ``[k, f]``, privileged ``[k, f, -f]``, action ``[100k + f]``,
    reward ``1000k + f``."""
    length = len(frames)
    return {
        "observations": np.stack([np.full(length, k), frames], 1).astype(np.float32),
        "privileged_observations": np.stack([np.full(length, k), frames, -frames], 1).astype(np.float32),
        "actions": (100 * k + frames).astype(np.float32)[:, None],
        "rewards": (1000 * k + frames).astype(np.float32),
        "values": np.zeros(length, np.float32),
    }


def write_traj(root, k, lengths, end="done", mtime=None, privileged=True, ext="npz"):
    """Trajectory ``k`` split into files of ``lengths``; ``end`` is 'done' (termination), 'timeout' or 'cut'."""
    d = os.path.join(root, f"trajectory_{k}")
    os.makedirs(d, exist_ok=True)
    total, start = sum(lengths), 0
    for length in lengths:
        frames = np.arange(start, start + length)
        arrays = _frame_arrays(k, frames)
        dones, timeouts = np.zeros(length, bool), np.zeros(length, bool)
        if start + length == total and end != "cut":
            dones[-1] = True
            timeouts[-1] = end == "timeout"
        arrays.update(dones=dones, timeouts=timeouts)
        if not privileged:
            arrays.pop("privileged_observations")
        path = os.path.join(d, trajectory_file_name(start, start + length, ext))
        if ext == "npz":
            write_trajectory_file(path, arrays)
        else:
            with open(path, "wb") as f:
                pickle.dump(arrays, f)
        start += length
    if mtime is not None:
        os.utime(d, (mtime, mtime))
    return d


def _ids(batch, field="observation"):
    """(traj id, frame) pairs of each env in a batch field."""
    x = getattr(batch, field)
    return [(int(a), int(b)) for a, b in x[:, :2].tolist()]


# ---------------------------------------------------------------------------------------------- alignment
def test_frame_by_frame_transitions_dones_timeouts_and_file_switch(tmp_path):
    root = str(tmp_path)
    write_traj(root, 0, [3, 2], end="done", mtime=100)  # terminated after frame 4, two files
    write_traj(root, 1, [2], end="timeout", mtime=200)
    write_traj(root, 2, [4], end="cut", mtime=300)  # recording stopped mid-episode
    write_traj(root, 3, [3], end="done", mtime=400)
    ds = RolloutDataset(root, num_envs=2, device="cpu")
    batches = list(ds)
    # (obs, next_obs, done, timeout) per step for env 0 and env 1
    expected = [
        ([(0, 0), (1, 0)], [(0, 1), (1, 1)], [True, True], [True, True]),  # first frames forced done
        ([(0, 1), (1, 1)], [(0, 2), (2, 0)], [False, True], [False, True]),  # env1: recorded time-out
        ([(0, 2), (2, 0)], [(0, 3), (2, 1)], [False, True], [False, True]),  # env0 crosses files
        ([(0, 3), (2, 1)], [(0, 4), (2, 2)], [False, False], [False, False]),
        ([(0, 4), (2, 2)], [(3, 0), (2, 3)], [True, False], [False, False]),  # env0: termination
    ]
    # step 5 needs a trajectory for env1 (traj 2 ends) and none is left: the dataset ends there
    assert len(batches) == len(expected)
    for batch, (obs, nxt, done, timeout) in zip(batches, expected):
        assert _ids(batch) == obs
        assert _ids(batch, "next_observation") == nxt
        assert batch.done.tolist() == done
        assert batch.timeout.tolist() == timeout
        assert batch.done.dtype == torch.bool and batch.timeout.dtype == torch.bool
        frames = torch.tensor([f for _, f in obs], dtype=torch.float32)
        ks = torch.tensor([k for k, _ in obs], dtype=torch.float32)
        assert torch.equal(batch.action[:, 0], 100 * ks + frames)
        assert torch.equal(batch.reward, 1000 * ks + frames)
        assert torch.equal(batch.privileged_observation[:, 2], -frames)
        next_frames = torch.tensor([f for _, f in nxt], dtype=torch.float32)
        assert torch.equal(batch.next_privileged_observation[:, 2], -next_frames)
    assert ds.exhausted and ds.get_batch() is None
    assert ds.get_transition_batch() == (None, {})


def test_cut_trajectory_reports_timeout_and_first_frame_option(tmp_path):
    root = str(tmp_path)
    write_traj(root, 0, [2], end="cut", mtime=100)
    write_traj(root, 1, [2], end="cut", mtime=200)
    ds = RolloutDataset(root, num_envs=1, device="cpu", mark_first_frame_done=False)
    batches = list(ds)
    assert [_ids(b) for b in batches] == [[(0, 0)], [(0, 1)], [(1, 0)]]
    assert [b.done.item() for b in batches] == [False, True, False]  # no forced first-frame done
    assert [b.timeout.item() for b in batches] == [False, True, False]  # the cut is a time-out
    assert _ids(batches[1], "next_observation") == [(1, 0)]


def test_get_batch_sequence_equals_single_steps(tmp_path):
    root = str(tmp_path)
    for k, lengths in enumerate([[3, 3], [2, 4], [5]]):
        write_traj(root, k, lengths, end="timeout", mtime=100 + k)
    seq = RolloutDataset(root, num_envs=2, device="cpu", dataset_loops=0).get_batch(7)
    single = RolloutDataset(root, num_envs=2, device="cpu", dataset_loops=0)
    steps = [single.get_batch() for _ in range(7)]
    assert seq.observation.shape == (7, 2, 2) and seq.done.shape == (7, 2) and seq.action.shape == (7, 2, 1)
    for name in RolloutDataset.Transition._fields:
        assert torch.equal(getattr(seq, name), torch.stack([getattr(s, name) for s in steps])), name


def test_transition_batch_infos_and_missing_privileged(tmp_path):
    root = str(tmp_path)
    write_traj(root, 0, [3], end="timeout", privileged=False)
    ds = RolloutDataset(root, num_envs=1, device="cpu")
    batch, infos = ds.get_transition_batch()
    assert set(infos) == {"time_outs"} and infos["time_outs"] is batch.timeout
    assert batch.privileged_observation is None and batch.next_privileged_observation is None
    assert batch.observation.dtype == torch.float32 and batch.observation.device.type == "cpu"


# ---------------------------------------------------------------------------------------------- loops
def test_dataset_loops_are_counted_and_honoured(tmp_path):
    root = str(tmp_path)
    write_traj(root, 0, [3], end="timeout", mtime=100)
    write_traj(root, 1, [3], end="timeout", mtime=200)
    ds = RolloutDataset(root, num_envs=2, device="cpu", dataset_loops=3)
    batches = list(ds)
    # three passes of three frames; the step that would start a fourth pass is not returned
    assert len(batches) == 8
    assert ds.num_dataset_looped == 2
    assert [_ids(b)[0] for b in batches] == [(0, 0), (0, 1), (0, 2)] * 2 + [(0, 0), (0, 1)]
    # iterating again starts over
    assert len(list(ds)) == 8
    forever = RolloutDataset(root, num_envs=2, device="cpu", dataset_loops=0)
    for _ in range(40):
        assert forever.get_batch() is not None
    assert forever.num_dataset_looped >= 12


def test_fewer_trajectories_than_envs_are_shared(tmp_path):
    root = str(tmp_path)
    write_traj(root, 0, [4], end="timeout")
    ds = RolloutDataset(root, num_envs=3, device="cpu")
    batches = list(ds)
    assert len(batches) == 3  # every env reads the one trajectory; it ends after frame 3
    for t, b in enumerate(batches):
        assert _ids(b) == [(0, t)] * 3
    looping = RolloutDataset(root, num_envs=3, device="cpu", dataset_loops=2)
    assert len(list(looping)) == 7


def test_keep_latest_n_trajs(tmp_path):
    root = str(tmp_path)
    for k in range(4):
        write_traj(root, k, [2], end="timeout", mtime=400 - 100 * k)  # trajectory 0 is the newest
    ds = RolloutDataset(root, num_envs=2, device="cpu", keep_latest_n_trajs=2)
    first = ds.get_batch()
    assert ds.num_trajectories == 2
    assert sorted(k for k, _ in _ids(first)) == [0, 1]
    assert _ids(first) == [(1, 0), (0, 0)]  # oldest first
    with pytest.warns(UserWarning, match="only 4 trajectories"):  # not waiting for more: use them all
        many = RolloutDataset(root, num_envs=2, device="cpu", keep_latest_n_trajs=10, wait_for_data_s=0)
        many.get_batch()
    assert many.num_trajectories == 4


def test_shuffle_changes_order_not_content(tmp_path):
    root = str(tmp_path)
    for k in range(6):
        write_traj(root, k, [2], end="timeout", mtime=100 + k)

    def read_all(**kw):
        ds = RolloutDataset(root, num_envs=1, device="cpu", **kw)
        return [(_ids(b)[0], b.action.item(), b.reward.item()) for b in ds]

    plain = read_all()
    shuffled = read_all(random_shuffle_traj_order=True, seed=3)
    order = [k for (k, f), _, _ in shuffled if f == 0]
    assert [k for (k, f), _, _ in plain if f == 0] == list(range(6))
    assert sorted(order) == list(range(6)) and order != list(range(6))
    # whole trajectories in the new order; the last frame of the last one is never served (nothing follows)
    assert [kf for kf, _, _ in shuffled] == [(k, f) for k in order for f in (0, 1)][:-1]
    everything = {((k, f), 100.0 * k + f, 1000.0 * k + f) for k in range(6) for f in (0, 1)}
    assert set(plain) | {((5, 1), 501.0, 5001.0)} == everything
    last = order[-1]
    assert set(shuffled) | {((last, 1), 100.0 * last + 1, 1000.0 * last + 1)} == everything
    assert read_all(random_shuffle_traj_order=True, seed=3) == shuffled


def test_starting_frame_range(tmp_path):
    root = str(tmp_path)
    write_traj(root, 0, [3, 3], end="timeout")
    fixed = RolloutDataset(root, num_envs=4, device="cpu", starting_frame_range=[2, 2]).get_batch()
    assert _ids(fixed) == [(0, 2)] * 4
    assert fixed.done.all() and fixed.timeout.all()  # first served frame of each trajectory
    spread = RolloutDataset(root, num_envs=64, device="cpu", starting_frame_range=[1, 4], seed=0).get_batch()
    starts = {f for _, f in _ids(spread)}
    assert starts == {1, 2, 3}
    # a start beyond the trajectory is clipped to its last frame
    late = RolloutDataset(root, num_envs=2, device="cpu", starting_frame_range=[10, 20], dataset_loops=2)
    assert _ids(late.get_batch()) == [(0, 5)] * 2
    with pytest.raises(ValueError, match="starting_frame_range"):
        RolloutDataset(root, num_envs=1, device="cpu", starting_frame_range=[3, 1])


def test_reset_env_ids_gives_new_trajectories(tmp_path):
    root = str(tmp_path)
    for k in range(3):
        write_traj(root, k, [4], end="timeout", mtime=100 + k)
    ds = RolloutDataset(root, num_envs=2, device="cpu")
    ds.get_batch()
    ds.reset(torch.tensor([1]))
    batch = ds.get_batch()
    assert _ids(batch) == [(0, 1), (2, 0)]
    assert batch.done.tolist() == [False, True]
    assert isinstance(ds, RolloutFileBase)


# ---------------------------------------------------------------------------------------------- formats
def test_compression_round_trip_numpy_and_torch():
    x = np.random.default_rng(0).uniform(-0.2, 1.2, size=(5, 8, 8)).astype(np.float32)
    c = compress_normalized_image(x)
    assert c.dtype == np.uint8 and c.shape == x.shape
    d = decompress_normalized_image(c)
    assert d.dtype == np.float32
    assert np.abs(d - np.clip(x, 0, 1)).max() <= 0.5 / 255 + 1e-6
    assert c.min() == 0 and c.max() == 255
    xt = torch.from_numpy(x)
    ct = compress_normalized_image(xt)
    assert ct.dtype == torch.uint8 and torch.equal(ct, torch.from_numpy(c))
    dt = decompress_normalized_image(ct)
    assert dt.dtype == torch.float32 and torch.allclose(dt, torch.from_numpy(d))
    assert get_compresser("normalized_image") == (compress_normalized_image, decompress_normalized_image)
    with pytest.raises(ValueError, match="registered types"):
        get_compresser("jpeg")


def test_component_files_are_reassembled_and_checked(tmp_path):
    root = str(tmp_path)
    rng = np.random.default_rng(1)
    image = rng.uniform(0, 1, size=(3, 2, 2)).astype(np.float32)
    state = rng.normal(size=(3, 3)).astype(np.float32)
    meta = {
        "obs_segments": {"state": [3], "depth": [2, 2]},
        "obs_disassemble_mapping": {"depth": "normalized_image"},
    }
    with open(os.path.join(root, "metadata.json"), "w") as f:
        json.dump(meta, f)
    d = os.path.join(root, "trajectory_0")
    os.makedirs(d)
    write_trajectory_file(
        os.path.join(d, "traj_000000_000003.npz"),
        {
            "obs_state": state,
            "obs_depth": compress_normalized_image(image),
            "actions": np.zeros((3, 1), np.float32),
            "rewards": np.zeros(3, np.float32),
            "dones": np.zeros(3, bool),
            "timeouts": np.zeros(3, bool),
        },
    )
    ds = RolloutDataset(root, num_envs=1, device="cpu", dataset_loops=0)
    obs = ds.get_batch(3).observation[:, 0]
    expected = np.concatenate(
        [state, decompress_normalized_image(compress_normalized_image(image)).reshape(3, 4)], 1
    )
    assert obs.shape == (3, 7)
    assert torch.equal(obs, torch.from_numpy(expected))
    # metadata whose layout disagrees with stored flat observations is reported
    write_traj(root, 1, [2], end="timeout")
    with open(os.path.join(root, "metadata.json"), "w") as f:
        json.dump({"obs_segments": {"state": [5]}}, f)
    bad = RolloutDataset(os.path.join(root), num_envs=2, device="cpu")
    with pytest.raises(TrajectoryFileError, match="obs_segments"):
        bad.get_batch()


def test_legacy_pickle_files_are_read(tmp_path):
    root = str(tmp_path)
    d = os.path.join(root, "trajectory_0")
    os.makedirs(d)
    arrays = _frame_arrays(0, np.arange(3))
    legacy = {
        "observations": (arrays["observations"],),  # the ancestor's trailing-comma tuple
        "privileged_observations": arrays["privileged_observations"],
        "actions": arrays["actions"],
        "rewards": arrays["rewards"][:, None],
        "dones": np.array([[0], [0], [1]], dtype=np.uint8),
        "values": np.zeros((3, 1), np.float32),
    }
    with open(os.path.join(d, "traj_000000_000003.pickle"), "wb") as f:
        pickle.dump(legacy, f)
    loaded = load_legacy_pickle(os.path.join(d, "traj_000000_000003.pickle"))
    assert np.array_equal(loaded["observations"], arrays["observations"])
    ds = RolloutDataset(root, num_envs=1, device="cpu", dataset_loops=2)
    batches = [ds.get_batch() for _ in range(3)]
    assert [_ids(b)[0] for b in batches] == [(0, 0), (0, 1), (0, 2)]
    assert [b.done.item() for b in batches] == [True, False, True]
    assert [b.timeout.item() for b in batches] == [True, False, False]  # no timeouts stored: terminal


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_without_running_code(tmp_path):
    root = str(tmp_path / "data")
    marker = str(tmp_path / "pwned")
    d = os.path.join(root, "trajectory_0")
    os.makedirs(d)
    path = os.path.join(d, "traj_000000_000002.pickle")
    with open(path, "wb") as f:
        pickle.dump({"observations": _Evil(marker), "actions": np.zeros((2, 1))}, f)
    with pytest.raises(TrajectoryFileError, match=r"Refusing to load .*(posix|os|nt)\.system"):
        read_trajectory_file(path)
    with pytest.raises(TrajectoryFileError, match="Refusing"):
        RolloutDataset(root, num_envs=1, device="cpu").get_batch()
    assert not os.path.exists(marker)
    # an npz with an object array is refused by np.load(allow_pickle=False)
    obj_path = os.path.join(d, "traj_000002_000004.npz")
    np.savez(obj_path, observations=np.array([_Evil(marker), 1], dtype=object))
    with pytest.raises(TrajectoryFileError, match="Python objects"):
        read_trajectory_file(obj_path)
    assert not os.path.exists(marker)
    with pytest.raises(TypeError, match="dtype object"):
        write_trajectory_file(obj_path, {"x": np.array([None], dtype=object)})


def _dump_pickle(directory, name, arrays):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        pickle.dump(arrays, f)


def test_hand_written_reference_pickle_dataset_is_served_exactly(tmp_path):
    root = str(tmp_path)
    with open(os.path.join(root, "metadata.json"), "w", encoding="utf-8") as f:
        json.dump({"obs_segments": {"a": [1], "b": [1]}, "use_critic_obs": False}, f)
    f32 = np.float32
    t0, t1 = os.path.join(root, "trajectory_0"), os.path.join(root, "trajectory_1")
    # trajectory 0: three frames in two files, ended by a time-out
    _dump_pickle(t0, "traj_000000_000002.pickle", {
        "observations": np.array([[1, 10], [2, 20]], f32), "privileged_observations": np.array([[0.5], [0.25]], f32),
        "actions": np.array([[-1], [-2]], f32), "rewards": np.array([0.5, 0.25], f32),
        "dones": np.array([False, False]), "timeouts": np.array([False, False]), "values": np.zeros(2, f32),
    })  # fmt: skip
    _dump_pickle(t0, "traj_000002_000003.pickle", {
        "observations": np.array([[3, 30]], f32), "privileged_observations": np.array([[0.125]], f32),
        "actions": np.array([[-3]], f32), "rewards": np.array([0.125], f32),
        "dones": np.array([True]), "timeouts": np.array([True]), "values": np.zeros(1, f32),
    })  # fmt: skip
    # trajectory 1: two frames, ended by a termination
    _dump_pickle(t1, "traj_000000_000002.pickle", {
        "observations": np.array([[7, 70], [8, 80]], f32), "privileged_observations": np.array([[4], [8]], f32),
        "actions": np.array([[5], [6]], f32), "rewards": np.array([1.5, 2.5], f32),
        "dones": np.array([False, True]), "timeouts": np.array([False, False]), "values": np.zeros(2, f32),
    })  # fmt: skip
    os.utime(t0, (100, 100))
    os.utime(t1, (200, 200))
    batches = list(RolloutDataset(root, num_envs=1, device="cpu"))
    # (obs, privileged, action, reward, done, timeout, next obs, next privileged); the first frame of each
    # trajectory is reported done (and a time-out: it is no termination), the last frame of all has no next.
    expected = [
        ([1, 10], [0.5], [-1], 0.5, True, True, [2, 20], [0.25]),
        ([2, 20], [0.25], [-2], 0.25, False, False, [3, 30], [0.125]),  # crosses into the second file
        ([3, 30], [0.125], [-3], 0.125, True, True, [7, 70], [4]),  # recorded time-out; trajectory 1 next
        ([7, 70], [4], [5], 1.5, True, True, [8, 80], [8]),
    ]
    assert len(batches) == len(expected)
    for batch, (obs, priv, action, reward, done, timeout, nxt, nxt_priv) in zip(batches, expected):
        assert batch.observation.tolist() == [obs] and batch.privileged_observation.tolist() == [priv]
        assert batch.action.tolist() == [action] and batch.reward.tolist() == [reward]
        assert batch.done.tolist() == [done] and batch.timeout.tolist() == [timeout]
        assert batch.next_observation.tolist() == [nxt]
        assert batch.next_privileged_observation.tolist() == [nxt_priv]


def test_a_dataset_mixing_npz_and_pickle_files_reads_both(tmp_path):
    root = str(tmp_path)
    write_traj(root, 0, [2], end="done", mtime=100, ext="npz")
    write_traj(root, 1, [3], end="timeout", mtime=200, ext="pickle")
    # trajectory 2 is split between the two forms: frames [0, 2) in an npz, [2, 4) in a pickle
    d = os.path.join(root, "trajectory_2")
    os.makedirs(d)
    head = _frame_arrays(2, np.arange(2))
    head.update(dones=np.zeros(2, bool), timeouts=np.zeros(2, bool))
    write_trajectory_file(os.path.join(d, "traj_000000_000002.npz"), head)
    tail = _frame_arrays(2, np.arange(2, 4))
    tail.update(dones=np.array([False, True]), timeouts=np.array([False, False]))
    write_trajectory_file(os.path.join(d, "traj_000002_000004.pickle"), tail)
    with open(os.path.join(d, "traj_000002_000004.pickle"), "rb") as f:
        assert set(pickle.load(f)) == set(tail)  # write_trajectory_file wrote the reference's pickle form
    os.utime(d, (300, 300))
    batches = list(RolloutDataset(root, num_envs=1, device="cpu"))
    assert [_ids(b)[0] for b in batches] == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    assert [_ids(b, "next_observation")[0] for b in batches][-1] == (2, 3)
    for b in batches:
        k, frame = _ids(b)[0]
        assert b.action.item() == 100 * k + frame and b.reward.item() == 1000 * k + frame


@pytest.mark.parametrize("where", ["top level", "inside an entry"])
def test_malicious_pickle_beside_good_files_is_refused_naming_the_file(tmp_path, where):
    root = str(tmp_path / "data")
    marker = str(tmp_path / "pwned")
    write_traj(root, 1, [2], end="done", mtime=200, ext="npz")
    d = os.path.join(root, "trajectory_0")
    payload = (
        _Evil(marker)
        if where == "top level"
        else {"observations": np.zeros((2, 2)), "rewards": _Evil(marker)}
    )
    _dump_pickle(d, "traj_000000_000002.pickle", payload)
    os.utime(d, (100, 100))
    path = os.path.join(d, "traj_000000_000002.pickle")
    with pytest.raises(TrajectoryFileError, match=re.escape(path) + r".*(posix|os|nt)\.system"):
        list(RolloutDataset(root, num_envs=2, device="cpu"))
    assert not os.path.exists(marker)  # nothing was executed


# ---------------------------------------------------------------------------------------------- errors
def test_missing_directory_and_empty_dataset(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="nope.*does not exist"):
        RolloutDataset(missing, num_envs=1, device="cpu", wait_for_data_s=0).get_batch()
    assert not os.path.exists(missing)  # not created when not waiting
    empty = tmp_path / "empty"
    (empty / "trajectory_0").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no trajectory in"):
        RolloutDataset(str(empty), num_envs=1, device="cpu", wait_for_data_s=0).get_batch()
    start = time.monotonic()
    with pytest.raises(FileNotFoundError):
        RolloutDataset(str(empty), 1, device="cpu", wait_for_data_s=0.3, poll_interval_s=0.1).get_batch()
    assert time.monotonic() - start >= 0.3


def test_waits_for_a_collector(tmp_path):
    root = str(tmp_path / "live")
    timer = threading.Timer(0.2, lambda: write_traj(root, 0, [2], end="timeout"))
    timer.start()
    try:
        ds = RolloutDataset(root, num_envs=1, device="cpu", wait_for_data_s=10, poll_interval_s=0.05)
        assert _ids(ds.get_batch()) == [(0, 0)]
    finally:
        timer.cancel()


def test_corrupt_and_inconsistent_files(tmp_path):
    root = str(tmp_path)
    d = write_traj(root, 0, [3], end="timeout")
    with open(os.path.join(d, "traj_000000_000003.npz"), "wb") as f:
        f.write(b"not a zip file at all")
    with pytest.raises(TrajectoryFileError, match="traj_000000_000003.npz.*corrupt"):
        RolloutDataset(root, num_envs=1, device="cpu").get_batch()
    # arrays shorter than the file name says
    write_trajectory_file(
        os.path.join(d, "traj_000000_000003.npz"),
        _frame_arrays(0, np.arange(2)) | {"dones": np.zeros(2, bool)},
    )
    with pytest.raises(TrajectoryFileError, match="file name says 3"):
        RolloutDataset(root, num_envs=1, device="cpu").get_batch()
    # a gap between files
    gap = str(tmp_path / "gap")
    g = write_traj(gap, 0, [2, 2], end="timeout")
    os.remove(os.path.join(g, "traj_000000_000002.npz"))
    with pytest.raises(TrajectoryFileError, match="gap"):
        RolloutDataset(gap, num_envs=1, device="cpu").get_batch()
    # observation width differs between trajectories
    mixed = str(tmp_path / "mixed")
    write_traj(mixed, 0, [2], end="timeout", mtime=100)
    m = os.path.join(mixed, "trajectory_1")
    os.makedirs(m)
    wide = _frame_arrays(1, np.arange(2)) | {"dones": np.zeros(2, bool)}
    wide["observations"] = np.zeros((2, 5), np.float32)
    write_trajectory_file(os.path.join(m, "traj_000000_000002.npz"), wide)
    os.utime(m, (200, 200))
    with pytest.raises(TrajectoryFileError, match="per-frame shape"):
        RolloutDataset(mixed, num_envs=2, device="cpu").get_batch()


def test_file_names():
    assert trajectory_file_name(0, 64) == "traj_000000_000064.npz"
    assert get_frame_range("traj_000064_000128.npz") == (64, 128)
    assert get_frame_range("/x/traj_000000_000064.pickle") == (0, 64)
    assert RolloutDataset.get_frame_range("traj_000001_000002.npz") == (1, 2)
    with pytest.raises(ValueError, match="not a trajectory file name"):
        get_frame_range("traj_000000.npz")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_without_cuda_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="device='cpu'"):
        RolloutDataset(str(tmp_path), num_envs=1)


def test_rollout_dataset_from_config(tmp_path):
    root = str(tmp_path)
    write_traj(root, 0, [2], end="timeout")
    cfg = {"scan_dir": root, "keep_latest_ratio": 0.5, "dataset_loops": 2}
    with pytest.warns(UserWarning, match="keep_latest_ratio"):
        ds = rollout_dataset_from_config(cfg, num_envs=1, device="cpu")
    assert cfg == {"scan_dir": root, "keep_latest_ratio": 0.5, "dataset_loops": 2}  # not mutated
    assert ds.data_dirs == [root] and ds.dataset_loops == 2
    assert _ids(ds.get_batch()) == [(0, 0)]
    assert RolloutDataset.from_config({"data_dir": [root]}, 1, "cpu").data_dirs == [root]
    with pytest.raises(ValueError, match="did you mean 'dataset_loops'"):
        rollout_dataset_from_config({"data_dir": root, "dataset_loop": 2}, 1, "cpu")
    with pytest.raises(ValueError, match="both 'data_dir'"):
        rollout_dataset_from_config({"data_dir": root, "scan_dir": root}, 1, "cpu")
    with pytest.raises(ValueError, match="needs 'data_dir'"):
        rollout_dataset_from_config({}, 1, "cpu")
