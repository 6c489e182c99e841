"""legged_gym and parkour scripts driving st_rl, call for call: real-client acceptance tests.

The configs (:mod:`clients.legged_gym_cfg`) have legged_gym's and parkour's public field names and defaults
and are turned into the runner's dict by legged_gym's ``class_to_dict`` (which, for a ``BaseConfig``, adds
``"init_member_classes": {}`` at the top level); the environment (:mod:`clients.legged_gym_env`) has the
legged_gym / parkour ``VecEnv`` API. The helpers below restate what the clients' scripts do:

* legged_gym (leggedrobotics/legged_gym): ``task_registry.make_alg_runner`` builds ``OnPolicyRunner(env,
  class_to_dict(train_cfg), log_dir, device)`` with ``log_dir = <log_root>/<%b%d_%H-%M-%S>_<run_name>`` and, on
  resume, "saves the resume path before creating a new log_dir": ``get_load_path(log_root, load_run,
  checkpoint)`` (``load_run=-1``: the last run directory by name, ``checkpoint=-1``: the last file containing
  "model" by zero-padded name) then ``runner.load(path)``; ``train.py`` calls ``runner.learn(
  num_learning_iterations=max_iterations, init_at_random_ep_len=True)``; ``play.py`` takes
  ``runner.get_inference_policy(device=env.device)``, exports ``runner.alg.actor_critic`` with
  ``export_policy_as_jit`` and steps the env with ``policy(obs.detach())``.
* parkour (ZiwenZhuang/parkour): ``make_alg_runner`` uses ``build_runner(train_cfg.runner_class_name, ...)``,
  writes ``config.json`` (train cfg dict updated with the env cfg dict; here with st_rl's
  ``write_run_config``), copies the resume checkpoint into the new run directory and loads it; its play script
  forces ``runner_class_name = "OnPolicyRunner"``, ``resume = True`` and does not write ``config.json``;
  ``collect.py`` builds the teacher with ``build_actor_critic(env, teacher_policy_class_name,
  config["algorithm"]["teacher_policy"])``, loads ``torch.load(teacher_ac_path)["model_state_dict"]`` and
  records it with ``DemonstrationSaver(..., use_critic_obs=True, obs_disassemble_mapping={"forward_depth":
  "normalized_image"})``.

Configs are used unchanged except for what a user changes for a run (``max_iterations``, ``num_envs`` as
``--max_iterations`` / ``--num_envs`` do, the placeholder paths of parkour's configs); each such change is
commented.
"""

from __future__ import annotations

import contextlib
import copy
import glob
import json
import os
import shutil
import time
from datetime import datetime
from typing import Any

import pytest
import torch
from clients.legged_gym_cfg import (
    BaseConfig,
    Go2DistillCfgPPO,
    Go2FieldCfgPPO,
    Go2RoughCfgPPO,
    LeggedRobotCfgPPO,
    LeggedRobotRecurrentCfgPPO,
    ParkourLeggedRobotCfgPPO,
    class_to_dict,
)
from clients.legged_gym_env import LeggedGymLikeEnv, ToyDistillCfg, ToyFieldCfg, ToyRoughCfg, make_env

from st_rl.config import ConfigError
from st_rl.modules import build_actor_critic
from st_rl.runners import DemonstrationSaver, OnPolicyRunner, build_runner
from st_rl.utils.config import resolve_train_cfg
from st_rl.utils.utils import write_run_config

NUM_ENVS = 32
DEVICE = "cpu"  # args.rl_device

# One torch thread: on a shared 2-core machine the thread pool costs more than it saves for these batches (an
# iteration of the Go2 config takes ~1 s with one thread and can take a minute with two under load).
pytestmark = pytest.mark.usefixtures("one_thread")


