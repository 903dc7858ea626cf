"""``explorer play``: live, in real time, on a captured screen and a virtual pad.

The env is the live screen (capture thread, ring, pad, watchdog, fixed tick);
the actor is the learning actor with its own copy of the policy; a learner
thread trains beside it and publishes weights, which the actor installs
between decisions. With ``with_game`` the built-in game runs in a visible
real-time window (the Linux test bed) and its pad bridge takes the actions.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from explorer.agent.memory import check_memory
from explorer.agent.schedule import UpdateSchedule
from explorer.agent.threaded import ThreadedLearner
from explorer.config import Config, check_live_turn_rate
from explorer.core import Actor
from explorer.envs.live.pad import Pad
from explorer.envs.live.screen import screen_region
from explorer.run.assembly import Assembly
from explorer.run.driver import Controls, Driver
from explorer.run.observers import Coverage, Training, blank_warning
from explorer.run.safety import Hotkeys, Kept, countdown
from explorer.timing import IdleWindow


def play(config: Config, dry_run: bool = False, pad: Pad | None = None, controls: Controls | None = None,
         countdown_s: float | None = None, with_game: bool = False, resume: str | Path | None = None,
         actor: Actor | None = None, screen: Any = None) -> dict[str, Any]:
    """Live mode: capture thread -> ring -> actor -> pad at ``control.hz``; returns the run summary.

    Args:
      config: the merged config.
      dry_run: capture and act, but send nothing to a pad.
      pad: the pad to drive (default: ``pad.backend``, or the game's bridge with ``with_game``).
      controls: stop/pause switches (default: new ones, wired to the hotkeys).
      countdown_s: seconds to wait before acting (default ``control.countdown_s``).
      with_game: start the built-in game in a visible real-time window and capture it.
      resume: a run directory (explore, play or replay) whose latest checkpoint to start from.
      actor: an actor to use instead of the learning agent (tests, benchmarks).
      screen: a screen to capture instead of the configured one (tests).
    """
    check_memory(config)  # the learner's buffers fit in the memory free, before the pad is taken
    if actor is None:
        check_live_turn_rate(config)  # the heading window turns at the live game's rate, or is refused
    from explorer.envs.live.capture import make_screen

    if resume is not None:  # the trained policy acts with the settings it learned with, or not at all
        from explorer.run.resume import refuse_policy_changes, run_settings
        refuse_policy_changes(resume, run_settings(resume), config)
    # Ctrl-C and SIGTERM end the run at a tick, with the pad neutral, keeping what it learned
    with Assembly(config, "play", resume="play on from it with --resume {run_dir}", controls=controls,
                  eager=False) as a:
        game = None
        if with_game:
            game, pad = _open_game(a, pad, dry_run)
        screen = screen if screen is not None else make_screen(config.capture, config.observation)
        run = a.open_run()
        threaded = window = None
        keep: Callable[[], str | None] = lambda: None  # noqa: E731
        if actor is None:
            agent = a.learning_agent(tuple(screen.shape), acting_copy=True, restore=resume)
            actor = agent.actor
            window = IdleWindow() if config.learner.live.between_ticks else None
            threaded = ThreadedLearner(agent.learner, UpdateSchedule.from_config(config.learner, live=True),
                                       steps=lambda: agent.actor.steps, actor=agent.actor, window=window)
            # Attached before the env, so the env (and its pad) closes first, on every way out.
            keep = a.checkpoint_on_exit(lambda: agent.actor.steps, settle=threaded.stop)
        env = _live_env(a, screen, pad, dry_run, [game.check] if game is not None else [], window)
        driver = _driver(a, env, actor)
        if threaded is not None:
            training = Training(threaded.start(), threaded.steps)
            driver.before_act(threaded.before_act)
        driver.on_step(blank_warning(env, config))
        _hotkeys(a)
        coverage = None
        if game is not None:
            live_game = game
            coverage = Coverage(lambda s: live_game.position(), every=10)
            coverage.attach(driver)
        region = screen_region(screen)
        recorder = a.record(driver, "game" if game is not None else "screen", region=region)
        if threaded is not None:
            driver.on_step(training.step)  # the learner's newest metrics join each step's
        # a stop during the countdown ends the run before its first tick
        countdown(config.control.countdown_s if countdown_s is None else countdown_s, a.controls)
        stats = a.go(driver, max_seconds=config.control.max_seconds or None)
        checkpoint = keep()  # the learner stopped and its checkpoint written, before the summary names it
        summary: dict[str, Any] = {
            "run_dir": str(run.path), "dry_run": dry_run, "capture_fps": env.capture.achieved_fps(),
            "region": region, "loop": stats.summary(),
            "finished": time.time(), "session": str(recorder.path) if recorder is not None else None,
            "checkpoint": checkpoint, "stopped_by": stats.stopped_by,
            # stopped before its first tick, the run directory holds nothing and goes
            "kept": str(a.kept) if stats.steps else str(Kept(session=a.kept.session))}
        if threaded is not None:
            summary["learner"] = threaded.stats()
        if game is not None and coverage is not None:
            summary["game"] = _game_figures(game, coverage)
        if stats.steps:
            run.write_summary(summary)
    return summary


def _open_game(a: Assembly, pad: Pad | None, dry_run: bool) -> tuple[Any, Pad | None]:
    """The built-in game in a visible real-time window (closed at the end), and the pad that drives it:
    ``pad``, else (unless ``dry_run``) the game's bridge."""
    from explorer.envs import make_game
    from explorer.envs.doom.game import DoomPad

    config = a.config
    game = make_game(config)
    a.stack.callback(game.close)
    _wait_for_window(config.capture.window_title if config.capture.source == "window" else "")
    if pad is None and not dry_run:
        pad = DoomPad(game, config.pad.buttons)
    return game, pad


def _live_env(a: Assembly, screen: Any, pad: Pad | None, dry_run: bool, checks: list[Any],
              window: IdleWindow | None) -> Any:
    """The live env on ``screen`` and ``pad`` (default: ``pad.backend``), closed (its pad neutral) at the end."""
    from explorer.envs.live.env import LiveEnv
    from explorer.envs.live.pad import make_pad

    config = a.config
    pad = pad if pad is not None else make_pad(config.pad, dry_run=dry_run)
    env = LiveEnv(screen, pad, stack=config.observation.stack, ring_capacity=config.ring.capacity,
                  capture_fps=config.capture.fps, hz=config.control.hz, blank_s=config.capture.blank_seconds,
                  stall_s=config.capture.stall_seconds, watchdog_s=config.control.watchdog_ticks / config.control.hz,
                  checks=checks, stop=a.controls.stop, window=window)
    a.stack.callback(env.close)
    return env


def _driver(a: Assembly, env: Any, actor: Actor) -> Driver:
    """The driver of the live env, holding while the game window is not focused (``control.pause_unfocused``)."""
    from explorer.envs.live.desktop import focus_check

    config = a.config
    return Driver(env, actor, a.controls, hold=focus_check(config.capture.window_title)
                  if config.control.pause_unfocused and config.capture.source == "window" else None)


def _hotkeys(a: Assembly) -> None:
    """The stop and pause keys, stopped at the end; one line when they are not available."""
    config = a.config
    hotkeys = Hotkeys(a.controls, config.control.stop_key, config.control.pause_key).start()
    a.stack.callback(hotkeys.stop)
    if not hotkeys.available:
        print(f"explorer: stop/pause keys off: {hotkeys.reason}; Ctrl-C stops", file=sys.stderr)


def _game_figures(game: Any, coverage: Coverage) -> dict[str, Any]:
    """The built-in game's tics, the distinct cells visited and the length of the path walked."""
    path = np.asarray(coverage.visited.path)
    return {"tics": game.tics, "distinct_cells": len(coverage.visited.all_cells),
            "path_length": float(np.abs(np.diff(path, axis=0)).sum()) if len(path) > 1 else 0.0}


def _wait_for_window(title: str, timeout_s: float = 10.0) -> None:
    """Wait until a window with ``title`` is on screen (a game takes a moment to open it)."""
    if not title:
        return
    from explorer.envs.live.desktop import find_window
    from explorer.envs.live.screen import ScreenError
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            find_window(title)
            return
        except ScreenError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
