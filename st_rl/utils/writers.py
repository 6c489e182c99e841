"""The writers the runner logs to: TensorBoard files, Weights & Biases, Neptune, and user-defined writers."""

from __future__ import annotations

import abc
import contextlib
import difflib
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from st_rl.registry import resolve_class
from st_rl.utils.files import read_json, write_json_atomic

RUN_INFO_FILE = "logger_run.json"  # the W&B / Neptune run of a run directory, for attach_files_to_run

_MEDIA_VIDEO = (".mp4", ".gif", ".webm")
_MEDIA_IMAGE = (".png", ".jpg", ".jpeg")


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


class TensorBoardWriter(CustomWriter):
    """``SummaryWriter`` (``summary_writer``, its methods reached through this object) as a ``logger="tensorboard"``."""

    def __init__(self, log_dir: str, flush_secs: int = 10, **kwargs: Any) -> None:
        from torch.utils.tensorboard import SummaryWriter

        super().__init__(SummaryWriter(log_dir=log_dir, flush_secs=flush_secs, **kwargs))
        self.summary_writer = self.writer


class MissingLoggerPackageError(ImportError, ValueError):
    """The package a logger needs is not installed."""


def import_optional(module: str, extra: str, feature: str | None = None) -> Any:
    """Import ``module`` or raise :class:`MissingLoggerPackageError` naming the st-rl ``extra`` to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        alternative = "" if feature else ", or set logger='tensorboard'"
        raise MissingLoggerPackageError(
            f"{feature or f'logger={extra!r}'} needs the {module!r} package, which is not installed: "
            f"pip install 'st-rl[{extra}]' (or pip install {module}){alternative}."
        ) from e


class TrackingWriter(Writer, abc.ABC):
    """Base of the W&B and Neptune writers: TensorBoard files plus a remote run started on first use."""

    backend = ""
    offline_modes: tuple[str, ...] | None = None  # the modes that need no ``<backend>_project`` (None: all)

    def __init__(self, log_dir: str, tensorboard: bool = True, cfg: dict[str, Any] | None = None) -> None:
        self.log_dir = log_dir
        cfg, env = cfg or {}, self.backend.upper()
        self.project = cfg.get(f"{self.backend}_project") or os.environ.get(f"{env}_PROJECT")
        self.mode = cfg.get(f"{self.backend}_mode") or os.environ.get(f"{env}_MODE")
        if not self.project and self.offline_modes is not None and self.mode not in self.offline_modes:
            offline = "".join(f", or {self.backend}_mode={m!r}" for m in self.offline_modes)
            raise ValueError(
                f"logger={self.backend!r} needs a project: set {self.backend}_project ({env}_PROJECT){offline}"
            )
        self.run_id = cfg.get(f"{self.backend}_run_id")
        self.run_name = cfg.get("run_name") or os.path.basename(os.path.normpath(log_dir))
        self._tb: Writer = TensorBoardWriter(log_dir) if tensorboard else NullWriter()
        self._run: Any = None
        self._closed = False

    @property
    def run(self) -> Any:
        """The library's run object (started on first access)."""
        if self._run is None:
            if self._closed:
                raise RuntimeError(f"this {type(self).__name__} is closed; build a new writer")
            self._run = self._init_run()
            os.makedirs(self.log_dir, exist_ok=True)
            write_json_atomic(os.path.join(self.log_dir, RUN_INFO_FILE), self.run_info())
        return self._run

    @property
    def started(self) -> bool:
        return self._run is not None

    def run_info(self) -> dict[str, Any]:
        """What ``logger_run.json`` records: how :func:`attach_files_to_run` finds the run again."""
        b = self.backend
        return {"logger": b, f"{b}_project": self.project, f"{b}_mode": self.mode}

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None:
        value = float(scalar_value)
        self._tb.add_scalar(tag, value, global_step)
        self._log_scalar(self.run, tag, value, global_step)

    def log_config(self, cfg: dict[str, Any]) -> None:
        self._log_config(self.run, cfg)

    def save_model(self, path: str, it: int) -> None:
        self._upload(self.run, path, f"model_{it}", kind="model")

    def save_file(self, path: str, name: str | None = None) -> None:
        """Upload any file (videos and images also as media)."""
        self._upload(self.run, path, name or os.path.basename(path), kind="file")

    def flush(self) -> None:
        self._tb.flush()
        if self._run is not None:
            self._flush_remote(self._run)

    def close(self) -> None:
        """Flush and finish the remote run; the writer cannot be used afterwards."""
        self.flush()
        self._tb.close()
        if self._run is not None:
            self._finish(self._run)
            self._run = None
        self._closed = True

    @abc.abstractmethod
    def _init_run(self) -> Any: ...

    @abc.abstractmethod
    def _log_scalar(self, run: Any, tag: str, value: float, step: int | None) -> None: ...

    @abc.abstractmethod
    def _log_config(self, run: Any, cfg: dict[str, Any]) -> None: ...

    @abc.abstractmethod
    def _upload(self, run: Any, path: str, name: str, kind: str) -> None: ...

    def _flush_remote(self, run: Any) -> None:  # noqa: B027 - optional hook, no-op by default
        pass

    @abc.abstractmethod
    def _finish(self, run: Any) -> None: ...


