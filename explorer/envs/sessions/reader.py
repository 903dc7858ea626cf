"""Reading recorded sessions: steps, frames, health, transitions.

A :class:`Session` streams its chunks one at a time, so memory does not grow
with the length of the session. A session cut off by a crash reads up to its
last committed chunk; :meth:`Session.health` says how many steps were lost. A
missing, truncated, corrupt or foreign file is a :class:`SessionError` naming
the file. Nothing is ever unpickled. The format is in ``docs/sessions.md``.

TensorFlow is imported only by :meth:`Session.dataset` and :func:`sessions_dataset`
(the pipeline is in :mod:`explorer.envs.sessions.dataset`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from explorer.core import action_dim
from explorer.envs.sessions.dataset import stack_index, transitions_dataset
from explorer.envs.sessions.format import (
    CHUNKS,
    FORMAT,
    JOURNAL,
    META,
    STEPS,
    VERSION,
    RecordedStep,
    SessionError,
    SessionMeta,
    StepArrays,
    StepRecord,
    _bad,
    _check_step,
    _chunk_header,
    _fields,
    _first_error,
    _NotAStep,
    _parse_line,
    chunk_name,
    load_chunk,
)
from explorer.envs.sessions.health import Health, check_chunks


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
        width = action_dim(self.buttons)
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
        check_chunks(((self.chunk_path(c), self._rows(c)) for c in range(self.chunks)), self.chunk_frames,
                     self.frame_shape, verify)
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
        width = action_dim(self.buttons)
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

    def iter_steps(self) -> Iterator[RecordedStep]:
        """Every readable :class:`~explorer.envs.sessions.format.RecordedStep`, without reading frames."""
        for s in self.iter_step_arrays():
            for j in range(len(s)):
                yield RecordedStep(int(s.index[j]), float(s.t[j]), s.action[j], float(s.reward[j]),
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
        - ``action``: ``float32[m, 4 + n]`` (sticks, then the session's buttons), sent at ``t`` (NaN if unknown);
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


def open_sessions(paths: Iterable[str | Path | Session]) -> list[Session]:
    """Sessions from paths (or already open sessions)."""
    return [p if isinstance(p, Session) else Session(p) for p in paths]


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
    return transitions_dataset(open_sessions(sessions), stack, batch_size, shuffle=shuffle, repeat=repeat, seed=seed,
                               drop_remainder=drop_remainder, buttons=buttons)


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
