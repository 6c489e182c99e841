"""Multi-skill Mutex policies assembled from sub-policies trained here by ``OnPolicyRunner``.

The environment (:class:`SkillVelocityTracking`) is ``VelocityTracking`` with an action scale applied by the env,
scaled command observations (``obs_scales.lin_vel``) and two selection components: ``skill`` (one-hot of the
trained skill) and ``engaging_block`` ``[engaged, one-hot obstacle type (4), obstacle height]``. Skill 0 and
skill 1 are trained in separate runs with different action scales (and seeds); one of them with empirical
normalisation, plus a recurrent (GRU) run.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import warnings
from collections import OrderedDict

import pytest
import torch

from st_rl.modules.actor_critic_mutex import (
    ActorCriticClimbMutex,
    ActorCriticFieldMutex,
    ActorCriticMutex,
    load_sub_policy,
    normalize_cmd_vel_mapping,
)
from st_rl.modules.factory import build_actor_critic
from st_rl.runners import OnPolicyRunner
from st_rl.tasks.velocity_tracking import VelocityTracking
from st_rl.utils.utils import latest_checkpoint, read_run_config, write_run_config

NUM_ENVS = 8
SEGMENTS = OrderedDict(
    [
        ("base_lin_vel", (2,)),
        ("commands", (2,)),
        ("last_actions", (2,)),
        ("skill", (2,)),
        ("engaging_block", (6,)),
    ]
)
NUM_OBS = 14
NUM_CRITIC_OBS = 8
CMD_SCALE = 2.0
SCALE_A, SCALE_B, SCALE_R = 0.5, 0.25, 0.4
ENV_SCALE = 0.5
CMD_COL = 2  # commands[0] in the flat observation
LAST = slice(4, 6)  # last_actions
SKILL = slice(6, 8)
EB = slice(8, 14)  # engaging_block


class SkillVelocityTracking(VelocityTracking):
    """VelocityTracking whose env applies ``action_scale`` and reports skill / obstacle components."""

    DEFAULT_CFG = {
        **VelocityTracking.DEFAULT_CFG,
        "action_scale": 0.5,
        "skill": 0,
        "obs_scales": {"lin_vel": 2.0},
    }

    def __init__(self, num_envs: int = NUM_ENVS, seed: int = 0, **cfg) -> None:
        super().__init__(num_envs=num_envs, device="cpu", seed=seed, episode_length_s=1.0, **cfg)
        self.obs_segments = copy.deepcopy(SEGMENTS)
        self.num_obs = NUM_OBS

    def _physics_step(self, actions: torch.Tensor) -> None:
        super()._physics_step(actions * float(self.cfg["action_scale"]))
        self.last_actions = actions  # the observation reports the policy's action, as legged_gym does

    def _compute_observations(self) -> None:
        super()._compute_observations()
        n, skill = self.num_envs, int(self.cfg["skill"])
        obs = self.obs_buf.clone()
        obs[:, 2:4] = obs[:, 2:4] * float(self.cfg["obs_scales"]["lin_vel"])
        onehot = torch.zeros(n, 2)
        onehot[:, skill] = 1.0
        block = torch.zeros(n, 6)
        block[:, 0] = float(skill > 0)
        block[:, 1 + skill] = 1.0
        block[:, 5] = 0.3 * skill
        self.obs_buf = torch.cat([obs, onehot, block], dim=1)


def make_cfg(seed: int, normalize: bool, policy: dict | None = None) -> dict:
    return {
        "seed": seed,
        "num_steps_per_env": 8,
        "save_interval": 1000,
        "empirical_normalization": normalize,
        "logger": "none",
        "policy": policy
        or {
            "class_name": "ActorCritic",
            "actor_hidden_dims": [16, 16],
            "critic_hidden_dims": [16],
            "activation": "elu",
            "init_noise_std": 0.5,
        },
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": 1,
            "num_mini_batches": 2,
            "learning_rate": 1e-3,
            "schedule": "fixed",
        },
    }


GRU_POLICY = {
    "class_name": "ActorCriticRecurrent",
    "actor_hidden_dims": [16],
    "critic_hidden_dims": [16],
    "activation": "elu",
    "init_noise_std": 0.5,
    "rnn_type": "gru",
    "rnn_hidden_size": 8,
}

RUNS = {
    # name: (skill, env action scale, seed, empirical normalisation, policy config)
    "A": (0, SCALE_A, 1, True, None),
    "B": (1, SCALE_B, 2, False, None),
    "R": (1, SCALE_R, 3, True, GRU_POLICY),
}


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """Train the sub-policies (2 tiny iterations each) into their own log directories."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("skills")
    out = {}
    for name, (skill, scale, seed, normalize, policy) in RUNS.items():
        env = SkillVelocityTracking(seed=seed, skill=skill, action_scale=scale)
        run_dir = str(root / name)
        OnPolicyRunner(env, make_cfg(seed, normalize, copy.deepcopy(policy)), log_dir=run_dir).learn(2)
        out[name] = run_dir
    return out


