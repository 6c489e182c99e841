"""Observation layout (``obs_segments``): an ordered ``name -> shape`` mapping over the flat observation's columns."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence

import torch

Shape = tuple[int, ...]
Segments = Mapping[str, "int | Sequence[int]"]


def normalize_shape(shape: int | Sequence[int]) -> Shape:
    return (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)


def normalize_segments(segments: Segments | None) -> OrderedDict[str, Shape] | None:
    """Return an ordered ``name -> tuple shape`` copy of ``segments`` (``None`` stays ``None``)."""
    if segments is None:
        return None
    return OrderedDict((str(k), normalize_shape(v)) for k, v in segments.items())


def _names_list(segments: Segments, names: str | Iterable[str]) -> list[str]:
    """``names`` as a checked list (a bare string is one name, never matched by substring)."""
    names = [names] if isinstance(names, str) else list(names)
    for n in names:
        get_obs_slice(segments, n)
    return names


def segments_size(segments: Segments) -> int:
    return sum(math.prod(normalize_shape(s)) for s in segments.values())


def get_obs_slice(segments: Segments, component_name: str) -> tuple[slice, Shape]:
    """The column slice and shape of one component (AssertionError if absent)."""
    start = 0
    for name, shape in segments.items():
        shape = normalize_shape(shape)
        size = math.prod(shape)
        if name == component_name:
            return slice(start, start + size), shape
        start += size
    raise AssertionError(f"Observation component '{component_name}' is not in the layout {list(segments)}")


def get_subobs_size(segments: Segments, component_names: str | Iterable[str]) -> int:
    names = _names_list(segments, component_names)
    return sum(math.prod(normalize_shape(s)) for k, s in segments.items() if k in names)


def _segments_arg(obs_segments: Segments | None, segments: Segments | None, owner: str) -> Segments:
    if obs_segments is not None and segments is not None:
        raise TypeError(f"{owner}() got both obs_segments and segments; pass one")
    layout = obs_segments if obs_segments is not None else segments
    if layout is None:
        raise TypeError(f"{owner}() missing the observation layout: pass obs_segments (name -> shape)")
    return layout


def get_subobs_by_components(
    observations: torch.Tensor,
    component_names: str | Iterable[str],
    obs_segments: Segments | None = None,
    *,
    segments: Segments | None = None,
) -> torch.Tensor:
    """Concatenate the named components of ``(..., width)`` observations along the last dim, in layout order."""
    segments = _segments_arg(obs_segments, segments, "get_subobs_by_components")
    names = _names_list(segments, component_names)
    parts = [observations[..., get_obs_slice(segments, k)[0]] for k in segments if k in names]
    return torch.cat(parts, dim=-1)


def substitute_estimated_state(
    observations: torch.Tensor,
    target_components: str | Iterable[str],
    estimated_state: torch.Tensor,
    obs_segments: Segments | None = None,
    *,
    segments: Segments | None = None,
) -> torch.Tensor:
    """Write consecutive chunks of ``estimated_state`` into the target components in layout order, in place;
    returns ``observations``."""
    segments = _segments_arg(obs_segments, segments, "substitute_estimated_state")
    names = _names_list(segments, target_components)
    expected = get_subobs_size(segments, names)
    if estimated_state.shape[-1] != expected:
        width = estimated_state.shape[-1]
        raise ValueError(f"estimated_state has {width} columns but components {names} take {expected}")
    cursor = 0
    for sl in (get_obs_slice(segments, k)[0] for k in segments if k in names):
        observations[..., sl] = estimated_state[..., cursor : cursor + sl.stop - sl.start]
        cursor += sl.stop - sl.start
    return observations
