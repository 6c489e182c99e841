"""The environment contract that :class:`~st_rl.env.EnvAdapter` and the simulator adapters check, with
metadata only (nothing is reshaped across environments)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class NonFiniteError(ValueError):
    """Raised when the environment returns NaN or Inf in observations or rewards."""


class EnvOutputError(ValueError):
    """An environment output of the wrong type, shape, dtype or device (the message names method, output, fix)."""


def describe_value(value: Any) -> str:
    """A short description of an environment output for error messages (type, dtype, shape, device)."""
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)} on {value.device}"
    if isinstance(value, np.ndarray):
        return f"a numpy {value.dtype} array of shape {value.shape}"
    return f"a {type(value).__name__}" if value is not None else "None"


def forwarded(name: str) -> Any:
    """A read-write property forwarding attribute ``name`` to ``self.env``."""
    return property(lambda self: getattr(self.env, name), lambda self, value: setattr(self.env, name, value))


def episode_length_property() -> Any:
    """``episode_length_buf``: ``self._episode_length_buf``, long (num_envs,) on ``self.device``; writable."""

    def set_buffer(self: Any, value: Any) -> None:
        value = torch.as_tensor(value, device=self.device)
        self._episode_length_buf = value.to(dtype=torch.long).expand(self.num_envs).clone()

    return property(lambda self: self._episode_length_buf, set_buffer, doc="Steps of the current episodes.")


def require_attributes(env: Any, names: str, what: str, fix: str) -> None:
    """Raise ``TypeError`` naming those of the space-separated ``names`` that ``env`` (``what``) lacks."""
    missing = [n for n in names.split() if not hasattr(env, n)]
    if missing:
        raise TypeError(f"{type(env).__name__} is not {what}: it has no {', '.join(missing)}. {fix}")


class OutputChecker:
    """Checks the outputs of one environment and moves them to ``device``."""

    def __init__(
        self, env_name: str, num_envs: int, device: torch.device, env_device: torch.device | None
    ) -> None:
        self.env_name, self.num_envs, self.device, self.env_device = env_name, num_envs, device, env_device

    def error(self, method: str, output: str, value: Any, rule: str, fix: str) -> EnvOutputError:
        return EnvOutputError(
            f"{self.env_name}.{method}() returned {output} as {describe_value(value)}; {rule}. Fix: {fix}."
        )

    def tensor(self, value: Any, method: str, output: str, expected: str) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            return torch.tensor(value)  # a copy: the environment may reuse its array
        rule = f"expected a torch.Tensor (or a numeric numpy array) of shape {expected}"
        fix = f"return {output} as a tensor of that shape (torch.as_tensor(x, device=env.device))"
        raise self.error(method, output, value, rule, fix)

    def to_device(
        self, x: torch.Tensor, method: str, output: str, dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        try:
            return x.to(device=self.device, dtype=dtype)
        except (RuntimeError, NotImplementedError) as e:
            reason = (str(e).splitlines() or [type(e).__name__])[0]
            rule = f"it cannot be moved to the training device {self.device} ({reason})"
            fix = f"return tensors on a real device (the environment's, {self.env_device or 'cpu'})"
            raise self.error(method, output, x, rule, fix) from e

    def observation(self, value: Any, method: str, output: str, group: bool = False) -> torch.Tensor:
        """One observation as float32 ``(num_envs, width)`` (a ``group`` may have more dimensions: flattened)."""
        n = self.num_envs
        x = self.tensor(value, method, output, f"(num_envs, num_obs) with num_envs={n}")
        if not x.dtype.is_floating_point:
            fix = f"convert them in the environment ({output}.float())"
            raise self.error(method, output, x, "observations must be floating point", fix)
        shape = tuple(x.shape)
        if x.ndim < (1 if group else 2) or shape[0] != n or (not group and x.ndim != 2):
            if x.ndim == 2 and shape[1] == n and shape[0] != n:
                rule = f"expected (num_envs, num_obs) = ({n}, ...); it looks transposed"
                fix = f"return it with the environments first ({output}.T)"
            elif x.ndim >= 1 and shape[0] != n:
                rule = f"expected (num_envs, num_obs) = ({n}, ...), got {shape[0]} rows"
                fix = f"return {n} rows (num_envs={n}); st_rl does not reshape observations"
            else:
                rule = f"expected a 2-D (num_envs, num_obs) = ({n}, ...) tensor"
                fix = f"flatten them in the environment ({output}.reshape({n}, -1)) or return a TensorDict group"
            raise self.error(method, output, x, rule, fix)
        if x.ndim != 2:
            x = x.flatten(1) if x.ndim > 2 else x.unsqueeze(1)  # one group: its per-environment dims
        return self.to_device(x, method, output, torch.float32)

    def per_env(self, value: Any, method: str, output: str, rewards: bool) -> torch.Tensor:
        """Rewards (float32) or dones / time-outs (bool) of shape ``(num_envs,)`` on the training device."""
        n = self.num_envs
        x = self.tensor(value, method, output, f"({n},)")
        if rewards and not x.dtype.is_floating_point:
            raise self.error(method, output, x, "rewards must be floating point", f"return {output}.float()")
        if not rewards and x.dtype.is_complex:
            raise self.error(method, output, x, "expected bool or 0/1 numbers", f"return {output}.bool()")
        if tuple(x.shape) != (n,):
            reshape = f"return it as ({n},) ({output}.reshape({n}) in the environment)"
            fix = reshape if x.numel() == n else f"return one value per environment (num_envs={n})"
            raise self.error(method, output, x, f"expected shape (num_envs,) = ({n},)", fix)
        if rewards:
            return self.to_device(x, method, output, torch.float32)
        return self.to_device(x, method, output).bool()

    def check_width(self, x: torch.Tensor, width: int | None, method: str, output: str) -> None:
        if width is not None and x.shape[1] != width:
            rule = f"expected (num_envs, {width}): the width of the first observation, which the policy is built for"
            raise self.error(method, output, x, rule, "return observations of a fixed width")
