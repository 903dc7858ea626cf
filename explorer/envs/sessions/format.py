"""The session format: file names, bounds, metadata and step-line schemas, chunk files, the action layout.

A session is one directory (described in ``docs/sessions.md``); the writer
(:mod:`explorer.envs.sessions.writer`) and the reader
(:mod:`explorer.envs.sessions.reader`) both hold to what is here. Nothing is
ever unpickled.
"""

from __future__ import annotations

import json
import math
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from explorer.core import N_AXES, PAD_BUTTONS, ExplorerError, action_dim

FORMAT = "explorer-session"
VERSION = 1
META = "meta.json"
STEPS = "steps.jsonl"
JOURNAL = "journal.jsonl"
CHUNKS = "chunks"

#: bounds a session's files are held to (the reader refuses anything beyond them before allocating)
MAX_CHUNK_FRAMES = 4096  # frames per chunk (record.chunk_frames)
MAX_FRAME_SIDE = 16384  # pixels of a frame's height or width
MAX_CHANNELS = 4
MAX_CHUNK_BYTES = 2**32  # uncompressed frames of one chunk


def chunk_name(index: int) -> str:
    """File name of chunk ``index`` inside ``chunks/``."""
    return f"{index:06d}.npz"


class SessionError(ExplorerError, ValueError):
    """A session file is missing, truncated, corrupt or not a session; the message names the file."""


@dataclass(frozen=True)
class RecordedStep:
    """One recorded step (RLDS-shaped); not :class:`explorer.core.Step`, which an env returns."""

    index: int  # step number in the session, from 0; also the frame's index
    t: float  # monotonic time of the frame, seconds
    action: np.ndarray  # float32[4 + n] (sticks, then the session's buttons) sent after seeing the frame; NaN where unknown
    reward: float  # novelty that action earned; NaN where not computed
    first: bool  # opens an episode
    last: bool  # closes an episode (action and reward unused)
    decision: bool = True  # the action is a new decision (sessions without the flag: every step is one)


@dataclass
class StepArrays:
    """The steps of one chunk, as arrays of length ``n``."""

    index: np.ndarray  # int64[n]
    t: np.ndarray  # float64[n]
    action: np.ndarray  # float32[n, 4 + b]: sticks, then the session's b buttons
    reward: np.ndarray  # float32[n]
    first: np.ndarray  # bool[n]
    last: np.ndarray  # bool[n]
    decision: np.ndarray  # bool[n]: the action is a new decision (True where the session has no flags)

    def __len__(self) -> int:
        return len(self.index)


def _fields(s: StepArrays) -> tuple[np.ndarray, ...]:
    return (s.index, s.t, s.action, s.reward, s.first, s.last, s.decision)



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
                       f"({N_AXES} sticks and the buttons {list(buttons)})")
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


def remap_actions(action: np.ndarray, have: Sequence[str], want: Sequence[str]) -> np.ndarray:
    """Recorded actions ``float32[n, 4 + len(have)]`` in the layout of ``want``: the sticks as they
    were, each button of ``want`` as recorded, or released (-1) where the session did not hold it
    (a session recorded before buttons, or with other buttons). Rows without an action stay NaN."""
    if tuple(have) == tuple(want):
        return action
    out = np.full((len(action), action_dim(tuple(want))), -1.0, np.float32)
    out[:, :N_AXES] = action[:, :N_AXES]
    for i, name in enumerate(want):
        if name in have:
            out[:, N_AXES + i] = action[:, N_AXES + list(have).index(name)]
    out[np.isnan(action).any(axis=1)] = np.nan
    return out
