"""DemonstrationSaver and DaggerSaver on the built-in velocity-tracking task: file contents, resumes, DAgger."""

from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest
import torch
import torch.nn as nn

from st_rl.runners import OnPolicyRunner
from st_rl.runners.dagger_saver import DaggerSaver
from st_rl.runners.demonstration import DemonstrationSaver
from st_rl.storage.rollout_files.rollout_dataset import (
    RolloutDataset,
    get_frame_range,
    read_trajectory_file,
)
from st_rl.tasks import make_env
from st_rl.utils.checkpoint import load_checkpoint
from st_rl.utils.data_compresser import compress_normalized_image, decompress_normalized_image

STUDENT_CFG = {
    "seed": 1,
    "num_steps_per_env": 8,
    "save_interval": 100,
    "empirical_normalization": True,
    "logger": "none",
    "policy": {
        "class_name": "ActorCritic",
        "actor_hidden_dims": [16],
        "critic_hidden_dims": [16],
        "activation": "elu",
        "init_noise_std": 1.0,
    },
    "algorithm": {
        "class_name": "PPO",
        "num_learning_epochs": 1,
        "num_mini_batches": 1,
        "learning_rate": 1e-3,
    },
}


class RecordingEnv:
    """Delegates to a built-in task and records what ``reset`` / ``step`` returned and the executed actions."""

    def __init__(self, env):
        self._env = env
        self.resets: list[torch.Tensor] = []
        self.steps: list[dict[str, torch.Tensor]] = []

    def __getattr__(self, name):
        return getattr(self._env, name)

    def get_observations(self):
        return self._env.get_observations()

    def reset(self):
        out = self._env.reset()
        self.resets.append(out[0].clone())
        self.critic_at_reset = out[1]["observations"]["critic"].clone()
        self.steps.clear()
        return out

    def step(self, actions):
        obs, rew, dones, extras = self._env.step(actions)
        self.steps.append(
            {
                "actions": actions.clone(),
                "obs": obs.clone(),
                "critic": extras["observations"]["critic"].clone(),
                "rewards": rew.clone(),
                "dones": dones.clone(),
                "time_outs": extras["time_outs"].clone(),
            }
        )
        return obs, rew, dones, extras

    def sequences(self):
        """Per-step tensors (S, N, ...): observation before each step, and the step's outputs."""
        obs_before = torch.stack([self.resets[-1]] + [s["obs"] for s in self.steps[:-1]])
        critic_before = torch.stack([self.critic_at_reset] + [s["critic"] for s in self.steps[:-1]])
        out = {k: torch.stack([s[k] for s in self.steps]) for k in self.steps[0]}
        return obs_before, critic_before, out


class Expert:
    """The task's controller as a policy; records what it saw."""

    def __init__(self, env):
        self.env = env
        self.seen: list[torch.Tensor] = []
        self.resets = 0

    def act_inference(self, obs):
        self.seen.append(obs.clone())
        return self.env.expert_action(obs)

    def reset(self, dones):
        self.resets += 1


def _env(n=8, seed=0, **cfg):
    """Velocity tracking with 20-step episodes, recorded."""
    return RecordingEnv(make_env("velocity_tracking", num_envs=n, seed=seed, episode_length_s=1.0, **cfg))


def _trajectories(save_dir):
    """{trajectory dir name: {array: concatenated frames}} of a saved dataset."""
    out = {}
    for name in sorted(os.listdir(save_dir)):
        path = os.path.join(save_dir, name)
        if not name.startswith("trajectory_"):
            continue
        files = sorted(os.listdir(path), key=lambda f: get_frame_range(f)[0])
        parts = [read_trajectory_file(os.path.join(path, f)) for f in files]
        out[name] = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}
    return out


def _meta(save_dir):
    with open(os.path.join(save_dir, "metadata.json"), encoding="utf-8") as f:
        return json.load(f)


def _frames_on_disk(save_dir):
    total = 0
    for name in os.listdir(save_dir):
        if name.startswith("trajectory_"):
            total += sum(b - a for a, b in map(get_frame_range, os.listdir(os.path.join(save_dir, name))))
    return total


def _locate(obs_before, first_obs):
    """(step, env) where the recorded observation equals ``first_obs`` exactly."""
    hits = (obs_before == torch.from_numpy(first_obs)).all(dim=-1).nonzero().tolist()
    assert len(hits) == 1, hits
    return hits[0]


