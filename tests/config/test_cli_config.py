"""Config files, ``key=value`` overrides and the ``st-rl train`` options that use them (--config, --env,
--print-config, --debug), and the one-line CLI error format."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys

import pytest
import yaml

from st_rl.cli import main
from st_rl.config import ConfigError, apply_overrides, load_config_file, parse_value

FLAT = {
    "seed": 1,
    "num_steps_per_env": 24,
    "max_iterations": 10,
    "policy": {"class_name": "ActorCritic", "actor_hidden_dims": [64, 64], "activation": "elu"},
    "algorithm": {"class_name": "PPO", "learning_rate": 1e-3, "gamma": 0.99, "rnd_cfg": None},
}
NESTED = {
    "seed": 1,
    "runner_class_name": "OnPolicyRunner",
    "runner": {"policy_class_name": "ActorCritic", "num_steps_per_env": 24, "max_iterations": 10},
    "policy": {"actor_hidden_dims": [64, 64]},
    "algorithm": {"learning_rate": 1e-3, "gamma": 0.99},
}

# A small st_gym flat-form config; "1e-3" is the YAML 1.1 trap (PyYAML alone reads it as text).
FLAT_YAML = """\
seed: 3
num_steps_per_env: 8
max_iterations: 50
save_interval: 10
empirical_normalization: true
experiment_name: from_yaml
policy:
  class_name: ActorCritic
  actor_hidden_dims: [32, 32]
  critic_hidden_dims: [32, 32]
  activation: elu
  init_noise_std: 1.0
algorithm:
  class_name: PPO
  num_learning_epochs: 2
  num_mini_batches: 2
  learning_rate: 1e-3
  schedule: fixed
  gamma: 0.99
  lam: 0.95
