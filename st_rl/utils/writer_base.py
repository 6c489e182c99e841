"""The writer interface the runner logs to (kept apart from the backends so that they import no logger)."""

from __future__ import annotations

from typing import Any, Protocol


class ScalarWriter(Protocol):
    """What a log backend must offer (``torch.utils.tensorboard.SummaryWriter`` does); see docs/logging.md."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class Writer:
    """Base of the writers the runner logs to: ``add_scalar`` and the optional hooks (no-ops here) that a
    backend overrides where it supports them."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None:
        """Record one scalar (required).

        Raises:
            NotImplementedError: the subclass does not implement it.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement add_scalar(tag, value, step)")

    def log_config(self, cfg: dict[str, Any]) -> None:
        """Record the resolved training config; called once, when the writer is created."""

    def save_model(self, path: str, it: int) -> None:
        """Record the checkpoint ``path`` written at iteration ``it`` (e.g. upload it)."""

    def save_file(self, path: str, name: str | None = None) -> None:
        """Attach a file (a play video, a plot) to the run."""

    def flush(self) -> None:
        """Write out what is buffered."""

    def close(self) -> None:
        """Flush and release the backend; the writer is not used afterwards."""


class NullWriter(Writer):
    """Discards everything (``logger="none"`` or no log directory)."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None:
        pass
