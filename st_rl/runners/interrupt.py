"""Stopping training cleanly on SIGINT / SIGTERM / SIGHUP: the first signal finishes the iteration and saves,
a second one (or any in an :meth:`InterruptGuard.immediate` phase: start-up, waiting for data) stops at once."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

__all__ = ["STOP_SIGNALS", "InterruptGuard", "TrainingInterrupted", "stop_at_once"]

STOP_SIGNALS: tuple[int, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on signal ``signum``; ``checkpoint``: the one saved at the stop, or ``None``;
    ``aborted``: stopped at once without saving (a second signal, or one in the phase ``during``)."""

    def __init__(
        self, checkpoint: str | None, signum: int, aborted: bool = False, during: str | None = None
    ) -> None:
        name = _signal_name(signum)
        if during is not None:
            text = f"training stopped by {name} {during}; nothing saved"
        elif aborted:
            text = f"training aborted by a second {name}; nothing saved"
        elif checkpoint is None:
            text = f"training stopped by {name}; nothing saved (no log directory)"
        else:
            text = f"training stopped by {name}; saved {checkpoint}"
        super().__init__(text)
        self.checkpoint = checkpoint
        self.signum = int(signum)
        self.aborted = aborted or during is not None
        self.during = during

    @property
    def exit_code(self) -> int:
        """128 + signal number, as a shell reports it."""
        return 128 + self.signum


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class _HungUpStream:
    """Forwards to ``stream``, dropping writes that fail (a hung-up terminal must not stop the final save)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):  # EIO / EPIPE on a dead terminal, or a closed stream
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_ACTIVE: list[InterruptGuard] = []  # guards whose handlers are installed (main thread only), innermost last


class InterruptGuard:
    """While active (a context manager; main thread only), the first stop signal sets :attr:`signum` (noted on
    stderr with ``announce``); a second one, or any inside :meth:`immediate`, raises :class:`TrainingInterrupted`."""

    def __init__(self, signals: tuple[int, ...] = STOP_SIGNALS, announce: bool = True) -> None:
        self.signals = signals
        self.announce = announce
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}
        self._during: str | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def active(self) -> bool:
        return bool(self._previous)

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                # SIGHUP ignored (nohup): keep going
                if not (sig == getattr(signal, "SIGHUP", None) and signal.getsignal(sig) is signal.SIG_IGN):
                    self._previous[sig] = signal.signal(sig, self.handle)
            _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def restore(self) -> None:
        """Put the previous handlers back (idempotent)."""
        previous, self._previous = self._previous, {}
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if self in _ACTIVE:
            _ACTIVE.remove(self)

    @contextlib.contextmanager
    def immediate(self, during: str) -> Iterator[None]:
        """A phase (``during``, e.g. ``"during start-up"``) in which a signal, or one before it, stops at once."""
        if self.signum is not None and self.active:
            signum = self.signum
            self.restore()
            raise TrainingInterrupted(None, signum, during=during)
        outer, self._during = self._during, during
        try:
            yield
        finally:
            self._during = outer

    def handle(self, signum: int, frame: FrameType | None = None) -> None:
        """The first call asks for a stop; the second (or any inside :meth:`immediate`) raises."""
        if hasattr(signal, "SIGHUP") and signum == signal.SIGHUP:
            for name in ("stdout", "stderr"):
                stream = getattr(sys, name, None)
                if stream is not None and not isinstance(stream, _HungUpStream):
                    setattr(sys, name, _HungUpStream(stream))
        if self._during is not None or self.signum is not None:
            self.restore()
            raise TrainingInterrupted(None, signum, aborted=True, during=self._during)
        self.signum = int(signum)
        if self.announce:
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                sys.stderr.write(
                    f"\n[st-rl] {_signal_name(signum)} received: finishing this iteration, then saving a "
                    "checkpoint (send it again to abort at once)\n"
                )
                sys.stderr.flush()


@contextlib.contextmanager
def stop_at_once(during: str) -> Iterator[None]:
    """:meth:`InterruptGuard.immediate` of the running ``learn()`` (a no-op outside it), for blocking waits."""
    on_main = threading.current_thread() is threading.main_thread()
    with _ACTIVE[-1].immediate(during) if _ACTIVE and on_main else contextlib.nullcontext():
        yield
