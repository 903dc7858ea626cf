"""Listing recorded sessions: length, duration, frame size, buttons, health (``explorer sessions``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from explorer.envs.sessions.format import SessionError
from explorer.envs.sessions.reader import Session, find_sessions


def describe(path: str | Path, verify: bool = False) -> dict[str, Any]:
    """Facts about one session for listings; an unreadable one gives ``{"path", "error"}`` (the
    error names the file and what is wrong with it), so one bad session hides none of the others."""
    try:
        s = Session(path)
        h = s.health(verify=verify)
    except SessionError as err:
        return {"path": str(path), "error": str(err)}
    except OSError as err:  # unreadable (permissions, a folder where a file should be)
        return {"path": str(path), "error": f"{err.filename or path}: cannot be read ({err.strerror or err})"}
    return {"path": str(path), "steps": s.steps, "episodes": s.episodes, "duration_s": round(s.duration_s, 3),
            "frame_shape": list(s.frame_shape) if s.frame_shape else None,
            "source": str(s.info.meta.get("source", "?")), "buttons": list(s.buttons),
            "actions": s.has_actions, "status": h.status, "lost_steps": h.lost_steps, "ok": h.ok,
            "health": h.summary()}


def list_sessions(paths: Sequence[str | Path], verify: bool = False) -> list[dict[str, Any]]:
    """:func:`describe` every session found among ``paths`` (session directories or folders of them)."""
    return [describe(p, verify) for p in find_sessions(paths)]
