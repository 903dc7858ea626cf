"""Run directories: the merged config, a metrics file and pictures, one folder per run.

Whole files in a run (``config.toml``, ``summary.json``, pictures) are written
through :func:`atomic_write` / :func:`atomic_save`: a reader, or a run that
crashed mid-write, sees the old file or the new one, never half of one. A
process writing into a run holds an exclusive lock on ``<run>/.lock``
(:class:`RunLock`), so two processes never write into one run; the operating
system drops the lock when the process dies.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import tomli_w

from explorer.config import Config
from explorer.core import ExplorerError
from explorer.files import atomic_save, atomic_write, json_text, remedy

#: where a run can go instead, in messages
ELSEWHERE = "choose another folder (--out or run.dir)"
#: the largest ``summary.json`` a resumed run reads back (a summary holds a few numbers per episode)
MAX_SUMMARY_BYTES = 64 * 2**20


class RunDirError(ExplorerError):
    """A run directory cannot be opened for writing (in use by another process, not a folder, not writable)."""


def timestamped_path(parent: str | Path, name: str) -> Path:
    """``<parent>/<YYYYmmdd-HHMMSS>-<name>``, numbered when it exists already."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(parent) / f"{stamp}-{name}"
    n = 1
    while path.exists():
        n += 1
        path = Path(parent) / f"{stamp}-{name}-{n}"
    return path


_WINDOWS_LOCK_OFFSET = 2**30  # msvcrt locks bytes; lock one far past the pid so others can read the pid


class RunLock:
    """An exclusive lock on ``<run>/.lock``, which holds the holder's pid.

    ``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows: either way the
    operating system releases it when the process ends, however it ends.

    Raises:
      RunDirError: another process (or another open of the run in this process) holds it,
        or the lock file cannot be created.
    """

    def __init__(self, run: str | Path):
        self.run = Path(run)
        self.path = self.run / ".lock"
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise RunDirError(f"cannot lock run {self.run}: {err.strerror or err}; {remedy(err, ELSEWHERE)}") from None
        try:
            if not _try_lock(fd):
                pid = _read_pid(fd)
                if pid == str(os.getpid()):
                    raise RunDirError(f"run {self.run} is already open for writing in this process")
                raise RunDirError(f"run {self.run} is in use by another explorer process (pid {pid or 'unknown'}); "
                                  f"wait for it to finish")
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as err:  # a full disk
            os.close(fd)
            raise RunDirError(f"cannot lock run {self.run}: {err.strerror or err}; {remedy(err, ELSEWHERE)}") from None
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd

    def __del__(self) -> None:  # a run dropped without close() (an exception on the way) still lets go
        try:  # noqa: SIM105 (no module globals: they may be gone at interpreter exit)
            self.release()
        except Exception:
            pass

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (closing the file drops it); the file stays, so no other process locks a stale copy."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                _unlock(fd)
            finally:
                os.close(fd)


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":
        import msvcrt
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    if sys.platform == "win32":  # Windows wants byte locks undone before the file is closed
        import msvcrt
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    # POSIX: closing the file drops the flock


def _read_pid(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 32).decode("ascii", "replace").strip()
    except OSError:
        return ""


