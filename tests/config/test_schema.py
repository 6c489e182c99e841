"""The config schema: built from the constructors (so it covers every key), documented from itself, and
what it changes in the algorithm (``max_grad_norm=None``)."""

from __future__ import annotations

import copy
import inspect
from pathlib import Path

import pytest
import torch

import st_rl.algorithms as algorithms
import st_rl.modules as modules
from st_rl.config import ConfigError
from st_rl.config.docs import render
from st_rl.config.schema import class_fields, schema_for
from st_rl.utils.config import resolve_train_cfg

ALGORITHMS = ["PPO", "APPO", "ATPPO", "TPPO", "EstimatorPPO", "EstimatorTPPO"]
POLICIES = sorted(
    name
    for name in modules.__all__
    if inspect.isclass(getattr(modules, name))
    and issubclass(getattr(modules, name), (modules.ActorCritic, modules.ActorCriticMutex))
)


def _own_params(cls: type) -> set[str]:
    params = inspect.signature(cls.__init__).parameters.values()
    return {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)} - {
        "self", "actor_critic", "device", "parts"
    }  # fmt: skip


@pytest.mark.parametrize("name", ALGORITHMS + POLICIES)
def test_schema_has_every_constructor_argument(name):
    cls = getattr(algorithms, name, None) or getattr(modules, name)
    fields, _, open_kwargs = class_fields(cls)
    assert _own_params(cls) <= set(fields)
    assert not open_kwargs, f"{name}: unknown keys could not be rejected"


def test_presets_take_their_extensions_keys():
    assert {"discriminator_loss_coef", "amp_replay_buffer_size"} <= set(class_fields(algorithms.APPO)[0])
    assert {"teacher_ac_path", "distillation_loss_coef", "ppo"} <= set(class_fields(algorithms.TPPO)[0])
    atppo = set(class_fields(algorithms.ATPPO)[0])
    assert {"teacher_ac_path", "discriminator_loss_coef"} <= atppo
    assert "estimator_loss_coef" in class_fields(algorithms.EstimatorTPPO)[0]
    assert "discriminator_loss_coef" not in class_fields(algorithms.PPO)[0]


def test_schema_is_strict():
    model = schema_for(algorithms.PPO)
    assert model(gamma=0.9, num_mini_batches=4, use_clipped_value_loss=False)
    for bad in ({"num_mini_batches": 2.0}, {"use_clipped_value_loss": "False"}, {"gamma": float("nan")},
                {"gama": 0.9}):  # fmt: skip
        with pytest.raises(Exception):  # noqa: B017 - pydantic's ValidationError
            model(**bad)


def test_error_names_path_value_rule_and_fix(small_cfg):
    small_cfg["algorithm"]["max_grad_norm"] = -1
    small_cfg["policy"]["actor_hidden_dims"] = [32, 0]
    original = copy.deepcopy(small_cfg)
    with pytest.raises(ConfigError) as err:
        resolve_train_cfg(small_cfg)
    assert small_cfg == original
    assert set(err.value.paths) == {"algorithm.max_grad_norm", "policy.actor_hidden_dims"}
    lines = str(err.value).splitlines()
    assert lines[0].startswith("Invalid training config: policy.actor_hidden_dims = [32, 0]: every entry")
    assert lines[1].strip().startswith("algorithm.max_grad_norm = -1: must be > 0")
    assert "Fix: typical: 1.0" in lines[1]


def test_resolved_config_resolves_to_itself(small_cfg):
    resolved = resolve_train_cfg(small_cfg).to_dict()
    again = resolve_train_cfg(resolved).to_dict()
    assert again == resolved
    assert resolved["algorithm"]["class_name"] == "PPO" and resolved["runner"]["num_steps_per_env"] == 16


def test_docs_schema_reference_is_current():
    doc = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    assert render() in doc, "docs/configuration.md is out of date: run `python -m st_rl.config.docs`"


def _update(max_grad_norm):
    torch.manual_seed(0)
    policy = modules.ActorCritic(4, 4, 2, [8], [8])
    alg = algorithms.PPO(policy, num_mini_batches=1, max_grad_norm=max_grad_norm, learning_rate=0.1)
    alg.init_storage(8, 4, [4], [None], [2])
    alg.train_mode()
    with torch.inference_mode():
        for _ in range(4):
            obs = torch.randn(8, 4)
            alg.act(obs, obs)
            alg.process_env_step(torch.randn(8) * 100, torch.zeros(8, dtype=torch.bool), {}, obs, obs)
        alg.compute_returns(obs)
    alg.update()
    return torch.cat([p.detach().flatten() for p in policy.parameters()])


def test_max_grad_norm_none_means_no_clipping():
    unclipped = _update(None)
    torch.testing.assert_close(unclipped, _update(1e12))
    assert not torch.allclose(unclipped, _update(0.01))
