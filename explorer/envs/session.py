"""Reading recorded sessions: steps, frames, health and a ``tf.data`` pipeline of transitions.

A :class:`Session` streams its chunks one at a time, so memory does not grow
with the length of the session. A session cut off by a crash reads up to its
last committed chunk; :meth:`Session.health` says how many steps were lost. A
missing, truncated, corrupt or foreign file is a :class:`SessionError` naming
the file. Nothing is ever unpickled. The format is in ``docs/sessions.md``.

TensorFlow is imported only by :meth:`Session.dataset` and :func:`sessions_dataset`.
"""

from __future__ import annotations

import json
import math
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from explorer.core import PAD_BUTTONS, EndOfData, ExplorerError
from explorer.core import Step as EnvStep
from explorer.envs.recorder import (
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


class SessionError(ExplorerError, ValueError):
    """A session file is missing, truncated, corrupt or not a session; the message names the file."""


@dataclass(frozen=True)
class Step:
    """One recorded step (RLDS-shaped)."""

    index: int  # step number in the session, from 0; also the frame's index
    t: float  # monotonic time of the frame, seconds
    action: np.ndarray  # float32[4] sent after seeing the frame; NaN where unknown
    reward: float  # novelty that action earned; NaN where not computed
    first: bool  # opens an episode
    last: bool  # closes an episode (action and reward unused)
    decision: bool = True  # the action is a new decision (sessions without the flag: every step is one)


@dataclass
class StepArrays:
    """The steps of one chunk, as arrays of length ``n``."""

    index: np.ndarray  # int64[n]
    t: np.ndarray  # float64[n]
    action: np.ndarray  # float32[n, 4]
    reward: np.ndarray  # float32[n]
    first: np.ndarray  # bool[n]
    last: np.ndarray  # bool[n]
    decision: np.ndarray  # bool[n]: the action is a new decision (True where the session has no flags)

    def __len__(self) -> int:
        return len(self.index)


@dataclass
class Health:
    """What a session holds and what it lost.

    ``status`` is ``complete`` (closed normally), ``recording`` (never closed:
    the recorder crashed or was killed, or is still running) or ``failed`` (the
    writer hit an error and closed what it had).
    """

    path: str
    status: str
    steps: int  # readable steps
    chunks: int  # readable chunk files
    episodes: int  # episodes started among the readable steps
    duration_s: float
    frame_shape: tuple[int, ...] | None
    lost_steps: int = 0  # steps recorded but not readable (known from the journal and leftovers)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "complete" and self.lost_steps == 0 and not self.problems

    def summary(self) -> str:
        """One line for people, e.g. ``complete`` or ``cut off: 37 steps lost after step 640``."""
        if self.ok:
            return "complete"
        parts = []
        if self.status == "recording":
            parts.append("cut off (never closed)")
        elif self.status != "complete":
            parts.append(self.status)
        if self.lost_steps:
            parts.append(f"{self.lost_steps} steps lost after step {self.steps}")
        parts.extend(self.problems)
        return "; ".join(parts)


def stack_index(first: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` newest rows ending at each row, oldest first.

    A stack does not reach back past the start of its row's episode (a row with
    ``first`` set, or row 0): the episode's first row stands in for the rows
    before it, as :meth:`explorer.envs.ring.FrameRing.latest` does.

    Args:
      first: ``bool[n]``, rows that open an episode.
      k: rows per stack.

    Returns:
      ``int64[n, k]``.
    """
    n = len(first)
    rows = np.arange(n)
    starts = np.where(np.asarray(first, bool), rows, 0)
    episode_start = np.maximum.accumulate(starts) if n else starts
    wanted = rows[:, None] + np.arange(1 - k, 1)[None, :]
    return np.maximum(wanted, episode_start[:, None])


def _bad(path: Path, what: str) -> SessionError:
    return SessionError(f"{path}: {what}")


# ---------------------------------------------------------------- what a session's files may hold

_Side = Annotated[int, Field(ge=1, le=MAX_FRAME_SIDE)]
_Channels = Annotated[int, Field(ge=1, le=MAX_CHANNELS)]
_Count = Annotated[int, Field(ge=0)]
_Finite = Annotated[float, Field(allow_inf_nan=False)]


class SessionMeta(BaseModel):
    """``meta.json`` as the reader accepts it (``docs/sessions.md``); other keys are kept as they are.

    Strict: a number written as text, a flag as a number or a list as text is refused, not converted.
    """

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    format: Literal["explorer-session"]
    version: Literal[1]
    status: Literal["recording", "complete", "failed"] = "recording"
    chunk_frames: int = Field(ge=1, le=MAX_CHUNK_FRAMES)
    frame_shape: tuple[_Side, _Side, _Channels] | None = None
    buttons: tuple[str, ...] = ()
    meta: dict[str, Any] = {}
    created_wall: _Finite | None = None
    created_monotonic: _Finite | None = None
    versions: dict[str, str] = {}
    steps: _Count | None = None
    chunks: _Count | None = None
    episodes: _Count | None = None
    duration_s: _Finite | None = None
    first_t: _Finite | None = None
    last_t: _Finite | None = None
    closed_wall: _Finite | None = None
    error: str | None = None

    @field_validator("frame_shape", mode="before")
    @classmethod
    def _shape_from_json(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value  # JSON has lists; strict tuples take tuples

    @field_validator("buttons", mode="before")
    @classmethod
    def _known_buttons(cls, value: Any) -> Any:
        if value is None:  # written as null: no buttons, as when absent
            return ()
        if not isinstance(value, list):
            raise ValueError(f"is a list of pad button names ({', '.join(PAD_BUTTONS)}), got {value!r}")
        unknown = [b for b in value if b not in PAD_BUTTONS]
        if unknown:
            raise ValueError(f"names no pad button {unknown!r}; the names are {', '.join(PAD_BUTTONS)}")
        if len(set(value)) != len(value):
            raise ValueError(f"lists a button twice: {value}")
        return tuple(value)

    @model_validator(mode="after")
    def _chunk_bytes(self) -> SessionMeta:
        if self.frame_shape is not None and self.chunk_frames * math.prod(self.frame_shape) > MAX_CHUNK_BYTES:
            raise ValueError(f"chunk_frames = {self.chunk_frames} frames of {list(self.frame_shape)} make chunks of "
                             f"more than {MAX_CHUNK_BYTES >> 20} MiB")
        return self


class StepRecord(BaseModel):
    """One line of ``steps.jsonl`` (or of the journal)."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    i: _Count
    t: _Finite
    a: list[float | None] | None  # NaN and infinities are read, then refused with the step named
    r: float | None
    first: bool
    last: bool
    d: bool = True


def _first_error(err: ValidationError) -> str:
    """The first problem of a failed validation, as ``field = value: what is wrong``."""
    e = err.errors(include_url=False)[0]
    field = ".".join(str(x) for x in e["loc"]) or "the document"
    if e["type"] == "missing":
        return f"{field} is missing"
    value = e.get("input")
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    msg = e["msg"].removeprefix("Value error, ")
    return f"{field} = {shown}: {msg}"


class _NotAStep(Exception):
    """A whole log line (JSON, ending in a newline) that is not a step record; says which field."""


def _parse_line(raw: bytes) -> StepRecord | None:
    """A step record from one raw log line; None when the line is incomplete (cut off by a crash).

    Raises:
      _NotAStep: the line is whole, but not a step record (a field missing or of the wrong type).
    """
    if not raw.endswith(b"\n"):
        return None
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(rec, dict):
        raise _NotAStep(f"is not a step record: {raw[:80]!r}")
    try:
        return StepRecord.model_validate(rec)
    except ValidationError as err:
        raise _NotAStep(f"is not a step record: {_first_error(err)}") from None


def _check_step(path: Path, rec: StepRecord, width: int, buttons: Sequence[str]) -> None:
    """Refuse a step whose action or reward no recorder writes (non-finite, or of another width)."""
    if rec.a is not None:
        if len(rec.a) != width:
            raise _bad(path, f"step {rec.i} has {len(rec.a)} action values; this session's actions have {width} "
                       f"(4 sticks and the buttons {list(buttons)})")
        if not all(v is not None and abs(v) <= _FLOAT32_MAX for v in rec.a):  # NaN fails the test too
            raise _bad(path, f"step {rec.i} has a non-finite action {rec.a} (a recorder writes finite values, or "
                       "null for a whole action that is unknown): the session is damaged")
    if rec.r is not None and not math.isfinite(rec.r):
        raise _bad(path, f"step {rec.i} has a non-finite reward {rec.r}: the session is damaged")


_FLOAT32_MAX = float(np.finfo(np.float32).max)

#: the most that deflate shrinks data (1032:1), to bound what a chunk's compressed member can hold
_DEFLATE_RATIO = 1032


def _chunk_header(path: Path) -> tuple[int, tuple[int, ...]]:
    """Rows and frame shape of a chunk, read from its array header without decompressing the frames.

    The header is checked against the bounds of a session and against the size of the file (what
    its compressed member can hold), so that no header makes a reader allocate what is not there.
    """
    try:
        size = path.stat().st_size
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if names != {"frames.npy", "start.npy"}:
                raise _bad(path, f"not a session chunk (holds {sorted(names)}, expected frames.npy and start.npy)")
            info = z.getinfo("frames.npy")
            with z.open(info) as f:
                major, _ = np.lib.format.read_magic(f)
                read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                shape, _, dtype = read_header(f)  # the header only; frames stay compressed
                header_bytes = f.tell()
    except SessionError:
        raise
    except FileNotFoundError:
        raise _bad(path, "chunk file is missing") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, zlib.error) as err:
        raise _bad(path, f"truncated or corrupt chunk ({type(err).__name__}: {err})") from err
    if dtype != np.uint8 or len(shape) != 4:
        raise _bad(path, f"frames are {dtype}{list(shape)}, expected uint8[n, H, W, C]")
    rows, frame = int(shape[0]), tuple(int(x) for x in shape[1:])
    if not (1 <= rows <= MAX_CHUNK_FRAMES and all(1 <= x <= MAX_FRAME_SIDE for x in frame[:2])
            and 1 <= frame[2] <= MAX_CHANNELS):
        raise _bad(path, f"the chunk's header declares frames uint8{list(shape)}, beyond what a session holds "
                   f"(1 to {MAX_CHUNK_FRAMES} frames of at most {MAX_FRAME_SIDE} pixels a side, 1 to {MAX_CHANNELS} "
                   "channels): a damaged or foreign chunk")
    data = rows * math.prod(frame)
    ratio = 1 if info.compress_type == zipfile.ZIP_STORED else _DEFLATE_RATIO
    if (info.compress_size > size or info.file_size != header_bytes + data
            or data > ratio * info.compress_size + 2**16):
        raise _bad(path, f"the chunk's header declares {rows} frames of {list(frame)} ({data} bytes), which its "
                   f"{size}-byte file cannot hold: a truncated, damaged or foreign chunk")
    return rows, frame


def load_chunk(path: Path, start: int, rows: int | None = None, shape: Sequence[int] | None = None) -> np.ndarray:
    """The frames ``uint8[n, H, W, C]`` of one chunk, checked against what the log expects.

    The array header is checked (against the log, the session's frame shape, the bounds of a
    session and the file's size) before the frames are read: nothing is allocated for frames
    the file does not hold.

    Raises:
      SessionError: the file is missing, truncated, corrupt (CRC), foreign, or
        holds other steps or another frame shape than expected.
    """
    try:
        with open(path, "rb") as f:  # numpy takes anything else for a pickle, and says so misleadingly
            if f.read(4) != b"PK\x03\x04":
                raise _bad(path, "truncated or corrupt chunk (not an .npz archive: empty, cut short or overwritten)")
    except FileNotFoundError:
        raise _bad(path, "chunk file is missing") from None
    except OSError as err:
        raise _bad(path, f"unreadable chunk ({type(err).__name__}: {err})") from err
    declared, frame = _chunk_header(path)
    if rows is not None and declared != rows:
        raise _bad(path, f"chunk holds {declared} frames, the log expects {rows}")
    if shape is not None and frame != tuple(shape):
        raise _bad(path, f"frames are {list(frame)}, the session's are {list(shape)}")
    try:
        with np.load(path, allow_pickle=False) as z:
            if set(z.files) != {"frames", "start"}:
                raise _bad(path, f"not a session chunk (holds {sorted(z.files)}, expected frames and start)")
            start_array = z["start"]
            if start_array.dtype != np.int64 or start_array.size != 1:
                raise _bad(path, f"start is {start_array.dtype}{list(start_array.shape)}, expected int64[1]")
            first = int(start_array.reshape(-1)[0])
            if first != start:
                raise _bad(path, f"chunk starts at step {first}, the log expects step {start}")
            frames = z["frames"]
    except SessionError:
        raise
    except FileNotFoundError:
        raise _bad(path, "chunk file is missing") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, zlib.error, KeyError) as err:
        raise _bad(path, f"truncated or corrupt chunk ({type(err).__name__}: {err})") from err
    if frames.dtype != np.uint8 or frames.shape != (declared, *frame):
        raise _bad(path, f"frames are {frames.dtype}{list(frames.shape)}, expected uint8{[declared, *frame]}")
    return frames


class Session:
    """A recorded session on disk, read lazily.

    Opening reads ``meta.json`` and scans the step log (keeping only counts);
    frames are read a chunk at a time when iterated.

    Args:
      path: the session directory.

    Raises:
      SessionError: the directory is not a session (no or foreign ``meta.json``),
        or its step log is damaged before its end.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        meta_path = self.path / META
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise _bad(meta_path, "not found; is this a session directory (made by explorer record or a Recorder)?") from None
        except (ValueError, OSError) as err:
            raise _bad(meta_path, f"not readable as session metadata ({type(err).__name__}: {err})") from err
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise _bad(meta_path, f"not an explorer session (format {meta.get('format') if isinstance(meta, dict) else None!r})")
        if meta.get("version") != VERSION:
            raise _bad(meta_path, f"session format version {meta.get('version')!r}; this explorer reads version {VERSION}")
        try:
            checked = SessionMeta.model_validate(meta)
        except ValidationError as err:
            raise _bad(meta_path, f"{_first_error(err)} (a damaged or foreign session)") from None
        self.meta: dict[str, Any] = meta
        #: meta.json as validated (:class:`SessionMeta`)
        self.info = checked
        self.status: str = checked.status
        self.chunk_frames = checked.chunk_frames
        self.frame_shape: tuple[int, ...] | None = checked.frame_shape
        #: pad buttons after the four sticks of each action (sessions recorded before buttons have none)
        self.buttons: tuple[str, ...] = checked.buttons
        self._problems: list[str] = []
        self._scan()

    # ------------------------------------------------------------ scanning

    def _scan(self) -> None:
        log_path = self.path / STEPS
        F = self.chunk_frames
        width = 4 + len(self.buttons)
        lines = 0
        self.episodes = 0
        self.first_t: float | None = None
        self.last_t: float | None = None
        tail: list[StepRecord] = []  # lines past the last full chunk
        tail_bad = 0  # an incomplete line at the end (a crash mid-write)
        t_whole: float | None = None  # time of the last step of the last full chunk
        self.has_actions = False
        self._lost: set[int] = set()
        self._claimed = 0  # steps meta.json says a closed session holds
        try:
            f = open(log_path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            raise _bad(log_path, "step log is missing") from None
        with f:
            pending: bytes | None = None
            for number, raw in enumerate(f, 1):
                if pending is not None:
                    raise _bad(log_path, f"line {number - 1} is not a step record: {pending[:80]!r}")
                try:
                    rec = _parse_line(raw)
                except _NotAStep as err:
                    raise _bad(log_path, f"line {number} {err}") from None
                if rec is None:
                    pending = raw  # allowed only as the very last line
                    continue
                if rec.i != lines:
                    raise _bad(log_path, f"line {number} is step {rec.i}, expected step {lines}")
                _check_step(log_path, rec, width, self.buttons)
                lines += 1
                self.episodes += rec.first
                self.first_t = rec.t if self.first_t is None else self.first_t
                self.last_t = rec.t
                self.has_actions = self.has_actions or rec.a is not None
                tail.append(rec)
                if len(tail) == F:
                    tail = []
                    t_whole = rec.t
            if pending is not None:
                tail_bad = 1
        full_chunks = lines // F
        committed = full_chunks * F
        chunks = full_chunks
        if tail:
            path = self.chunk_path(full_chunks)
            rows = None
            if path.exists():
                rows, _ = _chunk_header(path)
            if rows == len(tail):
                committed += len(tail)  # the short last chunk that close() writes
                chunks += 1
            else:
                # Log lines whose chunk is not whole: a crash while the log was written.
                self._lost.update(r.i for r in tail)
                self.episodes -= sum(r.first for r in tail)
                if rows is not None:
                    self._lost.update(range(committed, committed + min(rows, F)))
                if self.status == "complete":
                    self._problems.append(f"{path.name}: chunk and step log disagree ({rows} frames, {len(tail)} log lines)")
        if tail_bad and self.status == "complete":
            raise _bad(log_path, f"the last line is incomplete in a session marked complete (after step {lines})")
        self.steps = committed
        self.chunks = chunks
        self._lost_scan(committed, chunks)
        if self.frame_shape is None and chunks:
            self.frame_shape = _chunk_header(self.chunk_path(0))[1]
        said = self.info.steps
        if self.status == "complete" and said is not None and said != committed:
            self._problems.append(f"{META} says {said} steps, the log and chunks hold {committed}")
            self._claimed = said  # counted, never listed: the number is the file's
        if committed < lines:
            self.last_t = t_whole
            if t_whole is None:
                self.first_t = None

    def _lost_scan(self, committed: int, chunks: int) -> None:
        journal = self.path / JOURNAL
        if journal.exists():
            with open(journal, "rb") as f:
                for raw in f:
                    try:
                        rec = _parse_line(raw)
                    except _NotAStep:
                        continue  # evidence only: a line that is not a step counts nothing
                    if rec is not None and rec.i >= committed:
                        self._lost.add(rec.i)
        self.leftovers: list[str] = []
        chunk_dir = self.path / CHUNKS
        if chunk_dir.is_dir():
            for p in sorted(chunk_dir.iterdir()):
                if p.name.endswith(".tmp"):
                    self.leftovers.append(p.name)
                elif p.suffix == ".npz" and p.stem.isdigit() and int(p.stem) >= chunks:
                    self.leftovers.append(p.name)
                    try:
                        rows, _ = _chunk_header(p)
                    except SessionError:
                        continue
                    start = int(p.stem) * self.chunk_frames
                    self._lost.update(range(start, start + min(rows, self.chunk_frames)))

    # ------------------------------------------------------------ facts

    def __len__(self) -> int:
        return self.steps

    def __repr__(self) -> str:
        return f"Session({str(self.path)!r}, steps={self.steps}, status={self.status!r})"

    @property
    def duration_s(self) -> float:
        """Time from the first to the last readable step, seconds."""
        if self.first_t is None or self.last_t is None:
            return 0.0
        return float(self.last_t - self.first_t)

    @property
    def lost_steps(self) -> int:
        claimed = range(self.steps, self._claimed)  # what meta.json says was recorded beyond the readable steps
        return len(claimed) + sum(1 for i in self._lost if i not in claimed)

    def chunk_path(self, index: int) -> Path:
        return self.path / CHUNKS / chunk_name(index)

    def health(self, verify: bool = False) -> Health:
        """What the session holds and lost.

        Checks that every chunk the log names exists and has the expected
        header (cheap); with ``verify``, decompresses every chunk, which also
        checks the CRCs.

        Raises:
          SessionError: a chunk the log names is missing, truncated, corrupt or foreign.
        """
        for c in range(self.chunks):
            path = self.chunk_path(c)
            if verify:
                load_chunk(path, c * self.chunk_frames, self._rows(c), self.frame_shape)
            else:
                rows, shape = _chunk_header(path)
                if rows != self._rows(c):
                    raise _bad(path, f"chunk holds {rows} frames, the log expects {self._rows(c)}")
                if self.frame_shape is not None and shape != tuple(self.frame_shape):
                    raise _bad(path, f"frames are {list(shape)}, the session's are {list(self.frame_shape)}")
        problems = list(self._problems)
        if self.leftovers and self.status == "complete":
            problems.append(f"unexpected files in {CHUNKS}/: {', '.join(self.leftovers)}")
        return Health(path=str(self.path), status=self.status, steps=self.steps, chunks=self.chunks,
                      episodes=self.episodes, duration_s=self.duration_s, frame_shape=self.frame_shape,
                      lost_steps=self.lost_steps, problems=problems)

    def verify(self) -> Health:
        """:meth:`health` after decompressing every chunk."""
        return self.health(verify=True)

    def _rows(self, c: int) -> int:
        return min(self.chunk_frames, self.steps - c * self.chunk_frames)

    # ------------------------------------------------------------ streaming

    def iter_step_arrays(self) -> Iterator[StepArrays]:
        """The readable steps, one :class:`StepArrays` per chunk, streamed from the log."""
        F = self.chunk_frames
        log_path = self.path / STEPS
        width = 4 + len(self.buttons)
        with open(log_path, "rb") as f:
            for c in range(self.chunks):
                n = self._rows(c)
                recs: list[StepRecord] = []
                for _ in range(n):
                    try:
                        rec = _parse_line(f.readline())
                    except _NotAStep:
                        rec = None
                    if rec is None or rec.i != c * F + len(recs):
                        raise _bad(log_path, f"changed while being read (at step {c * F + len(recs)})")
                    _check_step(log_path, rec, width, self.buttons)
                    recs.append(rec)
                action = np.full((n, width), np.nan, np.float32)
                for j, r in enumerate(recs):
                    if r.a is not None:
                        action[j] = r.a
                yield StepArrays(
                    index=np.fromiter((r.i for r in recs), np.int64, n),
                    t=np.fromiter((r.t for r in recs), np.float64, n),
                    action=action,
                    reward=np.array([np.nan if r.r is None else r.r for r in recs], np.float32).reshape(n),
                    first=np.fromiter((r.first for r in recs), bool, n),
                    last=np.fromiter((r.last for r in recs), bool, n),
                    decision=np.fromiter((r.d for r in recs), bool, n),
                )

    def iter_chunks(self) -> Iterator[tuple[np.ndarray, StepArrays]]:
        """``(frames uint8[n, H, W, C], StepArrays)`` per chunk, in order, one chunk in memory at a time."""
        for c, steps in enumerate(self.iter_step_arrays()):
            frames = load_chunk(self.chunk_path(c), c * self.chunk_frames, len(steps), self.frame_shape)
            yield frames, steps

    def iter_steps(self) -> Iterator[Step]:
        """Every readable :class:`Step`, without reading frames."""
        for s in self.iter_step_arrays():
            for j in range(len(s)):
                yield Step(int(s.index[j]), float(s.t[j]), s.action[j], float(s.reward[j]),
                           bool(s.first[j]), bool(s.last[j]), bool(s.decision[j]))

    def frames(self) -> Iterator[np.ndarray]:
        """Every readable frame, ``uint8[H, W, C]``, in order."""
        for frames, _ in self.iter_chunks():
            yield from frames

    def transitions(self, stack: int) -> Iterator[dict[str, np.ndarray]]:
        """Transitions in blocks (one per chunk), as numpy arrays with a leading block axis ``m``.

        A transition joins step ``t`` to step ``t + 1`` of the same episode
        (``t`` not ``last``, ``t + 1`` not ``first``):

        - ``obs``: ``uint8[m, k, H, W, C]``, the ``k`` newest frames ending at ``t``, oldest first,
          not crossing the start of the episode (its first frame repeats instead);
        - ``action``: ``float32[m, 4]``, sent at ``t`` (NaN if unknown);
        - ``reward``: ``float32[m]``, earned by that action (NaN if not computed);
        - ``next_obs``: ``uint8[m, k, H, W, C]``, the stack ending at ``t + 1``;
        - ``first``: ``bool[m]``, ``t`` opens its episode; ``last``: ``bool[m]``, ``t + 1`` closes it;
        - ``index``: ``int64[m]``, ``t``.

        These are the arguments the control loop passes to ``Agent.observe``.
        """
        if stack < 1:
            raise ValueError(f"stack must be at least 1, got {stack}")
        carry: tuple[np.ndarray, StepArrays] | None = None
        for frames, steps in self.iter_chunks():
            if carry is not None:
                cf, cs = carry
                frames = np.concatenate([cf, frames])
                steps = StepArrays(*(np.concatenate([a, b]) for a, b in zip(_fields(cs), _fields(steps), strict=True)))
                begin = len(cf) - 1  # the carried step waiting for its successor
            else:
                begin = 0
            src = np.arange(begin, len(steps) - 1)
            src = src[~steps.last[src] & ~steps.first[src + 1]]
            if len(src):
                idx = stack_index(steps.first, stack)
                yield {
                    "obs": frames[idx[src]], "action": steps.action[src], "reward": steps.reward[src],
                    "next_obs": frames[idx[src + 1]], "first": steps.first[src], "last": steps.last[src + 1],
                    "index": steps.index[src],
                }
            keep = min(stack, len(steps))
            carry = (frames[-keep:], StepArrays(*(a[-keep:] for a in _fields(steps))))

    def dataset(self, stack: int, batch_size: int, shuffle: int = 0, repeat: bool = False,
                seed: int | None = None, drop_remainder: bool = False) -> Any:
        """A ``tf.data.Dataset`` of batched transitions (see :meth:`transitions`), prefetched.

        Args:
          stack: frames per observation ``k``.
          batch_size: transitions per batch.
          shuffle: shuffle buffer, transitions (0 keeps the recorded order).
          repeat: cycle through the session forever.
          seed: shuffle seed.
          drop_remainder: drop a last batch smaller than ``batch_size``.

        Returns:
          Batches of ``{"obs": uint8[B, k, H, W, C], "action": float32[B, 4 + n], "reward": float32[B],
          "next_obs": uint8[B, k, H, W, C], "first": bool[B], "last": bool[B], "index": int64[B]}``.
        """
        return sessions_dataset([self], stack, batch_size, shuffle=shuffle, repeat=repeat, seed=seed,
                                drop_remainder=drop_remainder)


def remap_actions(action: np.ndarray, have: Sequence[str], want: Sequence[str]) -> np.ndarray:
    """Recorded actions ``float32[n, 4 + len(have)]`` in the layout of ``want``: the sticks as they
    were, each button of ``want`` as recorded, or released (-1) where the session did not hold it
    (a session recorded before buttons, or with other buttons). Rows without an action stay NaN."""
    if tuple(have) == tuple(want):
        return action
    out = np.full((len(action), 4 + len(want)), -1.0, np.float32)
    out[:, :4] = action[:, :4]
    for i, name in enumerate(want):
        if name in have:
            out[:, 4 + i] = action[:, 4 + list(have).index(name)]
    out[np.isnan(action).any(axis=1)] = np.nan
    return out


def check_buttons(sessions: Iterable[Session], buttons: Sequence[str], fix: str | None = None) -> None:
    """Refuse to read sessions' actions in the layout of ``buttons`` (``pad.buttons``) where a button of
    ``buttons`` is missing from a session that recorded buttons: its presses are unknown, and reading
    them as released would teach that it is never pressed. Sessions recorded with sticks only (no
    buttons, or from before buttons existed) read every button as released, as they were; a
    session's recorded buttons that ``buttons`` leaves out are dropped.

    Args:
      sessions: the sessions to read.
      buttons: the layout to read them in.
      fix: what to do instead, for the message (default: replay with the session's buttons).

    Raises:
      SessionError: naming the session, its buttons and the setting that reads it.
    """
    want = list(buttons)
    for s in sessions:
        missing = [b for b in want if b not in s.buttons]
        if s.has_actions and s.buttons and missing:
            recorded = ", ".join(f'"{b}"' for b in s.buttons)
            raise SessionError(
                f"{s.path} was recorded with pad.buttons = {list(s.buttons)}, but the settings in use have "
                f"pad.buttons = {want}: {', '.join(missing)} {'was' if len(missing) == 1 else 'were'} not recorded, and "
                f"reading {'it' if len(missing) == 1 else 'them'} as never pressed would teach that wrongly; "
                + (fix or f"replay it with the buttons it recorded: --set 'pad.buttons=[{recorded}]'"))


def _fields(s: StepArrays) -> tuple[np.ndarray, ...]:
    return (s.index, s.t, s.action, s.reward, s.first, s.last, s.decision)


def open_sessions(paths: Iterable[str | Path | Session]) -> list[Session]:
    """Sessions from paths (or already open sessions)."""
    return [p if isinstance(p, Session) else Session(p) for p in paths]


def _pools(sessions: Sequence[Session], stack: int, batch_size: int, shuffle: int,
           rng: np.random.Generator, drop_remainder: bool,
           buttons: tuple[str, ...] = ()) -> Iterator[dict[str, np.ndarray]]:
    """Pools of transitions for :func:`sessions_dataset`: a run of consecutive frames and index stacks into it.

    Each pool holds a multiple of ``batch_size`` transitions (the very last may
    hold fewer), at least ``shuffle`` of them when shuffling, in a random order
    then. Frames are passed once per pool; the stacking gather runs in TensorFlow.
    """
    target = max(batch_size, shuffle)
    for session in sessions:
        frames: list[np.ndarray] = []  # consecutive rows of this session, from row `base`
        steps: list[StepArrays] = []
        base = 0
        rows = 0  # rows buffered
        pending: list[np.ndarray] = []  # session rows of transitions not yet emitted

        def emit(final: bool, have: tuple[str, ...] = session.buttons) -> dict[str, np.ndarray] | None:
            nonlocal frames, steps, base, rows, pending
            src = np.concatenate(pending) if pending else np.zeros(0, np.int64)
            if shuffle:
                src = src[rng.permutation(len(src))]
            n = len(src) if final and not drop_remainder else (len(src) // batch_size) * batch_size
            if n == 0:
                return None
            out_src, keep = src[:n], src[n:]
            f = np.concatenate(frames) if len(frames) > 1 else frames[0]
            st = StepArrays(*(np.concatenate(x) for x in zip(*map(_fields, steps), strict=True)))
            frames, steps = [f], [st]
            local = out_src - base
            idx = stack_index(st.first, stack)
            pool = {"frames": f, "obs_idx": idx[local].astype(np.int32), "next_idx": idx[local + 1].astype(np.int32),
                    "action": remap_actions(st.action[local], have, buttons), "reward": st.reward[local],
                    "first": st.first[local],
                    "last": st.last[local + 1], "index": st.index[local]}
            # Keep the rows that later transitions (and their stacks) still need.
            oldest = base + rows - 1  # the newest row waits for its successor
            if len(keep):
                oldest = min(oldest, int(keep.min()))
            cut = max(0, oldest - stack + 1 - base)
            if cut:
                frames, steps = [f[cut:]], [StepArrays(*(x[cut:] for x in _fields(st)))]
                base, rows = base + cut, rows - cut
            pending = [np.sort(keep)] if len(keep) else []
            return pool

        tail: tuple[np.ndarray, np.ndarray] | None = None  # last/first flags of the previous chunk's last row
        for chunk_frames, chunk_steps in session.iter_chunks():
            frames.append(chunk_frames)
            steps.append(chunk_steps)
            if tail is None:  # the session's first chunk: its rows start at 0
                last, first, start = chunk_steps.last, chunk_steps.first, 0
            else:  # the previous chunk's last row gets its successor now
                last = np.concatenate([tail[0], chunk_steps.last])
                first = np.concatenate([tail[1], chunk_steps.first])
                start = base + rows - 1
            rows += len(chunk_steps)
            tail = (chunk_steps.last[-1:], chunk_steps.first[-1:])
            src = start + np.arange(len(last) - 1)
            pending.append(src[~last[:-1] & ~first[1:]])
            if sum(len(p) for p in pending) >= target:
                pool = emit(final=False)
                if pool is not None:
                    yield pool
        if rows:
            pool = emit(final=True)
            if pool is not None:
                yield pool


def sessions_dataset(sessions: Iterable[str | Path | Session], stack: int, batch_size: int, shuffle: int = 0,
                     repeat: bool = False, seed: int | None = None, drop_remainder: bool = False,
                     buttons: Sequence[str] | None = None) -> Any:
    """Transitions of several sessions, one after another, as a batched, prefetched ``tf.data.Dataset``.

    All sessions must share a frame shape. See :meth:`Session.dataset` for the
    arguments and batches. With ``shuffle``, transitions are shuffled within
    pools of at least ``shuffle`` consecutive transitions (memory: those frames).
    Actions come in the layout of ``buttons`` (see :func:`remap_actions`); None
    keeps the sessions' own, which must then be the same in every session.

    Raises:
      SessionError: no session holds frames, or the frame shapes differ.
    """
    import tensorflow as tf

    sessions = open_sessions(sessions)
    shapes = {s.frame_shape for s in sessions if s.frame_shape is not None}
    if not shapes:
        raise SessionError(f"no frames in {', '.join(str(s.path) for s in sessions)}")
    if len(shapes) > 1:
        raise SessionError("sessions have different frame shapes: " + ", ".join(
            f"{s.path} {list(s.frame_shape or ())}" for s in sessions))
    h, w, c = next(iter(shapes))
    layouts = {s.buttons for s in sessions}
    if buttons is None and len(layouts) > 1:
        raise SessionError(f"sessions hold different pad buttons {sorted(map(list, layouts))}; pass buttons= to "
                           "read them all in one layout")
    want = tuple(buttons) if buttons is not None else layouts.pop()
    if stack < 1 or batch_size < 1:
        raise ValueError(f"stack and batch_size must be positive, got {stack} and {batch_size}")
    rng = np.random.default_rng(seed)

    def pools() -> Iterator[dict[str, np.ndarray]]:
        return _pools(sessions, stack, batch_size, shuffle, rng, drop_remainder, want)

    index = tf.TensorSpec([None, stack], tf.int32)
    signature = {
        "frames": tf.TensorSpec([None, h, w, c], tf.uint8), "obs_idx": index, "next_idx": index,
        "action": tf.TensorSpec([None, 4 + len(want)], tf.float32), "reward": tf.TensorSpec([None], tf.float32),
        "first": tf.TensorSpec([None], tf.bool), "last": tf.TensorSpec([None], tf.bool),
        "index": tf.TensorSpec([None], tf.int64),
    }
    ds = tf.data.Dataset.from_generator(pools, output_signature=signature)
    if repeat:
        ds = ds.repeat()

    def batches(pool: dict[str, tf.Tensor]) -> Any:
        n = tf.shape(pool["obs_idx"], out_type=tf.int64)[0]

        def batch(i: tf.Tensor) -> dict[str, tf.Tensor]:
            part = slice(i * batch_size, (i + 1) * batch_size)
            return {"obs": tf.gather(pool["frames"], pool["obs_idx"][part]), "action": pool["action"][part],
                    "reward": pool["reward"][part], "next_obs": tf.gather(pool["frames"], pool["next_idx"][part]),
                    "first": pool["first"][part], "last": pool["last"][part], "index": pool["index"][part]}

        return tf.data.Dataset.range((n + batch_size - 1) // batch_size).map(batch, num_parallel_calls=tf.data.AUTOTUNE,
                                                                             deterministic=True)

    return ds.flat_map(batches).prefetch(tf.data.AUTOTUNE)


def find_sessions(paths: Iterable[str | Path]) -> list[Path]:
    """Session directories among ``paths``: each path itself if it is one, else its sub-directories that are."""
    found: list[Path] = []
    for p in map(Path, paths):
        if (p / META).is_file():
            found.append(p)
        elif p.is_dir():
            found.extend(sorted(d for d in p.iterdir() if (d / META).is_file()))
        else:
            raise SessionError(f"{p}: no such session or directory")
    return found


class SessionEnv:
    """Recorded sessions as an :class:`~explorer.core.Env`: their frames in order, through a frame ring.

    Actions sent to it are ignored; each step's ``info`` holds what was recorded for the frame
    the step returns: ``action`` (``float32[4 + n]`` in the layout of ``buttons``, see
    :func:`remap_actions`; NaN where unknown), ``reward``, and the
    decision flags ``starts`` (the action is a new decision) and ``ends`` (the decision ends
    with this step: the next step starts a new one, or the episode ends), ``index`` (the step's
    number in its session) and ``session`` (its path). An episode ends at a
    ``last`` step, or where a session stops before one (a crash): that step is given as last.
    After the final episode :meth:`reset` raises :class:`EndOfData`.

    Args:
      sessions: the sessions, one frame shape.
      stack: frames per observation ``k``.
      ring_capacity: frames the ring holds (more than ``stack``).
      buttons: the pad buttons of the actions it gives (``pad.buttons``).
    """

    def __init__(self, sessions: Sequence[Session], stack: int, ring_capacity: int, buttons: tuple[str, ...] = ()):
        from explorer.envs.ring import FrameRing

        shapes = {s.frame_shape for s in sessions if s.frame_shape is not None}
        if len(shapes) > 1:
            raise SessionError(f"sessions of different frame shapes {sorted(shapes)} cannot be replayed together")
        if not shapes:
            raise SessionError(f"no frames in {', '.join(str(s.path) for s in sessions)}")
        self.sessions = list(sessions)
        self.stack = stack
        self.buttons = tuple(buttons)
        self.frame_shape: tuple[int, int, int] = tuple(shapes.pop())  # type: ignore[assignment]
        self.ring = FrameRing(ring_capacity, self.frame_shape)
        self.steps = 0
        self._rows = self._iter_rows()
        self._next: tuple[np.ndarray, Step, bool, str] | None = next(self._rows, None)

    def _iter_rows(self) -> Iterator[tuple[np.ndarray, Step, bool, str]]:
        """``(frame, recorded step, ends an episode, session path)`` in order, over every session."""
        for s in self.sessions:
            where = str(s.path)
            prev: tuple[np.ndarray, Step] | None = None
            for frames, arrays in s.iter_chunks():
                actions = remap_actions(arrays.action, s.buttons, self.buttons)
                for j in range(len(arrays)):
                    row = Step(int(arrays.index[j]), float(arrays.t[j]), actions[j], float(arrays.reward[j]),
                               bool(arrays.first[j]), bool(arrays.last[j]), bool(arrays.decision[j]))
                    if prev is not None:
                        yield prev[0], prev[1], prev[1].last or row.first, where
                    prev = (frames[j], row)
            if prev is not None:
                yield prev[0], prev[1], True, where

    def _take(self) -> tuple[np.ndarray, Step, bool, str]:
        if self._next is None:
            raise EndOfData("the sessions are replayed to their end")
        row, self._next = self._next, next(self._rows, None)
        return row

    def _step(self, row: tuple[np.ndarray, Step, bool, str], first: bool) -> EnvStep:
        frame, rec, ends_episode, session = row
        self.ring.push(frame)
        nxt = self._next
        ends_decision = ends_episode or nxt is None or nxt[1].decision
        return EnvStep(self.ring.latest(self.stack), first=first, last=ends_episode and not first, t=rec.t,
                       info={"action": rec.action, "reward": rec.reward, "starts": rec.decision,
                             "ends": ends_decision, "index": rec.index, "session": session})

    def reset(self) -> EnvStep:
        """The next episode's first frame (an episode of one frame is skipped: it has no transition)."""
        while True:
            row = self._take()
            if not row[2]:
                self.ring.reset()
                return self._step(row, first=True)

    def step(self, action: np.ndarray | None) -> EnvStep:
        self.steps += 1
        return self._step(self._take(), first=False)

    def idle(self) -> None:
        pass

    def neutral(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {"sessions": [str(s.path) for s in self.sessions]}

    def close(self) -> None:
        pass