"""

# The same in the legged_gym nested form.
NESTED_CFG = {
    "seed": 4,
    "runner_class_name": "OnPolicyRunner",
    "runner": {
        "policy_class_name": "ActorCritic",
        "algorithm_class_name": "PPO",
        "num_steps_per_env": 8,
        "max_iterations": 50,
        "save_interval": 10,
        "experiment_name": "from_json",
    },
    "policy": {"actor_hidden_dims": [16, 16], "critic_hidden_dims": [16, 16], "activation": "elu"},
    "algorithm": {"num_learning_epochs": 1, "num_mini_batches": 2, "learning_rate": 1e-3, "gamma": 0.99},
}

SMALL_TASK = ["--task", "velocity_tracking", "--num-envs", "16", "--iterations", "1", "--device", "cpu"]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``main(argv)`` in-process: (exit code, stdout, stderr); argparse errors exit via SystemExit."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------------------------------------- overrides


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3e-4", 3e-4),
        ("1e5", 1e5),
        ("48", 48),
        ("-3", -3),
        ("[128,128]", [128, 128]),
        ("[128, 64]", [128, 64]),
        ('{"weight": 0.5}', {"weight": 0.5}),
        ("true", True),
        ("True", True),
        ("FALSE", False),
        ("null", None),
        ("None", None),
        ("~", None),
        ("(1, 2)", (1, 2)),
        ("1_000", 1000),
        ("elu", "elu"),
        ("none", "none"),  # runner.logger=none stays the text
        ("pkg.module:Class", "pkg.module:Class"),
        ('"42"', "42"),
        ("'text'", "text"),
    ],
)
def test_parse_value(text, expected):
    value = parse_value(text)
    assert value == expected and type(value) is type(expected)


def test_parse_value_non_finite_floats():
    assert (
        parse_value("inf") == math.inf and parse_value("-inf") == -math.inf and math.isnan(parse_value("nan"))
    )


def test_overrides_flat_form_types_nesting_and_immutability():
    before = copy.deepcopy(FLAT)
    out = apply_overrides(
        FLAT,
        [
            "algorithm.learning_rate=3e-4",
            "policy.actor_hidden_dims=[128,128]",
            "algorithm.rnd_cfg.weight=0.5",  # rnd_cfg is None (off): it becomes a section
            "runner.num_steps_per_env=48",  # flat form: runner.X is the top-level X
            "seed=3",
            "storage.ring=true",  # a missing section is created
            "policy.activation=tanh",
        ],
    )
    assert before == FLAT  # the input is not modified
    assert out["algorithm"]["learning_rate"] == 3e-4 and isinstance(out["algorithm"]["learning_rate"], float)
    assert out["policy"]["actor_hidden_dims"] == [128, 128]
    assert out["algorithm"]["rnd_cfg"] == {"weight": 0.5}
    assert out["num_steps_per_env"] == 48 and "runner" not in out
    assert out["seed"] == 3 and out["storage"] == {"ring": True} and out["policy"]["activation"] == "tanh"
    # Deep copy: changing the result does not reach the input's nested lists.
    out["policy"]["actor_hidden_dims"].append(1)
    assert FLAT["policy"]["actor_hidden_dims"] == [64, 64]


def test_overrides_nested_form_maps_bare_runner_keys():
    before = copy.deepcopy(NESTED)
    out = apply_overrides(
        NESTED,
        [
            "num_steps_per_env=48",  # a runner key: runner.num_steps_per_env
            "runner.save_interval=5",
            "seed=3",  # legged_gym keeps seed at the top level (the runner has none): stays there
            "experiment_name=walk",  # in neither: goes into the runner
            'obs_groups.policy=["policy"]',  # deeper paths under a runner key too
            "algorithm.gamma=0.98",
        ],
    )
    assert before == NESTED
    assert out["runner"]["num_steps_per_env"] == 48 and "num_steps_per_env" not in out
    assert out["runner"]["save_interval"] == 5 and out["runner"]["experiment_name"] == "walk"
    assert out["seed"] == 3 and "seed" not in out["runner"]
    assert out["runner"]["obs_groups"] == {"policy": ["policy"]}
    assert out["algorithm"]["gamma"] == 0.98


def test_overrides_delete_and_hydra_add_prefix():
    out = apply_overrides(FLAT, ["~algorithm.rnd_cfg", "+algorithm.entropy_coef=0.01", "++seed=2"])
    assert "rnd_cfg" not in out["algorithm"] and out["algorithm"]["entropy_coef"] == 0.01 and out["seed"] == 2
    assert apply_overrides(FLAT, []) == FLAT


@pytest.mark.parametrize(
    ("item", "rule"),
    [
        ("algorithm.gamma", "KEY=VALUE"),  # no '='
        ("=3", "key is empty"),
        ("algorithm..gamma=1", "empty part"),
        ("algorithm.gamma.x=1", "not a section"),  # indexing into a number
        ("policy.actor_hidden_dims.0=32", "not a section"),  # indexing into a list
        ("~algorithm.nope", "no key"),
        ("~seed=3", "takes no value"),
    ],
)
def test_malformed_overrides_raise_config_error(item, rule):
    with pytest.raises(ConfigError) as info:
        apply_overrides(FLAT, [item])
    problem = info.value.problems[0]
    assert problem.path == item and rule in problem.rule and problem.fix
    assert str(info.value).startswith("Invalid command-line override: " + item)


def test_override_cannot_turn_a_number_or_flag_into_text():
    with pytest.raises(ConfigError, match=r"algorithm\.gamma = 'abc': expects a number") as info:
        apply_overrides(FLAT, ["algorithm.gamma=abc"])
    assert "algorithm.gamma=0.99" in info.value.problems[0].fix
    with pytest.raises(ConfigError, match="expects true or false"):
        apply_overrides({**FLAT, "empirical_normalization": True}, ["empirical_normalization=yes"])
    # Keys that take a number or a name (legged_gym load_run=-1 or a run directory) are exempt.
    assert (
        apply_overrides({**FLAT, "load_run": -1}, ["load_run=Jan01_12-00-00"])["load_run"] == "Jan01_12-00-00"
    )


# ---------------------------------------------------------------------------------------------- config files


def test_load_config_file_yaml_and_json(tmp_path):
    flat = tmp_path / "flat.yaml"
    flat.write_text(FLAT_YAML)
    cfg = load_config_file(str(flat))
    assert cfg["algorithm"]["learning_rate"] == 1e-3 and isinstance(cfg["algorithm"]["learning_rate"], float)
    assert cfg["policy"]["actor_hidden_dims"] == [32, 32] and cfg["empirical_normalization"] is True
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps(NESTED_CFG))
    assert load_config_file(str(nested)) == NESTED_CFG
    yml = tmp_path / "short.yml"
    yml.write_text("runner:\n  num_steps_per_env: 8\npolicy: {}\nalgorithm: {lr: .5e-3, x: 2.5E+2}\n")
    assert load_config_file(str(yml))["algorithm"] == {"lr": 5e-4, "x": 250.0}


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("missing.yaml", None, "no such file"),
        ("train.toml", "seed = 1", "unknown config file type '.toml'"),
        (
            "bad.yaml",
            "seed: 1\npolicy:\n  actor_hidden_dims: [32, 32\nalgorithm: {}\n",
            "not valid YAML at line",
        ),
        ("bad.json", '{\n  "seed": 1,\n  "policy": {},\n}\n', "not valid JSON at line 4"),
        ("list.yaml", "- seed: 1\n", "must be a mapping"),
        ("empty.yaml", "", "the file is empty"),
        ("twice.yaml", "seed: 1\nalgorithm:\n  gamma: 0.9\n  gamma: 0.99\n", "duplicate key 'gamma'"),
        ("twice.json", '{"seed": 1, "seed": 2}', "duplicate key 'seed'"),
    ],
)
def test_load_config_file_errors_name_the_file_and_the_fix(tmp_path, name, text, expected):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config_file(str(path))
    message = str(info.value)
    assert message.startswith(f"Invalid config file {path}:") and expected in message
    assert info.value.problems[0].fix and "Fix:" in message


def test_load_config_file_yaml_error_gives_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("seed: 1\nalgorithm:\n  gamma: 0.99\n   lam: 0.95\n")
    with pytest.raises(ConfigError) as info:
        load_config_file(str(path))
    assert info.value.problems[0].path == f"{path}:4"  # file:line of the offending line


# ---------------------------------------------------------------------------------------------- st-rl train


def test_train_with_flat_yaml_config_and_overrides(tmp_path, capsys):
    cfg_file, log_dir = tmp_path / "train.yaml", tmp_path / "run"
    cfg_file.write_text(FLAT_YAML)
    code, out, err = run_cli(
        ["train", *SMALL_TASK, "--config", str(cfg_file), "--log-dir", str(log_dir),
         "algorithm.learning_rate=3e-4", "policy.actor_hidden_dims=[24,24]"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert (log_dir / "model_1.pt").exists() and "Learning iteration 1/1" in out
    saved = json.loads((log_dir / "config.json").read_text())
    assert saved["runner"]["num_steps_per_env"] == 8 and saved["runner"]["seed"] == 3  # from the file
    assert saved["runner"]["task"] == "velocity_tracking"  # the env stays --task
    assert saved["algorithm"]["learning_rate"] == 3e-4 and saved["algorithm"]["schedule"] == "fixed"
    assert saved["policy"]["actor_hidden_dims"] == [24, 24] and saved["policy"]["critic_hidden_dims"] == [
        32,
        32,
    ]


def test_train_with_nested_json_config(tmp_path, capsys):
    cfg_file, log_dir = tmp_path / "train.json", tmp_path / "run"
    cfg_file.write_text(json.dumps(NESTED_CFG))
    code, _, err = run_cli(
        ["train", *SMALL_TASK, "--config", str(cfg_file), "--log-dir", str(log_dir), "--seed", "9",
         "num_steps_per_env=6", "runner.save_interval=1"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    saved = json.loads((log_dir / "config.json").read_text())
    assert saved["runner"]["num_steps_per_env"] == 6 and saved["runner"]["save_interval"] == 1
    assert saved["runner"]["seed"] == 9 and saved["runner"]["experiment_name"] == "from_json"
    assert saved["policy"]["actor_hidden_dims"] == [16, 16] and saved["algorithm"]["num_learning_epochs"] == 1
    assert (log_dir / "model_1.pt").exists()


USER_ENVS = """\
from st_rl.tasks import VelocityTracking