def _claim_new(parent: str | Path, name: str) -> Path:
    """Create and return ``<parent>/<YYYYmmdd-HHMMSS>-<name>[-n]``; two processes never get the same folder."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    Path(parent).mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        path = Path(parent) / (f"{stamp}-{name}" if n == 1 else f"{stamp}-{name}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RunDirError(f"cannot find a free run directory name for {name} in {parent}")


class RunDir:
    """``<parent>/<timestamp>-<name>/`` with ``config.toml``, ``metrics.jsonl``, ``summary.json``
    and TensorBoard event files under ``tb/`` (``tensorboard --logdir runs``).

    Opening one locks it (:class:`RunLock`) until :meth:`close`.

    Args:
      parent: folder of run directories (``run.dir``).
      name: what the run is (``explore``, ``play``, ...), part of the folder name.
      config: the merged config, written to ``config.toml`` unless ``write_config`` is False.
      path: a given run directory (created if missing) instead of a new timestamped one.
      write_config: False opens the run without changing anything in it (a resume, until
        :meth:`commit_config` says the run goes on).

    Raises:
      RunDirError: the folder cannot be created, is a file, or is in use by another process.
    """

    def __init__(self, parent: str | Path, name: str, config: Config | None, path: str | Path | None = None,
                 *, write_config: bool = True):
        try:
            if path is None:
                if Path(parent).exists() and not Path(parent).is_dir():
                    raise RunDirError(f"cannot create a run directory in {parent}: it is a file, not a folder; "
                                      f"{ELSEWHERE}")
                for left in _remove_crashed(Path(parent)):
                    print(f"explorer: removed {left}: a run that crashed before it wrote anything left it empty",
                          file=sys.stderr)
                self.path = _claim_new(parent, name)
            else:
                self.path = Path(path)
                if self.path.exists() and not self.path.is_dir():
                    raise RunDirError(f"run directory {self.path} is a file, not a folder; give a run directory")
                self.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            where = path if path is not None else Path(parent)
            raise RunDirError(f"cannot create a run directory in {where}: {err.strerror or err}; choose another "
                              f"folder (--out or run.dir)") from None
        self._new = path is None
        self._metrics: Any = None
        self._writer: Any = None
        self._earlier: list[Any] | None = None  # the summaries of the run's earlier parts, read at the first write
        try:
            self._lock = RunLock(self.path)
        except BaseException:
            if self._new:
                _remove_unused(self.path)
            raise
        if write_config and config is not None:
            try:
                self.commit_config(config)
            except BaseException:
                self.close()
                self._discard()
                raise

    @classmethod
    def reopen(cls, path: str | Path) -> RunDir:
        """An existing run directory, locked, with nothing in it changed (to resume it).

        Call :meth:`commit_config` once the run is known to go on (its checkpoint restored).

        Raises:
          RunDirError: there is no such folder, or another process has it open.
        """
        path = Path(path)
        if not path.is_dir():
            raise RunDirError(f"no run directory at {path}; give the folder of an earlier run")
        return cls(path.parent, path.name, None, path=path, write_config=False)

    def commit_config(self, config: Config) -> Path:
        """Write ``config.toml`` (whole or not at all), replacing the one there.

        Raises:
          RunDirError: it cannot be written (a full disk); the one there is left as it was.
        """
        path = self.path / "config.toml"
        try:
            return atomic_write(path, tomli_w.dumps(config.to_dict()))
        except OSError as err:
            raise RunDirError(f"cannot write {path}: {err.strerror or err}; {remedy(err, ELSEWHERE)}") from None

    def save(self, name: str, write: Callable[[Path], object]) -> Path:
        """Write file ``name`` of the run through ``write(temporary path)`` and rename it in (see :func:`atomic_save`).

        Raises:
          RunDirError: it cannot be written (a full disk); the file there is left as it was.
        """
        with self._writing(name):
            return atomic_save(self.path / name, write)

    def log(self, record: dict[str, Any]) -> None:
        """Append one JSON line to ``metrics.jsonl`` and flush it.

        Raises:
          RunDirError: it cannot be written (a full disk); the lines before stay.
        """
        with self._writing("metrics.jsonl"):
            if self._metrics is None:
                self._metrics = self._open_metrics()
            self._metrics.write(json_text(record) + "\n")
            self._metrics.flush()

    @contextlib.contextmanager
    def _writing(self, name: str) -> Iterator[None]:
        try:
            yield
        except OSError as err:
            raise RunDirError(f"cannot write {self.path / name}: {err.strerror or err}; the run stops: "
                              f"{remedy(err, ELSEWHERE)}") from None

    def _open_metrics(self) -> Any:
        path = self.path / "metrics.jsonl"
        torn = False
        if path.is_file() and path.stat().st_size:
            with open(path, "rb") as old:
                old.seek(-1, os.SEEK_END)
                torn = old.read(1) != b"\n"  # a run killed mid-line: the next record starts on a line of its own
        out = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        if torn:
            out.write("\n")
        return out

    def scalars(self, step: int, values: dict[str, float], prefix: str = "") -> None:
        """Write scalars to TensorBoard (``tb/``) at ``step``; names may hold a ``group/`` prefix."""
        import tensorflow as tf
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(str(self.path / "tb"))
        with self._writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(f"{prefix}{name}", float(value))

    def write_summary(self, summary: dict[str, Any]) -> Path:
        """Write ``summary.json`` (whole or not at all, strict JSON: a number that is not finite is ``null``).

        A run that goes on from an earlier one (``explore --resume`` of an explore or replay run) keeps
        the summaries that were there: the file holds this part's summary, and those of the parts before
        it under ``earlier``, oldest first.

        Raises:
          RunDirError: it cannot be written (a full disk); the one there is left as it was.
        """
        with self._writing("summary.json"):
            if self._earlier is None:
                self._earlier = self._earlier_summaries()
            whole = {**summary, "earlier": self._earlier} if self._earlier else summary
            return atomic_write(self.path / "summary.json", json_text(whole, indent=2) + "\n")

    def _earlier_summaries(self) -> list[Any]:
        """The summaries of the run's earlier parts, from the ``summary.json`` there when the run was opened.

        One that cannot be read as a summary is moved aside to ``summary-unreadable[-n].json`` (and named in
        the list), so nothing in it is lost.
        """
        path = self.path / "summary.json"
        if not path.is_file():
            return []
        try:
            if path.stat().st_size > MAX_SUMMARY_BYTES:
                raise ValueError(f"larger than {MAX_SUMMARY_BYTES} bytes")
            previous = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(previous, dict):
                raise ValueError("not a JSON object")
        except (ValueError, UnicodeDecodeError):
            aside = self.path / "summary-unreadable.json"
            n = 1
            while aside.exists():
                n += 1
                aside = self.path / f"summary-unreadable-{n}.json"
            os.replace(path, aside)
            return [{"unreadable": aside.name}]
        earlier = previous.pop("earlier", [])
        return [*(earlier if isinstance(earlier, list) else [earlier]), previous]

    def close(self) -> None:
        """Close the metrics file and TensorBoard writer, and release the lock. Safe to call twice.

        A line that could not be written (a full disk) was reported by :meth:`log`; closing does not
        report it again.
        """
        try:
            if self._metrics is not None:
                metrics, self._metrics = self._metrics, None
                with contextlib.suppress(OSError):
                    metrics.close()
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        finally:
            self._lock.release()

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Close the run; a new run that wrote nothing but its config (it failed or was stopped before) is removed."""
        self.close()
        self._discard()

    def _discard(self) -> None:
        """Remove this run's folder if it is new and holds nothing worth keeping, so that failed starts
        leave no empty runs behind: only its config and lock, empty files and folders, and TensorBoard
        files (every mode that logs a metric there writes ``metrics.jsonl`` or its results beside them)."""
        if self._new and not self._lock.held:
            _remove_unused(self.path)


