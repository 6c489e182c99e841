"""The reference documentation's code snippets, run verbatim against st_rl.

``tests/data/reference_snippets.json`` holds the snippets (``"<doc file>#<block index>"`` -> code, the
index counting the fenced blocks of the doc from 0); where the docs are present
(``/work/shared/reference/``) each is checked to still be there verbatim. Snippets that are fragments of a
method run with ``self`` bound to an st_rl object. Covered: the import blocks, ``GET_PROB_FUNC``, PPO's
``update`` loop, the estimator algorithm (mixin, attributes, loss body), ``ActorCriticRecurrent``'s
signature, the hidden-state namedarraytuples, the policy compositions (with a (1, nx, ny) height map), the
module utilities and the visual policy example. Not covered (they document the reference's internals, not
an API call of these items): PPO's other method bodies, APPO/TPPO internals, the Mutex, discriminator,
normaliser and runner internals.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import re
import textwrap
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import torch

SNIPPETS: dict[str, str] = json.loads(
    (Path(__file__).parent / "data" / "reference_snippets.json").read_text(encoding="utf-8")
)
REFERENCE_DIR = Path(os.environ.get("ST_RL_REFERENCE_DOCS", "/work/shared/reference"))


def snippet(key: str) -> str:
    """The snippet's code (leading and trailing blank space removed, as a fenced block shows it)."""
    return textwrap.dedent(SNIPPETS[key]).strip() + "\n"


def run(key: str, namespace: dict[str, Any]) -> dict[str, Any]:
    exec(compile(snippet(key), f"<reference {key}>", "exec"), namespace)
    return namespace


@pytest.mark.skipif(not REFERENCE_DIR.is_dir(), reason="reference docs not present")
@pytest.mark.parametrize("key", sorted(SNIPPETS))
def test_snippet_is_verbatim_from_the_docs(key):
    doc, _, index = key.partition("#")
    blocks = re.findall(r"``` ?\w*\n(.*?)```", (REFERENCE_DIR / doc).read_text(encoding="utf-8"), re.S)
    assert blocks[int(index)] == SNIPPETS[key]


# ---------------------------------------------------------------------------------------------- imports
@pytest.mark.parametrize(
    "key",
    ["000_2ced53c7a0d0c3f3.txt#0", "000_2ced53c7a0d0c3f3.txt#17", "000_2ced53c7a0d0c3f3.txt#37"],
)
def test_import_blocks_run(key):
    ns = run(key, {})
    from st_rl.utils.utils import unpad_trajectories

    if "unpad_trajectories" in ns:
        assert ns["unpad_trajectories"] is unpad_trajectories


def test_get_prob_func_snippet_matches_ours():
    from st_rl.algorithms.appo import GET_PROB_FUNC

    ns = run("000_2ced53c7a0d0c3f3.txt#16", {"torch": torch})
    for option in ("linear", "exp"):
        for x in (0, 3, 10, 50):
            assert GET_PROB_FUNC(option, 10)(x) == pytest.approx(ns["GET_PROB_FUNC"](option, 10)(x))
    # the reference's tanh calls torch.tanh on a float (a TypeError there); ours computes the documented curve
    assert GET_PROB_FUNC("tanh", 10)(10) == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------------- estimator
N, T = 6, 5
SEGMENTS: Any = OrderedDict(
    [("base_lin_vel", (3,)), ("dof_pos", (4,)), ("last_actions", (2,)), ("height_measurements", (1, 3, 4))]
)
CRITIC_SEGMENTS: Any = OrderedDict([*SEGMENTS.items(), ("friction", (1,))])
NUM_OBS = sum(math.prod(s) for s in SEGMENTS.values())
NUM_CRITIC = NUM_OBS + 1


def _estimator_policy(recurrent: bool) -> Any:
    from st_rl.modules import EncoderStateAc, EncoderStateAcRecurrent

    cls: Any = EncoderStateAcRecurrent if recurrent else EncoderStateAc
    extra: dict[str, Any] = {"rnn_type": "gru", "rnn_hidden_size": 8} if recurrent else {}
    return cls(
        NUM_OBS,
        NUM_CRITIC,
        2,
        [16],
        [16],
        obs_segments=SEGMENTS,
        privileged_obs_segments=CRITIC_SEGMENTS,
        encoder_component_names=["height_measurements"],
        encoder_kwargs={"hidden_sizes": [8]},
        encoder_output_size=4,
        estimator_obs_components=["dof_pos", "last_actions"],
        estimator_target_components=["base_lin_vel"],
        replace_state_prob=0.5,
        **extra,
    )