def independent_policy(run_dir: str, name: str):
    """The sub-policy loaded through the runner (its own normaliser inside): raw observations in."""
    skill, scale, seed, normalize, policy = RUNS[name]
    env = SkillVelocityTracking(seed=seed, skill=skill, action_scale=scale)
    runner = OnPolicyRunner(env, make_cfg(seed, normalize, copy.deepcopy(policy)))
    runner.load(latest_checkpoint(run_dir), load_optimizer=False)
    return runner.get_inference_policy()


def raw_obs(seed: int = 5, skill: int = 0) -> torch.Tensor:
    env = SkillVelocityTracking(seed=seed, skill=skill)
    for _ in range(3):
        env.step(torch.rand(NUM_ENVS, 2, generator=torch.Generator().manual_seed(seed)) * 2 - 1)
    obs, _ = env.get_observations()
    return obs.clone()


def with_skill(obs: torch.Tensor, skills: list[int]) -> torch.Tensor:
    obs = obs.clone()
    obs[:, SKILL] = 0.0
    obs[torch.arange(len(skills)), SKILL.start + torch.tensor(skills)] = 1.0
    return obs


def with_block(
    obs: torch.Tensor, types: list[int | None], heights: list[float] | None = None
) -> torch.Tensor:
    """engaging_block rows: obstacle type t sets one-hot column 1 + t (None: no obstacle)."""
    obs = obs.clone()
    obs[:, EB] = 0.0
    for row, t in enumerate(types):
        if t is not None:
            obs[row, EB.start] = 1.0
            obs[row, EB.start + 1 + t] = 1.0
        if heights is not None:
            obs[row, EB.stop - 1] = heights[row]
    return obs


def mutex_kwargs(paths: list[str], **kw) -> dict:
    return dict(
        num_actor_obs=NUM_OBS,
        num_critic_obs=NUM_CRITIC_OBS,
        num_actions=2,
        sub_policy_paths=paths,
        obs_segments=SEGMENTS,
        env_action_scale=ENV_SCALE,
        **kw,
    )


def field_obs_for(obs: torch.Tensor, sub_scale: float, cmd: float | torch.Tensor | None) -> torch.Tensor:
    """What a field-mutex sub-policy sees: last action back in its own units, command overridden."""
    out = obs.clone()
    out[:, LAST] = obs[:, LAST] * ENV_SCALE / sub_scale
    if cmd is not None:
        out[:, CMD_COL] = cmd * CMD_SCALE
    return out


# ---------------------------------------------------------------------------- base Mutex
def test_runs_wrote_what_the_mutex_reads(runs):
    cfg_a, cfg_b = read_run_config(runs["A"]), read_run_config(runs["B"])
    assert cfg_a["env"]["action_scale"] == SCALE_A and cfg_b["env"]["action_scale"] == SCALE_B
    assert cfg_a["env"]["obs_scales"]["lin_vel"] == CMD_SCALE
    model_a = torch.load(latest_checkpoint(runs["A"]), weights_only=True)["model_state_dict"]
    model_b = torch.load(latest_checkpoint(runs["B"]), weights_only=True)["model_state_dict"]
    assert "actor_obs_normalizer._mean" in model_a  # A normalises (inside its policy), B does not
    assert not any(k.startswith("actor_obs_normalizer") for k in model_b)


