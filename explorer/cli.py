"""Command line: ``explorer explore | play | doctor``."""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from explorer import config as config_mod
from explorer.config import Config, ConfigError, capture_overrides, quote


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="PATH", help="TOML file merged over the defaults")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. --set capture.fps=30 (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="explorer", description="A curiosity-driven game agent on a virtual Xbox 360 pad.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("explore", help="explore the built-in game (ViZDoom) headless and write a run directory")
    _common(p)
    p.add_argument("--steps", type=int, help="agent steps (overrides run.steps)")
    p.add_argument("--agent", choices=["explorer", "random", "sticky"], help="overrides run.agent")
    p.add_argument("--out", metavar="DIR", help="parent folder for the run directory (overrides run.dir)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--record", metavar="DIR", help="record the run as a session under DIR (overrides record.dir)")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue an explore run from its latest checkpoint (its config.toml, then --config/--set)")

    p = sub.add_parser("play", help="live: capture a screen region or window and drive a virtual pad")
    _common(p)
    p.add_argument("--dry-run", action="store_true", help="capture and act, but send nothing to a pad")
    p.add_argument("--window", metavar="TITLE", help="capture the window whose title contains TITLE")
    p.add_argument("--region", metavar="L,T,W,H", help="capture this screen rectangle (pixels)")
    p.add_argument("--seconds", type=float, help="stop after this long (overrides control.max_seconds)")
    p.add_argument("--out", metavar="DIR", help="parent folder for the run directory (overrides run.dir)")
    p.add_argument("--record", metavar="DIR", help="record the run as a session under DIR (overrides record.dir)")
    p.add_argument("--resume", metavar="RUN_DIR", help="start from the latest checkpoint of an explore, play or replay run")
    p.add_argument("--game", action="store_true",
                   help="real-time test bed: start the built-in game in a visible window at 35 tics/s, capture that "
                        "window, and drive it through the pad bridge instead of a virtual pad")

    p = sub.add_parser("doctor", help="check TensorFlow, the game, capture, the pad driver and the display")
    _common(p)
    p.add_argument("--report", metavar="FILE", help="also write the checks, with versions and settings, to FILE "
                   "(attach it to a bug report)")

    from explorer.sessions_cli import add_parsers
    add_parsers(sub, _common)
    return parser


def load_config(args: argparse.Namespace, extra: list[str]) -> Config:
    return config_mod.load(args.config, [*args.overrides, *extra])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "explore":
            return cmd_explore(args)
        if args.command == "play":
            return cmd_play(args)
        if args.command == "doctor":
            from explorer.doctor import run_doctor
            return run_doctor(load_config(args, []), report=args.report)
        if getattr(args, "handler", None) is not None:
            return int(args.handler(args))
    except ConfigError as err:
        print(f"explorer: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nexplorer: interrupted; the pad is neutral", file=sys.stderr)
        return 130
    except Exception as err:
        from explorer.checkpoint import CheckpointError
        from explorer.games.vizdoom import GameError
        from explorer.learner import NonFiniteLossError
        from explorer.loop import NonFiniteAction, StalledCapture
        from explorer.pad import PadError
        from explorer.record import RecorderError
        from explorer.screen import ScreenError
        from explorer.session import SessionError
        if isinstance(err, (PadError, ScreenError, GameError, NonFiniteAction, StalledCapture, RecorderError, SessionError,
                            CheckpointError, NonFiniteLossError)):
            print(f"explorer: {err}", file=sys.stderr)
            return 1
        raise
    return 0


def _seed(seed: int) -> None:
    import keras
    keras.utils.set_random_seed(seed)


def cmd_explore(args: argparse.Namespace) -> int:
    extra = []
    if args.steps is not None:
        extra.append(f"run.steps={args.steps}")
    if args.agent:
        extra.append(f"run.agent={args.agent}")
    if args.out:
        extra.append(f"run.dir={quote(args.out)}")
    if args.record:
        extra.append(f"record.dir={quote(args.record)}")
    if args.resume:
        run_config = Path(args.resume) / "config.toml"
        if not run_config.is_file():
            raise ConfigError(f"--resume {args.resume}: no config.toml there; give the run directory of an explore run")
        config = config_mod.load(run_config, [])
        newer = config_mod.missing_keys(run_config)
        if newer:
            print(f"explorer: {run_config} predates settings it does not set, which take today's defaults: "
                  + ", ".join(f"{k} = {v}" for k, v in newer.items())
                  + "; to resume with other values, pass them with --set", file=sys.stderr)
        if args.config:
            config = config_mod.load(args.config, [], base=config)
        config = config_mod.load(None, [*args.overrides, *extra], base=config)
    else:
        config = load_config(args, extra)
    summary = explore(config, progress=not args.no_progress, run_path=args.resume)
    print(f"run directory: {summary['run_dir']}")
    cells = summary["cells_per_episode_last20"]
    cells_text = f"{cells:.1f}" if summary["episodes"] else "- (no episode ended)"
    print(f"steps {summary['steps']}, {summary['steps_per_s']:.0f} steps/s, episodes {summary['episodes']}, "
          f"cells per episode (last 20) {cells_text}, distinct cells {summary['distinct_cells']}")
    return 0


def explore(config: Config, progress: bool = True, run_path: str | Path | None = None,
            agent: Any = None) -> dict[str, Any]:
    """The main job: explore the built-in game headless; returns the run summary.

    Args:
      config: the merged config.
      progress: show a progress bar.
      run_path: an existing run directory to resume (its latest checkpoint).
      agent: an agent to use instead of the one ``run.agent`` names (benchmarks of outside agents).
    """
    from tqdm import tqdm

    from explorer.agent import make_agent
    from explorer.checkpoint import Checkpointer
    from explorer.coverage import Coverage
    from explorer.games import make_game
    from explorer.games.vizdoom import DoomPad
    from explorer.loop import GameClock, run_loop
    from explorer.pad import AXES
    from explorer.plots import plot_trajectory
    from explorer.ring import FrameRing
    from explorer.rundir import RunDir

    _seed(config.run.seed)
    if config.run.eager:
        import tensorflow as tf
        tf.config.run_functions_eagerly(True)
    run = RunDir(config.run.dir, "explore", config, path=run_path)
    game = make_game(config)
    pad = DoomPad(game)
    ring = FrameRing(config.ring.capacity, game.shape)
    if agent is None:
        agent = make_agent(config, game.shape, run.path, resume=run_path)
    checkpointer = Checkpointer(agent, run.path / "checkpoints") if hasattr(agent, "save_state") else None
    start = agent.steps if run_path is not None and checkpointer is not None else 0
    if start:
        print(f"resumed {run.path} at step {start}", file=sys.stderr)
    coverage = Coverage()
    coverage.add(*_xy(game))
    bar = tqdm(total=config.run.steps, initial=start, disable=not progress, unit="step", dynamic_ncols=True)

    window: dict[str, list[float]] = {}
    actions: list[np.ndarray] = []
    every = config.run.log_every
    done = [start]  # agent steps so far, over all resumptions
    every_ckpt = config.learner.checkpoint_every

    def on_step(loop_step: int, action, metrics: dict[str, float], tick) -> None:
        step = done[0] = start + loop_step
        if checkpointer is not None and every_ckpt and step % every_ckpt == 0:
            checkpointer.save(step)
        coverage.add(*_xy(game))
        bar.update(1)
        actions.append(action)
        for k, v in metrics.items():
            window.setdefault(k, []).append(float(v))
        if step % every == 0:
            means = {k: float(np.mean(v)) for k, v in window.items()}
            a = np.stack(actions)
            stats = {f"action/mean_{axis}": float(m) for axis, m in zip(AXES, a.mean(0), strict=True)}
            stats |= {f"action/abs_{axis}": float(m) for axis, m in zip(AXES, np.abs(a).mean(0), strict=True)}
            stats["coverage/distinct_cells"] = len(coverage.all_cells)
            run.log({"step": step, **means, **stats})
            run.scalars(step, {**{f"learner/{k}": v for k, v in means.items()}, **stats})
            window.clear()
            actions.clear()

    def on_episode(n: int) -> None:
        cells = coverage.end_episode()
        coverage.add(*_xy(game))  # where the next episode starts
        run.log({"step": done[0], "episode": n, "cells": cells})
        run.scalars(done[0], {"coverage/cells_per_episode": cells, "coverage/last20_mean": coverage.recent_mean()})
        bar.set_postfix(episode=n, cells=cells, last20=f"{coverage.recent_mean():.1f}")

    clock = GameClock(game, ring)
    recorder = open_recorder(config, run.path, source="game")
    try:
        stats = run_loop(clock, ring, agent, pad, config.observation.stack, max_steps=max(config.run.steps - start, 0),
                         on_step=on_step, on_episode=on_episode, recorder=recorder)
    finally:
        bar.close()
        try:
            if recorder is not None:
                recorder.close()
        finally:
            try:
                if checkpointer is not None and done[0] > start and not checkpointer.failed:
                    checkpointer.save(done[0])  # on every way out, Ctrl-C included (not again after a failed one)
            finally:
                agent.close()
                game.close()
    if coverage.episode_cells:
        coverage.end_episode()  # the unfinished last episode counts in the picture, not in last-20 means below
        partial = coverage.per_episode.pop()
    else:
        partial = 0
    picture = plot_trajectory(coverage, run.path / "trajectory.png",
                              title=f"{config.game.scenario}, agent={config.run.agent}, {stats.steps} steps")
    summary = {
        "run_dir": str(run.path), "steps": stats.steps, "resumed_at": start, "episodes": stats.episodes,
        "seconds": round(stats.seconds, 2), "steps_per_s": stats.hz,
        "cells_per_episode": coverage.per_episode, "cells_in_unfinished_episode": partial,
        "cells_per_episode_last20": coverage.recent_mean(20), "distinct_cells": len(coverage.all_cells),
        "trajectory_png": str(picture), "loop": stats.summary(),
        "session": str(recorder.recorder.path) if recorder is not None else None,
        "checkpoint": checkpointer.latest if checkpointer is not None else None,
        "updates": int(agent.learner.updates.numpy()) if hasattr(agent, "learner") else 0,
    }
    run.write_summary(summary)
    run.close()
    return summary


def _xy(game: Any) -> tuple[float, float]:
    p = game.position()
    return p.x, p.y


def cmd_play(args: argparse.Namespace) -> int:
    extra = []
    if args.game:
        extra += ["game.realtime=true", "game.visible=true"]
        if not args.window and not args.region:
            from explorer.games.vizdoom import DoomGame
            args.window = DoomGame.window_title
    extra += capture_overrides(args.window, args.region)
    if args.seconds is not None:
        extra.append(f"control.max_seconds={args.seconds}")
    if args.out:
        extra.append(f"run.dir={quote(args.out)}")
    if args.record:
        extra.append(f"record.dir={quote(args.record)}")
    config = load_config(args, extra)
    summary = play(config, dry_run=args.dry_run, with_game=args.game, resume=args.resume)
    loop = summary["loop"]
    print(f"run directory: {summary['run_dir']}")
    print(f"{loop['steps']} ticks in {loop['seconds']:.1f} s: {loop['hz']:.1f} Hz (target {config.control.hz:g}), "
          f"capture {summary['capture_fps']:.1f} fps (target {config.capture.fps:g}), latency p50 {loop['latency_p50_ms']:.1f} ms "
          f"p99 {loop['latency_p99_ms']:.1f} ms, missed ticks {loop['missed_ticks']}, dropped frames {loop['dropped_frames']}; "
          f"stopped by {loop['stopped_by']}")
    return 0


def play(config: Config, dry_run: bool = False, pad: Any = None, controls: Any = None,
         countdown_s: float | None = None, with_game: bool = False, resume: str | None = None) -> dict[str, Any]:
    """Live mode: capture thread → ring → agent → pad at ``control.hz``; returns the run summary.

    With ``with_game`` the built-in game runs in real time in a visible window
    (the Linux test bed): that window is captured like any game's, and the pad
    is the game's bridge unless ``pad`` or ``dry_run`` says otherwise.
    """
    from explorer.agent import make_agent
    from explorer.coverage import Coverage
    from explorer.loop import Controls, LiveClock, run_loop
    from explorer.pad import make_pad
    from explorer.ring import FrameRing
    from explorer.rundir import RunDir
    from explorer.safety import Hotkeys, countdown
    from explorer.screen import CaptureThread, MssScreen, focus_check

    _seed(config.run.seed)
    game = None
    checks: list[Any] = []
    stack = ExitStack()
    with stack:
        if with_game:
            from explorer.games import make_game
            from explorer.games.vizdoom import DoomPad
            game = make_game(config)
            stack.callback(game.close)
            checks.append(game.check)
            _wait_for_window(config.capture.window_title if config.capture.source == "window" else "")
            if pad is None and not dry_run:
                pad = DoomPad(game)
        screen = MssScreen(config.capture, config.observation)
        ring = FrameRing(config.ring.capacity, screen.shape)
        run = RunDir(config.run.dir, "play", config)
        stack.callback(run.close)
        agent: Any = make_agent(config, screen.shape, run.path, live=True, resume=resume)
        stack.callback(agent.close)
        if hasattr(agent, "check"):
            checks.append(agent.check)
        if hasattr(agent, "agent") and hasattr(agent.agent, "save_state"):
            from explorer.checkpoint import Checkpointer
            checkpointer = Checkpointer(agent.agent, run.path / "checkpoints")

            def keep_what_was_learned() -> None:
                # Registered after agent.close, so it runs before it, on every way out.
                agent.stop_learning()
                if agent.agent.steps:
                    checkpointer.save(agent.agent.steps)

            stack.callback(keep_what_was_learned)
        agent.act(ring_warmup_obs(screen.shape, config.observation.stack))  # trace before the game starts
        pad = pad if pad is not None else make_pad(config.pad, dry_run=dry_run)
        stack.callback(pad.close)
        controls = controls or Controls()
        hotkeys = Hotkeys(controls, config.control.stop_key, config.control.pause_key).start()
        stack.callback(hotkeys.stop)
        if not hotkeys.available:
            print(f"explorer: stop/pause keys off: {hotkeys.reason}; Ctrl-C stops", file=sys.stderr)
        capture = CaptureThread(screen, ring, config.capture.fps, config.capture.blank_seconds)
        stack.callback(capture.stop)
        clock = LiveClock(capture, ring, config.control.hz, stall_s=config.capture.stall_seconds, checks=tuple(checks))
        focused = (focus_check(config.capture.window_title)
                   if config.control.pause_unfocused and config.capture.source == "window" else None)
        coverage = Coverage()
        recorder = open_recorder(config, run.path, source="game" if game is not None else "screen",
                                 region=screen.region.as_mss())
        if recorder is not None:
            stack.callback(recorder.close)

        def on_step(step: int, action, metrics, tick) -> None:
            if game is not None and step % 10 == 0:
                coverage.add(*_xy(game))

        wait = config.control.countdown_s if countdown_s is None else countdown_s
        if not countdown(wait, controls):
            raise KeyboardInterrupt
        if game is not None:
            coverage.add(*_xy(game))
        stats = run_loop(clock, ring, agent, pad, config.observation.stack,
                         max_seconds=config.control.max_seconds or None, controls=controls,
                         watchdog_s=config.control.watchdog_ticks / config.control.hz,
                         on_step=on_step, focused=focused, recorder=recorder)
        summary: dict[str, Any] = {
            "run_dir": str(run.path), "dry_run": dry_run, "capture_fps": capture.achieved_fps(),
            "region": screen.region.as_mss(), "loop": stats.summary(), "finished": time.time(),
            "session": str(recorder.recorder.path) if recorder is not None else None}
        if hasattr(agent, "stats"):
            summary["learner"] = agent.stats()
        if game is not None:
            path = np.asarray(coverage.path)
            summary["game"] = {"tics": game.tics, "distinct_cells": len(coverage.all_cells),
                               "path_length": float(np.abs(np.diff(path, axis=0)).sum()) if len(path) > 1 else 0.0}
        run.write_summary(summary)
    return summary


def open_recorder(config: Config, run_path: Path, source: str, **meta: Any) -> Any:
    """A :class:`~explorer.record.LoopRecorder` writing under ``record.dir``, or None when not recording."""
    if not config.record.dir:
        return None
    from explorer.record import LoopRecorder, Recorder
    path = Path(config.record.dir) / run_path.name
    info = {"source": source, "run_dir": str(run_path), "config": config.to_dict(),
            "episode_steps": config.game.episode_steps if source == "game" else 0, **meta}
    return LoopRecorder(Recorder(path, info, chunk_frames=config.record.chunk_frames))


def _wait_for_window(title: str, timeout_s: float = 10.0) -> None:
    """Wait until a window with ``title`` is on screen (a game takes a moment to open it)."""
    if not title:
        return
    from explorer.screen import ScreenError, find_window
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            find_window(title)
            return
        except ScreenError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def ring_warmup_obs(shape: tuple[int, int, int], stack: int):
    import tensorflow as tf
    return tf.zeros((stack, *shape), tf.uint8)


if __name__ == "__main__":
    sys.exit(main())
