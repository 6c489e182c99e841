"""The writer interface the runner logs to (apart from the backends, so that they import no logger)."""

from __future__ import annotations

from typing import Any, Protocol


class ScalarWriter(Protocol):
    """What a log backend must offer (``torch.utils.tensorboard.SummaryWriter`` does); see docs/logging.md."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class Writer:
    """Base of the runner's writers: ``add_scalar`` (required) and optional hooks, no-ops here."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement add_scalar(tag, value, step)")

    def log_config(self, cfg: dict[str, Any]) -> None:
        """Record the resolved training config (once, when the writer is created)."""

    def save_model(self, path: str, it: int) -> None:
        """Record the checkpoint ``path`` written at iteration ``it`` (e.g. upload it)."""

    def save_file(self, path: str, name: str | None = None) -> None:
        """Attach a file (a play video, a plot) to the run."""

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class NullWriter(Writer):
    """Discards everything (``logger="none"`` or no log directory)."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None:
        pass


class CustomWriter(Writer):
    """A user's writer (any object with ``add_scalar``) as a :class:`Writer` whose hooks call its methods."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def __getattr__(self, name: str) -> Any:
        if name == "writer":  # not set yet (e.g. during unpickling)
            raise AttributeError(name)
        return getattr(self.writer, name)

    def _call(self, name: str, *args: Any) -> None:
        method = getattr(self.writer, name, None)
        if callable(method):
            method(*args)

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None:
        self.writer.add_scalar(tag, scalar_value, global_step)

    def log_config(self, cfg: dict[str, Any]) -> None:
        self._call("log_config", cfg)

    def save_model(self, path: str, it: int) -> None:
        self._call("save_model", path, it)

    def save_file(self, path: str, name: str | None = None) -> None:
        self._call("save_file", path)

    def flush(self) -> None:
        self._call("flush")

    def close(self) -> None:
        self._call("close")
