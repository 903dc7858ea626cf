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
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from explorer.agent.memory import check_memory
from explorer.config import Config
from explorer.core import Actor, IdleWindow
from explorer.envs.live.pad import Pad
from explorer.envs.live.screen import screen_region
from explorer.run.driver import Controls, Driver, NonFiniteAction
from explorer.run.observers import Coverage, Training, blank_warning, open_recorder
from explorer.run.rundir import RunDir
from explorer.run.safety import Hotkeys, Kept, SignalStop, countdown, stop_on_signals


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
    from explorer.envs.live.capture import make_screen
    from explorer.envs.live.desktop import focus_check
    from explorer.envs.live.env import LiveEnv
    from explorer.envs.live.pad import make_pad
    from explorer.run.builder import build_agent, configure_threads, seed_everything

    if resume is not None:  # the trained policy acts with the settings it learned with, or not at all
        from explorer.run.resume import refuse_policy_changes, run_settings
        refuse_policy_changes(resume, run_settings(resume), config)
    configure_threads(config.run.threads)
    seed_everything(config.run.seed)
    controls = controls or Controls()
    kept = Kept()
    # Ctrl-C and SIGTERM end the run at a tick, with the pad neutral, keeping what it learned
    with (stop_on_signals(controls, kept) as signals, kept.on_error("play on from it with --resume {run_dir}"),
          ExitStack() as stack):
        game = None
        checks: list[Any] = []
        if with_game:
            from explorer.envs import make_game
            from explorer.envs.doom.game import DoomPad
            game = make_game(config)
            stack.callback(game.close)
            checks.append(game.check)
            _wait_for_window(config.capture.window_title if config.capture.source == "window" else "")
            if pad is None and not dry_run:
                pad = DoomPad(game, config.pad.buttons)
        screen = screen if screen is not None else make_screen(config.capture, config.observation)
        run = stack.enter_context(RunDir(config.run.dir, "play", config))
        kept.run_dir = run.path
        agent = None
        threaded = None
        window: IdleWindow | None = None
        keep: Callable[[], str | None] = lambda: None  # noqa: E731
        if actor is None:
            from explorer.agent.schedule import UpdateSchedule
            from explorer.agent.threaded import ThreadedLearner

            agent = build_agent(config, tuple(screen.shape), acting_copy=True)
            actor = learning = agent.actor
            checkpointer = agent.checkpointer(run.path / "checkpoints")
            kept.checkpoints = checkpointer.directory
            if resume is not None:
                agent.checkpointer(Path(resume) / "checkpoints").restore()
                learning.new_episode = True  # whatever the game is doing now, it is not where that run stopped
                learning.set_weights(agent.learner.get_weights())
            window = IdleWindow() if config.learner.between_ticks else None
            threaded = ThreadedLearner(agent.learner, UpdateSchedule.from_config(config.learner, live=True),
                                       steps=lambda: learning.steps, actor=learning, window=window)
            keep = _keep_what_was_learned(threaded, checkpointer, learning, signals)
            # Registered before the env, so the env (and its pad) closes first, on every way out.
            stack.push(_unless_diverged(keep))
        pad = pad if pad is not None else make_pad(config.pad, dry_run=dry_run)
        env = LiveEnv(screen, pad, stack=config.observation.stack, ring_capacity=config.ring.capacity,
                      capture_fps=config.capture.fps, hz=config.control.hz, blank_s=config.capture.blank_seconds,
                      stall_s=config.capture.stall_seconds, watchdog_s=config.control.watchdog_ticks / config.control.hz,
                      checks=checks, stop=controls.stop, window=window)
        stack.callback(env.close)
        driver = Driver(env, actor, controls, hold=focus_check(config.capture.window_title)
                        if config.control.pause_unfocused and config.capture.source == "window" else None)
        if threaded is not None:
            training = Training(threaded.start(), threaded.steps)
            driver.before_act(threaded.before_act)
        driver.on_step(blank_warning(env, config))
        hotkeys = Hotkeys(controls, config.control.stop_key, config.control.pause_key).start()
        stack.callback(hotkeys.stop)
        if not hotkeys.available:
            print(f"explorer: stop/pause keys off: {hotkeys.reason}; Ctrl-C stops", file=sys.stderr)
        coverage = None
        if game is not None:
            live_game = game
            coverage = Coverage(lambda s: live_game.position(), every=10)
            coverage.attach(driver)
        region = screen_region(screen)
        recorder = open_recorder(config, run.path, source="game" if game is not None else "screen",
                                 decisions=(lambda: agent.actor.started) if agent is not None else None, region=region)
        if recorder is not None:
            kept.session = recorder.path
            stack.callback(recorder.close)
            recorder.attach(driver)
        if threaded is not None:
            driver.on_step(training.step)  # the learner's newest metrics join each step's
        wait = config.control.countdown_s if countdown_s is None else countdown_s
        countdown(wait, controls)  # a stop meanwhile ends the run before its first tick
        kept.started = True
        stats = driver.run(max_seconds=config.control.max_seconds or None)
        checkpoint = keep()  # the learner stopped and its checkpoint written, before the summary names it
        summary: dict[str, Any] = {
            "run_dir": str(run.path), "dry_run": dry_run, "capture_fps": env.capture.achieved_fps(),
            "region": region, "loop": stats.summary(),
            "finished": time.time(), "session": str(recorder.path) if recorder is not None else None,
            "checkpoint": checkpoint, "stopped_by": stats.stopped_by,
            # stopped before its first tick, the run directory holds nothing and goes
            "kept": str(kept) if stats.steps else str(Kept(session=kept.session))}
        if threaded is not None:
            summary["learner"] = threaded.stats()
        if game is not None and coverage is not None:
            path = np.asarray(coverage.coverage.path)
            summary["game"] = {"tics": game.tics, "distinct_cells": len(coverage.coverage.all_cells),
                               "path_length": float(np.abs(np.diff(path, axis=0)).sum()) if len(path) > 1 else 0.0}
        if stats.steps:
            run.write_summary(summary)
    return summary


def _keep_what_was_learned(threaded: Any, checkpointer: Any, actor: Any, signals: SignalStop) -> Callable[[], str | None]:
    """``keep()`` stops the learner thread and checkpoints what it learned (once); returns the checkpoint."""
    done: list[str | None] = []

    def keep() -> str | None:
        if not done:
            done.append(None)
            threaded.stop()
            if actor.steps and not checkpointer.failed:
                with signals.held():
                    done[0] = checkpointer.save(actor.steps)
        return done[0]
    return keep


def _unless_diverged(keep: Callable[[], object]) -> Callable[[Any, BaseException | None, Any], None]:
    """An exit callback that keeps what was learned, unless the policy produced non-finite sticks (then the
    checkpoint before stays the newest)."""
    def on_exit(kind: Any, err: BaseException | None, tb: Any) -> None:
        if not isinstance(err, NonFiniteAction):
            keep()
    return on_exit


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
