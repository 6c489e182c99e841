"""Run directories: one writer at a time (lock file :data:`LOCK_NAME`, ``flock``-ed on POSIX); an earlier run
is continued or replaced, never mixed into (docs/configuration.md, "Run directories")."""

from __future__ import annotations

import atexit
import contextlib
import errno
import glob
import json
import os
import socket
import sys
import time
from dataclasses import dataclass

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking (read_lock still reads a lock file)
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "LOCK_NAME",
    "LockOwner",
    "RunDirLock",
    "RunDirectory",
    "RunDirectoryError",
    "RunDirectoryLocked",
    "check_run_dir",
    "clear_previous_run",
    "previous_run_files",
    "read_lock",
    "remove_stale_temporaries",
]

LOCK_NAME = ".st_rl.lock"
# Temporary files of atomic writes: save_checkpoint's of model_*.pt, atomic_write's of config.json.
_TMP_PATTERNS = (".tmp_model_*", ".config.json*.tmp")
_HELD: dict[str, RunDirLock] = {}  # run directory (real path) -> the lock this process holds there


class RunDirectoryError(FileExistsError):
    """A run directory cannot be written: it holds an earlier run that is neither resumed nor replaced."""


class RunDirectoryLocked(RunDirectoryError):
    """Another live process writes the run directory (``directory``, owner ``pid`` and ``host``, or None)."""

    def __init__(self, directory: str, pid: int | None, host: str | None, detail: str = "") -> None:
        who = f"process {pid}" if pid is not None else "another process"
        if host is not None and host != socket.gethostname():
            who += f" on host {host}"
        lock = os.path.join(directory, LOCK_NAME)
        super().__init__(
            f"run directory {directory} is in use by {who} (lock file {lock}){detail}; wait for that run to "
            "end or stop it, or train into another directory"
        )
        self.directory, self.pid, self.host = directory, pid, host


def _locked(run_dir: str, owner: LockOwner | None, detail: str = "") -> RunDirectoryLocked:
    return RunDirectoryLocked(run_dir, owner and owner.pid, owner and owner.host, detail)


@dataclass(frozen=True)
class LockOwner:
    """What a lock file says about its owner."""

    pid: int
    host: str
    started: str = ""

    def is_this_process(self) -> bool:
        return self.pid == os.getpid() and self.host == socket.gethostname()

    def is_alive(self) -> bool:
        """``False`` only for a pid of this host that no longer exists."""
        if self.host != socket.gethostname():
            return True
        if self.pid <= 0 or os.name == "nt":  # on Windows, os.kill would terminate the process
            return self.pid > 0
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # exists, owned by another user
            pass
        return True


def read_lock(run_dir: str) -> LockOwner | None:
    """The owner named by ``run_dir``'s lock file, or ``None``."""
    try:
        fd = os.open(os.path.join(run_dir, LOCK_NAME), os.O_RDONLY)
    except OSError:
        return None
    try:
        return _read_fd(fd)
    finally:
        os.close(fd)