# ---------------------------------------------------------------------------------------------- saver
def test_saved_files_match_what_the_env_produced(tmp_path):
    env = _env()
    expert = Expert(env)
    save_dir = str(tmp_path / "demo")
    saver = DemonstrationSaver(
        env, expert, save_dir, rollout_storage_length=8, min_timesteps=100, min_episodes=8
    )
    saver.collect_and_save(config={"task": "velocity_tracking"})
    obs_before, critic_before, rec = env.sequences()
    steps = obs_before.shape[0]
    assert steps == 24  # 3 rounds of 8 steps: the 8 episodes of 20 steps end at step 20
    # the policy saw the raw observations, the env executed its actions
    assert torch.equal(torch.stack(expert.seen), obs_before)
    assert torch.equal(rec["actions"], env.expert_action(obs_before))

    trajs = _trajectories(save_dir)
    covered = torch.zeros(steps, 8, dtype=torch.bool)
    for name, data in trajs.items():
        length = data["observations"].shape[0]
        t0, i = _locate(obs_before, data["observations"][0])
        sl = slice(t0, t0 + length)
        assert torch.equal(torch.from_numpy(data["observations"]), obs_before[sl, i]), name
        assert torch.equal(torch.from_numpy(data["privileged_observations"]), critic_before[sl, i])
        assert torch.equal(torch.from_numpy(data["actions"]), rec["actions"][sl, i])
        assert torch.equal(torch.from_numpy(data["rewards"]), rec["rewards"][sl, i])
        assert torch.equal(torch.from_numpy(data["dones"]), rec["dones"][sl, i])
        assert torch.equal(torch.from_numpy(data["timeouts"]), rec["time_outs"][sl, i])
        assert data["dones"].dtype == np.bool_ and data["observations"].dtype == np.float32
        assert np.all(data["values"] == 0)
        # saved obs at t+1 is what step t returned; only the last frame may be a done
        assert torch.equal(torch.from_numpy(data["observations"][1:]), rec["obs"][t0 : t0 + length - 1, i])
        assert not data["dones"][:-1].any()
        assert data["dones"][-1] or t0 + length == steps  # ended by a done, or cut by the end of collection
        covered[sl, i] = True
    assert covered.all()  # every recorded step is in exactly one trajectory (lengths add up)
    assert sum(d["observations"].shape[0] for d in trajs.values()) == steps * 8

    meta = _meta(save_dir)
    n_done = int(rec["dones"].sum())
    assert meta["format"] == "st_rl.demonstrations" and meta["format_version"] == 1
    assert meta["total_timesteps"] == steps * 8 == _frames_on_disk(save_dir)
    assert meta["total_trajectories"] == n_done == 8
    assert meta["truncated_trajectories"] == 8 and meta["discarded_trajectories"] == 0
    assert meta["num_obs"] == 6 and meta["num_critic_obs"] == 8 and meta["num_actions"] == 2
    assert meta["obs_segments"] == {"base_lin_vel": [2], "commands": [2], "last_actions": [2]}
    assert list(meta["critic_obs_segments"]) == [
        "base_lin_vel",
        "commands",
        "last_actions",
        "mass",
        "friction",
    ]
    assert meta["config"] == {"task": "velocity_tracking"} and meta["env"] == "RecordingEnv"
    assert meta["policy"] == "Expert" and meta["rollout_storage_length"] == 8
    assert (
        meta["min_timesteps"] == 100 and meta["min_episodes"] == 8 and meta["obs_disassemble_mapping"] is None
    )
    assert len(trajs) == 16 and all(trajs.values())  # no empty directory left
    assert expert.resets == 25  # once at the start, then every step (no per-step host sync)