@contextlib.contextmanager
def single_thread():
    """``one_thread`` for module-scoped fixtures (built before any test's function-scoped fixtures)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------- the clients
def new_log_dir(log_root: str, run_name: str) -> str:
    """``<log_root>/<%b%d_%H-%M-%S>_<run_name>`` (legged_gym's run directory name). Runs of a test can start
    within one second; rather than reuse a name, wait for the clock to move on."""
    while True:
        log_dir = os.path.join(log_root, datetime.now().strftime("%b%d_%H-%M-%S") + "_" + run_name)
        if not os.path.exists(log_dir):
            return log_dir
        time.sleep(0.05)


def get_load_path(root: str, load_run: Any = -1, checkpoint: Any = -1) -> str:
    """legged_gym's ``get_load_path``."""
    if load_run == -1:
        runs = sorted(os.listdir(root))
        if "exported" in runs:
            runs.remove("exported")
        if not runs:
            raise ValueError("No runs in this directory: " + root)
        load_run = os.path.join(root, runs[-1])
    elif not os.path.isabs(load_run):
        load_run = os.path.join(root, load_run)
    if checkpoint == -1:
        models = [file for file in os.listdir(load_run) if "model" in file]
        models.sort(key=lambda m: f"{m:0>15}")
        model = models[-1]
    else:
        model = f"model_{checkpoint}.pt"
    return os.path.join(load_run, model)


def legged_gym_make_alg_runner(env: Any, train_cfg: BaseConfig, log_root: str | None):
    """legged_gym's ``task_registry.make_alg_runner``; returns ``(runner, train_cfg, log_dir)``."""
    log_dir = None if log_root is None else new_log_dir(log_root, train_cfg.runner.run_name)
    train_cfg_dict = class_to_dict(train_cfg)
    runner = OnPolicyRunner(env, train_cfg_dict, log_dir, device=DEVICE)
    # legged_gym: "save resume path before creating a new log_dir" -- rsl_rl's runner creates its log directory
    # when learn() starts, so get_load_path(load_run=-1) below finds the previous run, not this one.
    assert log_dir is None or not os.path.exists(log_dir), (
        f"OnPolicyRunner(env, train_cfg, log_dir) created {log_dir} before learn(): legged_gym's get_load_path"
        "(load_run=-1) then takes this new, empty run for the last one (IndexError on its model list), and every "
        "play.py call leaves an empty run directory behind"
    )
    if train_cfg.runner.resume:
        resume_path = get_load_path(log_root, train_cfg.runner.load_run, train_cfg.runner.checkpoint)
        runner.load(resume_path)
    return runner, train_cfg, log_dir


def parkour_make_alg_runner(
    env: Any, train_cfg: BaseConfig, log_root: str, env_cfg: BaseConfig | None = None, save_cfg: bool = True
):
    """parkour's ``task_registry.make_alg_runner``; returns ``(runner, train_cfg, log_dir, resume_path)``."""
    log_dir = new_log_dir(log_root, train_cfg.runner.run_name)
    log_cfg_dict: dict[str, Any] = {}
    train_cfg_dict = class_to_dict(train_cfg)
    log_cfg_dict.update(train_cfg_dict)
    if env_cfg is not None:
        log_cfg_dict.update(class_to_dict(env_cfg))
    runner = build_runner(
        getattr(train_cfg, "runner_class_name", "OnPolicyRunner"), env, train_cfg_dict, log_dir, device=DEVICE
    )
    if save_cfg:
        os.makedirs(log_dir, exist_ok=True)
        write_run_config(log_dir, log_cfg_dict)  # parkour: json.dump(log_cfg_dict, f, indent=4)
    resume_path = None
    if train_cfg.runner.resume:
        resume_path = get_load_path(log_root, train_cfg.runner.load_run, train_cfg.runner.checkpoint)
        if save_cfg:
            shutil.copyfile(resume_path, os.path.join(log_dir, os.path.basename(resume_path)))
        runner.load(resume_path)
    return runner, train_cfg, log_dir, resume_path


def export_policy_as_jit(actor_critic: Any, path: str) -> str:
    """legged_gym's ``export_policy_as_jit`` (``legged_gym/utils/helpers.py``); returns the file written."""
    if hasattr(actor_critic, "memory_a"):
        exporter = PolicyExporterLSTM(actor_critic)
        return exporter.export(path)
    os.makedirs(path, exist_ok=True)
    path = os.path.join(path, "policy_1.pt")
    model = copy.deepcopy(actor_critic.actor).to("cpu")
    torch.jit.script(model).save(path)
    return path


class PolicyExporterLSTM(torch.nn.Module):
    """legged_gym's LSTM exporter: the actor MLP after a copy of ``memory_a.rnn``, memory kept in buffers for
    one robot."""

    def __init__(self, actor_critic: Any) -> None:
        super().__init__()
        self.actor = copy.deepcopy(actor_critic.actor)
        self.is_recurrent = actor_critic.is_recurrent
        self.memory = copy.deepcopy(actor_critic.memory_a.rnn)
        self.memory.cpu()
        self.register_buffer("hidden_state", torch.zeros(self.memory.num_layers, 1, self.memory.hidden_size))
        self.register_buffer("cell_state", torch.zeros(self.memory.num_layers, 1, self.memory.hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, (h, c) = self.memory(x.unsqueeze(0), (self.hidden_state, self.cell_state))
        self.hidden_state[:] = h
        self.cell_state[:] = c
        return self.actor(out.squeeze(0))

    @torch.jit.export
    def reset_memory(self) -> None:
        self.hidden_state[:] = 0.0
        self.cell_state[:] = 0.0

    def export(self, path: str) -> str:
        os.makedirs(path, exist_ok=True)
        path = os.path.join(path, "policy_lstm_1.pt")
        self.to("cpu")
        torch.jit.script(self).save(path)
        return path


def model_files(run_dir: str) -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(run_dir, "model_*.pt")))


def play(runner: Any, env: LeggedGymLikeEnv, steps: int) -> torch.Tensor:
    """legged_gym's / parkour's play loop; returns the summed rewards."""
    policy = runner.get_inference_policy(device=env.device)
    obs = env.get_observations()
    total = torch.zeros(env.num_envs)
    with torch.no_grad():  # parkour decorates play() with @torch.no_grad()
        for _ in range(steps):
            actions = policy(obs.detach())
            assert actions.shape == (env.num_envs, env.num_actions)
            assert torch.isfinite(actions).all()
            obs, _, rews, dones, infos = env.step(actions.detach())
            total += rews
    return total


# ----------------------------------------------------------------------------------------- the schema walk
CONFIG_CLASSES = [
    LeggedRobotCfgPPO,
    LeggedRobotRecurrentCfgPPO,
    ParkourLeggedRobotCfgPPO,
    Go2RoughCfgPPO,
    Go2FieldCfgPPO,
    Go2DistillCfgPPO,
]


def config_fields(cfg: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of every field of a ``class_to_dict`` result, nested config classes included (their own
    path and each of their fields)."""
    paths = []
    for key, value in cfg.items():
        path = f"{prefix}{key}"
        paths.append(path)
        if isinstance(value, dict) and value and not (prefix == "" and key == "init_member_classes"):
            paths += config_fields(value, path + ".")
    return paths


def problem_paths(field: str) -> set[str]:
    """Where a problem about ``field`` is reported: the nested form's top-level runner keys (``seed``,
    ``runner_class_name``) are read as ``runner.<key>``."""
    return {field} if "." in field else {field, f"runner.{field}"}


@pytest.mark.parametrize("cfg_class", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_every_field_of_the_client_configs_is_accepted(cfg_class):
    """The full config (a task registry's instance, through legged_gym's class_to_dict) validates, and no
    field -- top-level, section, or field of a nested config class -- is reported as an unknown key."""
    cfg = class_to_dict(cfg_class())
    fields = config_fields(cfg)
    assert "policy.init_noise_std" in fields and "runner.checkpoint" in fields
    try:
        resolve_train_cfg(cfg)
        problems = []
    except ConfigError as e:
        problems = e.problems
    unknown = {
        field: p.rule
        for field in fields
        for p in problems
        if p.path in problem_paths(field) and p.rule.startswith("unknown key")
    }
    assert not unknown, f"st_rl rejects fields a {cfg_class.__name__} client sends: {unknown}"
    assert not problems, f"{cfg_class.__name__}: " + "; ".join(str(p) for p in problems)


@pytest.mark.parametrize("cfg_class", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_class_to_dict_of_the_class_and_without_base_config_methods(cfg_class):
    """Scripts that pass the class itself (not a registered instance) give the same dict; every field is
    accepted there too (checked without the ``init_member_classes`` entry, so that a failure names only
    what else st_rl rejects)."""
    from_class = class_to_dict(cfg_class)
    from_instance = class_to_dict(cfg_class())
    assert from_class == from_instance
    from_class.pop("init_member_classes", None)
    try:
        resolve_train_cfg(from_class)
    except ConfigError as e:
        pytest.fail(f"{cfg_class.__name__}: st_rl rejects: " + "; ".join(str(p) for p in e.problems))


# ---------------------------------------------------------------------------------------- legged_gym forms
@pytest.fixture(scope="module")
def legged_gym_runs(tmp_path_factory):
    """legged_gym's train.py (2 iterations), then a resume with ``load_run=-1, checkpoint=-1`` (1 iteration)."""
    log_root = str(tmp_path_factory.mktemp("legged_gym") / "logs" / LeggedRobotCfgPPO.runner.experiment_name)
    with single_thread():
        env, env_cfg = make_env(ToyRoughCfg, num_envs=NUM_ENVS)
        train_cfg = LeggedRobotCfgPPO()
        train_cfg.runner.max_iterations = 2  # --max_iterations 2
        runner, train_cfg, log_dir = legged_gym_make_alg_runner(env, train_cfg, log_root)
        returned = runner.learn(
            num_learning_iterations=train_cfg.runner.max_iterations, init_at_random_ep_len=True
        )
        first = {"dir": log_dir, "runner": runner, "env": env, "returned": returned}

        env, _ = make_env(ToyRoughCfg, num_envs=NUM_ENVS)
        train_cfg = LeggedRobotCfgPPO()
        train_cfg.runner.resume = True  # --resume
        train_cfg.runner.max_iterations = 1  # --max_iterations 1
        runner, train_cfg, log_dir = legged_gym_make_alg_runner(env, train_cfg, log_root)
        start = runner.current_learning_iteration
        runner.learn(num_learning_iterations=train_cfg.runner.max_iterations, init_at_random_ep_len=True)
        second = {"dir": log_dir, "runner": runner, "start": start}
    return {"log_root": log_root, "first": first, "second": second}


def test_legged_gym_train(legged_gym_runs):
    """``OnPolicyRunner(env, class_to_dict(LeggedRobotCfgPPO()), log_dir)`` + ``learn(max_iterations,
    init_at_random_ep_len=True)``: checkpoint, TensorBoard file, episode infos, st_gym's metric attributes."""
    first = legged_gym_runs["first"]
    runner, log_dir, env = first["runner"], first["dir"], first["env"]
    assert runner.current_learning_iteration == 2
    assert model_files(log_dir) == ["model_2.pt"]
    assert glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))
    # learn() returns the env's tracking_error / CoT means after the last iteration (legged_gym ignores them)
    velrmsd, cot = first["returned"]
    assert isinstance(velrmsd, torch.Tensor) and isinstance(cot, torch.Tensor)
    torch.testing.assert_close(velrmsd, env.tracking_error.mean())
    torch.testing.assert_close(cot, env.CoT.mean())
    state = torch.load(os.path.join(log_dir, "model_2.pt"), map_location="cpu")  # plain torch.load
    assert state["iter"] == 2 and {"model_state_dict", "optimizer_state_dict"} <= set(state)