def _fill(alg: Any) -> None:
    alg.init_storage(N, T, [NUM_OBS], [NUM_CRITIC], [2])
    gen = torch.Generator().manual_seed(0)
    obs, critic = torch.randn(N, NUM_OBS, generator=gen), torch.randn(N, NUM_CRITIC, generator=gen)
    alg.train_mode()
    with torch.inference_mode():
        for step in range(T):
            alg.act(obs, critic)
            obs, critic = torch.randn(N, NUM_OBS, generator=gen), torch.randn(N, NUM_CRITIC, generator=gen)
            dones = torch.zeros(N, dtype=torch.bool)
            dones[step] = step == 2
            alg.process_env_step(torch.randn(N, generator=gen), dones, {}, obs, critic)
        alg.compute_returns(critic)


def _reference_estimator_ppo() -> type:
    """The reference's EstimatorAlgoMixin (class line, __init__) and ``EstimatorPPO`` over st_rl's PPO."""
    from st_rl.algorithms.ppo import PPO

    body = textwrap.indent(snippet("000_2ced53c7a0d0c3f3.txt#39"), "    ")
    ns: dict[str, Any] = {"PPO": PPO}
    exec(snippet("000_2ced53c7a0d0c3f3.txt#38") + body, ns)
    return run("000_2ced53c7a0d0c3f3.txt#45", ns)["EstimatorPPO"]


def test_reference_estimator_mixin_composes_with_our_ppo():
    cls = _reference_estimator_ppo()
    policy = _estimator_policy(recurrent=False)
    alg = cls(policy, num_mini_batches=2, estimator_loss_func="l1_loss")
    assert alg.estimator_obs_components == ["dof_pos", "last_actions"]
    assert alg.estimator_target_obs_components == ["base_lin_vel"]
    assert alg.estimator_loss_func == "l1_loss"


@pytest.mark.parametrize("recurrent", [False, True], ids=["mlp", "gru"])
def test_reference_estimator_loss_body_runs_on_our_estimator_ppo(recurrent):
    """compute_losses of the reference's EstimatorAlgoMixin, snippet by snippet, with ``self`` our EstimatorPPO."""
    import torch.nn.functional as F  # noqa: N812

    from st_rl.algorithms import EstimatorPPO
    from st_rl.utils.utils import get_subobs_by_components, unpad_trajectories

    torch.manual_seed(0)
    alg = EstimatorPPO(_estimator_policy(recurrent), num_mini_batches=2, estimator_loss_func="mse_loss")
    _fill(alg)
    assert alg.storage is not None
    generator = (
        alg.storage.reccurent_mini_batch_generator(2, 1)
        if recurrent
        else alg.storage.mini_batch_generator(2, 1)
    )
    minibatch = next(iter(generator))
    losses, inter_vars, stats = alg.compute_losses(minibatch)  # the policy ran on the minibatch
    pieces = ["000_2ced53c7a0d0c3f3.txt#41"]
    pieces += ["000_2ced53c7a0d0c3f3.txt#42"] if recurrent else []  # unpads the padded estimate
    body = "".join(snippet(k) for k in pieces)
    if not recurrent:
        body += "estimation = self.actor_critic.get_estimated_state()\n"
    body += snippet("000_2ced53c7a0d0c3f3.txt#43") + snippet("000_2ced53c7a0d0c3f3.txt#44")
    source = "def compute_losses_tail(self, minibatch, losses, inter_vars, stats):\n" + textwrap.indent(
        body, "    "
    )
    ns: dict[str, Any] = {
        "F": F,
        "get_subobs_by_components": get_subobs_by_components,
        "unpad_trajectories": unpad_trajectories,
    }
    exec(compile(source, "<reference EstimatorAlgoMixin.compute_losses>", "exec"), ns)
    ref_losses, _, _ = ns["compute_losses_tail"](alg, minibatch, dict(losses), inter_vars, stats)
    # the reference targets the raw critic observations; ours the critic-normalised ones (identity here)
    torch.testing.assert_close(ref_losses["estimator_loss"], losses["estimator_loss"])


@pytest.mark.parametrize("recurrent", [False, True], ids=["mlp", "gru"])
def test_reference_update_loop_runs_on_our_ppo(recurrent):
    """The reference's ``PPO.update`` (its results are tensors: custom runners call ``.item()``)."""
    from collections import defaultdict

    import torch.nn as nn

    from st_rl.algorithms import EstimatorPPO

    torch.manual_seed(0)
    alg = EstimatorPPO(_estimator_policy(recurrent), num_mini_batches=2, num_learning_epochs=2)
    _fill(alg)
    update = run("000_2ced53c7a0d0c3f3.txt#7", {"defaultdict": defaultdict, "nn": nn})["update"]
    mean_losses, _ = update(alg, 0)
    ours_fill = EstimatorPPO(_estimator_policy(recurrent), num_mini_batches=2, num_learning_epochs=2)
    _fill(ours_fill)
    our_losses, _ = ours_fill.update(0)
    assert set(our_losses) == set(mean_losses)
    for k, v in mean_losses.items():  # both are tensors; .item() is what reference runners call
        assert isinstance(v.item(), float) and isinstance(our_losses[k].item(), float)