def test_rollout_dataset_reproduces_saved_transitions(tmp_path):
    env = _env(n=4, seed=2)
    save_dir = str(tmp_path / "demo")
    DemonstrationSaver(
        env, Expert(env), save_dir, rollout_storage_length=8, min_timesteps=64, min_episodes=4
    ).collect_and_save()
    trajs = _trajectories(save_dir)
    index = {}
    for name, data in trajs.items():
        for f, row in enumerate(data["observations"]):
            index[row.tobytes()] = (name, f)
    ds = RolloutDataset(save_dir, num_envs=1, device="cpu")
    served = 0
    for batch in ds:
        name, f = index[batch.observation[0].numpy().tobytes()]
        data = trajs[name]
        assert torch.equal(batch.action[0], torch.from_numpy(data["actions"][f]))
        assert batch.reward.item() == data["rewards"][f]
        assert torch.equal(
            batch.privileged_observation[0], torch.from_numpy(data["privileged_observations"][f])
        )
        nxt_name, nxt_f = index[batch.next_observation[0].numpy().tobytes()]
        if f + 1 < len(data["observations"]):
            assert (nxt_name, nxt_f) == (name, f + 1)
            assert batch.done.item() == (f == 0 or bool(data["dones"][f]))
        else:
            assert nxt_f == 0 and nxt_name != name and batch.done.item()  # next trajectory starts
            assert batch.timeout.item() == (not data["dones"][f] or bool(data["timeouts"][f]))
        served += 1
    # one slot reads every trajectory once; only the final frame (nothing follows it) is not served
    assert served == _frames_on_disk(save_dir) - 1


def test_success_traj_only_deletes_terminated_trajectories(tmp_path):
    env = _env(n=16, seed=0, max_velocity_error=0.8)
    save_dir = str(tmp_path / "success")
    saver = DemonstrationSaver(
        env,
        Expert(env),
        save_dir,
        rollout_storage_length=16,
        min_timesteps=0,
        min_episodes=20,
        success_traj_only=True,
    )
    saver.collect_and_save()
    _, _, rec = env.sequences()
    terminations = int((rec["dones"] & ~rec["time_outs"]).sum())
    time_outs = int(rec["time_outs"].sum())
    assert terminations > 0 and time_outs >= 20
    trajs = _trajectories(save_dir)
    assert trajs and all(trajs.values())
    for data in trajs.values():
        assert not data["dones"][:-1].any()
        assert not data["dones"][-1] or data["timeouts"][-1]  # survived to the time-out, or still running
    meta = _meta(save_dir)
    assert meta["total_trajectories"] == time_outs == sum(bool(d["timeouts"][-1]) for d in trajs.values())
    assert meta["discarded_trajectories"] == terminations
    assert meta["total_timesteps"] == _frames_on_disk(save_dir) < rec["dones"].numel()
    assert meta["success_traj_only"] is True


def test_resume_continues_numbering_and_checks_compatibility(tmp_path):
    save_dir = str(tmp_path / "demo")
    env = _env(n=4, seed=0)
    DemonstrationSaver(
        env, Expert(env), save_dir, rollout_storage_length=8, min_timesteps=32, min_episodes=0
    ).collect_and_save()
    first = _trajectories(save_dir)
    first_meta = _meta(save_dir)
    first_max = max(int(n.split("_")[1]) for n in first)
    assert first_meta["total_timesteps"] == 32 and first_meta["total_trajectories"] == 0
    os.makedirs(os.path.join(save_dir, f"trajectory_{first_max + 5}"))  # an empty leftover directory

    env2 = _env(n=4, seed=1)
    saver = DemonstrationSaver(
        env2, Expert(env2), save_dir, rollout_storage_length=8, min_timesteps=120, min_episodes=4
    )
    saver.collect_and_save()
    second = _trajectories(save_dir)
    new = sorted(int(n.split("_")[1]) for n in set(second) - set(first))
    assert new[0] == first_max + 5  # the empty directory is reused ...
    assert all(k > first_max for k in new)  # ... and numbering continues after the old trajectories
    for name, data in first.items():  # old data untouched
        assert all(np.array_equal(data[k], second[name][k]) for k in data)
    meta = _meta(save_dir)
    assert meta["total_timesteps"] == _frames_on_disk(save_dir) == 32 + 4 * len(env2.steps)
    assert meta["total_trajectories"] == int(env2.sequences()[2]["dones"].sum()) >= 4

    other = make_env("point_mass", num_envs=4, seed=0)
    with pytest.raises(ValueError, match="num_obs"):
        DemonstrationSaver(
            other, lambda obs: torch.zeros(4, other.num_actions), save_dir
        ).init_traj_handlers()


