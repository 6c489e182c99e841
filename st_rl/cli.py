"""Command line: ``st-rl train`` trains a built-in task or your environment (``--env``) with the task's preset,
a config file (``--config``) and ``KEY=VALUE`` overrides; ``st-rl tasks`` lists the tasks; ``st-rl play``
evaluates a checkpoint (metrics, video, plot; rendering uses ``MUJOCO_GL=egl`` unless set); ``st-rl plot``
draws a run's training curves. Errors print one line, ``st-rl: error: ...`` (exit code 2; 130 for a Ctrl-C
before training started); ``--debug`` shows the traceback.

This module imports only the standard library when it is imported; :mod:`st_rl.commands` (torch, st_rl) is
imported inside :func:`main`, so that a Ctrl-C while Python starts up is reported like any other interrupt."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import warnings
from typing import Any

EXIT_ERROR = 2
"""Exit code of an error the user can fix (a bad option, config, file, device, environment factory ...)."""
EXIT_UNEXPECTED = 1
"""Exit code of an unexpected error (a bug in st_rl or in code it runs); ``--debug`` shows its traceback."""


def __getattr__(name: str) -> Any:
    """The names that moved to :mod:`st_rl.commands` (``CommandError``, ``cmd_train`` ...), imported on use."""
    if name.startswith("__"):  # module protocol lookups (__all__, __path__ ...) need no torch
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from st_rl import commands

    return getattr(commands, name)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0].strip()


def _error_lines(error: BaseException) -> tuple[list[str], int]:
    """What :func:`main` prints for ``error`` (the lines after ``st-rl: error: ``) and the exit code."""
    config_error = getattr(sys.modules.get("st_rl.config"), "ConfigError", None)
    if config_error is not None and isinstance(error, config_error):  # its other problems indented below
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        return [lines[0], *("  " + line for line in lines[1:])], EXIT_ERROR
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        target = f"{error.filename} -> {error.filename2}" if error.filename2 else str(error.filename)
        return [f"{error.strerror}: {target}"], EXIT_ERROR
    if isinstance(error, (ValueError, OSError, ImportError)):  # errors st_rl raises with a message to show
        return [_first_line(error) or type(error).__name__], EXIT_ERROR
    out_of_memory = getattr(sys.modules.get("torch"), "OutOfMemoryError", None)  # torch >= 2.5
    if out_of_memory is not None and isinstance(error, out_of_memory):
        return [
            f"out of memory on the device ({_first_line(error).split('. ')[0]}): use fewer --num-envs, a "
            "smaller policy or --device cpu"
        ], EXIT_ERROR
    if isinstance(error, MemoryError) or "DefaultCPUAllocator: can't allocate memory" in str(error):
        size = re.search(r"you tried to allocate (\d+) bytes", str(error))
        detail = f"{int(size.group(1)) / 2**30:,.1f} GiB asked for" if size else _first_line(error)
        return [f"out of memory on the CPU ({detail}): use fewer --num-envs or a smaller policy"], EXIT_ERROR
    detail = _first_line(error)
    return [
        f"unexpected {type(error).__name__}{': ' + detail if detail else ''} (--debug shows the traceback; if st_rl "
        "is at fault, please report it with that traceback)"
    ], EXIT_UNEXPECTED


def _report_error(error: BaseException) -> int:
    """Print an error as ``st-rl: error: <first line>`` (a ConfigError's other problems indented below) and
    return the exit code."""
    lines, code = _error_lines(error)
    print("\n".join([f"st-rl: error: {lines[0]}", *lines[1:]]), file=sys.stderr, flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run the ``st-rl`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit code.

    Every error prints one line, ``st-rl: error: ...``: a mistake the user can fix (``ValueError`` including
    ``ConfigError``, ``OSError``, ``ImportError``; argument errors exit via ``SystemExit``) returns 2, anything
    else 1; ``--debug`` shows the traceback instead. Training stopped by SIGINT / SIGTERM prints ``interrupted:
    saved <checkpoint>`` and returns 128 + the signal number; a Ctrl-C before training started returns 130.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    args: argparse.Namespace | None = None
    handlers = _install_stop_handlers()
    format_warning = warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        from st_rl import commands  # torch and st_rl: a Ctrl-C meanwhile is reported below

        parser = commands.build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra:
            # 'train' overrides after an option (argparse fills a '*' positional only once)
            if args.command == "train" and not any(item.startswith("-") for item in extra):
                args.overrides = [*args.overrides, *extra]
            else:
                parser.error(f"unrecognized arguments: {' '.join(extra)}")
        debug = debug or bool(getattr(args, "debug", False))
        if args.command is None:
            parser.print_help()
            return 1
        return commands.COMMANDS[args.command](args)
    except KeyboardInterrupt as e:
        return _report_interrupt(e, args, debug)
    except Exception as e:
        if debug:
            raise
        return _report_error(e)
    finally:
        warnings.formatwarning = format_warning
        _restore_handlers(handlers)


def _one_line_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """A warning as ``st-rl: warning: <message>`` (Python's format adds the file and a line of st_rl's source)."""
    return f"st-rl: warning: {message}\n"


class _Stopped(KeyboardInterrupt):
    """SIGTERM / SIGHUP outside ``learn()`` (which handles them itself): stop, as a Ctrl-C does."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _install_stop_handlers() -> dict[int, Any]:
    """Make SIGTERM and SIGHUP stop the command like a Ctrl-C (one line, exit code 128 + the signal number);
    signals the caller ignores (``nohup``) or handles stay as they are. Returns the previous handlers."""

    def stop(signum: int, frame: Any) -> None:
        raise _Stopped(signum)

    previous: dict[int, Any] = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                previous[signum] = signal.signal(signum, stop)
        except ValueError:  # not the main thread: signals stay as they are
            break
    return previous


def _restore_handlers(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        with contextlib.suppress(ValueError):  # installed in the main thread, restored there
            signal.signal(signum, handler)


def _report_interrupt(error: KeyboardInterrupt, args: argparse.Namespace | None, debug: bool) -> int:
    """Print how a Ctrl-C / SIGTERM stopped the command (one line to stderr) and return the exit code."""
    # Not imported here: the Ctrl-C may have stopped Python while it imported torch.
    training_interrupted = getattr(sys.modules.get("st_rl.runners.interrupt"), "TrainingInterrupted", None)
    if training_interrupted is not None and isinstance(error, training_interrupted):
        checkpoint = getattr(error, "checkpoint", None)
        if checkpoint is not None:
            print(f"interrupted: saved {os.path.abspath(checkpoint)}", file=sys.stderr, flush=True)
        else:
            print(f"interrupted: {error}", file=sys.stderr, flush=True)
        return int(getattr(error, "exit_code", 130))
    if debug:
        raise error
    command = getattr(args, "command", None)
    if command == "train" and not getattr(args, "training_started", False):
        what = " before training started; nothing was saved: start it again"
    elif command == "train":
        what = " during training; the checkpoints already saved are complete: continue with --resume"
    else:
        what = f"; st-rl {command} stopped" if command else " while st-rl was starting"
    signum = getattr(error, "signum", None)
    name = "Ctrl-C" if signum is None else _signal_name(signum)
    with contextlib.suppress(OSError):  # the terminal went away (SIGHUP)
        print(f"st-rl: error: interrupted ({name}){what}", file=sys.stderr, flush=True)
    return 130 if signum is None else 128 + int(signum)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


if __name__ == "__main__":
    sys.exit(main())
