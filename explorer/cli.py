"""Command line: ``explorer explore | play | record | replay | sessions | doctor``.

Argument parsing and printing only: each command turns its flags into ``--set`` overrides, has
:mod:`explorer.run.resume` merge the settings (a resumed or evaluated run's own first), calls one
function of :mod:`explorer.run` and prints its summary and warnings. A
:class:`~explorer.core.ExplorerError` (or a config error) prints one line and exits non-zero;
nothing else is caught.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
from pathlib import Path
from typing import Any

from explorer import config as config_mod
from explorer.config import Config, ConfigError, capture_overrides, quote
from explorer.core import ExplorerError, Stopped, Terminated


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="PATH", help="TOML file merged over the defaults")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. --set capture.fps=30 (repeatable)")


def _positive(kind: type[int] | type[float], zero: bool = False) -> Any:
    """An argparse type: a number of ``kind`` above 0 (or 0 itself with ``zero``); NaN and infinity are refused."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not (value > 0 or (zero and value == 0)) or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be {'0 or more' if zero else 'more than 0'}, got {text}")
        return value
    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="explorer", description="A curiosity-driven game agent on a virtual Xbox 360 pad.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("explore", help="explore the built-in game (ViZDoom) headless and write a run directory")
    _common(p)
    p.add_argument("--steps", type=_positive(int), help="agent steps (overrides run.steps)")
    p.add_argument("--agent", choices=["explorer", "random", "sticky", "sticky_prior"], help="overrides run.agent")
    p.add_argument("--out", metavar="DIR", help="parent folder for the run directory (overrides run.dir)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--record", metavar="DIR", help="record the run as a session under DIR (overrides record.dir)")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue an explore run from its latest checkpoint (its config.toml, then --config/--set)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="game instances feeding one learner, each a Ray actor (overrides run.workers; needs the ray extra)")
    p.add_argument("--address", metavar="ADDR",
                   help="with --workers: join this Ray cluster (overrides run.address; default RAY_ADDRESS, "
                        "else a local cluster)")
    p.set_defaults(handler=cmd_explore)

    p = sub.add_parser("play", help="live: capture a screen region or window and drive a virtual pad")
    _common(p)
    p.add_argument("--dry-run", action="store_true", help="capture and act, but send nothing to a pad")
    p.add_argument("--window", metavar="TITLE", help="capture the window whose title contains TITLE")
    p.add_argument("--region", metavar="L,T,W,H", help="capture this screen rectangle (pixels)")
    p.add_argument("--seconds", type=_positive(float), help="stop after this long (overrides control.max_seconds)")
    p.add_argument("--out", metavar="DIR", help="parent folder for the run directory (overrides run.dir)")
    p.add_argument("--record", metavar="DIR", help="record the run as a session under DIR (overrides record.dir)")
    p.add_argument("--resume", metavar="RUN_DIR", help="start from the latest checkpoint of an explore, play or replay run")
    p.add_argument("--game", action="store_true",
                   help="real-time test bed: start the built-in game in a visible window at 35 tics/s, capture that "
                        "window, and drive it through the pad bridge instead of a virtual pad")
    p.set_defaults(handler=cmd_play)

    p = sub.add_parser("record", help="record the configured screen capture while a person plays (sends nothing to a pad)")
    _common(p)
    p.add_argument("--out", metavar="DIR", default="sessions", help="parent folder of the session directory (default: sessions)")
    p.add_argument("--name", metavar="NAME", default="record", help="suffix of the session directory name")
    p.add_argument("--seconds", type=_positive(float), help="stop after this long; Ctrl-C stops at any time")
    p.add_argument("--hz", type=_positive(float),
                   help="frames recorded per second (default: control.hz, the rate the agent acts at)")
    p.add_argument("--window", metavar="TITLE", help="capture the window whose title contains TITLE")
    p.add_argument("--region", metavar="L,T,W,H", help="capture this screen rectangle (pixels)")
    p.add_argument("--chunk-frames", type=_positive(int), default=64, help="frames per chunk file (default 64)")
    p.set_defaults(handler=cmd_record)

    p = sub.add_parser("sessions", help="list recorded sessions: length, duration, frame size, health")
    p.add_argument("paths", nargs="+", metavar="DIR", help="a session directory, or a folder of sessions")
    p.add_argument("--verify", action="store_true", help="decompress every chunk (checks CRCs; slower)")
    p.add_argument("--json", action="store_true", help="print one JSON object per session")
    p.set_defaults(handler=cmd_sessions)

    p = sub.add_parser("replay", help="train on recorded sessions with no game running, or --evaluate a checkpoint")
    _common(p)
    p.add_argument("sessions", nargs="+", metavar="SESSION", help="session directories (or folders of sessions)")
    p.add_argument("--evaluate", metavar="CHECKPOINT", help="evaluate a run's latest checkpoint (a run directory) or one checkpoint "
                   "(<run>/checkpoints/learner-N) on the sessions instead of training")
    p.add_argument("--epochs", type=_positive(int), default=1, help="passes over the sessions (default 1)")
    p.add_argument("--steps", type=_positive(int), help="stop after this many transitions")
    p.add_argument("--checkpoint-every", type=_positive(int, zero=True), default=0, metavar="N",
                   help="also save a checkpoint every N transitions (0: only at the end)")
    p.add_argument("--out", metavar="DIR", help="parent folder for the run directory (overrides run.dir)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_replay)

    p = sub.add_parser("doctor", help="check TensorFlow, the game, capture, the pad driver and the display")
    _common(p)
    p.add_argument("--report", metavar="FILE", help="also write the checks, with versions and settings, to FILE "
                   "(attach it to a bug report)")
    p.set_defaults(handler=cmd_doctor)
    return parser


def load_config(args: argparse.Namespace, extra: list[str], default_path: str | Path | None = None) -> Config:
    return config_mod.load(args.config or default_path, [*args.overrides, *extra])


def main(argv: list[str] | None = None) -> int:
    from explorer.run.safety import terminate_raises

    args = build_parser().parse_args(argv)
    try:
        with terminate_raises():  # each mode stops on signals in its own way once it runs
            return int(args.handler(args))
    except ConfigError as err:
        print(f"explorer: {err}", file=sys.stderr)
        return 2
    except Stopped as err:
        print(f"explorer: {err}", file=sys.stderr)
        return 128 + err.signum
    except ExplorerError as err:
        print(f"explorer: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nexplorer: interrupted; nothing was written", file=sys.stderr)
        return 130
    except Terminated as err:
        print(f"explorer: stopped by {err}; nothing was written", file=sys.stderr)
        return 128 + err.signum
    except OSError as err:
        if err.errno not in _DISK_FULL:
            raise
        where = f" {err.filename}" if err.filename else ""
        print(f"explorer: cannot write{where}: {err.strerror}; free space there, or write elsewhere (--out)",
              file=sys.stderr)
        return 1


#: a full disk or quota: never a fault of explorer's, always worth one line rather than a traceback
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}