def test_metadata_exists_from_the_start_and_close_is_safe(tmp_path):
    save_dir = str(tmp_path / "demo")
    env = _env(n=2)
    seen_metadata = []

    class Checker(Expert):
        def act_inference(self, obs):
            seen_metadata.append(os.path.isfile(os.path.join(save_dir, "metadata.json")))
            return super().act_inference(obs)

    saver = DemonstrationSaver(
        env, Checker(env), save_dir, rollout_storage_length=4, min_timesteps=8, min_episodes=0
    )
    assert saver.metadata["total_timesteps"] == 0 and saver.metadata["num_obs"] == 6
    saver.init_traj_handlers()  # usable before collect_and_save (the seed's DaggerSaver example)
    saver.collect_and_save()
    assert seen_metadata and all(seen_metadata)
    meta = _meta(save_dir)
    saver.close()
    saver.__del__()  # no double counting after close
    assert _meta(save_dir) == meta
    assert meta["truncated_trajectories"] == 2 and meta["total_timesteps"] == 8

    never = DemonstrationSaver(env, Expert(env), str(tmp_path / "never"))
    never.close()
    del never
    assert not os.path.exists(tmp_path / "never")


def test_component_compression_and_raw_observations_with_normalizer(tmp_path):
    env = _env(n=4, seed=3)
    save_dir = str(tmp_path / "demo")

    class Affine(nn.Module):
        def forward(self, x):
            return 2 * x + 1

    normalizer = Affine().train()
    expert = Expert(env)
    saver = DemonstrationSaver(
        env,
        expert,
        save_dir,
        rollout_storage_length=8,
        min_timesteps=32,
        min_episodes=0,
        obs_disassemble_mapping={"commands": "normalized_image"},
        obs_normalizer=normalizer,
    )
    saver.collect_and_save()
    assert normalizer.training  # mode restored
    obs_before, _, _ = env.sequences()
    assert torch.equal(torch.stack(expert.seen), 2 * obs_before + 1)  # the policy saw normalised obs
    files = [
        os.path.join(save_dir, "trajectory_0", f)
        for f in sorted(os.listdir(os.path.join(save_dir, "trajectory_0")))
    ]
    data = read_trajectory_file(files[0])
    assert (
        set(data) >= {"obs_base_lin_vel", "obs_commands", "obs_last_actions"} and "observations" not in data
    )
    assert data["obs_commands"].dtype == np.uint8 and data["obs_base_lin_vel"].dtype == np.float32
    assert torch.equal(torch.from_numpy(data["obs_base_lin_vel"]), obs_before[:8, 0, :2])  # raw values
    assert np.array_equal(data["obs_commands"], compress_normalized_image(obs_before[:8, 0, 2:4].numpy()))
    batch = RolloutDataset(save_dir, num_envs=4, device="cpu", dataset_loops=0).get_batch(8)
    expected = obs_before[:8].clone()
    expected[..., 2:4] = decompress_normalized_image(compress_normalized_image(expected[..., 2:4]))
    assert torch.equal(batch.observation, expected)

    with pytest.raises(ValueError, match="not in env.obs_segments"):
        DemonstrationSaver(env, expert, save_dir, obs_disassemble_mapping={"depth": "normalized_image"})
    with pytest.raises(ValueError, match="registered types"):
        DemonstrationSaver(env, expert, save_dir, obs_disassemble_mapping={"commands": "jpeg"})
    with pytest.raises(TypeError, match="act"):
        DemonstrationSaver(env, expert, save_dir, demo_by_sample=True)


# ---------------------------------------------------------------------------------------------- DAgger
@pytest.fixture
def student_logdir(tmp_path):
    log_dir = str(tmp_path / "student")
    runner = OnPolicyRunner(
        make_env("velocity_tracking", num_envs=4, seed=1), copy.deepcopy(STUDENT_CFG), log_dir=log_dir
    )
    runner.learn(1)
    assert os.path.isfile(os.path.join(log_dir, "model_1.pt"))
    return log_dir, runner


def _student_actions(saver, obs):
    with torch.no_grad():
        return saver.training_policy.act_inference(obs)  # the student normalises its observations itself


def _dagger(env, save_dir, logdir, prob, **kw):
    return DaggerSaver(
        env,
        Expert(env),
        save_dir,
        rollout_storage_length=8,
        min_timesteps=kw.pop("min_timesteps", 32),
        min_episodes=0,
        training_policy_logdir=logdir,
        teacher_act_prob=prob,
        **kw,
    )


