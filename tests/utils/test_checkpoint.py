"""Checkpoint files (atomic save, weights-only load), RNG state capture and checkpoint discovery."""

import os
import random

import numpy as np
import pytest
import torch

import st_rl.utils.checkpoint as ckpt
from st_rl.utils.checkpoint import (
    CheckpointError,
    capture_rng_state,
    check_weights_only_safe,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
    seed_everything,
)
from st_rl.utils.utils import get_checkpoint_path


class ArbitraryThing:
    """A class a weights-only load must refuse."""

    def __init__(self):
        self.payload = 3


def _state(value=1.0):
    return {
        "model_state_dict": {"w": torch.full((2, 3), value), "b": torch.zeros(3)},
        "optimizer_state_dict": {"state": {}, "param_groups": [{"lr": 1e-3, "params": [0, 1]}]},
        "iter": 7,
        "infos": {"note": "x", "values": [1, 2.5, None], "nested": {"t": torch.arange(3)}},
    }


# ---------------------------------------------------------------------------- save / load
def test_round_trip(tmp_path):
    path = str(tmp_path / "sub" / "model_7.pt")  # missing directory is created
    save_checkpoint(path, _state(2.0))
    loaded = load_checkpoint(path)
    torch.testing.assert_close(loaded["model_state_dict"]["w"], torch.full((2, 3), 2.0))
    assert loaded["iter"] == 7
    assert loaded["infos"]["values"] == [1, 2.5, None]
    torch.testing.assert_close(loaded["infos"]["nested"]["t"], torch.arange(3))
    assert os.listdir(tmp_path / "sub") == ["model_7.pt"]
    # it is a plain torch file readable with weights_only=True
    assert torch.load(path, weights_only=True)["iter"] == 7


