"""Shared set-up of the reference drop-in tests (``tests/test_reference_snippets.py``,
``tests/test_reference_api.py``, ``tests/modules/test_encoder_grids.py``).

legged_gym-style ``obs_segments`` (proprioception plus a ``(1, nx, ny)`` height map, the critic's adding
privileged components), the keyword arguments that switch on a preset's recurrent / estimator / AMP parts, and
a short rollout into an algorithm's storage (random observations, one or more finished episodes) ending with
``compute_returns``. Imported as ``utils.reference_fixtures`` (``tests/`` is on ``sys.path`` through
``tests/conftest.py``).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import torch

__all__ = ["build_policy", "flat_size", "legged_segments", "part_kwargs", "rollout"]


def legged_segments(
    proprio: Sequence[tuple[str, tuple[int, ...]]],
    height: tuple[int, int, int] | None = (1, 3, 4),
    height_name: str = "height_measurements",
    privileged: Sequence[tuple[str, tuple[int, ...]]] = (("friction", (1,)),),
) -> tuple[Any, Any]:
    """``(actor_segments, critic_segments)``: the proprioceptive components, then the height map (if any); the
    critic's are the actor's plus ``privileged``."""
    actor = OrderedDict([*proprio, *([(height_name, height)] if height is not None else [])])
    return actor, OrderedDict([*actor.items(), *privileged])


def flat_size(segments: Any) -> int:
    """Columns of the flat observation vector that ``segments`` lays out."""
    return sum(math.prod(shape) for shape in segments.values())


def build_policy(
    cls: Any, actor_segments: Any, critic_segments: Any, num_actions: int = 2, hidden: int = 16, **kwargs: Any
) -> Any:
    """A policy preset on these segments (flat observation widths from them), one ``hidden``-wide layer per MLP."""
    return cls(
        num_actor_obs=flat_size(actor_segments),
        num_critic_obs=flat_size(critic_segments),
        num_actions=num_actions,
        actor_hidden_dims=[hidden],
        critic_hidden_dims=[hidden],
        obs_segments=actor_segments,
        privileged_obs_segments=critic_segments,
        **kwargs,
    )


def part_kwargs(
    *,
    recurrent: bool = False,
    estimator: dict[str, Any] | None = None,
    amp_input_dim: int | None = None,
    rnn_hidden_size: int = 8,
) -> dict[str, Any]:
    """Keyword arguments of a preset's optional parts: a small GRU memory, the estimator's keywords as given,
    a small AMP discriminator on ``amp_input_dim`` features."""
    kwargs: dict[str, Any] = {}
    if recurrent:
        kwargs.update(rnn_type="gru", rnn_hidden_size=rnn_hidden_size)
    if estimator is not None:
        kwargs.update(estimator)
    if amp_input_dim is not None:
        kwargs["amp_discriminator"] = {
            "input_dim": amp_input_dim,
            "style_reward_coef": 1.0,
            "hidden_dims": [8],
        }
    return kwargs


def rollout(
    alg: Any,
    num_envs: int,
    num_steps: int,
    num_obs: int,
    num_critic: int,
    *,
    done_steps: Iterable[int] = (),
    seed: int = 0,
) -> None:
    """Fill ``alg``'s (initialised) storage with ``num_steps`` random steps and compute the returns.

    At each step in ``done_steps`` the env ``step % num_envs`` finishes an episode (two trajectories in it).
    """
    done_steps = set(done_steps)
    gen = torch.Generator().manual_seed(seed)
    obs, critic = (
        torch.randn(num_envs, num_obs, generator=gen),
        torch.randn(num_envs, num_critic, generator=gen),
    )
    alg.train_mode()
    with torch.inference_mode():
        for step in range(num_steps):
            alg.act(obs, critic)
            obs = torch.randn(num_envs, num_obs, generator=gen)
            critic = torch.randn(num_envs, num_critic, generator=gen)
            dones = torch.zeros(num_envs, dtype=torch.bool)
            dones[step % num_envs] = step in done_steps
            alg.process_env_step(torch.randn(num_envs, generator=gen), dones, {}, obs, critic)
        alg.compute_returns(critic)
