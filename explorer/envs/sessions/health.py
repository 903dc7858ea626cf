"""A session's health: what it holds and what it lost, and the check that every chunk is there and whole."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from explorer.envs.sessions.format import _bad, _chunk_header, load_chunk


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


def check_chunks(chunks: Iterable[tuple[Path, int]], chunk_frames: int, frame_shape: tuple[int, ...] | None,
                 verify: bool = False) -> None:
    """Check that every chunk ``(path, rows)`` of a session exists and has the expected header (cheap);
    with ``verify``, decompress each, which also checks the CRCs.

    Raises:
      SessionError: a chunk is missing, truncated, corrupt or foreign.
    """
    for c, (path, rows) in enumerate(chunks):
        if verify:
            load_chunk(path, c * chunk_frames, rows, frame_shape)
        else:
            have, shape = _chunk_header(path)
            if have != rows:
                raise _bad(path, f"chunk holds {have} frames, the log expects {rows}")
            if frame_shape is not None and shape != tuple(frame_shape):
                raise _bad(path, f"frames are {list(shape)}, the session's are {list(frame_shape)}")
