"""Log writers: W&B and Neptune in their offline modes, custom writers, and the errors for bad loggers."""

from __future__ import annotations

import glob
import json
import os
import struct
import sys
import time

import pytest

from st_rl.runners import OnPolicyRunner
from st_rl.tasks import VelocityTracking
from st_rl.utils.logger import NullWriter, make_writer
from st_rl.utils.writers import RUN_INFO_FILE, MissingLoggerPackageError, attach_files_to_run


def _tb_files(log_dir) -> list[str]:
    return glob.glob(os.path.join(str(log_dir), "events.out.tfevents.*"))


def _read_wandb_records(path: str) -> list:
    """Decode a W&B ``.wandb`` transaction log (LevelDB-style 32 KiB blocks of CRC/length/type records).

    wandb-core appends to the log in the background, so the tail may be a record still being written: reading
    stops there (the caller polls until the run's exit record is in).
    """
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2 as pb

    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B"
    pos, block, records, pending = 7, 32768, [], b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pos += 7
        if kind == 0 and length == 0:
            pos += left - 7
            continue
        if pos + length > len(data):
            break  # a record still being written
        pending += data[pos : pos + length]
        pos += length
        if kind in (1, 4):  # FULL or LAST
            record = pb.Record()
            try:
                record.ParseFromString(pending)
            except DecodeError:
                break  # a record still being written (its bytes not yet all flushed)
            records.append(record)
            pending = b""
    return records


def _wandb_run_content(root: str) -> tuple[dict, dict, set]:
    """History (tag -> values), config keys and uploaded file names of every offline run under ``root``."""
    history: dict[str, list] = {}
    config: dict[str, object] = {}
    files: set[str] = set()
    paths = {os.path.realpath(p) for p in glob.glob(os.path.join(root, "**", "run-*.wandb"), recursive=True)}
    for path in sorted(paths):  # (the latest-run link points at a run already found)
        records = _read_wandb_records(path)
        deadline = time.monotonic() + 30  # wandb-core writes the log in the background, even after finish()
        while not any(r.WhichOneof("record_type") == "exit" for r in records) and time.monotonic() < deadline:
            time.sleep(0.2)
            records = _read_wandb_records(path)
        for rec in records:
            kind = rec.WhichOneof("record_type")
            if kind == "history":
                for item in rec.history.item:
                    history.setdefault(item.key or "/".join(item.nested_key), []).append(
                        json.loads(item.value_json)
                    )
            elif kind == "config":
                config.update({u.key: json.loads(u.value_json) for u in rec.config.update})
            elif kind == "files":
                files.update(os.path.basename(f.path) for f in rec.files.files)
    return history, config, files


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    wandb_dir = tmp_path / "wandb_dir"
    wandb_dir.mkdir()
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_CODE", "true")
    return wandb_dir


def test_wandb_offline_run_records_scalars_config_and_checkpoints(small_cfg, tmp_path, wandb_offline):
    log_dir = tmp_path / "run"
    cfg = {**small_cfg, "logger": "wandb", "wandb_project": "st-rl-test", "wandb_mode": "offline"}
    runner = OnPolicyRunner(VelocityTracking(num_envs=16, seed=0), cfg, log_dir=str(log_dir))
    runner.learn(2)
    runner.writer.close()

    history, config, files = _wandb_run_content(str(wandb_offline))
    assert history["Loss/value_loss"] and len(history["Loss/value_loss"]) == 2
    assert {0, 1} <= set(history["global_step"])
    assert config["algorithm"]["learning_rate"] == pytest.approx(1e-3)
    assert "model_2.pt" in files
    assert _tb_files(log_dir), "the W&B writer also writes TensorBoard files locally"
    info = json.loads((log_dir / RUN_INFO_FILE).read_text())
    assert info["logger"] == "wandb" and info["wandb_project"] == "st-rl-test" and info["wandb_run_id"]

    # st-rl play --upload: attach the play plot and video (a real MP4 written the way st-rl play writes it)
    # to the same (offline) run, in one call as st-rl play does.
    plot, video = _play_plot_and_video(tmp_path)
    assert attach_files_to_run(str(log_dir), [str(video), str(plot), None]) == "wandb"
    history, _, files = _wandb_run_content(str(wandb_offline))
    assert {"play_2.png", "play_2.mp4"} <= files
    assert history["images/play_2/_type"] == ["image-file"]  # shown as an image in the W&B run
    assert history["videos/play_2/_type"] == ["video-file"]  # ... and the video as a video