class WandbWriter(TrackingWriter):
    """Weights & Biases writer (``logger="wandb"``); ``cfg`` keys ``wandb_project`` (or ``WANDB_PROJECT``),
    ``wandb_entity``, ``wandb_mode``, ``wandb_run_id`` (continue it), ``run_name``."""

    backend = "wandb"
    offline_modes = ()

    def __init__(self, log_dir: str, cfg: dict[str, Any] | None = None, tensorboard: bool = True) -> None:
        self.wandb = import_optional("wandb", "wandb")
        self.entity = (cfg or {}).get("wandb_entity")
        self._pending_step: int | None = None
        self._pending: dict[str, float] = {}
        self._last_step = 0
        super().__init__(log_dir, tensorboard, cfg)

    def _init_run(self) -> Any:
        kwargs = {"project": self.project, "name": self.run_name, "entity": self.entity, "mode": self.mode}
        kwargs = {key: value for key, value in kwargs.items() if value}
        if not os.environ.get("WANDB_DIR"):
            kwargs["dir"] = self.log_dir
        if self.run_id:
            kwargs.update(id=self.run_id, resume="allow")
        run = self.wandb.init(**kwargs)
        run.define_metric("global_step")
        run.define_metric("*", step_metric="global_step")
        return run

    def run_info(self) -> dict[str, Any]:
        run = self._run  # None before the first scalar
        ids = {"wandb_run_id": getattr(run, "id", None), "url": getattr(run, "url", None)}
        return super().run_info() | ids | {"wandb_entity": self.entity or getattr(run, "entity", None)}

    def _log_scalar(self, run: Any, tag: str, value: float, step: int | None) -> None:
        step = self._last_step if step is None else int(step)
        if self._pending_step is not None and step != self._pending_step:
            self._flush_remote(run)
        self._pending_step = step
        self._pending[tag] = value

    def _flush_remote(self, run: Any) -> None:
        if self._pending_step is not None and self._pending:
            run.log({**self._pending, "global_step": self._pending_step})
            self._last_step = self._pending_step
        self._pending, self._pending_step = {}, None

    def _log_config(self, run: Any, cfg: dict[str, Any]) -> None:
        run.config.update(cfg, allow_val_change=True)

    def _upload(self, run: Any, path: str, name: str, kind: str) -> None:
        path = os.path.abspath(path)
        run.save(path, base_path=os.path.dirname(path), policy="now")
        ext = os.path.splitext(path)[1].lower()
        if kind == "file" and ext in _MEDIA_VIDEO + _MEDIA_IMAGE:
            self._flush_remote(run)
            group, media = (
                ("videos", self.wandb.Video) if ext in _MEDIA_VIDEO else ("images", self.wandb.Image)
            )
            run.log({f"{group}/{os.path.splitext(name)[0]}": media(path), "global_step": self._last_step})

    def _finish(self, run: Any) -> None:
        run.finish()


class NeptuneWriter(TrackingWriter):
    """Neptune 1.x writer (``logger="neptune"``, token ``NEPTUNE_API_TOKEN``); ``cfg`` keys ``neptune_project``
    (or ``NEPTUNE_PROJECT``), ``neptune_mode``, ``neptune_run_id`` (continue it), ``run_name``."""

    backend = "neptune"
    offline_modes = ("offline", "debug")

    def __init__(self, log_dir: str, cfg: dict[str, Any] | None = None, tensorboard: bool = True) -> None:
        self.neptune = import_optional("neptune", "neptune")
        super().__init__(log_dir, tensorboard, cfg)

    def _init_run(self) -> Any:
        kwargs = {"project": self.project, "name": self.run_name, "mode": self.mode, "with_id": self.run_id}
        return self.neptune.init_run(**{key: value for key, value in kwargs.items() if value})

    def run_info(self) -> dict[str, Any]:
        run_id = None
        if self._run is not None and self.mode != "offline":  # offline runs have no id before syncing
            with contextlib.suppress(Exception):  # the id is only a convenience for later uploads
                run_id = self._run["sys/id"].fetch()
        return super().run_info() | {"neptune_run_id": run_id}

    def _log_scalar(self, run: Any, tag: str, value: float, step: int | None) -> None:
        run[tag].append(value, step=step)  # step=None: the next one

    def _log_config(self, run: Any, cfg: dict[str, Any]) -> None:
        run["config"] = self.neptune.utils.stringify_unsupported(cfg)

    def _upload(self, run: Any, path: str, name: str, kind: str) -> None:
        if kind == "model":
            field = f"model/checkpoints/{name}"
        else:  # play_2.mp4 -> files/play_2/mp4, so a video and a plot of one name both stay
            stem, ext = os.path.splitext(name)
            field = f"files/{stem}/{ext.lstrip('.') or 'file'}"
        run[field].upload(os.path.abspath(path))

    def _finish(self, run: Any) -> None:
        run.stop()