def _nothing_done(summary: dict[str, Any]) -> int:
    print(f"explorer: stopped by {summary['stopped_by']} before the first tick; {summary['kept']}", file=sys.stderr)
    return 0


def _stopped_by_signal(summary: dict[str, Any], done: str, resume: str | None = None) -> int:
    """After a run a signal stopped: one line saying so and what was kept; the exit code (128 + signal).

    Returns 0 when no signal stopped the run.
    """
    from explorer.run.safety import signal_number

    signum = signal_number(str(summary.get("stopped_by")))
    if signum is None:
        return 0
    hint = f"; {resume}" if resume and summary.get("checkpoint") else ""
    print(f"explorer: stopped by {summary['stopped_by']} {done}; {summary['kept']}{hint}", file=sys.stderr)
    return 128 + signum


def cmd_explore(args: argparse.Namespace) -> int:
    from explorer.run.coverage import FIGURE
    from explorer.run.explore import explore
    from explorer.run.resume import command_config

    extra = []
    if args.steps is not None:
        extra.append(f"run.steps={args.steps}")
    if args.agent:
        extra.append(f"run.agent={args.agent}")
    if args.out:
        extra.append(f"run.dir={quote(args.out)}")
    if args.record:
        extra.append(f"record.dir={quote(args.record)}")
    if args.workers is not None:
        extra.append(f"run.workers={args.workers}")
    if args.address:
        extra.append(f"run.address={quote(args.address)}")
    config = command_config(args.resume, args.config, [*args.overrides, *extra], "an explore run", game=True)
    if config.run.agent == "explorer":
        for warning in config_mod.explore_warnings(config):
            print(f"explorer: {warning}", file=sys.stderr)
    summary = explore(config, progress=not args.no_progress, run_path=args.resume)
    if summary["steps"]:  # none when a signal came before the first step
        print(f"run directory: {summary['run_dir']}")
        cells = summary["cells_per_budget"]
        cells_text = f"{cells:.1f}" if summary["episodes"] else "- (no episode ended)"
        print(f"steps {summary['steps']}, {summary['steps_per_s']:.0f} steps/s, episodes {summary['episodes']}, "
              f"{FIGURE} {cells_text} (budget {summary['episode_budget']} steps), "
              f"distinct cells {summary['distinct_cells']}"
              + (f" ({summary['cells']})" if summary.get("cells", "map cells") != "map cells" else ""))
        if "workers" in summary:
            print(f"{len(summary['workers'])} workers: {summary['updates_this_run']} updates "
                  f"({summary['update_to_data']:.3f} per step, setting {summary['update_to_data_setting']:.3f}), "
                  f"{summary['transitions_per_s']:.0f} transitions/s into replay, weights version "
                  f"{summary['weights_version']}, {summary['lost_batches']} batches lost, "
                  f"{summary['worker_restarts']} worker restarts")
    done = summary["resumed_at"] + summary["steps"]
    return _stopped_by_signal(summary, f"at step {done} of {config.run.steps}",
                              f"continue with: explorer explore --resume {summary['run_dir']}")