def _play_plot_and_video(tmp_path) -> tuple:
    """A PNG plot and a 5-frame H.264 MP4, named as st-rl play names them for iteration 2."""
    import imageio.v2 as imageio
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot, video = tmp_path / "play_2.png", tmp_path / "play_2.mp4"
    plt.plot([0, 1])
    plt.savefig(plot)
    plt.close("all")
    with imageio.get_writer(str(video), fps=10, codec="libx264", macro_block_size=1) as w:
        for k in range(5):
            w.append_data(np.full((32, 32, 3), 40 * k, dtype=np.uint8))
    return plot, video


def test_neptune_debug_run_records_scalars_config_and_checkpoints(small_cfg, tmp_path, monkeypatch):
    pytest.importorskip("neptune")
    monkeypatch.chdir(tmp_path)
    log_dir = tmp_path / "run"
    cfg = {**small_cfg, "logger": "neptune", "neptune_mode": "debug", "save_interval": 1}
    runner = OnPolicyRunner(VelocityTracking(num_envs=16, seed=0), cfg, log_dir=str(log_dir))
    runner.learn(2)
    run = runner.writer.run  # type: ignore[attr-defined]
    values = run["Loss/value_loss"].fetch_values()
    assert list(values["step"]) == [0, 1]
    assert run["config/algorithm/learning_rate"].fetch() == pytest.approx(1e-3)
    structure = run.get_structure()
    assert {"model_1", "model_2"} <= set(structure["model"]["checkpoints"])
    plot, video = _play_plot_and_video(tmp_path)
    runner.writer.save_file(str(plot))  # type: ignore[attr-defined]
    runner.writer.save_file(str(video))  # type: ignore[attr-defined]
    assert set(run.get_structure()["files"]["play_2"]) == {"png", "mp4"}  # one name, both files kept
    runner.writer.close()
    assert _tb_files(log_dir)


def test_neptune_offline_writer_writes_local_operations(tmp_path, monkeypatch):
    pytest.importorskip("neptune")
    monkeypatch.chdir(tmp_path)
    writer = make_writer("neptune", str(tmp_path / "run"), {"neptune_mode": "offline"})
    writer.log_config({"algorithm": {"gamma": 0.99}})  # type: ignore[attr-defined]
    writer.add_scalar("Loss/value_loss", 0.5, 0)
    writer.add_scalar("Loss/value_loss", 0.25, 1)
    writer.close()
    logs = glob.glob(str(tmp_path / ".neptune" / "offline" / "*" / "data-1.log"))
    assert logs
    with open(logs[0]) as f:
        ops = [json.loads(line)["obj"] for line in f]
    assert any(op["path"] == ["config", "algorithm", "gamma"] and op["value"] == 0.99 for op in ops)
    series = [op for op in ops if op["path"] == ["Loss", "value_loss"]]
    assert [v["value"] for op in series for v in op["values"]] == [0.5, 0.25]


class RecordingWriter:
    """A custom writer as docs/logging.md describes it."""

    def __init__(self, log_dir: str, cfg: dict, prefix: str = "") -> None:
        self.log_dir, self.cfg, self.prefix = log_dir, cfg, prefix
        self.scalars: dict[str, list[tuple[int | None, float]]] = {}
        self.configs: list[dict] = []
        self.models: list[tuple[str, int]] = []
        self.closed = False

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None:
        self.scalars.setdefault(self.prefix + tag, []).append((global_step, float(scalar_value)))

    def log_config(self, cfg: dict) -> None:
        self.configs.append(cfg)

    def save_model(self, path: str, it: int) -> None:
        self.models.append((os.path.basename(path), it))