# ---------------------------------------------------------------------------------------------- modules
def test_actor_critic_recurrent_signature_snippet():
    from st_rl.modules import ActorCriticRecurrent

    ns: dict[str, Any] = {}
    exec(snippet("002_7048e72fa8f1a842.txt#19") + "    pass\n", ns)
    reference = list(inspect.signature(ns["__init__"]).parameters.values())[1:]  # without self
    ours = list(inspect.signature(ActorCriticRecurrent).parameters.values())
    positional = [p for p in reference if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in ours[: len(positional)]] == [p.name for p in positional]
    for ref, our in zip(positional, ours):
        default = list(our.default) if isinstance(our.default, tuple) else our.default
        assert default == ref.default, ref.name
    assert ours[-1].kind is inspect.Parameter.VAR_KEYWORD


@pytest.mark.parametrize(
    "key", ["002_7048e72fa8f1a842.txt#27", "002_7048e72fa8f1a842.txt#48", "002_7048e72fa8f1a842.txt#51"]
)
def test_hidden_state_namedarraytuples(key):
    from st_rl.utils.collections import is_namedarraytuple, namedarraytuple

    ns = run(key, {"namedarraytuple": namedarraytuple})
    for name, cls in ns.items():
        if name.endswith("HiddenState"):
            state = cls(*[torch.zeros(1, 4, 2) for _ in cls._fields])
            assert is_namedarraytuple(state) and state[:, 1:].get(0).shape == (1, 3, 2)
            import st_rl.modules as modules

            if hasattr(modules, name):
                assert getattr(modules, name)._fields == cls._fields


def _composition_namespace() -> dict[str, Any]:
    import st_rl.modules as modules

    return {name: getattr(modules, name) for name in modules.__all__}


@pytest.mark.parametrize(
    ("key", "name", "recurrent", "estimator", "encoder"),
    [
        ("002_7048e72fa8f1a842.txt#28", "EncoderStateAc", False, True, True),
        ("002_7048e72fa8f1a842.txt#29", "EncoderStateAcRecurrent", True, True, True),
        ("002_7048e72fa8f1a842.txt#42", "EncoderActorCritic", False, False, True),
        ("002_7048e72fa8f1a842.txt#42", "EncoderActorCriticRecurrent", True, False, True),
        ("002_7048e72fa8f1a842.txt#42", "EncoderAmpActorCriticRecurrent", True, False, True),
        ("002_7048e72fa8f1a842.txt#53", "StateAc", False, True, False),
        ("002_7048e72fa8f1a842.txt#54", "StateAcRecurrent", True, True, False),
    ],
)
def test_policy_compositions_on_a_height_map(key, name, recurrent, estimator, encoder):
    cls = run(key, _composition_namespace())[name]
    kwargs: dict[str, Any] = {"obs_segments": SEGMENTS, "privileged_obs_segments": CRITIC_SEGMENTS}
    if recurrent:
        kwargs.update(rnn_type="gru", rnn_hidden_size=8)
    if encoder:
        kwargs.update(
            encoder_component_names=["height_measurements"], critic_encoder_component_names="shared"
        )
    if estimator:
        kwargs.update(estimator_obs_components=["dof_pos"], estimator_target_components=["base_lin_vel"])
    if "Amp" in name:
        kwargs["amp_discriminator"] = {"input_dim": 4, "style_reward_coef": 1.0, "hidden_dims": [8]}
    policy = cls(NUM_OBS, NUM_CRITIC, 2, [16], [16], **kwargs)
    if encoder:  # MLP encoder on the flattened (1, 3, 4) map
        assert policy.encoders[0].model[0].in_features == 12
    with torch.no_grad():
        assert policy.act(torch.randn(3, NUM_OBS)).shape == (3, 2)
        assert policy.evaluate(torch.randn(3, NUM_CRITIC)).shape == (3, 1)
        if estimator:
            assert policy.get_estimated_state().shape == (3, 3)


def test_module_utilities_snippets():
    from st_rl.modules.utils import conv2d_output_shape, get_activation_Cls

    ns = run("002_7048e72fa8f1a842.txt#55", {"get_activation_Cls": get_activation_Cls})
    assert isinstance(ns["activation"], torch.nn.ReLU)
    ns = run("002_7048e72fa8f1a842.txt#56", {"conv2d_output_shape": conv2d_output_shape})
    assert (ns["h"], ns["w"]) == (32, 32)


def test_visual_policy_example():
    from st_rl.modules import VisualDeterministicAC

    obs_segments = OrderedDict([("forward_depth", (1, 16, 32))])  # 512 columns, as the example's sizes
    observations = torch.randn(4, 512)
    ns = run(
        "002_7048e72fa8f1a842.txt#57",
        {
            "VisualDeterministicAC": VisualDeterministicAC,
            "obs_segments": obs_segments,
            "observations": observations,
        },
    )
    assert ns["actions"].shape == (4, 12)
    torch.testing.assert_close(ns["actions"], ns["model"].action_mean)