def cmd_play(args: argparse.Namespace) -> int:
    from explorer.run.play import play
    from explorer.run.resume import command_config

    extra = []
    if args.game:
        extra += ["game.realtime=true", "game.visible=true"]
        if not args.window and not args.region:
            from explorer.envs.doom.game import DoomGame
            args.window = DoomGame.window_title
    extra += capture_overrides(args.window, args.region)
    if args.seconds is not None:
        extra.append(f"control.max_seconds={args.seconds}")
    if args.out:
        extra.append(f"run.dir={quote(args.out)}")
    if args.record:
        extra.append(f"record.dir={quote(args.record)}")
    # resumed, the policy acts with the settings it was trained with
    config = command_config(args.resume, args.config, [*args.overrides, *extra], "an explore, play or replay run",
                            game=bool(args.game))
    summary = play(config, dry_run=args.dry_run, with_game=args.game, resume=args.resume)
    loop = summary["loop"]
    if not loop["steps"]:  # stopped before its first tick: nothing to report but that
        return _stopped_by_signal(summary, "before the first tick") or _nothing_done(summary)
    print(f"run directory: {summary['run_dir']}")
    print(f"{loop['steps']} ticks in {loop['seconds']:.1f} s: {loop['hz']:.1f} Hz (target {config.control.hz:g}), "
          f"capture {summary['capture_fps']:.1f} fps (target {config.capture.fps:g}), latency p50 {loop['latency_p50_ms']:.1f} ms "
          f"p99 {loop['latency_p99_ms']:.1f} ms, missed ticks {loop['missed_ticks']}, dropped frames {loop['dropped_frames']}; "
          f"stopped by {loop['stopped_by']}")
    return _stopped_by_signal(summary, f"after {loop['steps']} ticks",
                              f"play on from it with --resume {summary['run_dir']}")


