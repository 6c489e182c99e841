"""Every data file st_rl reads back names itself when it is missing or broken (issue 15, item 8)."""

from __future__ import annotations

import pickle

import pytest

from st_rl.cli import main
from st_rl.deploy import read_policy_metadata, sidecar_path
from st_rl.tasks.motion_recorder import load_motion_file
from st_rl.utils.files import DataFileError, read_json
from st_rl.utils.utils import read_run_config
from st_rl.utils.writers import read_run_info


def test_read_json_names_the_file_line_and_column(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"a": 1,\n "b": }')
    with pytest.raises(DataFileError, match=rf"{path}:2:7: the config is not valid JSON"):
        read_json(str(path), "config")
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "missing.json")):
        read_json(str(tmp_path / "missing.json"))


def test_broken_config_json_of_a_run(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(DataFileError, match=str(tmp_path / "config.json")):
        read_run_config(str(tmp_path))


def test_broken_logger_run_info(tmp_path):
    (tmp_path / "logger_run.json").write_text("")
    with pytest.raises(DataFileError, match="logger_run.json"):
        read_run_info(str(tmp_path))


def test_broken_policy_json_sidecar(tmp_path):
    policy = tmp_path / "policy.onnx"
    policy.write_bytes(b"")
    sidecar = sidecar_path(str(policy))
    with open(sidecar, "w") as f:
        f.write("[1, 2")
    with pytest.raises(DataFileError, match=sidecar):
        read_policy_metadata(str(policy))


@pytest.mark.parametrize(
    "content", [b"", b"garbage", pickle.dumps({"a": 1})[:-3]], ids=["empty", "junk", "cut"]
)
def test_broken_motion_file(tmp_path, content):
    path = tmp_path / "motion.pkl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"{path}: not a readable motion file"):
        load_motion_file(str(path))
    with pytest.raises(FileNotFoundError, match="nope.pkl"):
        load_motion_file(str(tmp_path / "nope.pkl"))


def test_cli_reports_a_broken_run_config_in_one_line(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{")
    (tmp_path / "model_1.pt").write_bytes(b"")
    code = main(["play", "--checkpoint", str(tmp_path), "--no-video", "--no-plot"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.startswith("st-rl: error:") and str(tmp_path) in err