@pytest.mark.parametrize("as_string", [False, True])
def test_custom_writer_receives_scalars_config_and_checkpoints(small_cfg, tmp_path, as_string):
    cls = f"{RecordingWriter.__module__}:RecordingWriter" if as_string else RecordingWriter
    cfg = {**small_cfg, "logger": {"class_name": cls, "prefix": "x/"}}
    runner = OnPolicyRunner(VelocityTracking(num_envs=16, seed=0), cfg, log_dir=str(tmp_path))
    runner.learn(2)
    writer = runner.writer
    inner = getattr(writer, "writer", writer)  # no flush/close: wrapped in an adapter
    assert isinstance(inner, RecordingWriter)
    assert [step for step, _ in inner.scalars["x/Loss/value_loss"]] == [0, 1]
    assert len(inner.configs) == 1 and inner.configs[0]["algorithm"]["learning_rate"] == pytest.approx(1e-3)
    assert inner.models == [("model_2.pt", 2)]
    assert inner.log_dir == str(tmp_path) and inner.cfg["num_steps_per_env"] == 16
    writer.close()  # the adapter supplies the missing flush/close


def test_missing_logger_package_names_the_extra(tmp_path, monkeypatch):
    for module, extra in (("wandb", "wandb"), ("neptune", "neptune")):
        monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
        with pytest.raises(MissingLoggerPackageError, match=rf"pip install 'st-rl\[{extra}\]'"):
            make_writer(module, str(tmp_path), {"wandb_project": "p", "neptune_project": "w/p"})
    assert issubclass(MissingLoggerPackageError, ValueError)


def test_unknown_and_invalid_loggers(tmp_path):
    with pytest.raises(ValueError, match=r"Unknown logger 'wandbb'. Did you mean 'wandb'\?"):
        make_writer("wandbb", str(tmp_path))
    with pytest.raises(ValueError, match="Cannot import logger class"):
        make_writer("no_such_pkg.mod:Writer", str(tmp_path))

    class NoScalars:
        def __init__(self, log_dir: str, cfg: dict) -> None:
            pass

    with pytest.raises(TypeError, match="has no add_scalar"):
        make_writer(NoScalars, str(tmp_path))
    with pytest.raises(TypeError, match="must accept"):
        make_writer({"class_name": RecordingWriter, "bad_kwarg": 1}, str(tmp_path))
    assert isinstance(make_writer("none", str(tmp_path)), NullWriter)
    assert isinstance(make_writer("wandb", None), NullWriter)  # no log dir: nothing is written


def test_wandb_writer_needs_a_project_and_starts_lazily(tmp_path, monkeypatch, wandb_offline):
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    with pytest.raises(ValueError, match="wandb_project"):
        make_writer("wandb", str(tmp_path), {})
    writer = make_writer("wandb", str(tmp_path), {"wandb_project": "p"})
    assert not writer.started  # type: ignore[attr-defined]  # no wandb.init until first use
    assert not (tmp_path / RUN_INFO_FILE).exists()
    writer.close()


def test_attach_files_without_a_tracked_run(tmp_path):
    assert attach_files_to_run(str(tmp_path), ["x.png"]) is None
    with pytest.raises(ValueError, match="not logged with logger='wandb' or 'neptune'"):
        attach_files_to_run(str(tmp_path), ["x.png"], required=True)


def test_writer_subclasses_are_used_as_given_and_plain_writers_get_no_op_hooks(tmp_path):
    from st_rl.utils.logger import Writer
    from st_rl.utils.writers import CustomWriter

    class Subclass(Writer):
        def __init__(self, log_dir: str, cfg: dict) -> None:
            self.scalars: list[float] = []

        def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None:
            self.scalars.append(scalar_value)

    writer = make_writer(Subclass, str(tmp_path))
    assert type(writer) is Subclass
    writer.log_config({})  # the base class's no-op hooks
    writer.save_model("model_1.pt", 1)
    writer.close()

    class ScalarsOnly:
        def __init__(self, log_dir: str, cfg: dict) -> None:
            self.scalars: list[float] = []

        def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None:
            self.scalars.append(scalar_value)

    wrapped = make_writer(ScalarsOnly, str(tmp_path))
    assert isinstance(wrapped, CustomWriter) and isinstance(wrapped.writer, ScalarsOnly)
    wrapped.add_scalar("x", 1.0, 0)
    for hook in (wrapped.flush, wrapped.close):
        hook()
    wrapped.log_config({})
    wrapped.save_model("model_1.pt", 1)
    wrapped.save_file("play.png")
    assert wrapped.scalars == [1.0]  # other attributes are the user's writer's
