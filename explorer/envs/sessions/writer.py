"""Recording sessions to disk: what the agent saw and did, crash-safe.

A session is one directory (the format is described in ``docs/sessions.md``)::

    meta.json          what was recorded; rewritten (atomically) when the session closes
    steps.jsonl        one JSON line per committed step, in order
    journal.jsonl      steps received but not yet committed (evidence after a crash)
    chunks/000000.npz  frames ``uint8[n, H, W, C]`` of steps ``[c*F, c*F + n)``

:class:`Recorder` takes steps on the caller's (control) thread at the cost of
a frame copy and a queue put; a background writer thread compresses frames in
chunks of ``chunk_frames``, writes each chunk to a temporary name, fsyncs it and
renames it into place, and only then appends the chunk's lines to the step log.
So the log never names a frame that is not on disk, and a crash loses at most
the chunk being filled (which the journal counts).

This module does not import TensorFlow, so a recorder is cheap to start.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import platform
import queue
import shutil
import sys
import threading
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from explorer.core import N_AXES, ExplorerError, action_dim
from explorer.envs.sessions.format import (
    CHUNKS,
    FORMAT,
    JOURNAL,
    MAX_CHANNELS,
    MAX_CHUNK_BYTES,
    MAX_CHUNK_FRAMES,
    MAX_FRAME_SIDE,
    META,
    STEPS,
    VERSION,
    chunk_name,
)
from explorer.files import atomic_write, fsync_dir, remedy

#: where a session can go instead, in messages
ELSEWHERE = "record elsewhere (--out, --record or record.dir)"


class RecorderError(ExplorerError):
    """The recorder cannot take or write steps; the message says why."""


def library_versions() -> dict[str, str]:
    """Versions of Python, numpy, explorer and, if already imported, TensorFlow and Keras."""
    versions = {"python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform()}
    try:
        from importlib.metadata import version
        versions["explorer"] = version("explorer")
    except Exception:  # running from a source tree that is not installed
        versions["explorer"] = "source"
    for name in ("tensorflow", "keras", "vizdoom", "mss"):
        module = sys.modules.get(name)
        if module is not None:
            versions[name] = str(getattr(module, "__version__", "?"))
    return versions


def write_chunk(path: Path, frames: list[np.ndarray], start: int, level: int = 1) -> None:
    """Write ``n`` frames ``uint8[H, W, C]`` of steps ``[start, start + n)`` as an ``.npz`` (atomic, fsynced).

    The archive is what ``np.savez_compressed`` writes (two plain arrays,
    ``frames`` = ``uint8[n, H, W, C]`` and ``start`` = ``int64[1]``, no pickles),
    at deflate ``level`` (1 is fast). Frames are streamed one by one into the
    archive, never stacked, so the writer holds the GIL only briefly.
    """
    tmp = path.with_name(path.name + ".tmp")
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.uint8)), "fortran_order": False,
              "shape": (len(frames), *frames[0].shape)}
    with open(tmp, "wb") as f:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as z:
            with z.open("frames.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_1_0(member, header)
                for frame in frames:
                    member.write(np.ascontiguousarray(frame).data)
            with z.open("start.npy", "w") as member:
                np.lib.format.write_array(member, np.array([start], np.int64), allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _float(x: float) -> float | None:
    """A float32 value for JSON (shortest text that reads back to the same float32); None for NaN."""
    if x != x:  # NaN: an unknown value (no action sent, no reward computed)
        return None
    return float(np.format_float_positional(np.float32(x), unique=True, trim="-"))


def step_line(index: int, t: float, action: np.ndarray | None, reward: float | None, first: bool, last: bool,
              decision: bool | None = None) -> str:
    """One line of the step log (and of the journal); ``"d"`` only where the decision flag is known."""
    record: dict[str, Any] = {
        "i": index, "t": round(t, 6),
        "a": None if action is None else [_float(v) for v in action],
        "r": None if reward is None else _float(reward),
        "first": bool(first), "last": bool(last),
    }
    if decision is not None:
        record["d"] = bool(decision)
    return json.dumps(record, separators=(",", ":")) + "\n"


_CLOSE = object()


class Recorder:
    """Records steps into a session directory, with a background writer thread.

    One step is RLDS-shaped: the frame the agent saw, the action it then sent,
    the reward that action earned, and whether the step opens (``first``) or
    closes (``last``) an episode. The last step of an episode holds the final
    frame; its action and reward are not used.

    Args:
      path: the session directory; created; it must not already hold a session.
      meta: what to keep about the session (config dict, ``source``: screen or
        game, ``region``, ...); must be JSON-serialisable. Stored under ``meta``.
      chunk_frames: frames per chunk file (also the most a crash can lose, plus the queue).
      queue_chunks: the hand-off queue holds this many chunks of steps; when the
        writer falls that far behind, :meth:`add` waits up to ``block_s`` and
        then raises rather than dropping a step.
      block_s: longest wait in :meth:`add` for a full queue, seconds; None waits as long as
        it takes (for offline writers, never for a real-time loop).
      level: deflate level of the chunks (1 fast .. 9 small).
      buttons: the pad buttons an action holds after its four sticks (``pad.buttons``), kept in the
        metadata so that a replay knows which value is which button.

    Raises:
      RecorderError: the directory already holds a session, or cannot be written.
    """

    def __init__(self, path: str | Path, meta: Mapping[str, Any] | None = None, chunk_frames: int = 64,
                 queue_chunks: int = 4, block_s: float | None = 1.0, level: int = 1,
                 buttons: tuple[str, ...] = ()):
        if not 1 <= chunk_frames <= MAX_CHUNK_FRAMES:
            raise ValueError(f"chunk_frames must be from 1 to {MAX_CHUNK_FRAMES}, got {chunk_frames}")
        self.path = Path(path)
        self.chunk_frames = int(chunk_frames)
        self.block_s = block_s
        self.level = level
        if (self.path / META).exists():
            raise RecorderError(f"{self.path} already holds a session ({META} exists); record into a new directory")
        self.meta: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "status": "recording", "chunk_frames": self.chunk_frames,
            "frame_shape": None, "created_wall": time.time(), "created_monotonic": time.monotonic(),
            "versions": library_versions(), "buttons": list(buttons), "meta": dict(meta or {}),
        }
        self._width = action_dim(buttons)  # the four sticks, then the buttons
        try:
            json.dumps(self.meta)
        except TypeError as err:
            raise RecorderError(f"session meta must be JSON-serialisable: {err}") from err
        self._created = not self.path.exists()
        try:
            (self.path / CHUNKS).mkdir(parents=True, exist_ok=True)
            self._journal = open(self.path / JOURNAL, "w", encoding="utf-8")  # noqa: SIM115 (closed by the writer)
            self._log = open(self.path / STEPS, "w", encoding="utf-8")  # noqa: SIM115 (closed by the writer)
            self._write_meta()
        except OSError as err:
            for name in ("_journal", "_log"):
                with contextlib.suppress(AttributeError, OSError):
                    getattr(self, name).close()
            self._remove_unused()
            raise RecorderError(f"cannot create the session {self.path}: {err.strerror or err}; "
                                f"{remedy(err, ELSEWHERE)}") from None
        self.steps = 0  # steps taken by add()
        self.episodes = 0
        self.committed = 0  # steps whose frames and log lines are on disk
        self.chunks = 0
        self.wait_s = 0.0  # time add() spent waiting on a full queue
        self._shape: tuple[int, ...] | None = None
        self._first_t: float | None = None
        self._last_t: float | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, queue_chunks) * self.chunk_frames)
        self._thread = threading.Thread(target=self._run, name="session-writer", daemon=True)
        self._thread.start()
        atexit.register(self._at_exit)

    # ------------------------------------------------------------ caller side

    def add(self, frame: Any, action: Any | None, reward: float | None, first: bool, last: bool,
            t: float | None = None, decision: bool | None = None) -> None:
        """Take one step; returns at once (the frame is copied, the writer thread does the rest).

        Args:
          frame: ``uint8[H, W, C]`` (numpy array or tensor), the same shape every step.
          action: ``float32[4 + n]`` stick values and buttons sent after seeing ``frame``; None when
            unknown (a person played), stored as NaN.
          reward: the novelty reward that action earned; None when not computed.
          first: this step opens an episode.
          last: this step closes an episode (its action and reward are not used).
          t: monotonic time of the frame, seconds; ``time.monotonic()`` when None.
          decision: ``action`` is a new decision of the agent (False: the previous one, held);
            None when not known (a person played).

        Raises:
          RecorderError: the recorder is closed, the writer thread failed (the
            cause is chained), the frame has the wrong shape or dtype, or the
            writer fell ``queue_chunks`` chunks behind for ``block_s``.
        """
        if t is None:
            t = time.monotonic()
        self._check()
        array = np.array(frame, copy=True)
        if array.dtype != np.uint8 or array.ndim != 3:
            raise RecorderError(f"a frame is uint8[H, W, C], got {array.dtype}{list(array.shape)}")
        if self._shape is None:
            h, w, c = array.shape
            if not (0 < h <= MAX_FRAME_SIDE and 0 < w <= MAX_FRAME_SIDE and 0 < c <= MAX_CHANNELS) or \
                    self.chunk_frames * array.size > MAX_CHUNK_BYTES:
                raise RecorderError(f"frames of {list(array.shape)} cannot be recorded in chunks of {self.chunk_frames}: "
                                    f"a session's frames are at most {MAX_FRAME_SIDE} pixels a side with 1 to "
                                    f"{MAX_CHANNELS} channels, and a chunk at most {MAX_CHUNK_BYTES >> 20} MiB")
            self._shape = array.shape
        elif array.shape != self._shape:
            raise RecorderError(f"frame shape changed from {list(self._shape)} to {list(array.shape)} mid-session")
        act = None
        if action is not None:
            act = np.asarray(action, np.float32).reshape(-1)
            if act.shape != (self._width,):
                raise RecorderError(f"an action of this session has the {N_AXES} stick axes and the buttons "
                                    f"{self.meta['buttons']}: {self._width} values, got shape {np.shape(action)}")
            if not np.isfinite(act).all():
                raise RecorderError(f"step {self.steps}: the action {act.tolist()} is not finite; a session records "
                                    "finite actions, or None where the action is unknown")
        item = (self.steps, float(t), array, act, None if reward is None else float(reward), bool(first), bool(last),
                decision)
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            t0 = time.monotonic()
            try:
                self._queue.put(item, timeout=self.block_s)
            except queue.Full:
                self._check()
                raise RecorderError(
                    f"the session writer is {self._queue.qsize()} steps behind for {self.block_s:g} s "
                    f"(disk too slow for {self.path}?); recording stopped rather than dropping steps") from None
            finally:
                self.wait_s += time.monotonic() - t0
        self.steps += 1
        self.episodes += bool(first)
        self._first_t = t if self._first_t is None else self._first_t
        self._last_t = t

    def close(self) -> dict[str, Any]:
        """Write the last (short) chunk, complete the metadata and stop the writer.

        Returns:
          The final metadata.

        Raises:
          RecorderError: the writer thread failed; what was committed before
            the failure stays readable.
        """
        if self._closed:
            self._raise_error()
            return self.meta
        self._closed = True
        atexit.unregister(self._at_exit)
        if self._thread.is_alive():
            self._queue.put(_CLOSE)
            self._thread.join()
        status = "complete" if self._error is None else "failed"
        self.meta.update(
            status=status, steps=self.committed, chunks=self.chunks, episodes=self.episodes,
            closed_wall=time.time(), first_t=self._first_t, last_t=self._last_t,
            duration_s=(self._last_t - self._first_t) if self._first_t is not None and self._last_t is not None else 0.0,
        )
        if self._error is not None:
            self.meta["error"] = f"{type(self._error).__name__}: {self._error}"
        try:
            self._write_meta()
            if self._error is None:
                (self.path / JOURNAL).unlink(missing_ok=True)
        except OSError as err:
            if self._error is None:
                self._error = err
        if self._error is not None and self.committed == 0:
            self._remove_unused()  # a session that failed before its first chunk holds nothing: no half of one is left
        self._raise_error()
        return self.meta

    def _remove_unused(self) -> None:
        """Remove what this recorder made (all of it, if it made the folder) when it recorded no frame."""
        with contextlib.suppress(OSError):
            if self._created:
                shutil.rmtree(self.path)
            else:
                for name in (META, STEPS, JOURNAL):
                    (self.path / name).unlink(missing_ok=True)
                shutil.rmtree(self.path / CHUNKS, ignore_errors=True)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except RecorderError as err:  # keep the original exception; say what else went wrong
            add_note = getattr(exc, "add_note", None)  # Python 3.11+
            if add_note is not None:
                add_note(f"and closing the session {self.path} failed: {err}")

    @property
    def pending(self) -> int:
        """Steps taken but not yet committed to disk."""
        return self.steps - self.committed

    def _raise_error(self) -> None:
        err = self._error
        if err is None:
            return
        if isinstance(err, OSError):  # a full disk, a folder gone
            kept = (f"the {self.committed} steps written before are kept" if self.committed
                    else "nothing was recorded, so the session folder is not kept")
            raise RecorderError(f"cannot write session {self.path}: {err.strerror or err}; {kept}; "
                                f"{remedy(err, ELSEWHERE)}") from err
        raise RecorderError(f"session writer for {self.path} failed: {type(err).__name__}: {err}") from err

    def _check(self) -> None:
        self._raise_error()
        if self._closed:
            raise RecorderError(f"the recorder for {self.path} is closed")

    def _at_exit(self) -> None:
        # A program that forgot close() still leaves a complete session on a normal exit.
        try:
            self.close()
        except Exception as err:
            print(f"explorer: closing session {self.path} at exit failed: {err}", file=sys.stderr)

    def _write_meta(self) -> None:
        atomic_write(self.path / META, (json.dumps(self.meta, indent=1) + "\n").encode("utf-8"))

    # ------------------------------------------------------------ writer thread

    def _run(self) -> None:
        frames: list[np.ndarray] = []
        lines: list[str] = []
        try:
            done = False
            while not done:
                batch = [self._queue.get()]
                while len(frames) + len(batch) < self.chunk_frames:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                new_lines = []
                for item in batch:
                    if item is _CLOSE:
                        done = True
                        break
                    index, t, frame, action, reward, first, last, decision = item
                    frames.append(frame)
                    new_lines.append(step_line(index, t, action, reward, first, last, decision))
                if new_lines:
                    # The journal reaches the OS before the chunk commits, so a crash can be counted.
                    self._journal.writelines(new_lines)
                    self._journal.flush()
                    lines.extend(new_lines)
                if len(frames) >= self.chunk_frames or (done and frames):
                    self._commit(frames, lines)
                    frames, lines = [], []
        except BaseException as err:
            self._error = err
            self._drain()
        finally:
            for f in (self._journal, self._log):
                try:
                    f.close()
                except OSError as err:  # a full disk: what could not be flushed is counted by the journal
                    self._error = self._error or err

    def _commit(self, frames: list[np.ndarray], lines: list[str]) -> None:
        start = self.committed
        if self.meta["frame_shape"] is None:
            self.meta["frame_shape"] = list(frames[0].shape)
            self._write_meta()
        write_chunk(self.path / CHUNKS / chunk_name(self.chunks), frames, start, self.level)
        # Only now that the frames are on disk do their steps enter the log.
        self._log.writelines(lines)
        self._log.flush()
        os.fsync(self._log.fileno())
        self._journal.seek(0)
        self._journal.truncate()
        self._journal.flush()
        self.chunks += 1
        self.committed = start + len(frames)

    def _drain(self) -> None:
        # After a failure, keep taking items so add() and close() never hang on a full queue.
        def drain() -> None:
            while self._queue.get() is not _CLOSE:
                pass
        threading.Thread(target=drain, name="session-writer-drain", daemon=True).start()


class LoopRecorder:
    """Adapts the control loop's transitions to RLDS-shaped steps.

    The loop knows, after each tick, the action it sent, the reward it earned
    and the frame that followed. A step of the session pairs a frame with the
    action taken *on* it, so this holds each frame until its action is known.

    Call :meth:`begin` with the first frame of every episode, :meth:`step` after
    every tick and :meth:`close` at the end (in a ``finally``).
    """

    def __init__(self, recorder: Recorder):
        self.recorder = recorder
        self._held: tuple[np.ndarray, float, bool] | None = None

    def begin(self, frame: Any, t: float | None = None) -> None:
        """An episode starts with ``frame`` (``uint8[H, W, C]``); a held frame closes the one before."""
        self._flush_held(last=True)
        self._held = (np.array(frame, copy=True), time.monotonic() if t is None else t, True)

    def step(self, action: Any, reward: float | None, next_frame: Any, last: bool, t: float | None = None,
             decision: bool | None = None) -> None:
        """The loop sent ``action`` on the held frame, earned ``reward`` and saw ``next_frame``.

        Args:
          action: ``float32[4 + n]`` sent (sticks, then buttons).
          reward: novelty of ``next_frame`` (None when the agent computes none).
          next_frame: ``uint8[H, W, C]``, the newest frame after the tick.
          last: ``next_frame`` ended the episode (it is recorded as the episode's last step).
          t: monotonic time ``next_frame`` reached the ring.
          decision: ``action`` is a new decision (None: not known).
        """
        if self._held is None:
            raise RecorderError("LoopRecorder.step before begin: pass the episode's first frame to begin()")
        frame, held_t, first = self._held
        self.recorder.add(frame, action, reward, first=first, last=False, t=held_t, decision=decision)
        t = time.monotonic() if t is None else t
        if last:
            self.recorder.add(next_frame, None, None, first=False, last=True, t=t)
            self._held = None
        else:
            self._held = (np.array(next_frame, copy=True), t, False)

    def close(self) -> dict[str, Any]:
        """Record the held frame (an unfinished episode ends there) and close the recorder."""
        try:
            self._flush_held(last=True)
        finally:
            meta = self.recorder.close()
        return meta

    def _flush_held(self, last: bool) -> None:
        if self._held is not None:
            frame, t, first = self._held
            self._held = None
            self.recorder.add(frame, None, None, first=first, last=last, t=t)
