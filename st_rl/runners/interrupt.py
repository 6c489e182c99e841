"""Stopping training cleanly on SIGINT / SIGTERM.

While :meth:`st_rl.runners.OnPolicyRunner.learn` runs in the main thread, the first Ctrl-C (SIGINT) or SIGTERM
only asks it to stop: the iteration in progress finishes, a checkpoint is saved atomically, the writers are
closed and :class:`TrainingInterrupted` is raised. A second signal aborts at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

__all__ = ["InterruptGuard", "TrainingInterrupted"]


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a signal.

    Attributes:
        checkpoint: the checkpoint saved at the stop (``None`` when nothing was saved: no log directory, or an
            abort by a second signal).
        signum: the signal (``signal.SIGINT`` or ``signal.SIGTERM``).
        aborted: a second signal stopped training at once, without saving.
    """

    def __init__(self, checkpoint: str | None, signum: int, aborted: bool = False) -> None:
        name = _signal_name(signum)
        if aborted:
            text = f"training aborted by a second {name}; nothing saved"
        elif checkpoint is None:
            text = f"training stopped by {name}; nothing saved (no log directory)"
        else:
            text = f"training stopped by {name}; saved {checkpoint}"
        super().__init__(text)
        self.checkpoint = checkpoint
        self.signum = int(signum)
        self.aborted = aborted

    @property
    def exit_code(self) -> int:
        """The shell's exit code for the signal: 128 + signal number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class InterruptGuard:
    """Turns SIGINT and SIGTERM into a stop request while active (a context manager).

    The handlers are installed on entry and the previous ones restored on exit, only in the main thread;
    elsewhere the guard does nothing. The first signal sets :attr:`signum`; a second one restores the previous
    handlers and raises :class:`TrainingInterrupted` (``aborted=True``) at once.

    Args:
        signals: the signals to handle.
        announce: print a note to stderr at the first signal.
    """

    def __init__(
        self, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM), announce: bool = True
    ) -> None:
        self.signals = signals
        self.announce = announce
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for."""
        return self.signum is not None

    @property
    def active(self) -> bool:
        """Whether the handlers are installed."""
        return bool(self._previous)

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self.handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def restore(self) -> None:
        """Put the previous handlers back (idempotent)."""
        previous, self._previous = self._previous, {}
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def handle(self, signum: int, frame: FrameType | None = None) -> None:
        """The signal handler: the first call asks for a stop, the second aborts.

        Raises:
            TrainingInterrupted: at the second signal.
        """
        if self.signum is not None:
            self.restore()
            raise TrainingInterrupted(None, signum, aborted=True)
        self.signum = int(signum)
        if self.announce:
            try:
                sys.stderr.write(
                    f"\n[st-rl] {_signal_name(signum)} received: finishing this iteration, then saving a "
                    "checkpoint (send it again to abort at once)\n"
                )
                sys.stderr.flush()
            except (OSError, RuntimeError, ValueError):  # a closed or busy stream must not break the stop
                pass
