"""``explorer record``: record the screen while a person plays; nothing is sent to a pad.

The driver runs the live env with a pad that sends nothing and an actor that
acts not at all; the recorder observer stores a frame every tick. Actions are
stored as unknown (NaN) and rewards as not computed; the whole recording is
one episode.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from explorer.agent.actor import NoActor
from explorer.config import Config
from explorer.core import ExplorerError
from explorer.envs.live.screen import screen_region
from explorer.envs.sessions.reader import Session
from explorer.run.driver import Controls, Driver
from explorer.run.observers import SessionRecorder, blank_warning
from explorer.run.rundir import timestamped_path
from explorer.run.safety import Kept, join_sentences, stop_on_signals

#: the longest ``--name`` (the folder's name adds a time stamp and maybe a number to it)
MAX_NAME = 100


def check_name(name: str) -> str:
    """``name`` if it can be the end of a folder's name, else a one-line :class:`ExplorerError`.

    A name is part of one file name inside ``--out``: no folder separators, no ``..``, no drive, nothing
    the file system would take for a path or refuse.
    """
    bad = next((c for c in name if c in '/\\:*?"<>|' or not c.isprintable()), None)
    if not name.strip() or name.strip(".") == "" or bad is not None or len(name) > MAX_NAME or name != name.strip():
        why = (f"it holds {bad!r}" if bad is not None else f"it is longer than {MAX_NAME} characters"
               if len(name) > MAX_NAME else "it is empty, dots only, or starts or ends with a space")
        raise ExplorerError(f"--name {name!r} cannot name a session folder: {why}; give a plain name such as "
                            "e1m1-run (letters, digits, - _ . and spaces), the session goes in --out")
    return name


def new_session_path(parent: str | Path, name: str) -> Path:
    """``<parent>/<YYYYmmdd-HHMMSS>-<name>``, numbered if it exists; ``name`` is checked (:func:`check_name`)."""
    return timestamped_path(parent, check_name(name))


def record_screen(config: Config, out: str | Path, seconds: float | None = None, hz: float | None = None,
                  screen: Any = None, stop: threading.Event | None = None, name: str = "record",
                  chunk_frames: int = 64, path: str | Path | None = None, announce: bool = False) -> dict[str, Any]:
    """Record the screen while a person plays: capture thread -> ring -> a frame every tick -> session.

    Args:
      config: the merged config.
      out: parent folder of the session directory.
      seconds: stop after this long (None: until ``stop`` or Ctrl-C/SIGTERM).
      hz: frames recorded per second (default ``config.control.hz``).
      screen: a screen (default: ``MssScreen`` on the configured capture).
      stop: set it to stop (Ctrl-C and SIGTERM stop too, from the main thread).
      name: suffix of the session directory name.
      chunk_frames: frames per chunk file.
      path: the session directory itself (overrides ``out`` and ``name``).
      announce: print the session path and how to stop, on stderr.

    Returns:
      A summary: ``path``, ``steps``, ``duration_s``, ``hz``, ``frame_shape``, ``stopped_by``, ``health``.
    """
    from explorer.envs.live.capture import make_screen
    from explorer.envs.live.env import LiveEnv
    from explorer.envs.live.pad import NullPad

    if path is None:
        check_name(name)  # before anything opens
    hz = hz or config.control.hz
    screen = screen if screen is not None else make_screen(config.capture, config.observation)
    region = screen_region(screen)
    path = Path(path) if path is not None else new_session_path(out, name)
    meta = {"source": "screen", "mode": "record", "config": config.to_dict(), "frame_shape": list(screen.shape),
            "region": region, "hz": hz, "capture_fps": config.capture.fps,
            "actions": "none (a person played; nothing was sent to a pad)"}
    controls = Controls()
    if stop is not None:  # an outside stop event, watched by a thread that forwards it
        def forward() -> None:
            stop.wait()
            controls.request_stop("stop")

        threading.Thread(target=forward, name="record-stop", daemon=True).start()
    kept = Kept(session=path)
    # Ctrl-C and SIGTERM end the recording (its documented way to stop) with the session whole
    with stop_on_signals(controls, kept, announce=False) as signals:
        env = LiveEnv(screen, NullPad(), stack=1, ring_capacity=max(config.ring.capacity, 2),
                      capture_fps=config.capture.fps, hz=hz, blank_s=config.capture.blank_seconds,
                      stall_s=config.capture.stall_seconds, stop=controls.stop)
        try:
            recorder = SessionRecorder(path, meta, chunk_frames, decisions=lambda: None)
        except BaseException:
            env.close()
            screen.close()
            raise
        if announce:
            print(f"recording {path} at {hz:g} Hz; Ctrl-C stops", file=sys.stderr)
        driver = Driver(env, NoActor(), controls)
        recorder.attach(driver)
        driver.on_step(blank_warning(env, config))
        failure: ExplorerError | None = None
        try:
            stats = driver.run(max_seconds=seconds)
        except ExplorerError as err:  # the capture stopped (blank, window closed, stalled): keep what was recorded
            failure = err
        finally:
            with signals.held():
                try:
                    recorder.close()
                finally:
                    env.close()
                    screen.close()
        if failure is not None:
            raise ExplorerError(join_sentences(str(failure), f"recording stopped: {kept}, with the "
                                                             f"{recorder.frames} frames recorded before")) from None
    session = Session(path)
    health = session.health()
    return {"path": str(path), "steps": session.steps, "duration_s": session.duration_s,
            "hz": (session.steps - 1) / session.duration_s if session.duration_s > 0 else 0.0,
            "target_hz": hz, "frame_shape": list(session.frame_shape or screen.shape), "stopped_by": stats.stopped_by,
            "health": health.summary(), "capture_fps": env.capture.achieved_fps()}