def cmd_record(args: argparse.Namespace) -> int:
    from explorer.run.record import record_screen

    config = load_config(args, capture_overrides(args.window, args.region))
    summary = record_screen(config, args.out, seconds=args.seconds, hz=args.hz, name=args.name,
                            chunk_frames=args.chunk_frames, announce=True)
    print(f"session: {summary['path']}")
    print(f"{summary['steps']} frames in {summary['duration_s']:.1f} s ({summary['hz']:.1f} Hz, target {summary['target_hz']:g}), "
          f"frame {'x'.join(map(str, summary['frame_shape']))}, stopped by {summary['stopped_by']}; {summary['health']}")
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    from explorer.run.sessions import list_sessions

    rows = list_sessions(args.paths, verify=args.verify)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0 if all(r.get("ok") for r in rows) else 1
    if not rows:
        print("no sessions found")
        return 1
    width = max(len(r["path"]) for r in rows)
    print(f"{'session':<{width}}  {'steps':>7}  {'episodes':>8}  {'duration':>9}  {'frame':>9}  {'source':>6}  "
          f"{'actions':>7}  {'buttons':>9}  health")
    for r in rows:
        if "error" in r:
            print(f"{r['path']:<{width}}  {'error: ' + r['error']}")
            continue
        frame = "x".join(map(str, r["frame_shape"])) if r["frame_shape"] else "-"
        buttons = ",".join(r["buttons"]) or "-"
        print(f"{r['path']:<{width}}  {r['steps']:>7}  {r['episodes']:>8}  {r['duration_s']:>8.1f}s  {frame:>9}  "
              f"{r['source']:>6}  {'yes' if r['actions'] else 'no':>7}  {buttons:>9}  {r['health']}")
    return 0 if all(r.get("ok") for r in rows) else 1


def cmd_replay(args: argparse.Namespace) -> int:
    from explorer.run.replay import evaluate_run, replay_run, replay_sessions
    from explorer.run.resume import evaluation_config

    sessions = replay_sessions(args.sessions)
    extra = [f"run.dir={quote(args.out)}"] if args.out else []
    config = evaluation_config(args.evaluate, args.config, [*args.overrides, *extra])
    if args.evaluate is not None:
        run_path, summary = evaluate_run(config, sessions, Path(args.evaluate))
        print(f"run directory: {run_path}")
        mse = summary.get("action_mse")
        print(f"{summary['transitions']} transitions; novelty mean {summary.get('novelty_mean', float('nan')):.3f}; "
              f"action MSE vs recorded {('n/a' if mse is None else ', '.join(f'{k} {v:.3f}' for k, v in mse.items()))}")
        return _stopped_by_signal(summary, f"after {summary['transitions']} transitions")
    transitions = sum(s.steps for s in sessions) * args.epochs
    for warning in config_mod.replay_warnings(config, min(transitions, args.steps or transitions)):
        print(f"explorer: {warning}", file=sys.stderr)
    run_path, summary = replay_run(config, sessions, epochs=args.epochs, max_steps=args.steps,
                                   checkpoint_every=args.checkpoint_every, progress=not args.no_progress)
    print(f"run directory: {run_path}")
    print(f"{summary['transitions']} transitions replayed in {summary['seconds']:.1f} s, {summary['updates']} "
          f"updates; checkpoint {summary['checkpoint']}")
    return _stopped_by_signal(summary, f"after {summary['transitions']} transitions")


def cmd_doctor(args: argparse.Namespace) -> int:
    from explorer.run.doctor import run_doctor

    return run_doctor(load_config(args, []), report=args.report)


if __name__ == "__main__":
    sys.exit(main())