TRACKING_WRITERS: dict[str, Callable[..., TrackingWriter]] = {"wandb": WandbWriter, "neptune": NeptuneWriter}


def build_custom_writer(spec: Any, log_dir: str, cfg: dict[str, Any]) -> Writer:
    """``cls(log_dir=log_dir, cfg=cfg, **kwargs)`` for ``spec`` a class, ``"pkg.module:Class"`` or
    ``{"class_name": ..., **kwargs}`` (a :class:`CustomWriter` unless a ``Writer``)."""
    kwargs: dict[str, Any] = {}
    if isinstance(spec, dict):
        kwargs = {k: v for k, v in spec.items() if k != "class_name"}
        spec = spec.get("class_name")
        if spec is None:
            raise ValueError("logger dict needs a 'class_name' (a class or 'package.module:Class')")
    cls = resolve_class(spec, sys.modules[__name__], "logger")
    try:
        inspect.signature(cls).bind(log_dir=log_dir, cfg=cfg, **kwargs)
    except TypeError as e:
        raise TypeError(
            f"custom writer {cls.__qualname__} must accept {cls.__name__}(log_dir=..., cfg=..., **kwargs) "
            f"with kwargs {sorted(kwargs)}: {e}"
        ) from e
    writer = cls(log_dir=log_dir, cfg=cfg, **kwargs)
    if isinstance(writer, Writer):
        return writer
    if not callable(getattr(writer, "add_scalar", None)):
        raise TypeError(
            f"custom writer {cls.__qualname__} has no add_scalar(tag, value, step) method; see docs/logging.md"
        )
    return CustomWriter(writer)


def read_run_info(run_dir: str) -> dict[str, Any] | None:
    """The ``logger_run.json`` of a run directory, or None."""
    path = os.path.join(run_dir, RUN_INFO_FILE)
    if not os.path.isfile(path):
        return None
    return read_json(path, "logger run info", "delete it to start a new logger run")


def attach_files_to_run(run_dir: str, files: Sequence[str | None], required: bool = False) -> str | None:
    """Upload ``files`` to the W&B / Neptune run of ``run_dir``; the backend, or None (ValueError if
    ``required``) without one."""
    info = read_run_info(run_dir)
    paths = [p for p in files if p]
    if info is None and required:
        msg = f"{run_dir} has no {RUN_INFO_FILE}: it was not logged with logger='wandb' or 'neptune'"
        raise ValueError(f"{msg}, so there is no run to attach files to. Drop --upload.")
    if info is None or not paths:
        return None
    backend = info.get("logger")
    cls = TRACKING_WRITERS.get(str(backend))
    if cls is None:
        raise ValueError(f"{os.path.join(run_dir, RUN_INFO_FILE)} names an unknown logger {backend!r}")
    writer = cls(run_dir, info, tensorboard=False)
    try:
        for path in paths:
            writer.save_file(path)
    finally:
        writer.close()
    return backend


LOGGERS = ("tensorboard", "wandb", "neptune", "none")


def make_writer(kind: Any, log_dir: str | None, cfg: dict[str, Any] | None = None) -> Writer:
    """The writer for ``kind`` (:data:`LOGGERS` or a custom writer), a :class:`NullWriter` without ``log_dir``."""
    cfg = cfg or {}
    if log_dir is None or kind in ("none", None):
        return NullWriter()
    if kind == "tensorboard":
        return TensorBoardWriter(log_dir=log_dir, flush_secs=10)
    if isinstance(kind, (dict, type)) or (isinstance(kind, str) and ":" in kind):
        return build_custom_writer(kind, log_dir, cfg)
    if isinstance(kind, str) and kind in TRACKING_WRITERS:
        return TRACKING_WRITERS[kind](log_dir, cfg)
    close = difflib.get_close_matches(str(kind), LOGGERS, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"Unknown logger {kind!r}.{hint} Use one of {list(LOGGERS)}, or a custom writer: a class, "
        "'package.module:Class' or {'class_name': ..., **kwargs} (see docs/logging.md)."
    )