CALLS = []


def make_env(num_envs, device="cpu", seed=None):
    CALLS.append({"num_envs": num_envs, "device": str(device), "seed": seed})
    return VelocityTracking(num_envs=num_envs, device=device, seed=seed)


class Wrapped:
    \"\"\"A user's own environment class built on a built-in task (no constructor arguments).\"\"\"

    def __init__(self):
        self._env = VelocityTracking(num_envs=8, seed=0)

    def __getattr__(self, name):
        if name == "_env":
            raise AttributeError(name)
        return getattr(self._env, name)

    def step(self, actions):
        return self._env.step(actions)

    def reset(self):
        return self._env.reset()

    def get_observations(self):
        return self._env.get_observations()
"""


@pytest.fixture
def user_envs(tmp_path, monkeypatch):
    """A module ``cli_user_envs`` in tmp_path, importable as the working directory."""
    (tmp_path / "cli_user_envs.py").write_text(USER_ENVS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored after the test (the CLI adds the cwd)
    monkeypatch.delitem(sys.modules, "cli_user_envs", raising=False)
    yield tmp_path
    sys.modules.pop("cli_user_envs", None)


def test_train_user_env_factory(user_envs, capsys):
    cfg_file = user_envs / "train.yaml"
    cfg_file.write_text(FLAT_YAML)
    log_dir = user_envs / "run"
    code, out, err = run_cli(
        ["train", "--env", "cli_user_envs:make_env", "--num-envs", "16", "--iterations", "1", "--device", "cpu",
         "--config", str(cfg_file), "--log-dir", str(log_dir)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    calls = sys.modules["cli_user_envs"].CALLS
    assert calls == [{"num_envs": 16, "device": "cpu", "seed": 3}]  # seed from the config
    assert "training 'cli_user_envs:make_env' with 16 envs" in out
    saved = json.loads((log_dir / "config.json").read_text())
    assert "task" not in saved["runner"]  # not a built-in task: st-rl play must be told the environment
    assert (log_dir / "model_1.pt").exists()


def test_train_user_env_class_without_config_uses_the_preset(user_envs, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(user_envs))
    code, out, err = run_cli(
        ["train", "--env", "cli_user_envs:Wrapped", "--iterations", "1", "--device", "cpu",
         "--log-dir", str(user_envs / "run"), "num_steps_per_env=4"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    saved = json.loads((user_envs / "run" / "config.json").read_text())
    # The built-in quadruped's PPO settings, logged under the module's name.
    assert saved["policy"]["actor_hidden_dims"] == [256, 128, 64]
    assert saved["runner"]["experiment_name"] == "cli_user_envs" and saved["runner"]["num_steps_per_env"] == 4
    assert "with 8 envs" in out
    # A factory without a num_envs parameter cannot take --num-envs: an error, not an ignored option. (The
    # environment given as a file path this time.)
    file_spec = f"{user_envs / 'cli_user_envs.py'}:Wrapped"
    code, _, err = run_cli(["train", "--env", file_spec, "--num-envs", "4", "--iterations", "1"], capsys)
    assert code == 2 and "takes no num_envs" in err and "--num-envs" in err
    code, _, err = run_cli(["train", "--env", "missing_dir/envs.py:make", "--iterations", "1"], capsys)
    assert code == 2 and "there is no file" in err


def test_print_config_shows_the_resolved_config(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(
        ["train", "--task", "point_mass", "algorithm.learning_rate=3e-4", "--seed", "5", "--policy",
         "ActorCriticRecurrent", "--print-config", "policy.actor_hidden_dims=[16,16]", "~algorithm.rnd_cfg"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    cfg = yaml.safe_load(out)
    assert cfg["algorithm"]["learning_rate"] == 3e-4
    assert cfg["policy"]["actor_hidden_dims"] == [16, 16]  # an override after an option is applied too
    assert cfg["policy"]["class_name"] == "ActorCriticRecurrent" and cfg["runner"]["seed"] == 5
    assert cfg["runner"]["task"] == "point_mass" and cfg["algorithm"]["rnd_cfg"] is None  # deleted: default
    assert cfg["algorithm"]["gamma"] is not None and "rnn_hidden_size" in cfg["policy"]  # defaults listed
    assert not (tmp_path / "logs").exists()  # nothing trained


def test_algorithm_option_and_later_override_order(capsys):
    code, out, _ = run_cli(
        ["train", "--task", "point_mass", "--algorithm", "EstimatorPPO", "--seed", "5", "--print-config",
         "seed=6"],
        capsys,
    )  # fmt: skip
    cfg = yaml.safe_load(out)
    assert code == 0 and cfg["algorithm"]["class_name"] == "EstimatorPPO"
    assert cfg["runner"]["seed"] == 6  # overrides come after the dedicated options


def _assert_one_error_line(err: str, *names: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("st-rl: error: "), err
    assert all(name in lines[0] for name in names), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--iterations", "0"], ["--iterations", ">= 1"]),
        (["--iterations", "-3"], ["--iterations"]),
        (["--num-envs", "many"], ["--num-envs"]),
        (["--threads", "0"], ["--threads"]),
        (["--log-interval", "0"], ["--log-interval"]),
        (["--style-reward-coef", "nan"], ["--style-reward-coef", "finite"]),
        (["--style-reward-coef", "-0.1"], ["--style-reward-coef"]),
        (["--style-reward-coef", "0.1"], ["--style-reward-coef", "--motion"]),
        (["--style-ramp", "-1", "3"], ["--style-ramp"]),
        (["--style-ramp", "1", "3"], ["--style-ramp", "--motion"]),
        (["--style-ramp", "5", "3", "--motion", "walk.motion"], ["--style-ramp", "START <= END"]),
        (["--print-config", "algorithm.gamma=abc"], ["algorithm.gamma", "expects a number"]),
        (["--print-config", "algorithm.gamma"], ["algorithm.gamma", "KEY=VALUE"]),
        (["--config", "no/such/train.yaml"], ["no/such/train.yaml", "no such file"]),
        (["--env", "no_such_module_xyz:make"], ["--env", "no_such_module_xyz"]),
        (["--env", "make_env"], ["--env", "MODULE:FACTORY"]),
        (["--iterations", "1", "--bogus"], ["unrecognized arguments: --bogus"]),
    ],
)
def test_cli_errors_are_one_line_with_exit_code_2(args, names, capsys):
    code, _, err = run_cli(["train", "--task", "point_mass", *args], capsys)
    assert code == 2
    _assert_one_error_line(err, *names)


def test_config_error_with_several_problems_lists_them_indented(capsys):
    code, _, err = run_cli(["train", "--style-ramp", "1", "3", "--style-reward-coef", "0.1"], capsys)
    lines = err.strip().splitlines()
    assert (
        code == 2
        and len(lines) == 2
        and lines[0].startswith("st-rl: error: Invalid command line: --style-ramp")
    )
    assert lines[1].startswith("  --style-reward-coef") and "Traceback" not in err


def test_config_without_iterations_is_an_error(tmp_path, capsys):
    cfg_file = tmp_path / "train.yaml"
    cfg_file.write_text(FLAT_YAML.replace("max_iterations: 50\n", "max_iterations: 0\n"))
    code, _, err = run_cli(["train", "--task", "velocity_tracking", "--config", str(cfg_file)], capsys)
    assert code == 2
    _assert_one_error_line(err, "max_iterations")


def test_debug_lets_the_exception_through(tmp_path):
    """With --debug (before or after the command) the error propagates: Python prints its traceback."""
    missing = str(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="no such file"):
        main(["train", "--config", missing, "--debug"])
    with pytest.raises(ConfigError, match="no such file"):
        main(["--debug", "train", "--config", missing])
    with pytest.raises(ConfigError, match="expects a number"):
        main(["train", "--task", "point_mass", "--print-config", "--debug", "algorithm.gamma=abc"])


def test_console_error_end_to_end(tmp_path):
    missing = str(tmp_path / "missing.yaml")
    cmd = [sys.executable, "-m", "st_rl", "train", "--config", missing, "--print-config"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 2 and result.stdout == ""
    _assert_one_error_line(result.stderr, "missing.yaml", "no such file")
