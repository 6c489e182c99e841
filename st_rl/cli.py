"""The ``st-rl`` entry point, reporting errors in one line (a Ctrl-C while Python imports torch included)."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import warnings
from typing import Any

try:
    import torch

    from st_rl import commands
    from st_rl.config import ConfigError
    from st_rl.runners.interrupt import TrainingInterrupted
except KeyboardInterrupt:  # before st-rl has started anything: one line, not a traceback
    print("st-rl: error: interrupted (Ctrl-C) while st-rl was starting", file=sys.stderr, flush=True)
    raise SystemExit(130) from None

EXIT_ERROR = 2  # an error the user can fix
EXIT_UNEXPECTED = 1  # a bug in st_rl or in code it runs


def __getattr__(name: str) -> Any:
    """The names that moved to :mod:`st_rl.commands` (``CommandError``, ``cmd_train`` ...)."""
    return getattr(commands, name)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0].strip()


def _error_lines(error: BaseException) -> tuple[list[str], int]:
    if isinstance(error, ConfigError):  # its other problems indented below
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        return [lines[0], *("  " + line for line in lines[1:])], EXIT_ERROR
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        target = f"{error.filename} -> {error.filename2}" if error.filename2 else str(error.filename)
        return [f"{error.strerror}: {target}"], EXIT_ERROR
    if isinstance(error, (ValueError, OSError, ImportError)):  # errors st_rl raises with a message to show
        return [_first_line(error) or type(error).__name__], EXIT_ERROR
    out_of_memory = getattr(torch, "OutOfMemoryError", ())  # torch >= 2.5
    if isinstance(error, out_of_memory):
        detail = _first_line(error).split(". ")[0]
        fix = "use fewer --num-envs, a smaller policy or --device cpu"
        return [f"out of memory on the device ({detail}): {fix}"], EXIT_ERROR
    if isinstance(error, MemoryError) or "DefaultCPUAllocator: can't allocate memory" in str(error):
        size = re.search(r"you tried to allocate (\d+) bytes", str(error))
        detail = f"{int(size.group(1)) / 2**30:,.1f} GiB asked for" if size else _first_line(error)
        return [f"out of memory on the CPU ({detail}): use fewer --num-envs or a smaller policy"], EXIT_ERROR
    detail = _first_line(error)
    what = f"unexpected {type(error).__name__}{': ' + detail if detail else ''}"
    return [f"{what} (--debug shows the traceback; if st_rl is at fault, please report it)"], EXIT_UNEXPECTED


def main(argv: list[str] | None = None) -> int:
    """Run ``st-rl`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code: errors are one line (exit
    code 2 for a user's mistake: ValueError, OSError, ImportError; 1 for others; 128 + N for signal N)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    args: argparse.Namespace | None = None
    handlers = _install_stop_handlers()
    format_warning = warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        parser = commands.build_parser()
        args, extra = parser.parse_known_args(argv)
        # 'train' overrides after an option (argparse fills a '*' positional only once)
        if extra and args.command == "train" and not any(item.startswith("-") for item in extra):
            args.overrides = [*args.overrides, *extra]
        elif extra:
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
        lines, code = _error_lines(e)
        print("\n".join([f"st-rl: error: {lines[0]}", *lines[1:]]), file=sys.stderr, flush=True)
        return code
    finally:
        warnings.formatwarning = format_warning
        for signum, handler in handlers.items():
            with contextlib.suppress(ValueError):  # installed in the main thread, restored there
                signal.signal(signum, handler)


def _one_line_warning(message: Warning | str, *args: Any, **kwargs: Any) -> str:
    return f"st-rl: warning: {message}\n"


class _Stopped(KeyboardInterrupt):
    """SIGTERM / SIGHUP outside ``learn()`` (which handles them itself): stop, as a Ctrl-C does."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _install_stop_handlers() -> dict[int, Any]:
    """Make SIGTERM and SIGHUP, unless ignored (``nohup``) or handled, stop like a Ctrl-C; the old handlers."""

    def stop(signum: int, frame: Any) -> None:
        raise _Stopped(signum)

    previous: dict[int, Any] = {}
    for signum in [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]:
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                previous[signum] = signal.signal(signum, stop)
        except ValueError:  # not the main thread: signals stay as they are
            break
    return previous


def _report_interrupt(error: KeyboardInterrupt, args: argparse.Namespace | None, debug: bool) -> int:
    if isinstance(error, TrainingInterrupted):
        what = f"saved {os.path.abspath(error.checkpoint)}" if error.checkpoint is not None else str(error)
        print(f"interrupted: {what}", file=sys.stderr, flush=True)
        return error.exit_code
    if debug:
        raise error
    command = getattr(args, "command", None)
    what = f"; st-rl {command} stopped" if command else " while st-rl was starting"
    if command == "train" and not getattr(args, "training_started", False):
        what = " before training started; nothing was saved: start it again"
    elif command == "train":
        what = " during training; the checkpoints already saved are complete: continue with --resume"
    signum = getattr(error, "signum", None)
    name = "Ctrl-C" if signum is None else f"signal {signum}"
    with contextlib.suppress(ValueError):
        name = signal.Signals(signum).name
    with contextlib.suppress(OSError):  # the terminal went away (SIGHUP)
        print(f"st-rl: error: interrupted ({name}){what}", file=sys.stderr, flush=True)
    return 130 if signum is None else 128 + int(signum)


if __name__ == "__main__":
    sys.exit(main())
