"""CUDA graphs emulated on the CPU, for tests on machines without a GPU.

A "capture" records the aten ops that run (the Python around them runs once, as in a real capture); a "replay"
runs those ops again on the same tensors, writing each fresh result into the tensor the capture returned, and
runs no Python. Unlike a real capture, the emulated one executes its ops: the first replay after it, which
st_rl makes at once, is therefore skipped. So, as on a GPU, a number taken on the host at capture time stays baked into every replay, and
an attribute that the Python of the capture reassigned is not reassigned again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[Any, tuple, dict, Any]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.ops.append((func, args, kwargs, out))
        return out


class FakeGraph:
    """Stands in for ``torch.cuda.CUDAGraph``."""

    def __init__(self) -> None:
        self.ops: list[tuple[Any, tuple, dict, Any]] = []
        self.replays = 0
        self.executed = False  # the capture ran the ops already

    def replay(self) -> None:
        self.replays += 1
        if self.executed:
            self.executed = False
            return
        with torch.inference_mode():  # in-place writes to the capture's tensors, inference tensors too
            for func, args, kwargs, out in self.ops:
                fresh = func(*args, **kwargs)
                for old, new in zip(pytree.tree_leaves(out), pytree.tree_leaves(fresh)):
                    if torch.is_tensor(old) and old is not new and not old._is_view():
                        old.copy_(new)

    def reset(self) -> None:
        self.ops = []


@contextlib.contextmanager
def _graph(graph: FakeGraph, *args: Any, **kwargs: Any) -> Iterator[None]:
    recorder = _Recorder()
    with recorder:
        yield
    graph.ops, graph.executed = recorder.ops, True


class _Stream:
    def wait_stream(self, other: Any) -> None:
        pass


def emulate_cuda_graphs(monkeypatch: Any) -> None:
    """Make ``torch.cuda``'s graph and stream API the emulation's, and let st_rl capture on the CPU."""
    import st_rl.algorithms.cuda_graph as cuda_graph

    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", _graph)
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: _Stream())
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    obstacle = cuda_graph._common_obstacle
    monkeypatch.setattr(
        cuda_graph,
        "_common_obstacle",
        lambda alg: None if obstacle(alg) == "the device is not a GPU" else obstacle(alg),
    )