def test_dagger_labels_with_teacher_and_executes_student(tmp_path, student_logdir):
    logdir, _ = student_logdir
    env = _env(n=4, seed=5)
    saver = _dagger(env, str(tmp_path / "d0"), logdir, 0.0)
    saver.collect_and_save()
    assert saver.training_policy_iteration == 1 and str(saver.loaded_checkpoint).endswith("model_1.pt")
    obs_before, _, rec = env.sequences()
    teacher = env.expert_action(obs_before)
    student = _student_actions(saver, obs_before)
    assert not torch.allclose(teacher, student, atol=1e-3)
    assert torch.allclose(rec["actions"], student, atol=1e-6)  # mask off: the student drives
    data = _trajectories(str(tmp_path / "d0"))["trajectory_0"]
    t0, i = _locate(obs_before, data["observations"][0])
    assert torch.equal(torch.from_numpy(data["actions"]), teacher[t0 : t0 + 8, i])  # teacher labels stored
    meta = _meta(str(tmp_path / "d0"))
    assert meta["training_policy_logdir"] == logdir and meta["teacher_act_prob"] == 0.0
    assert meta["update_times_scale"] == 5000 and meta["action_sample_std"] == 0.0

    env1 = _env(n=4, seed=5)
    _dagger(env1, str(tmp_path / "d1"), logdir, 1.0).collect_and_save()
    obs1, _, rec1 = env1.sequences()
    assert torch.equal(rec1["actions"], env1.expert_action(obs1))  # mask on: the teacher drives

    env_half = _env(n=16, seed=6)
    half = _dagger(env_half, str(tmp_path / "dh"), logdir, 0.5, min_timesteps=16 * 8)
    masks = []
    load = half.load_latest_training_policy

    def load_and_record():
        load()
        masks.append(half.use_teacher_act_mask.clone())

    half.load_latest_training_policy = load_and_record
    half.collect_and_save()
    obs_h, _, rec_h = env_half.sequences()
    by_teacher = (rec_h["actions"] - env_half.expert_action(obs_h)).abs().amax(-1) < 1e-6
    by_student = (rec_h["actions"] - _student_actions(half, obs_h)).abs().amax(-1) < 1e-6
    assert len(masks) == 2  # before the round and after it (the check that stops collection)
    assert torch.equal(by_teacher, masks[0].expand(8, 16)) and torch.equal(by_student, ~by_teacher)
    assert masks[0].any() and not masks[0].all()


def test_dagger_reloads_newer_checkpoints(tmp_path, student_logdir):
    logdir, runner = student_logdir
    env = _env(n=4)
    saver = _dagger(env, str(tmp_path / "d"), logdir, "exp", update_times_scale=10, action_sample_std=0.3)
    saver.init_traj_handlers()
    saver.load_latest_training_policy()
    assert saver.training_policy_iteration == 1
    assert torch.allclose(saver.training_policy.std, torch.full((2,), 0.3))
    runner.learn(1)  # writes model_2.pt
    saver.load_latest_training_policy()
    assert saver.training_policy_iteration == 2 and str(saver.loaded_checkpoint).endswith("model_2.pt")
    state = load_checkpoint(os.path.join(logdir, "model_2.pt"))
    for key, value in saver.training_policy.state_dict().items():
        if key != "std":
            assert torch.equal(value, state["model_state_dict"][key]), key
    assert torch.allclose(saver.training_policy.std, torch.full((2,), 0.3))  # overridden again
    assert torch.equal(
        saver.training_obs_normalizer.state_dict()["_mean"],
        state["model_state_dict"]["actor_obs_normalizer._mean"],
    )
    assert saver.current_teacher_act_prob == pytest.approx(0.9**2)
    saver.close()