def test_mutex_selects_per_env_and_matches_each_sub_policy(runs):
    mutex = ActorCriticMutex(**mutex_kwargs([runs["A"], runs["B"]], skill_selection_component="skill"))
    pol_a, pol_b = independent_policy(runs["A"], "A"), independent_policy(runs["B"], "B")
    assert (
        float(mutex.subpolicy_action_scale_0) == SCALE_A and float(mutex.subpolicy_action_scale_1) == SCALE_B
    )
    assert float(mutex.env_action_scale) == ENV_SCALE
    assert not mutex.is_recurrent and mutex.rnn_type is None
    # A's normaliser was loaded (inside its policy) and differs from identity
    assert not torch.allclose(mutex.submodules[0].actor_obs_normalizer._mean, torch.zeros(1, NUM_OBS))

    obs = with_skill(raw_obs(), [0, 0, 0, 0, 1, 1, 1, 1])
    with torch.no_grad():
        exp_a = pol_a(obs) * SCALE_A / ENV_SCALE
        exp_b = pol_b(obs) * SCALE_B / ENV_SCALE
    actions = mutex.act_inference(obs)
    torch.testing.assert_close(actions[:4], exp_a[:4], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(actions[4:], exp_b[4:], rtol=1e-6, atol=1e-6)
    assert (exp_a - exp_b).abs().min() > 1e-4  # the two skills really differ
    assert not actions.requires_grad

    # switching the selecting observation switches the skill, env by env
    flipped = with_skill(obs, [1, 1, 1, 1, 0, 0, 0, 0])
    actions2 = mutex.act_inference(flipped)
    with torch.no_grad():
        torch.testing.assert_close(
            actions2[:4], (pol_b(flipped) * SCALE_B / ENV_SCALE)[:4], rtol=1e-6, atol=1e-6
        )
        torch.testing.assert_close(
            actions2[4:], (pol_a(flipped) * SCALE_A / ENV_SCALE)[4:], rtol=1e-6, atol=1e-6
        )
    # the statistics stay frozen even in train mode (policies never update them while acting)
    mean_before = mutex.submodules[0].actor_obs_normalizer._mean.clone()
    mutex.train()
    mutex.act_inference(obs * 3.0)
    assert torch.equal(mutex.submodules[0].actor_obs_normalizer._mean, mean_before)


def test_index_valued_selection_component(runs):
    # the same 14 columns, with the skill read as an index from a one-column component
    segments = OrderedDict(
        [
            ("base_lin_vel", (2,)),
            ("commands", (2,)),
            ("last_actions", (2,)),
            ("skill_0", (1,)),
            ("skill_index", (1,)),
            ("engaging_block", (6,)),
        ]
    )
    kw = mutex_kwargs([runs["A"], runs["B"]], skill_selection_component="skill_index")
    kw["obs_segments"] = segments
    mutex = ActorCriticMutex(**kw)
    obs = raw_obs()
    obs[:, 7] = torch.tensor([0.0, 1.0, 0.2, 0.8, -3.0, 5.0, 1.0, 0.0])  # rounded and clamped
    sel = mutex.get_policy_selection(obs)
    assert sel.tolist() == [[r == 0, r == 1] for r in [0, 1, 0, 1, 0, 1, 1, 0]]
    pol_a, pol_b = independent_policy(runs["A"], "A"), independent_policy(runs["B"], "B")
    with torch.no_grad():
        expected = torch.where(sel[:, 1:], pol_b(obs) * SCALE_B / ENV_SCALE, pol_a(obs) * SCALE_A / ENV_SCALE)
    torch.testing.assert_close(mutex.act_inference(obs), expected, rtol=1e-6, atol=1e-6)


def test_stochastic_act_and_action_mean(runs):
    mutex = ActorCriticMutex(**mutex_kwargs([runs["A"], runs["B"]], skill_selection_component="skill"))
    obs = with_skill(raw_obs(), [0, 1] * 4)
    deterministic = mutex.act_inference(obs)
    torch.manual_seed(0)
    sampled = mutex.act(obs)
    torch.testing.assert_close(mutex.action_mean, deterministic)
    assert sampled.shape == (NUM_ENVS, 2) and (sampled - deterministic).abs().max() > 1e-3
    with pytest.raises(NotImplementedError, match="rollout mode"):
        mutex.act(obs, masks=torch.ones(1, NUM_ENVS, dtype=torch.bool), hidden_states=object())
    with pytest.raises(NotImplementedError, match="no critic"):
        mutex.evaluate(torch.zeros(NUM_ENVS, NUM_CRITIC_OBS))


def test_per_action_env_scale_and_legged_gym_config(runs, tmp_path):
    # a legged_gym-form run dir: policy without class_name, control.action_scale, normalization.obs_scales
    lg_dir = tmp_path / "lg"
    lg_dir.mkdir()
    cfg = read_run_config(runs["B"])
    policy = {k: v for k, v in cfg["policy"].items() if k != "class_name"}
    write_run_config(
        str(lg_dir),
        {
            "runner": {"policy_class_name": "ActorCritic"},
            "policy": policy,
            "control": {"action_scale": [0.3, 0.6]},
            "normalization": {"obs_scales": {"lin_vel": 3.0}},
        },
    )
    shutil.copy(latest_checkpoint(runs["B"]), lg_dir / "model_7.pt")
    kw = mutex_kwargs([runs["A"], str(lg_dir)], cmd_vel_mapping={1: 0.5})
    kw["env_action_scale"] = [0.5, 0.2]
    mutex = ActorCriticFieldMutex(**kw)
    assert mutex.subpolicy_action_scale_1.tolist() == pytest.approx([0.3, 0.6])
    assert mutex.env_action_scale.tolist() == pytest.approx([0.5, 0.2])
    assert mutex.cmd_scales.tolist() == [CMD_SCALE, 3.0]
    torch.testing.assert_close(mutex.action_scale_ratios(), torch.tensor([[1.0, 2.5], [0.6, 3.0]]))
    obs = with_block(raw_obs(), [1] * NUM_ENVS)
    pol_b = independent_policy(runs["B"], "B")
    seen = obs.clone()
    seen[:, LAST] = obs[:, LAST] * torch.tensor([0.5, 0.2]) / torch.tensor([0.3, 0.6])
    seen[:, CMD_COL] = 0.5 * 3.0
    with torch.no_grad():
        expected = pol_b(seen) * torch.tensor([0.6, 3.0])
    torch.testing.assert_close(mutex.act_inference(obs), expected, rtol=1e-5, atol=1e-6)


def test_missing_action_scale_uses_env_action_scale_or_raises(runs, tmp_path):
    d = tmp_path / "noscale"
    d.mkdir()
    cfg = read_run_config(runs["B"])
    write_run_config(str(d), {"policy": cfg["policy"]})
    shutil.copy(latest_checkpoint(runs["B"]), d / "model_3.pt")
    kw = mutex_kwargs([str(d)])
    kw.pop("env_action_scale")
    with pytest.raises(ValueError, match="no action scale.*Set env_action_scale"):
        ActorCriticMutex(**kw)
    mutex = ActorCriticMutex(**mutex_kwargs([str(d)]))  # never 1.0: the Mutex's env_action_scale
    assert float(mutex.subpolicy_action_scale_0) == ENV_SCALE
    obs = raw_obs()
    with torch.no_grad():
        expected = independent_policy(runs["B"], "B")(obs)
    torch.testing.assert_close(mutex.act_inference(obs), expected, rtol=1e-6, atol=1e-6)  # single skill


def test_field_mutex_defaults_follow_the_layout(runs):
    # the layout names commands / last_actions: those are used (column 0 of commands)
    mutex = ActorCriticFieldMutex(**mutex_kwargs([runs["A"], runs["B"]], cmd_vel_mapping={1: 0.5}))
    assert (mutex.command_component, mutex.command_column, mutex.last_action_component) == (
        "commands",
        0,
        "last_actions",
    )
    assert mutex._cmd_index == CMD_COL and mutex._last_action_slice == LAST
    # the reference's layout: one "proprioception" component, command at column 9, last action at the end
    segments = OrderedDict([("proprioception", (8,)), ("engaging_block", (6,))])
    kw = mutex_kwargs([runs["A"], runs["B"]])
    kw["obs_segments"] = segments
    mutex = ActorCriticFieldMutex(**kw)
    assert (mutex.command_component, mutex.command_column) == ("proprioception", 9)
    assert mutex.last_action_component == "proprioception" and mutex._last_action_slice == slice(6, 8)
    with pytest.raises(ValueError, match="command_column 9 is outside 'proprioception'"):
        ActorCriticFieldMutex(**kw, cmd_vel_mapping={1: 0.5})
    # neither: no last-action rescaling
    kw["obs_segments"] = OrderedDict([("state", (8,)), ("engaging_block", (6,))])
    assert ActorCriticFieldMutex(**kw).last_action_component is None


def test_built_through_the_factory_from_a_class_path(runs):
    env = SkillVelocityTracking()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mutex = build_actor_critic(
            env,
            "st_rl.modules.actor_critic_mutex:ActorCriticMutex",
            {
                "sub_policy_paths": [runs["A"], runs["B"]],
                "skill_selection_component": "skill",
                "env_action_scale": ENV_SCALE,
                "class_name": "x",
                "rnn_type": None,
            },
        )
    assert isinstance(mutex, ActorCriticMutex) and mutex.obs_segments == SEGMENTS
    assert mutex.num_critic_obs == NUM_CRITIC_OBS
    with pytest.warns(UserWarning, match="unknown arguments: \\['actor_hidden_dims'\\]"):
        ActorCriticMutex(**mutex_kwargs([runs["A"]]), actor_hidden_dims=[8])


# ---------------------------------------------------------------------------- errors
def test_errors_are_clear(runs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="No config.json"):
        ActorCriticMutex(**mutex_kwargs([runs["A"], str(empty)]))
    write_run_config(str(empty), read_run_config(runs["A"]))
    with pytest.raises(FileNotFoundError, match="No checkpoint model_<it>.pt"):
        ActorCriticMutex(**mutex_kwargs([str(empty)]))
    with pytest.raises(FileNotFoundError, match="not a directory"):
        ActorCriticMutex(**mutex_kwargs([str(tmp_path / "nowhere")]))
    with pytest.raises(ValueError, match="at least one"):
        ActorCriticMutex(**mutex_kwargs([]))
    with pytest.raises(ValueError, match="component 'gait' is not in the observation layout"):
        ActorCriticMutex(**mutex_kwargs([runs["A"]], skill_selection_component="gait"))
    with pytest.raises(ValueError, match="component 'blocks' is not in the observation layout"):
        ActorCriticFieldMutex(**mutex_kwargs([runs["A"]], selection_component="blocks"))
    with pytest.raises(ValueError, match="has 6 columns; it must hold the skill index"):
        ActorCriticMutex(**mutex_kwargs([runs["A"], runs["B"]], skill_selection_component="engaging_block"))
    with pytest.raises(ValueError, match="needs skill_selection_component"):
        ActorCriticMutex(**mutex_kwargs([runs["A"], runs["B"]])).act_inference(raw_obs())
    # dims that do not fit the checkpoints
    kw = mutex_kwargs([runs["A"]])
    kw.update(num_actor_obs=13, obs_segments=None)
    with pytest.raises(
        ValueError, match=r"does not fit .*num_actor_obs=13.*actor\.0\.weight: checkpoint \(16, 14\)"
    ):
        ActorCriticMutex(**kw)
    kw = mutex_kwargs([runs["A"]])
    kw["num_actions"] = 3
    with pytest.raises(ValueError, match=r"does not fit .*num_actions=3"):
        ActorCriticMutex(**kw)
    kw = mutex_kwargs([runs["A"]])
    kw["obs_segments"] = OrderedDict([("all", (13,))])
    with pytest.raises(ValueError, match="take 13 columns, expected 14"):
        ActorCriticMutex(**kw)
    with pytest.raises(ValueError, match="reset_non_selected"):
        ActorCriticFieldMutex(**mutex_kwargs([runs["A"]], reset_non_selected="sometimes"))
    with pytest.raises(ValueError, match="not a sub-policy index"):
        ActorCriticFieldMutex(**mutex_kwargs([runs["A"]], cmd_vel_mapping={2: 1.0}))


def test_load_sub_policy_rejects_a_config_trained_on_other_dims(runs, tmp_path):
    d = tmp_path / "other"
    d.mkdir()
    cfg = read_run_config(runs["A"])
    cfg["policy"]["num_actor_obs"] = 20
    write_run_config(str(d), cfg)
    shutil.copy(latest_checkpoint(runs["A"]), d / "model_2.pt")
    with pytest.raises(ValueError, match="trained with num_actor_obs=20, but the Mutex has num_actor_obs=14"):
        load_sub_policy(str(d), NUM_OBS, NUM_CRITIC_OBS, 2)


# ---------------------------------------------------------------------------- field Mutex
def test_field_mutex_selection_override_and_last_action_recovery(runs):
    mutex = ActorCriticFieldMutex(**mutex_kwargs([runs["A"], runs["B"]], cmd_vel_mapping={1: 0.7}))
    assert mutex.cmd_scales.tolist() == [CMD_SCALE, CMD_SCALE]
    obs = with_block(raw_obs(), [None, 0, 1, 1, None, 1, 0, None])
    sel = mutex.get_policy_selection(obs)
    assert sel.tolist() == [[t != 1, t == 1] for t in [0, 0, 1, 1, 0, 1, 0, 0]]

    # command override: the mapped skill sees 0.7 * cmd scale in commands[0], nothing else changes
    over = mutex.override_cmd_vel(obs, 1)
    assert torch.equal(over[:, CMD_COL], torch.full((NUM_ENVS,), 0.7 * CMD_SCALE))
    others = [c for c in range(NUM_OBS) if c != CMD_COL]
    assert torch.equal(over[:, others], obs[:, others])
    assert torch.equal(mutex.override_cmd_vel(obs, 0), obs)  # skill 0 is not mapped
    # last action rescaled into each skill's units
    torch.testing.assert_close(mutex.recover_last_action(obs, 1)[:, LAST], obs[:, LAST] * ENV_SCALE / SCALE_B)
    torch.testing.assert_close(mutex.recover_last_action(obs, 0), obs)  # same scale

    pol_a, pol_b = independent_policy(runs["A"], "A"), independent_policy(runs["B"], "B")
    with torch.no_grad():
        exp_a = pol_a(field_obs_for(obs, SCALE_A, None)) * SCALE_A / ENV_SCALE
        exp_b = pol_b(field_obs_for(obs, SCALE_B, 0.7)) * SCALE_B / ENV_SCALE
    expected = torch.where(sel[:, 1:], exp_b, exp_a)
    torch.testing.assert_close(mutex.act_inference(obs), expected, rtol=1e-6, atol=1e-6)


def test_command_ranges_are_sampled_per_env_and_resampled_on_reset(runs):
    torch.manual_seed(0)
    mutex = ActorCriticFieldMutex(
        **mutex_kwargs([runs["A"], runs["B"]], cmd_vel_mapping={0: 0.4, 1: (0.2, 0.6)})
    )
    obs = with_block(raw_obs(), [1] * NUM_ENVS)
    mutex.act_inference(obs)
    cur = mutex.cmd_vel_current.clone()
    assert cur.shape == (2, NUM_ENVS)
    assert torch.equal(cur[0], torch.full((NUM_ENVS,), 0.4))
    assert ((cur[1] >= 0.2) & (cur[1] <= 0.6)).all() and cur[1].std() > 0.01
    # the override uses each env's own value
    torch.testing.assert_close(mutex.override_cmd_vel(obs, 1)[:, CMD_COL], cur[1] * CMD_SCALE)
    dones = torch.tensor([True, False] * 4)
    mutex.reset(dones)
    new = mutex.cmd_vel_current
    assert torch.equal(new[:, ~dones], cur[:, ~dones])
    assert (new[1, dones] != cur[1, dones]).all() and ((new[1] >= 0.2) & (new[1] <= 0.6)).all()
    assert torch.equal(new[0], cur[0])
    mutex.reset()
    assert (mutex.cmd_vel_current[1] != new[1]).all()


def test_json_cmd_vel_mapping_is_normalised(runs):
    loaded = json.loads(json.dumps({1: [0.2, 0.6], 0: 0.5, 2: None}))
    assert loaded == {"1": [0.2, 0.6], "0": 0.5, "2": None}
    assert normalize_cmd_vel_mapping(loaded) == {0: 0.5, 1: (0.2, 0.6)}
    assert normalize_cmd_vel_mapping({"3": 1}, 4) == {3: 1.0}
    mutex = ActorCriticFieldMutex(**mutex_kwargs([runs["A"], runs["B"]], cmd_vel_mapping={"1": [0.2, 0.6]}))
    assert mutex.cmd_vel_mapping == {1: (0.2, 0.6)}
    mutex.act_inference(with_block(raw_obs(), [1] * NUM_ENVS))
    values = mutex.cmd_vel_current[1]
    assert ((values >= 0.2) & (values <= 0.6)).all() and values.std() > 0.01  # a range, not a fixed list
    for bad, match in [
        ({"walk": 1.0}, "indices"),
        ({1: [0.1, 0.2, 0.3]}, "low, high"),
        ({1: [0.5, 0.1]}, "low > high"),
        ({1: "fast"}, "number"),
        ({1.5: 1.0}, "indices"),
    ]:
        with pytest.raises(ValueError, match=match):
            normalize_cmd_vel_mapping(bad)


def test_smoothing_buffer_blends_across_a_switch(runs):
    mutex = ActorCriticFieldMutex(**mutex_kwargs([runs["A"], runs["B"]], action_smoothing_buffer_len=3))
    pol_a, pol_b = independent_policy(runs["A"], "A"), independent_policy(runs["B"], "B")
    obs0 = with_block(raw_obs(), [None] * NUM_ENVS)
    obs1 = with_block(obs0, [None] * 4 + [1] * 4)  # envs 4..7 switch to skill 1
    with torch.no_grad():
        a = pol_a(field_obs_for(obs1, SCALE_A, None)) * SCALE_A / ENV_SCALE
        b = pol_b(field_obs_for(obs1, SCALE_B, None)) * SCALE_B / ENV_SCALE
    mutex.act_inference(obs0)
    assert mutex.action_smoothing_buffer.shape == (3, NUM_ENVS, 2)
    for w_b in (1 / 3, 2 / 3, 1.0, 1.0):
        out = mutex.act_inference(obs1)
        torch.testing.assert_close(out[:4], a[:4], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(out[4:], ((1 - w_b) * a + w_b * b)[4:], rtol=1e-5, atol=1e-6)
    # a finished env restarts its buffer with its next selection (no blending with the old episode)
    mutex.reset(torch.tensor([False] * 7 + [True]))
    out = mutex.act_inference(obs0)
    with torch.no_grad():
        a0 = pol_a(field_obs_for(obs0, SCALE_A, None)) * SCALE_A / ENV_SCALE
        b0 = pol_b(field_obs_for(obs0, SCALE_B, None)) * SCALE_B / ENV_SCALE
    torch.testing.assert_close(out[7], a0[7], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out[4], (2 / 3 * b0 + 1 / 3 * a0)[4], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- recurrent sub-policies
def _hidden(mutex, i: int) -> torch.Tensor:
    return mutex.submodules[i].memory_a.hidden_states[0]  # (N, H) of the GRU's single layer


def test_recurrent_sub_policy_matches_and_reset_fans_out(runs):
    mutex = ActorCriticMutex(**mutex_kwargs([runs["A"], runs["R"]], skill_selection_component="skill"))
    assert mutex.is_recurrent and mutex.rnn_type == "gru"
    pol_r = independent_policy(runs["R"], "R")
    skills = [1, 1, 1, 1, 0, 0, 1, 1]
    dones = torch.tensor([True, False, False, True, False, False, False, False])
    for step in range(4):
        obs = with_skill(raw_obs(seed=10 + step), skills)
        with torch.no_grad():
            expected = pol_r(obs) * SCALE_R / ENV_SCALE
        out = mutex.act_inference(obs)
        rows = torch.tensor(skills).bool()
        torch.testing.assert_close(out[rows], expected[rows], rtol=1e-5, atol=1e-6)
        if step == 1:
            assert (_hidden(mutex, 1).abs().sum(-1) > 0).all()
            mutex.reset(dones)
            pol_r.reset(dones)
            h = _hidden(mutex, 1)
            assert (h[dones] == 0).all() and (h[~dones].abs().sum(-1) > 0).all()
    mutex.reset()
    assert (_hidden(mutex, 1) == 0).all()


@pytest.mark.parametrize(
    "rule, reset_rows",
    [
        # envs 0,1,2 are in skills 0,1,2; rows: which envs each sub-policy forgets after one step
        ("all", [[False, True, True], [True, False, True], [True, True, False]]),
        (True, [[False, True, True], [True, False, True], [True, True, False]]),
        ("when_skill", [[False, False, False], [False, False, True], [False, True, False]]),
        (False, [[False, False, False], [False, False, False], [False, False, False]]),
    ],
)
def test_reset_non_selected_rules(runs, rule, reset_rows):
    r = runs["R"]
    kw = mutex_kwargs([r, r, r], reset_non_selected=rule)
    kw["obs_segments"] = OrderedDict(
        [("base_lin_vel", (2,)), ("commands", (2,)), ("last_actions", (2,)), ("engaging_block", (8,))]
    )
    mutex = ActorCriticFieldMutex(**kw)
    obs = raw_obs()[:3]
    obs[:, 6:] = 0.0
    obs[1, 6 + 1 + 1] = 1.0  # env 1: type 1
    obs[2, 6 + 1 + 2] = 1.0  # env 2: type 2 (env 0: nothing -> skill 0)
    assert mutex.get_policy_selection(obs).tolist() == [
        [True, False, False],
        [False, True, False],
        [False, False, True],
    ]
    mutex.act_inference(obs)
    for i in range(3):
        was_reset = (_hidden(mutex, i) == 0).all(dim=-1)
        assert was_reset.tolist() == reset_rows[i], f"sub-policy {i}"


# ---------------------------------------------------------------------------- climb Mutex
def test_climb_mutex_jump_down_column_and_commands(runs):
    a, b = runs["A"], runs["B"]
    mutex = ActorCriticClimbMutex(
        **mutex_kwargs(
            [a, b, a, b], jump_down_policy_path=a, cmd_vel_mapping={3: 0.9}, jump_down_vel=(0.1, 0.3)
        )
    )
    assert mutex.num_sub_policies == 5 and mutex.JUMP_OBSTACLE_ID == 3
    types = [None, 1, 3, 3, 3, 2, 0, 3]
    heights = [0.0, 0.0, 0.3, -0.3, 0.0, 0.0, 0.0, 1e-3]
    obs = with_block(raw_obs(), types, heights)
    sel = mutex.get_policy_selection(obs)
    chosen = sel.float().argmax(-1).tolist()
    assert chosen == [0, 1, 3, 4, 4, 2, 0, 3] and (sel.sum(-1) == 1).all()

    out = mutex.act_inference(obs)
    cur = mutex.cmd_vel_current
    assert torch.equal(cur[3], torch.full((NUM_ENVS,), 0.9))
    assert ((cur[4] >= 0.1) & (cur[4] <= 0.3)).all()
    pol_a, pol_b = independent_policy(a, "A"), independent_policy(b, "B")
    with torch.no_grad():
        # jump-down rows: policy A with the jump-down command; jump-up rows: policy B with 0.9
        down = pol_a(field_obs_for(obs, SCALE_A, cur[4])) * SCALE_A / ENV_SCALE
        up = pol_b(field_obs_for(obs, SCALE_B, 0.9)) * SCALE_B / ENV_SCALE
    torch.testing.assert_close(out[[3, 4]], down[[3, 4]], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out[[2, 7]], up[[2, 7]], rtol=1e-6, atol=1e-6)


def test_climb_mutex_jump_down_follows_jump_command_and_alias(runs):
    a, b = runs["A"], runs["B"]
    with pytest.warns(FutureWarning, match="climb_down_policy_path"):
        mutex = ActorCriticClimbMutex(
            **mutex_kwargs([a, b, a, b], climb_down_policy_path=b, cmd_vel_mapping={"3": [0.5, 1.0]})
        )
    assert mutex.sub_policy_paths[-1] == b
    mutex.act_inference(with_block(raw_obs(), [3] * NUM_ENVS, [-0.2] * NUM_ENVS))
    cur = mutex.cmd_vel_current
    assert cur[3].std() > 0.01 and torch.equal(cur[4], cur[3])
    mutex.reset(torch.tensor([True] * 4 + [False] * 4))
    assert torch.equal(mutex.cmd_vel_current[4], mutex.cmd_vel_current[3])
    assert (mutex.cmd_vel_current[3, :4] != cur[3, :4]).all()

    with pytest.raises(ValueError, match="needs jump_down_policy_path"):
        ActorCriticClimbMutex(**mutex_kwargs([a, b, a, b]))
    with pytest.raises(ValueError, match="different"):
        ActorCriticClimbMutex(**mutex_kwargs([a, b, a, b], jump_down_policy_path=a, climb_down_policy_path=b))
    with pytest.raises(ValueError, match="JUMP_OBSTACLE_ID=3"):
        ActorCriticClimbMutex(**mutex_kwargs([a, b], jump_down_policy_path=a))
    # the obstacle height must be a column of its own after the one-hot columns
    kw = mutex_kwargs([a, b, a, b, a], jump_down_policy_path=a)
    with pytest.raises(ValueError, match="has 6 columns"):
        ActorCriticClimbMutex(**kw)


def test_mutex_state_dict_round_trip(runs):
    kw = mutex_kwargs([runs["A"], runs["B"]], cmd_vel_mapping={1: 0.7})
    m1, m2 = ActorCriticFieldMutex(**kw), ActorCriticFieldMutex(**kw)
    sd = m1.state_dict()
    assert "subpolicy_action_scale_0" in sd and "cmd_scales" in sd
    assert "submodules.0.actor_obs_normalizer._mean" in sd
    for v in m2.parameters():
        torch.nn.init.zeros_(v)
    m2.load_state_dict(sd)
    obs = with_block(raw_obs(), [None, 1] * 4)
    torch.testing.assert_close(m2.act_inference(obs), m1.act_inference(obs))
    assert math.isfinite(float(m1.act_inference(obs).abs().sum()))
    assert os.path.isdir(runs["A"])


def test_field_mutex_on_a_legged_gym_style_proprioception_layout(runs):
    # the same 14 columns as one flat "proprioception" component: command and last action located by columns
    segments = OrderedDict([("proprioception", (6,)), ("skill", (2,)), ("engaging_block", (6,))])
    kw = mutex_kwargs([runs["A"], runs["B"]], cmd_vel_mapping={1: 0.7})
    kw.update(
        obs_segments=segments,
        command_component="proprioception",
        command_column=2,
        last_action_component="proprioception",
        last_action_columns=(-2, None),
    )
    mutex = ActorCriticFieldMutex(**kw)
    obs = with_block(raw_obs(), [None, 1] * 4)
    torch.testing.assert_close(mutex.sub_policy_observations(obs, 1), field_obs_for(obs, SCALE_B, 0.7))
    torch.testing.assert_close(mutex.sub_policy_observations(obs, 0), field_obs_for(obs, SCALE_A, None))
    kw.update(command_column=6)
    with pytest.raises(ValueError, match="command_column 6 is outside 'proprioception'"):
        ActorCriticFieldMutex(**kw)