def _read_fd(fd: int) -> LockOwner | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)  # not os.pread: POSIX only, and read_lock serves every platform
        data = json.loads(os.read(fd, 4096).decode("utf-8", "replace"))
        return LockOwner(int(data["pid"]), str(data["host"]), str(data.get("started", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _note(message: str) -> None:
    print(f"[st-rl] {message}", file=sys.stderr, flush=True)


def _flock(fd: int, exclusive: bool) -> bool:
    """Take a non-blocking ``flock``; False when another holds it (no flock without fcntl: True)."""
    if fcntl is None:  # pragma: no cover - not POSIX
        return True
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
            raise
        return False
    return True


class RunDirLock:
    """The lock file of one run directory (another lock of this process for it takes it over)."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.path = os.path.join(run_dir, LOCK_NAME)
        self._key = os.path.realpath(run_dir)
        self._fd: int | None = None
        self._pid: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock (a no-op when held); RunDirectoryLocked when another live process holds it."""
        if self.held or fcntl is None:
            return
        os.makedirs(self.run_dir, exist_ok=True)
        other = _HELD.get(self._key)
        if other is not None and other.held and other._pid == os.getpid():
            self._fd, self._pid, other._fd, other._pid = other._fd, other._pid, None, None
            _HELD[self._key] = self
            return
        for _ in range(100):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                got = _flock(fd, exclusive=True)
            except OSError:
                os.close(fd)
                raise
            owner, same = _read_fd(fd), self._same_file(fd)  # not same: removed or replaced meanwhile, retry
            dead = owner if owner is not None and not owner.is_alive() else None
            if same and dead:
                _note(
                    f"took over the stale lock of process {dead.pid}, which no longer runs, in {self.run_dir}"
                )
            if same and got and (dead or owner is None or owner.is_this_process()):
                started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
                data = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started})
                os.ftruncate(fd, 0)
                os.pwrite(fd, (data + "\n").encode("utf-8"), 0)
                os.fsync(fd)
                self._fd, self._pid, _HELD[self._key] = fd, os.getpid(), self
                return
            if same and dead:  # still flock-ed by a child the dead owner forked: start a new lock file
                os.unlink(self.path)
            os.close(fd)  # releases the flock taken above
            if same and not dead:  # flock-ed, or (another host, no flock there) named by a live owner
                raise _locked(
                    self.run_dir, owner, f"; if that run is over, delete {self.path}" if got else ""
                )
        raise RunDirectoryLocked(self.run_dir, None, None, ": the lock file keeps changing")

    def _same_file(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        """Remove the lock file and release the lock (a no-op when not held, or in a forked child)."""
        fd, pid = self._fd, self._pid
        if fd is None or fcntl is None:
            return
        self._fd = self._pid = None
        if _HELD.get(self._key) is self:
            del _HELD[self._key]
        if pid != os.getpid():  # a forked child: the lock is its parent's
            return
        with contextlib.suppress(FileNotFoundError):
            if self._same_file(fd):
                os.unlink(self.path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@atexit.register
def _release_all() -> None:
    for lock in list(_HELD.values()):
        with contextlib.suppress(OSError):
            lock.release()


def previous_run_files(run_dir: str) -> list[str]:
    """The names that mark an earlier run in ``run_dir`` (``config.json``, ``model_*.pt``), sorted."""
    if not os.path.isdir(run_dir):
        return []
    names = [os.path.basename(p) for p in glob.glob(os.path.join(glob.escape(run_dir), "model_*.pt"))]
    if os.path.isfile(os.path.join(run_dir, "config.json")):
        names.append("config.json")
    return sorted(names)


def occupied_message(run_dir: str, names: list[str]) -> str:
    models = sum(n.startswith("model_") for n in names)
    held = [f"{models} checkpoint{'s' if models != 1 else ''} (model_*.pt)"] if models else []
    held += ["config.json"] if "config.json" in names else []
    return (
        f"run directory {run_dir} already holds an earlier run ({' and '.join(held)}); to continue it, resume: "
        f"st-rl train --resume {run_dir} --log-dir {run_dir} (Python: runner.load(checkpoint) before learn()); "
        "to replace it: st-rl train --overwrite (Python: overwrite=True in the runner config); or train into "
        "another directory"
    )


def check_run_dir(run_dir: str, *, resume: bool = False, overwrite: bool = False) -> None:
    """Check, writing nothing, that training may write ``run_dir`` (RunDirectoryLocked / RunDirectoryError)."""
    if not os.path.isdir(run_dir):
        return
    mine = _HELD.get(os.path.realpath(run_dir))
    if mine is None or not mine.held:
        _check_lock(run_dir)
    names = previous_run_files(run_dir)
    if names and not resume and not overwrite:
        raise RunDirectoryError(occupied_message(run_dir, names))


def _check_lock(run_dir: str) -> None:
    try:
        fd = os.open(os.path.join(run_dir, LOCK_NAME), os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        owner, flocked = _read_fd(fd), not _flock(fd, exclusive=False)
    finally:
        os.close(fd)  # releases a flock taken here
    if owner is not None and (owner.is_this_process() or not owner.is_alive()):
        return  # this process's own, or stale: taken over when training starts
    if owner is not None or flocked:
        detail = "" if flocked else f"; if that run is over, delete {os.path.join(run_dir, LOCK_NAME)}"
        raise _locked(run_dir, owner, detail)


def remove_stale_temporaries(run_dir: str) -> list[str]:
    """Delete the temporaries of interrupted atomic writes in ``run_dir`` (hold its lock); returns their names."""
    return _remove(run_dir, _TMP_PATTERNS)


def clear_previous_run(run_dir: str) -> list[str]:
    """Delete an earlier run's ``model_*.pt`` and TensorBoard files from ``run_dir``; returns their names."""
    return _remove(run_dir, ("model_*.pt", "events.out.tfevents.*"))


def _remove(run_dir: str, patterns: tuple[str, ...]) -> list[str]:
    removed = []
    for pattern in patterns:
        for path in glob.glob(os.path.join(glob.escape(run_dir), pattern)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
                removed.append(os.path.basename(path))
    return sorted(removed)


class RunDirectory:
    """The run directory of one runner: its lock and the rule for an earlier run found there."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = RunDirLock(path)
        self.claimed = False
        self._owned = False  # claimed once: its files are this runner's own from then on
        # Empty at build time: a config.json appearing before the first write is the client's (legged_gym).
        self._fresh = not previous_run_files(path)
        self.client_config = False

    def claim(self, *, resumed: bool, overwrite: bool) -> None:
        """Lock the directory; an earlier run is continued (``resumed``), replaced (``overwrite``) or refused."""
        if self.claimed:
            return
        self.lock.acquire()
        names = previous_run_files(self.path)
        if self._fresh and not self._owned and "config.json" in names:
            names.remove("config.json")
            self.client_config = True
        if names and not (resumed or self._owned):
            if not overwrite:
                self.lock.release()
                raise RunDirectoryError(occupied_message(self.path, names))
            removed = clear_previous_run(self.path)
            _note(f"overwrite: deleted {len(removed)} files of the earlier run in {self.path}")
        removed = remove_stale_temporaries(self.path)
        if removed:
            _note(f"removed {len(removed)} temporary files of interrupted saves from {self.path}")
        self.claimed = self._owned = True

    def close(self) -> None:
        """Release the lock (idempotent)."""
        self.claimed = False
        self.lock.release()
