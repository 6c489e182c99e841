"""The user-written extension of docs/architecture.md runs as printed: its loss trains with PPO."""

from __future__ import annotations

import copy
import os
import re

import pytest
import torch

from st_rl.runners import build_runner
from st_rl.tasks import make_env

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "architecture.md")


def _example_namespace() -> dict:
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## A user-written extension") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "the section lost its code block"
    namespace: dict = {}
    exec(compile(code.group(1), DOC, "exec"), namespace)
    return namespace


def test_documented_extension_trains_and_its_loss_is_weighted(small_cfg):
    ActionRate = _example_namespace()["ActionRate"]
    cfg = copy.deepcopy(small_cfg)
    cfg["logger"] = "none"
    runner = build_runner("OnPolicyRunner", make_env("velocity_tracking", num_envs=16, seed=0), cfg)
    with pytest.raises(RuntimeError, match="before init_storage"):  # fields are registered with the storage
        runner.alg.add_extension(ActionRate())
    cfg["algorithm"]["extensions"] = [ActionRate(action_rate_loss_coef=0.5)]
    runner = build_runner("OnPolicyRunner", make_env("velocity_tracking", num_envs=16, seed=0), cfg)
    assert runner.alg.storage.has_field("previous_actions")
    assert runner.alg.loss_weight("action_rate_loss") == 0.5
    seen = {}
    update = runner.alg.update

    def recording_update(*args):
        # previous_actions holds a_{t-1} of the same env (0 after a done), as the extension promises
        st = runner.alg.storage
        first = st.previous_actions[1:]
        expected = st.actions[:-1] * (1 - st.dones[:-1].float())
        seen["aligned"] = torch.allclose(first, expected)
        out = update(*args)
        seen["losses"] = out[0]
        return out

    runner.alg.update = recording_update
    runner.learn(2)
    assert seen["aligned"]
    assert seen["losses"]["action_rate_loss"] > 0.0
    # The total is PPO's weighted losses plus 0.5 x the extension's.
    losses, alg = seen["losses"], runner.alg
    total = sum(alg.loss_weight(k) * v for k, v in losses.items() if k != "total_loss")
    assert abs(losses["total_loss"] - total) < 1e-4 * max(1.0, abs(total))
