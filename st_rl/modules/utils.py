"""Small helpers shared by the network modules."""

from __future__ import annotations

import warnings

import torch.nn as nn

# every torch.nn module class by its lower-case name, plus the reference's short names
_ACTIVATIONS = {n.lower(): c for n, c in vars(nn).items() if isinstance(c, type) and issubclass(c, nn.Module)}
_ACTIVATIONS.update(crelu=nn.ReLU, lrelu=nn.LeakyReLU)


def get_activation_Cls(name: str | type[nn.Module] | None) -> type[nn.Module] | None:  # noqa: N802
    """The activation class for a ``torch.nn`` class name (any case), ``crelu``, ``lrelu`` or a class; ``None`` with
    a warning for an unknown name, as the reference does."""
    if name is None:
        return None
    if isinstance(name, type) and issubclass(name, nn.Module):
        return name
    if str(name).lower() in _ACTIVATIONS:
        return _ACTIVATIONS[str(name).lower()]
    warnings.warn(
        f"Unknown activation '{name}'; use a torch.nn class name such as 'ELU' or 'elu'.", stacklevel=2
    )
    return None


def get_activation(name: str | type[nn.Module]) -> nn.Module:
    """An activation instance for ``name``; ValueError if the name is unknown."""
    cls = get_activation_Cls(name)
    if cls is None:
        raise ValueError(f"Unknown activation '{name}'; use a torch.nn class name such as 'ELU' or 'elu'.")
    return cls()


def conv2d_output_shape(
    h_in: int,
    w_in: int,
    kernel_size: int | tuple[int, int] = 1,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    dilation: int | tuple[int, int] = 1,
) -> tuple[int, int]:
    """Output ``(h, w)`` of a ``Conv2d`` (the formula of the PyTorch docs)."""
    k, s, p, d = (
        (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))
        for v in (kernel_size, stride, padding, dilation)
    )
    h = (h_in + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    w = (w_in + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    return h, w


_PART_PRESETS = {"encoders": "EncoderActorCritic", "estimator": "StateAc", "adaptor": "PrivilegeStateAc"}


def part_is_on(policy: nn.Module, part: str, *given: object) -> bool:
    """Whether ``policy``'s parts include ``part``; where not, a warning when its arguments were ``given``."""
    if getattr(policy.parts, part):
        return True
    if any(given):
        msg = f"{type(policy).__name__} has no {part}: their arguments are ignored"
        warnings.warn(f"{msg} (use {_PART_PRESETS[part]}(Recurrent)).", stacklevel=4)
    return False


def warn_unknown_kwargs(owner: str, kwargs: dict, tolerated: frozenset[str] = frozenset()) -> None:
    """Warn about keyword arguments ``owner`` ignores (names in ``tolerated`` are passed silently)."""
    unknown = sorted(k for k in kwargs if k not in tolerated)
    if unknown:
        warnings.warn(f"{owner} ignores unknown arguments: {unknown}", stacklevel=3)
