"""Small helpers shared by the network modules."""

from __future__ import annotations

import warnings

import torch.nn as nn

_ACTIVATIONS: dict[str, type[nn.Module]] = {
    "elu": nn.ELU,
    "selu": nn.SELU,
    "relu": nn.ReLU,
    "crelu": nn.ReLU,
    "lrelu": nn.LeakyReLU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "celu": nn.CELU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "softsign": nn.Softsign,
    "identity": nn.Identity,
}


def get_activation_Cls(name: str | type[nn.Module] | None) -> type[nn.Module] | None:  # noqa: N802
    """Return the activation class for ``name``.

    Accepts the short names (``elu``, ``selu``, ``relu``, ``crelu``, ``lrelu``, ``tanh``, ``sigmoid``, ...),
    any ``torch.nn`` class name (``"ELU"``, ``"Mish"``) or a class. Returns ``None`` (with a warning) for an
    unknown name, as the reference does.
    """
    if name is None:
        return None
    if isinstance(name, type) and issubclass(name, nn.Module):
        return name
    key = str(name)
    if key.lower() in _ACTIVATIONS:
        return _ACTIVATIONS[key.lower()]
    cls = getattr(nn, key, None)
    if isinstance(cls, type) and issubclass(cls, nn.Module):
        return cls
    warnings.warn(
        f"Unknown activation '{name}'; use one of {sorted(_ACTIVATIONS)} or a torch.nn class name.",
        stacklevel=2,
    )
    return None


def get_activation(name: str | type[nn.Module]) -> nn.Module:
    """Return an activation instance for ``name``.

    Raises:
        ValueError: if the name is unknown.
    """
    cls = get_activation_Cls(name)
    if cls is None:
        raise ValueError(
            f"Unknown activation '{name}'; available: {sorted(_ACTIVATIONS)} or any torch.nn name."
        )
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

    def pair(v: int | tuple[int, int]) -> tuple[int, int]:
        return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))

    k, s, p, d = pair(kernel_size), pair(stride), pair(padding), pair(dilation)
    h = (h_in + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    w = (w_in + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    return h, w


def warn_unknown_kwargs(owner: str, kwargs: dict, tolerated: frozenset[str] = frozenset()) -> None:
    """Warn about keyword arguments ``owner`` ignores (names in ``tolerated`` are passed silently)."""
    unknown = sorted(k for k in kwargs if k not in tolerated)
    if unknown:
        warnings.warn(f"{owner} ignores unknown arguments: {unknown}", stacklevel=3)