def test_failed_save_leaves_old_file_and_no_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "model_1.pt"
    save_checkpoint(str(path), _state(1.0))
    old_bytes = path.read_bytes()

    def failing_save(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 partial data")
        f.flush()
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.torch, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(str(path), _state(5.0))
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes
    assert os.listdir(tmp_path) == ["model_1.pt"]
    torch.testing.assert_close(load_checkpoint(str(path))["model_state_dict"]["w"], torch.ones(2, 3))


def test_interrupted_save_of_new_file_leaves_nothing(tmp_path, monkeypatch):
    def interrupted(obj, f, *args, **kwargs):
        f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt.torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(str(tmp_path / "model_2.pt"), _state())
    assert os.listdir(tmp_path) == []


def test_save_rejects_unsafe_objects_before_writing(tmp_path):
    state = _state()
    state["infos"]["thing"] = ArbitraryThing()
    with pytest.raises(TypeError, match="ArbitraryThing"):
        save_checkpoint(str(tmp_path / "model_3.pt"), state)
    assert os.listdir(tmp_path) == []


def test_load_arbitrary_object_raises_checkpoint_error(tmp_path):
    path = str(tmp_path / "evil.pt")
    torch.save({"model_state_dict": {}, "thing": ArbitraryThing()}, path)
    with pytest.raises(CheckpointError, match="arbitrary Python objects"):
        load_checkpoint(path)


def test_load_arbitrary_object_error_names_the_class(tmp_path):
    path = str(tmp_path / "evil.pt")
    torch.save({"model_state_dict": {}, "thing": ArbitraryThing()}, path)
    with pytest.raises(CheckpointError, match="ArbitraryThing"):
        load_checkpoint(path)


def test_truncated_file_raises_checkpoint_error(tmp_path):
    # cut inside the zip header region: torch raises RuntimeError, which is wrapped
    good = tmp_path / "good.pt"
    save_checkpoint(str(good), _state())
    data = good.read_bytes()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(data[:500])
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(str(bad))


@pytest.mark.parametrize("fraction", [0.75, 0.999])
def test_truncated_large_file_raises_checkpoint_error(tmp_path, fraction):
    # cut after the first data record: torch.load raises OSError ([Errno 22]), which must be wrapped too
    good = tmp_path / "good.pt"
    save_checkpoint(str(good), {"model_state_dict": {"w": torch.ones(64, 64), "b": torch.ones(64)}})
    data = good.read_bytes()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(CheckpointError):
        load_checkpoint(str(bad))


def test_empty_file_raises_checkpoint_error(tmp_path):
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(CheckpointError):
        load_checkpoint(str(empty))


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_checkpoint(str(tmp_path / "nope.pt"))


def test_missing_required_key_lists_keys(tmp_path):
    path = str(tmp_path / "m.pt")
    save_checkpoint(path, {"weights": torch.ones(1), "iter": 3})
    with pytest.raises(CheckpointError, match="model_state_dict") as info:
        load_checkpoint(path)
    assert "'iter'" in str(info.value) and "'weights'" in str(info.value)
    assert load_checkpoint(path, required=("weights",))["iter"] == 3


def test_non_dict_checkpoint_raises(tmp_path):
    path = str(tmp_path / "t.pt")
    torch.save(torch.ones(2), path)
    with pytest.raises(CheckpointError, match="Tensor"):
        load_checkpoint(path)


@pytest.mark.parametrize(
    "obj",
    [
        ArbitraryThing(),
        {"a": ArbitraryThing()},
        [1, {"b": (2, ArbitraryThing())}],
        {(1, 2): 3},
        {1.5: 2},
        {1, 2},
    ],
)
def test_check_weights_only_safe_rejects(obj):
    with pytest.raises(TypeError):
        check_weights_only_safe(obj)


def test_check_weights_only_safe_accepts_plain_data():
    check_weights_only_safe({"a": [1, 2.0, "s", None, True], 3: (torch.ones(1), torch.Size([2]))})


def test_check_weights_only_safe_error_names_location():
    with pytest.raises(TypeError, match=r"infos\['a'\]\[1\]"):
        check_weights_only_safe({"a": [0, ArbitraryThing()]})


# ---------------------------------------------------------------------------- RNG state
def _draws():
    return (
        torch.rand(4).tolist(),
        torch.randn(2).tolist(),
        np.random.rand(3).tolist(),
        np.random.normal(size=3).tolist(),
        [random.random() for _ in range(3)],
        random.randint(0, 10**9),
    )


def test_capture_restore_reproduces_draws(tmp_path):
    seed_everything(11)
    np.random.normal()  # leaves a cached gaussian in numpy's state
    state = capture_rng_state()
    check_weights_only_safe(state, "rng_state")
    first = _draws()
    # the state survives a weights-only checkpoint round trip
    save_checkpoint(str(tmp_path / "rng.pt"), {"model_state_dict": {}, "rng_state": state})
    loaded = load_checkpoint(str(tmp_path / "rng.pt"))["rng_state"]
    _draws()  # move every generator on
    restore_rng_state(loaded)
    assert _draws() == first
    restore_rng_state(state)
    assert _draws() == first


def test_capture_restore_reproduces_python_gauss():
    random.seed(0)
    random.gauss(0.0, 1.0)  # Python caches the second Box-Muller value in gauss_next
    state = capture_rng_state()
    first = [random.gauss(0.0, 1.0) for _ in range(3)]
    restore_rng_state(state)
    assert [random.gauss(0.0, 1.0) for _ in range(3)] == first


def test_seed_everything():
    seed_everything(123)
    a = _draws()
    seed_everything(123)
    assert _draws() == a
    seed_everything(124)
    assert _draws() != a
    seed_everything(2**40 + 5)  # larger than numpy's 32-bit seed range
    np.random.rand()


# ---------------------------------------------------------------------------- get_checkpoint_path
def _touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


def test_get_checkpoint_path_highest_iteration_in_newest_run(tmp_path):
    old = tmp_path / "2024-01-05_10-00-00_walk"
    new = tmp_path / "2024-03-01_09-00-00_walk"
    _touch(old / "model_500.pt")
    for name in ("model_5.pt", "model_99.pt", "model_100.pt", "model_20.pt", "notes.txt"):
        _touch(new / name)
    assert get_checkpoint_path(str(tmp_path)) == str(new / "model_100.pt")  # 100 > 99 numerically
    assert get_checkpoint_path(str(tmp_path), checkpoint=99) == str(new / "model_99.pt")
    assert get_checkpoint_path(str(tmp_path), checkpoint="5") == str(new / "model_5.pt")
    assert get_checkpoint_path(str(tmp_path), load_run="2024-01.*") == str(old / "model_500.pt")
    assert get_checkpoint_path(str(tmp_path), checkpoint=r"model_[0-9]\.pt") == str(new / "model_5.pt")
    # a run directory itself, or a file path
    assert get_checkpoint_path(str(new)) == str(new / "model_100.pt")
    assert get_checkpoint_path(str(new / "model_20.pt")) == str(new / "model_20.pt")


def test_get_checkpoint_path_missing(tmp_path):
    with pytest.raises(FileNotFoundError):
        get_checkpoint_path(str(tmp_path / "nowhere"))
    (tmp_path / "run_a").mkdir()
    with pytest.raises(FileNotFoundError):
        get_checkpoint_path(str(tmp_path))
    _touch(tmp_path / "run_a" / "model_3.pt")
    with pytest.raises(FileNotFoundError):
        get_checkpoint_path(str(tmp_path), checkpoint=4)


def test_get_checkpoint_path_skips_exported_dir(tmp_path):
    _touch(tmp_path / "Mar01_09-00-00_walk" / "model_10.pt")
    _touch(tmp_path / "exported" / "policies" / "policy_1.pt")
    assert get_checkpoint_path(str(tmp_path)) == str(tmp_path / "Mar01_09-00-00_walk" / "model_10.pt")