def test_legged_gym_resume(legged_gym_runs):
    """``resume=True, load_run=-1, checkpoint=-1``: the previous run's last model is loaded and the iteration
    count continues in the new run directory."""
    first, second = legged_gym_runs["first"], legged_gym_runs["second"]
    assert second["start"] == 2
    assert second["runner"].current_learning_iteration == 3
    assert model_files(second["dir"]) == ["model_3.pt"] and model_files(first["dir"]) == ["model_2.pt"]


def test_legged_gym_play(legged_gym_runs):
    """play.py: at most 50 envs, ``resume=True`` (the last run), ``get_inference_policy(device=env.device)``,
    ``policy(obs.detach())`` in a loop."""
    log_root = legged_gym_runs["log_root"]
    env, _ = make_env(ToyRoughCfg, num_envs=min(NUM_ENVS, 50))
    env.reset()
    train_cfg = LeggedRobotCfgPPO()
    train_cfg.runner.resume = True
    runner, train_cfg, _ = legged_gym_make_alg_runner(env, train_cfg, log_root)
    assert runner.current_learning_iteration == 3
    total = play(runner, env, steps=int(env.max_episode_length) // 4)
    assert torch.isfinite(total).all()
    # the exporter's directory (exported/) and play runs do not count as runs
    assert get_load_path(log_root) == os.path.join(legged_gym_runs["second"]["dir"], "model_3.pt")


def test_legged_gym_export_feed_forward(legged_gym_runs):
    """play.py's ``export_policy_as_jit(runner.alg.actor_critic, path)``: ``torch.jit.script`` of a copy of the
    actor MLP, which must compute the inference policy's actions."""
    log_root = legged_gym_runs["log_root"]
    env, _ = make_env(ToyRoughCfg, num_envs=8)
    train_cfg = LeggedRobotCfgPPO()
    train_cfg.runner.resume = True
    runner, _, _ = legged_gym_make_alg_runner(env, train_cfg, log_root)
    policy = runner.get_inference_policy(device=env.device)
    actor_critic = runner.alg.actor_critic
    assert not actor_critic.is_recurrent
    assert not hasattr(actor_critic, "memory_a"), (
        "legged_gym's export_policy_as_jit exports with its LSTM exporter (reading memory_a.rnn) every policy "
        "that has a `memory_a` attribute; st_rl's feed-forward ActorCritic has one (NoMemory)"
    )
    path = export_policy_as_jit(actor_critic, os.path.join(log_root, "exported", "policies"))
    scripted = torch.jit.load(path)
    # legged_gym's exporter copies the actor MLP only; its configs leave empirical_normalization off, so the
    # deployed module takes the env's (scaled) observations as they are, like the inference policy.
    assert not actor_critic.actor_obs_normalization
    obs = env.get_observations()
    with torch.no_grad():
        torch.testing.assert_close(scripted(obs), policy(obs), atol=1e-6, rtol=0)


def test_legged_gym_recurrent_variant_trains_and_exports(tmp_path):
    """A legged_gym task config switching to ActorCriticRecurrent (the keys legged_gym comments out), trained,
    then exported with legged_gym's LSTM exporter: the scripted module equals the inference policy step by step
    for one robot."""
    log_root = str(tmp_path / "logs" / LeggedRobotRecurrentCfgPPO.runner.experiment_name)
    env, _ = make_env(ToyRoughCfg, num_envs=NUM_ENVS)
    train_cfg = LeggedRobotRecurrentCfgPPO()
    train_cfg.runner.max_iterations = 1
    runner, train_cfg, log_dir = legged_gym_make_alg_runner(env, train_cfg, log_root)
    runner.learn(num_learning_iterations=train_cfg.runner.max_iterations, init_at_random_ep_len=True)
    assert model_files(log_dir) == ["model_1.pt"]

    env, _ = make_env(ToyRoughCfg, num_envs=1)  # one robot: the exporter's memory holds one
    train_cfg = LeggedRobotRecurrentCfgPPO()
    train_cfg.runner.resume = True
    runner, _, _ = legged_gym_make_alg_runner(env, train_cfg, log_root)
    actor_critic = runner.alg.actor_critic
    assert actor_critic.is_recurrent and actor_critic.rnn_type == "lstm"
    assert actor_critic.memory_a.rnn.hidden_size == 512
    policy = runner.get_inference_policy(device=env.device)
    actor_critic.reset()
    scripted = torch.jit.load(
        export_policy_as_jit(actor_critic, os.path.join(log_root, "exported", "policies"))
    )
    obs = env.get_observations()
    with torch.no_grad():
        for _ in range(5):
            actions = policy(obs.detach())
            torch.testing.assert_close(scripted(obs), actions, atol=1e-6, rtol=0)
            obs, _, _, _, _ = env.step(actions)


def test_legged_gym_inference_mode_rollout_off(tmp_path):
    """parkour's runner key ``inference_mode_rollout`` (rollouts with autograd on) on legged_gym's config."""

    class Cfg(ParkourLeggedRobotCfgPPO):
        class runner(ParkourLeggedRobotCfgPPO.runner):
            inference_mode_rollout = False
            log_interval = 1

    env, _ = make_env(ToyRoughCfg, num_envs=16)
    train_cfg = Cfg()
    log_root = str(tmp_path / "logs" / "test")
    runner, train_cfg, log_dir = legged_gym_make_alg_runner(env, train_cfg, log_root)
    runner.learn(num_learning_iterations=1, init_at_random_ep_len=True)
    assert runner.current_learning_iteration == 1 and model_files(log_dir) == ["model_1.pt"]


# ------------------------------------------------------------------------------------------- parkour forms
def client_config(train_cfg: BaseConfig, env_cfg: BaseConfig) -> dict[str, Any]:
    """What parkour's make_alg_runner writes to config.json (as read back from JSON)."""
    data = class_to_dict(train_cfg)
    data.update(class_to_dict(env_cfg))
    return json.loads(json.dumps(data))


def read_config_json(run_dir: str) -> dict[str, Any]:
    with open(os.path.join(run_dir, "config.json")) as f:
        return json.load(f)


def test_parkour_fresh_run_keeps_the_client_config_json(tmp_path):
    """parkour writes config.json into the new run directory after building the runner and before learn();
    the run trains there, and the file stays the client's (its play.py and collect.py read env and train
    sections from it: ``control``, ``terrain``, ``runner``, ``algorithm.teacher_policy``)."""
    env, env_cfg = make_env(ToyRoughCfg, num_envs=16)
    train_cfg = ParkourLeggedRobotCfgPPO()
    train_cfg.runner.max_iterations = 1
    log_root = str(tmp_path / "logs" / train_cfg.runner.experiment_name)
    runner, train_cfg, log_dir, _ = parkour_make_alg_runner(env, train_cfg, log_root, env_cfg)
    runner.learn(num_learning_iterations=train_cfg.runner.max_iterations, init_at_random_ep_len=True)
    assert model_files(log_dir) == ["model_1.pt"]
    assert read_config_json(log_dir) == client_config(train_cfg, env_cfg)


def test_parkour_resumed_run_keeps_the_client_config_json(tmp_path):
    """A resumed parkour run (checkpoint copied into the new run directory, then ``runner.load``) also keeps the
    client's config.json."""
    log_root = str(tmp_path / "logs" / "test")
    env, env_cfg = make_env(ToyRoughCfg, num_envs=16)
    train_cfg = ParkourLeggedRobotCfgPPO()
    first, _, first_dir = legged_gym_make_alg_runner(env, train_cfg, log_root)
    first.learn(num_learning_iterations=1, init_at_random_ep_len=True)
    env, env_cfg = make_env(ToyRoughCfg, num_envs=16)
    train_cfg = ParkourLeggedRobotCfgPPO()
    train_cfg.runner.resume = True
    train_cfg.runner.load_run = os.path.basename(first_dir)
    runner, train_cfg, log_dir, resume_path = parkour_make_alg_runner(env, train_cfg, log_root, env_cfg)
    assert resume_path == os.path.join(first_dir, "model_1.pt")
    runner.learn(num_learning_iterations=1, init_at_random_ep_len=True)
    assert model_files(log_dir) == ["model_1.pt", "model_2.pt"]
    assert read_config_json(log_dir) == client_config(train_cfg, env_cfg)


@pytest.fixture(scope="module")
def parkour_logs(tmp_path_factory):
    """``<LEGGED_GYM_ROOT_DIR>/logs`` of the parkour tests."""
    return str(tmp_path_factory.mktemp("parkour") / "logs")


@pytest.fixture(scope="module")
def rough_run(parkour_logs):
    """parkour's train.py on Go2RoughCfgPPO (2 iterations); returns the run directory."""
    with single_thread():
        env, env_cfg = make_env(ToyRoughCfg, num_envs=NUM_ENVS)
        train_cfg = Go2RoughCfgPPO()
        train_cfg.runner.max_iterations = 2  # --max_iterations 2
        log_root = os.path.join(parkour_logs, train_cfg.runner.experiment_name)
        runner, train_cfg, log_dir, _ = parkour_make_alg_runner(env, train_cfg, log_root, env_cfg)
        runner.learn(num_learning_iterations=train_cfg.runner.max_iterations, init_at_random_ep_len=True)
    return {"dir": log_dir, "runner": runner, "env": env}


@pytest.fixture(scope="module")
def field_run(parkour_logs, rough_run):
    """parkour's train.py on Go2FieldCfgPPO, resumed (``resume=True``) from the rough run through ``load_run``
    (1 iteration); returns the run directory."""
    with single_thread():
        env, env_cfg = make_env(ToyFieldCfg, num_envs=NUM_ENVS)
        train_cfg = Go2FieldCfgPPO()
        train_cfg.runner.load_run = rough_run["dir"]  # the config's "{Your trained walking model directory}"
        train_cfg.runner.max_iterations = 1  # --max_iterations 1
        log_root = os.path.join(parkour_logs, train_cfg.runner.experiment_name)
        runner, train_cfg, log_dir, resume_path = parkour_make_alg_runner(env, train_cfg, log_root, env_cfg)
        start = runner.current_learning_iteration
        runner.learn(num_learning_iterations=train_cfg.runner.max_iterations, init_at_random_ep_len=True)
    return {"dir": log_dir, "runner": runner, "resume_path": resume_path, "start": start}


def test_parkour_go2_rough_trains(rough_run):
    """EncoderStateAcRecurrent + EstimatorPPO from Go2RoughCfgPPO, untouched but for max_iterations."""
    runner, log_dir = rough_run["runner"], rough_run["dir"]
    policy = runner.alg.actor_critic
    assert type(policy).__name__ == "EncoderStateAcRecurrent" and type(runner.alg).__name__ == "EstimatorPPO"
    assert policy.is_recurrent and policy.rnn_type == "gru"
    assert type(runner.alg.optimizer).__name__ == "AdamW"
    assert runner.current_learning_iteration == 2 and runner.log_interval == 100
    assert model_files(log_dir) == ["model_2.pt"]
    state = torch.load(
        os.path.join(log_dir, "model_2.pt"), map_location="cpu"
    )  # plain torch.load, as parkour
    assert state["iter"] == 2 and "model_state_dict" in state and "optimizer_state_dict" in state


def test_parkour_go2_rough_resumes(parkour_logs, rough_run):
    """Resume the rough run by name (``--resume --load_run <run>``): the checkpoint is copied into the new run
    directory and loaded; the iteration count continues."""
    env, env_cfg = make_env(ToyRoughCfg, num_envs=NUM_ENVS)
    train_cfg = Go2RoughCfgPPO()
    train_cfg.runner.resume = True  # --resume
    train_cfg.runner.load_run = os.path.basename(rough_run["dir"])  # --load_run <run directory name>
    train_cfg.runner.max_iterations = 1
    log_root = os.path.join(parkour_logs, train_cfg.runner.experiment_name)
    runner, train_cfg, log_dir, resume_path = parkour_make_alg_runner(env, train_cfg, log_root, env_cfg)
    assert resume_path == os.path.join(rough_run["dir"], "model_2.pt")
    assert runner.current_learning_iteration == 2
    for name, value in rough_run["runner"].alg.actor_critic.state_dict().items():
        torch.testing.assert_close(runner.alg.actor_critic.state_dict()[name], value, msg=name)
    runner.learn(num_learning_iterations=train_cfg.runner.max_iterations, init_at_random_ep_len=True)
    assert runner.current_learning_iteration == 3
    assert model_files(log_dir) == ["model_2.pt", "model_3.pt"]  # the copied checkpoint and the new one


def test_parkour_go2_field_resumes_from_rough(rough_run, field_run):
    """Go2FieldCfgPPO's ``resume=True`` + ``load_run`` (an absolute path) takes the rough run's last model."""
    assert field_run["resume_path"] == os.path.join(rough_run["dir"], "model_2.pt")
    assert field_run["start"] == 2
    runner = field_run["runner"]
    assert runner.current_learning_iteration == 3
    assert runner.alg.entropy_coef == 0.0
    assert model_files(field_run["dir"]) == ["model_2.pt", "model_3.pt"]


def test_parkour_go2_play(parkour_logs, field_run):
    """parkour's play.py: one env, ``runner_class_name = "OnPolicyRunner"``, ``resume = True`` with
    ``--load_run``, no config.json written; the inference policy drives the env."""
    env, env_cfg = make_env(ToyFieldCfg, num_envs=1)  # play.py: num_envs = min(num_envs, 1)
    env.reset()
    train_cfg = Go2FieldCfgPPO()
    train_cfg.runner.resume = True
    train_cfg.runner.load_run = os.path.basename(field_run["dir"])
    train_cfg.runner_class_name = "OnPolicyRunner"
    log_root = os.path.join(parkour_logs, train_cfg.runner.experiment_name)
    runner, _, _, resume_path = parkour_make_alg_runner(env, train_cfg, log_root, save_cfg=False)
    assert resume_path == os.path.join(field_run["dir"], "model_3.pt")
    assert runner.current_learning_iteration == 3
    agent_model = runner.alg.actor_critic
    total = play(runner, env, steps=20)
    assert torch.isfinite(total).all()
    agent_model.reset()  # play.py's "agent_full_reset" key


@pytest.fixture(scope="module")
def distill_dataset(parkour_logs, field_run):
    """parkour's collect.py (DemonstrationSaver) on the distillation task with the field policy as teacher;
    returns ``(data_dir, teacher checkpoint)``."""
    with single_thread():
        return _collect_distill_dataset(parkour_logs, field_run)


def _collect_distill_dataset(parkour_logs: str, field_run: dict[str, Any]) -> tuple[str, str]:
    env, env_cfg = make_env(ToyDistillCfg, num_envs=16)
    train_cfg = Go2DistillCfgPPO()
    teacher_ac_path = get_load_path(os.path.dirname(field_run["dir"]), field_run["dir"], -1)
    train_cfg.algorithm.teacher_ac_path = teacher_ac_path  # "{Your trained oracle parkour model directory}"
    data_dir = os.path.join(os.path.dirname(parkour_logs), "distill_data")
    train_cfg.runner.pretrain_dataset.data_dir = data_dir  # "{A temporary directory ...}"
    config = class_to_dict(train_cfg)
    config.update(class_to_dict(env_cfg))
    policy = build_actor_critic(
        env, train_cfg.algorithm.teacher_policy_class_name, config["algorithm"]["teacher_policy"]
    ).to(env.device)
    state_dict = torch.load(train_cfg.algorithm.teacher_ac_path, map_location="cpu")
    policy.load_state_dict(state_dict["model_state_dict"])
    saver = DemonstrationSaver(
        env=env,
        policy=policy,
        save_dir=os.path.join(data_dir, datetime.now().strftime("%b%d_%H-%M-%S") + "_field_teacher"),
        rollout_storage_length=32,
        min_timesteps=2e3,  # parkour: 1e6
        min_episodes=2e-3,
        use_critic_obs=True,
        success_traj_only=False,
        obs_disassemble_mapping=dict(forward_depth="normalized_image"),
    )
    saver.collect_and_save(config=config)
    saver.close()
    return data_dir, teacher_ac_path


@pytest.mark.timeout(300)
def test_parkour_go2_distill(parkour_logs, field_run, distill_dataset):
    """Go2DistillCfgPPO: TwoStageRunner pretraining from the collected dataset (``pretrain_iterations=-1``) with
    EstimatorTPPO (``using_ppo=False``, ``distill_target="l1"``) and the field policy as teacher; initialised from
    the field run through ``resume=True`` + ``ckpt_manipulator="replace_encoder0"`` (the height-map encoder
    becomes a fresh depth encoder). Afterwards legged_gym's "last model" rule finds the newest student."""
    data_dir, teacher_ac_path = distill_dataset
    n_trajs = len(glob.glob(os.path.join(data_dir, "*", "trajectory_*")))
    assert n_trajs >= 16
    # parkour distills with fewer envs than its teacher was trained with (256 vs 4096); here 16 vs 32
    env, env_cfg = make_env(ToyDistillCfg, num_envs=16)
    train_cfg = Go2DistillCfgPPO()
    train_cfg.algorithm.teacher_ac_path = teacher_ac_path
    train_cfg.runner.load_run = field_run["dir"]  # "{Your trained oracle parkour model directory}"
    train_cfg.runner.pretrain_dataset.data_dir = data_dir
    # parkour waits for 1500 trajectories of a collector running beside it; this dataset is small
    train_cfg.runner.pretrain_dataset.keep_latest_n_trajs = n_trajs
    train_cfg.runner.max_iterations = 2  # --max_iterations 2
    log_root = os.path.join(parkour_logs, train_cfg.runner.experiment_name)
    runner, train_cfg, log_dir, resume_path = parkour_make_alg_runner(env, train_cfg, log_root, env_cfg)
    assert type(runner).__name__ == "TwoStageRunner" and type(runner.alg).__name__ == "EstimatorTPPO"
    assert resume_path == os.path.join(field_run["dir"], "model_3.pt")
    start = runner.current_learning_iteration
    assert start == 3
    student, teacher = runner.alg.actor_critic, runner.alg.teacher_actor_critic
    teacher_state = torch.load(teacher_ac_path, map_location="cpu")["model_state_dict"]
    for name, value in teacher.state_dict().items():
        torch.testing.assert_close(value, teacher_state[name], msg=name)
    assert type(student.encoders[0]).__name__ == "Conv2dHeadModel"
    torch.testing.assert_close(  # the critic encoder comes from the field checkpoint
        student.state_dict()["critic_encoders.0.model.0.weight"],
        teacher_state["critic_encoders.0.model.0.weight"],
    )
    before = {k: v.clone() for k, v in student.state_dict().items()}
    runner.learn(num_learning_iterations=train_cfg.runner.max_iterations, init_at_random_ep_len=True)
    assert runner.current_learning_iteration == start + 2
    assert runner.is_pretraining()
    changed = [k for k, v in student.state_dict().items() if not torch.equal(v, before[k])]
    assert any(k.startswith("encoders.0.") for k in changed) and any(k.startswith("actor.") for k in changed)
    newest = f"model_{start + 2}.pt"
    assert newest in model_files(log_dir)
    for value in student.state_dict().values():
        assert torch.isfinite(value).all()
    # parkour re-saves a manipulated checkpoint as model_<iter>.pt; a resume or play of this run with
    # checkpoint=-1 must find the newest student, not the initial one
    assert get_load_path(log_root, os.path.basename(log_dir), -1) == os.path.join(log_dir, newest), (
        f"legged_gym's get_load_path(checkpoint=-1) picks {get_load_path(log_root, os.path.basename(log_dir), -1)}"
        f" among {sorted(os.listdir(log_dir))}"
    )


# ----------------------------------------------------------------------------------------------- learning
def test_legged_gym_config_learns_the_task():
    """legged_gym's config, untouched, learns the held-out task: after 25 iterations of 128 envs the inference
    policy earns clearly more than the untrained one (per env over 100 steps: untrained about 0.9, trained about
    2.2, an oracle about 2.9)."""
    env, _ = make_env(ToyRoughCfg, num_envs=128, seed=3)
    train_cfg = LeggedRobotCfgPPO()
    train_cfg.runner.max_iterations = 25  # --max_iterations 25
    runner, train_cfg, _ = legged_gym_make_alg_runner(env, train_cfg, None)

    def evaluate() -> float:
        eval_env, _ = make_env(ToyRoughCfg, num_envs=64, seed=11)
        eval_env.reset()
        return float(play(runner, eval_env, steps=100).mean())

    before = evaluate()
    runner.train_mode()
    runner.learn(num_learning_iterations=train_cfg.runner.max_iterations, init_at_random_ep_len=True)
    after = evaluate()
    print(f"return per env over 100 steps: untrained {before:.3f}, trained {after:.3f}")
    assert after > before + 0.7, (before, after)