def _remove_unused(path: Path) -> None:
    """Remove run folder ``path`` if it holds nothing worth keeping (see :meth:`RunDir._discard`)."""
    try:
        if _unused(path):
            shutil.rmtree(path)
    except OSError:
        pass  # a folder that cannot be cleaned is left as it is


def _unused(path: Path) -> bool:
    """Whether run folder ``path`` holds nothing worth keeping (see :meth:`RunDir._discard`)."""
    files = [p for p in path.rglob("*") if not p.is_dir() and p.relative_to(path).parts[0] != "tb"]
    return not any(p.name not in (".lock", "config.toml") and p.stat().st_size for p in files)


#: the name of a new run's folder (:func:`_claim_new`)
_RUN_NAME = re.compile(r"\d{8}-\d{6}-.+")
#: what the folder of a run that wrote nothing can hold
_START_FILES = {".lock", "config.toml", "metrics.jsonl", "tb"}


def _remove_crashed(parent: Path) -> list[Path]:
    """Remove the run folders in ``parent`` that runs which died before they wrote anything left behind
    (a crash, a kill: no clean-up ran), and return them.

    Such a folder holds only what a run writes at its start (see :meth:`RunDir._discard`), and its lock is
    free: the process that made it is gone. A run in use holds its lock and is never touched.
    """
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for path in sorted(parent.iterdir()) if parent.is_dir() else []:
            try:
                # config.toml is written once the lock is held: a run still taking its lock is never judged
                if not (_RUN_NAME.fullmatch(path.name) and path.is_dir() and (path / ".lock").is_file()
                        and (path / "config.toml").is_file()
                        and {p.name for p in path.iterdir()} <= _START_FILES and _unused(path)):
                    continue
                lock = RunLock(path)
            except (OSError, RunDirError):
                continue  # in use, or gone meanwhile
            try:
                if _unused(path):
                    shutil.rmtree(path)
                    removed.append(path)
            except OSError:
                pass
            finally:
                lock.release()
    return removed