def test_dagger_with_empty_log_directory_and_logging(tmp_path, capsys):
    logdir = str(tmp_path / "fresh")
    runner = OnPolicyRunner(
        make_env("velocity_tracking", num_envs=4, seed=1), copy.deepcopy(STUDENT_CFG), log_dir=logdir
    )
    runner.init_writer(init_at_random_ep_len=False)  # training has started (config.json), no model saved yet
    assert not [f for f in os.listdir(logdir) if f.startswith("model_")]
    env = _env(n=4)
    save_dir = str(tmp_path / "dagger_run_1")
    saver = _dagger(env, save_dir, logdir, "exp", log_to_tensorboard=True)
    saver.init_traj_handlers()
    saver.print_log()  # no episode yet: nothing to aggregate, no error
    saver.collect_and_save()
    out = capsys.readouterr().out
    assert "no model_<it>.pt" in out and out.count("no model_<it>.pt") == 1
    assert saver.training_policy_iteration == 0 and saver.loaded_checkpoint is None
    assert saver.use_teacher_act_mask.all()  # "exp" schedule: probability 1 at iteration 0
    obs, _, rec = env.sequences()
    assert torch.equal(rec["actions"], env.expert_action(obs))
    tb_dir = os.path.join(logdir, "collector_dagger_run")
    assert os.path.isdir(tb_dir) and any(f.startswith("events.out.tfevents") for f in os.listdir(tb_dir))
    assert saver.collector_iteration == 2  # one round + the manual print_log

    with pytest.raises(FileNotFoundError, match="config.json"):
        _dagger(_env(n=4), str(tmp_path / "x"), str(tmp_path / "nothing"), 0.5).init_traj_handlers()


# ---------------------------------------------------------------------------------------------- reference form
REFERENCE_KEYS = {
    "observations",
    "privileged_observations",
    "actions",
    "rewards",
    "dones",
    "timeouts",
    "values",
}


def _pickle_files(save_dir):
    return sorted(
        os.path.join(root, f) for root, _, files in os.walk(save_dir) for f in files if f.startswith("traj_")
    )


def test_pickle_file_format_writes_the_reference_files(tmp_path):
    import pickle

    def record(file_format):
        env = _env(n=4, seed=3)
        save_dir = str(tmp_path / file_format)
        DemonstrationSaver(
            env, Expert(env), save_dir, rollout_storage_length=8, min_timesteps=64, min_episodes=4,
            file_format=file_format,
        ).collect_and_save()  # fmt: skip
        return save_dir

    npz_dir, pickle_dir = record("npz"), record("pickle")
    files = _pickle_files(pickle_dir)
    assert files and all(f.endswith(".pickle") for f in files)
    assert all(os.path.basename(os.path.dirname(f)).startswith("trajectory_") for f in files)
    for path in files:
        with open(path, "rb") as f:
            data = pickle.load(f)  # what a reference tool does
        assert isinstance(data, dict) and set(data) == REFERENCE_KEYS, path
        assert all(isinstance(v, np.ndarray) for v in data.values())
        assert len({v.shape[0] for v in data.values()}) == 1  # one row per frame
    assert _meta(pickle_dir)["file_format"] == "pickle" and _meta(npz_dir)["file_format"] == "npz"
    # same recording, same arrays, whichever the form
    npz, pkl = _trajectories(npz_dir), _trajectories(pickle_dir)
    assert set(npz) == set(pkl)
    for name in npz:
        assert set(npz[name]) == set(pkl[name])
        for key, value in npz[name].items():
            assert pkl[name][key].dtype == value.dtype and np.array_equal(pkl[name][key], value), (name, key)

    def served(save_dir):  # every transition the dataset serves (order aside: it follows modification times)
        return sorted(
            tuple(torch.cat([b.observation[0], b.privileged_observation[0], b.action[0], b.reward]).tolist())
            for b in RolloutDataset(save_dir, num_envs=1, device="cpu")
        )

    assert served(pickle_dir) == served(npz_dir) and len(served(npz_dir)) == _frames_on_disk(npz_dir) - 1


def test_file_format_is_checked_and_reaches_dagger(tmp_path, student_logdir):
    env = _env(n=4)
    with pytest.raises(ValueError, match="file_format.*'npz', 'pickle'.*'hdf5'"):
        DemonstrationSaver(env, Expert(env), str(tmp_path / "x"), file_format="hdf5")
    logdir, _ = student_logdir
    save_dir = str(tmp_path / "dagger")
    _dagger(_env(n=4, seed=5), save_dir, logdir, 0.5, file_format="pickle").collect_and_save()
    files = _pickle_files(save_dir)
    assert files and all(f.endswith(".pickle") for f in files)
    assert _meta(save_dir)["file_format"] == "pickle"
