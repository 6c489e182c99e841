"""A config is resolved once: a resolved :class:`TrainConfig` passes through resolution again unchecked, as a
private copy, and a runner built from it trains."""

from __future__ import annotations

from unittest import mock

from st_rl.config import resolve as resolve_module
from st_rl.config.resolve import TrainConfig, resolve_train_cfg
from st_rl.runners import build_runner
from st_rl.tasks import make_env


def test_resolved_config_is_not_resolved_again(small_cfg):
    resolved = resolve_train_cfg(small_cfg)
    with mock.patch.object(resolve_module, "validate_runner", side_effect=AssertionError("resolved twice")):
        again = resolve_train_cfg(resolved)
    assert isinstance(again, TrainConfig) and again == resolved and again is not resolved
    again.policy["actor_hidden_dims"].append(1)
    assert resolved.policy["actor_hidden_dims"] == small_cfg["policy"]["actor_hidden_dims"]


def test_runner_takes_a_resolved_config(small_cfg):
    small_cfg["logger"] = "none"
    resolved = resolve_train_cfg(small_cfg)
    with mock.patch.object(resolve_module, "validate_runner", side_effect=AssertionError("resolved twice")):
        runner = build_runner("OnPolicyRunner", make_env("velocity_tracking", num_envs=8, seed=0), resolved)
    runner.learn(1)
    assert resolved.policy.get("num_actor_obs") is None  # the runner filled its own copy
