"""Command line for sessions: ``explorer record | sessions | replay``.

:func:`add_parsers` registers the three subcommands on the main parser; each
sets ``handler`` (``handler(args) -> exit code``). The work itself lives in
plain functions that tests and notebooks call directly: :func:`record_screen`,
:func:`list_sessions`, :func:`replay_train` and :func:`evaluate_policy`.

Replay drives a learning agent (:class:`explorer.agent.learner.LearningAgent`, or
anything with ``observe(obs, action, next_obs, first, last) -> metrics`` and
``save(dir)``) with recorded transitions instead of a game: the agent computes
novelty from the recorded frames and trains on its own schedule, exactly as it
would live, but the actions are the recorded ones.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from explorer.envs.recorder import Recorder
from explorer.envs.session import (
    Session,
    SessionError,
    find_sessions,
    open_sessions,
    sessions_dataset,
)

# ---------------------------------------------------------------- parsers


def add_parsers(subparsers: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Register ``record``, ``sessions`` and ``replay`` on ``subparsers``; ``common(p)`` adds --config/--set."""
    p = subparsers.add_parser("record", help="record the configured screen capture while a person plays (sends nothing to a pad)")
    common(p)
    p.add_argument("--out", metavar="DIR", default="sessions", help="parent folder of the session directory (default: sessions)")
    p.add_argument("--name", metavar="NAME", default="record", help="suffix of the session directory name")
    p.add_argument("--seconds", type=float, help="stop after this long; Ctrl-C stops at any time")
    p.add_argument("--hz", type=float, help="frames recorded per second (default: control.hz, the rate the agent acts at)")
    p.add_argument("--window", metavar="TITLE", help="capture the window whose title contains TITLE")
    p.add_argument("--region", metavar="L,T,W,H", help="capture this screen rectangle (pixels)")
    p.add_argument("--chunk-frames", type=int, default=64, help="frames per chunk file (default 64)")
    p.set_defaults(handler=cmd_record)

    p = subparsers.add_parser("sessions", help="list recorded sessions: length, duration, frame size, health")
    p.add_argument("paths", nargs="+", metavar="DIR", help="a session directory, or a folder of sessions")
    p.add_argument("--verify", action="store_true", help="decompress every chunk (checks CRCs; slower)")
    p.add_argument("--json", action="store_true", help="print one JSON object per session")
    p.set_defaults(handler=cmd_sessions)

    p = subparsers.add_parser("replay", help="train on recorded sessions with no game running, or --evaluate a checkpoint")
    common(p)
    p.add_argument("sessions", nargs="+", metavar="SESSION", help="session directories (or folders of sessions)")
    p.add_argument("--evaluate", metavar="CHECKPOINT", help="evaluate a run's latest checkpoint (a run directory) or one checkpoint "
                   "(<run>/checkpoints/learner-N) on the sessions instead of training")
    p.add_argument("--epochs", type=int, default=1, help="passes over the sessions (default 1)")
    p.add_argument("--steps", type=int, help="stop after this many transitions")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N", help="also save a checkpoint every N transitions")
    p.add_argument("--out", metavar="DIR", help="parent folder for the run directory (overrides run.dir)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_replay)


def _load_config(args: argparse.Namespace, extra: Sequence[str] = (), config_path: str | Path | None = None) -> Any:
    from explorer import config as config_mod
    return config_mod.load(args.config or config_path, [*args.overrides, *extra])


# ---------------------------------------------------------------- record

def cmd_record(args: argparse.Namespace) -> int:
    from explorer.config import capture_overrides
    config = _load_config(args, capture_overrides(args.window, args.region))
    summary = record_screen(config, args.out, seconds=args.seconds, hz=args.hz, name=args.name,
                            chunk_frames=args.chunk_frames, announce=True)
    print(f"session: {summary['path']}")
    print(f"{summary['steps']} frames in {summary['duration_s']:.1f} s ({summary['hz']:.1f} Hz, target {summary['target_hz']:g}), "
          f"frame {'x'.join(map(str, summary['frame_shape']))}, stopped by {summary['stopped_by']}; {summary['health']}")
    return 0


def new_session_path(parent: str | Path, name: str) -> Path:
    """``<parent>/<YYYYmmdd-HHMMSS>-<name>``, numbered if it exists."""
    from explorer.run.rundir import timestamped_path
    return timestamped_path(parent, name)


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C and SIGTERM set ``stop`` (so the session closes cleanly) instead of raising mid-write."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def record_screen(config: Any, out: str | Path, seconds: float | None = None, hz: float | None = None,
                  screen: Any = None, stop: threading.Event | None = None, name: str = "record",
                  chunk_frames: int = 64, path: str | Path | None = None, announce: bool = False) -> dict[str, Any]:
    """Record the screen while a person plays: capture thread → ring → a frame every tick → session.

    Nothing is sent to a pad; actions are stored as unknown (NaN) and rewards
    as not computed. The whole recording is one episode.

    Args:
      config: the :class:`explorer.config.Config`.
      out: parent folder of the session directory.
      seconds: stop after this long (None: until ``stop`` or Ctrl-C/SIGTERM).
      hz: frames recorded per second (default ``config.control.hz``).
      screen: a :class:`explorer.envs.screen.Screen` (default: ``MssScreen`` on the configured capture).
      stop: set it to stop (Ctrl-C and SIGTERM set it too, from the main thread).
      name: suffix of the session directory name.
      chunk_frames: frames per chunk file.
      path: the session directory itself (overrides ``out`` and ``name``).
      announce: print the session path and how to stop, on stderr.

    Returns:
      A summary: ``path``, ``steps``, ``duration_s``, ``hz``, ``frame_shape``, ``stopped_by``, ``health``.
    """
    from explorer.envs.ring import FrameRing
    from explorer.envs.screen import CaptureThread, MssScreen, ScreenError

    hz = hz or config.control.hz
    screen = screen if screen is not None else MssScreen(config.capture, config.observation)
    region = getattr(screen, "region", None)
    path = Path(path) if path is not None else new_session_path(out, name)
    meta = {"source": "screen", "mode": "record", "config": config.to_dict(), "frame_shape": list(screen.shape),
            "region": region.as_mss() if region is not None else None, "hz": hz, "capture_fps": config.capture.fps,
            "actions": "none (a person played; nothing was sent to a pad)"}
    ring = FrameRing(max(config.ring.capacity, 2), tuple(screen.shape))
    capture = CaptureThread(screen, ring, config.capture.fps, config.capture.blank_seconds)
    stop = stop or threading.Event()
    stopped_by = "time"

    def frame_time() -> float:
        # The ring gets the frame a moment before its time is noted.
        times = capture.grab_times
        return times[-1] if times else time.monotonic()

    recorder = Recorder(path, meta, chunk_frames=chunk_frames)
    if announce:
        print(f"recording {path} at {hz:g} Hz; Ctrl-C stops", file=sys.stderr)
    try:
        with _stop_on_signals(stop):
            capture.start()
            if not ring.wait_for(0, timeout=5.0):
                capture.check()
                raise ScreenError("no frame captured within 5 s")
            period = 1.0 / hz
            t0 = next_t = time.monotonic()
            first = True
            while True:
                if stop.is_set():
                    stopped_by = "stop"
                    break
                if seconds is not None and time.monotonic() - t0 >= seconds:
                    break
                if capture.error is not None:
                    capture.check()
                recorder.add(ring.latest(1)[0].numpy(), None, None, first=first, last=False, t=frame_time())
                first = False
                next_t += period
                delay = next_t - time.monotonic()
                if delay > 0:
                    stop.wait(delay)
                else:
                    next_t += int(-delay / period) * period
            recorder.add(ring.latest(1)[0].numpy(), None, None, first=first, last=True, t=frame_time())
    finally:
        capture.stop()
        screen.close()
        recorder.close()
    session = Session(path)
    health = session.health()
    return {"path": str(path), "steps": session.steps, "duration_s": session.duration_s,
            "hz": (session.steps - 1) / session.duration_s if session.duration_s > 0 else 0.0,
            "target_hz": hz, "frame_shape": list(session.frame_shape or screen.shape), "stopped_by": stopped_by,
            "health": health.summary(), "capture_fps": capture.achieved_fps()}


# ---------------------------------------------------------------- sessions

def describe(path: str | Path, verify: bool = False) -> dict[str, Any]:
    """Facts about one session for listings; an unreadable one gives ``{"path", "error"}``."""
    try:
        s = Session(path)
        h = s.health(verify=verify)
    except SessionError as err:
        return {"path": str(path), "error": str(err)}
    inner = s.meta.get("meta", {})
    return {"path": str(path), "steps": s.steps, "episodes": s.episodes, "duration_s": round(s.duration_s, 3),
            "frame_shape": list(s.frame_shape) if s.frame_shape else None, "source": inner.get("source", "?"),
            "actions": s.has_actions, "status": h.status, "lost_steps": h.lost_steps, "ok": h.ok,
            "health": h.summary()}


def list_sessions(paths: Sequence[str | Path], verify: bool = False) -> list[dict[str, Any]]:
    """:func:`describe` every session found among ``paths`` (session directories or folders of them)."""
    return [describe(p, verify) for p in find_sessions(paths)]


def cmd_sessions(args: argparse.Namespace) -> int:
    try:
        rows = list_sessions(args.paths, verify=args.verify)
    except SessionError as err:
        print(f"explorer: {err}", file=sys.stderr)
        return 1
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0 if all(r.get("ok") for r in rows) else 1
    if not rows:
        print("no sessions found")
        return 1
    width = max(len(r["path"]) for r in rows)
    print(f"{'session':<{width}}  {'steps':>7}  {'episodes':>8}  {'duration':>9}  {'frame':>9}  {'source':>6}  {'actions':>7}  health")
    for r in rows:
        if "error" in r:
            print(f"{r['path']:<{width}}  {'error: ' + r['error']}")
            continue
        frame = "x".join(map(str, r["frame_shape"])) if r["frame_shape"] else "-"
        print(f"{r['path']:<{width}}  {r['steps']:>7}  {r['episodes']:>8}  {r['duration_s']:>8.1f}s  {frame:>9}  "
              f"{r['source']:>6}  {'yes' if r['actions'] else 'no':>7}  {r['health']}")
    return 0 if all(r.get("ok") for r in rows) else 1


# ---------------------------------------------------------------- replay: training

class ReplayAgent(Protocol):
    """What replay training needs from an agent (``explorer.agent.learner.LearningAgent`` has it)."""

    def observe(self, obs: Any, action: Any, next_obs: Any, first: bool, last: bool) -> dict[str, float]:
        """One transition: ``uint8[k, H, W, C]``, ``float32[4]``, ``uint8[k, H, W, C]``; may train."""

    def save_state(self, directory: str | Path) -> None:
        """Write what lives outside TensorFlow (replay, counters) into ``directory``."""


def build_agent(config: Any, frame_shape: Sequence[int], episode_steps: int = 0) -> Any:
    """The learning agent for frames ``uint8[H, W, C]`` stacked ``config.observation.stack`` deep.

    Uses ``config.learner`` and ``config.novelty`` when the config has them, else their defaults.
    """
    from explorer.agent.learner import build_agent as build_learning_agent
    from explorer.config import LearnerConfig, NoveltyConfig

    learner = getattr(config, "learner", None) or LearnerConfig()
    novelty = getattr(config, "novelty", None) or NoveltyConfig()
    k = config.observation.stack
    return build_learning_agent(learner, novelty, (k, *(int(s) for s in frame_shape)), episode_steps)


def _episode_steps(sessions: Sequence[Session]) -> int:
    # The learner's context input is the fraction of the episode gone; only a game has fixed-length episodes.
    for s in sessions:
        n = s.meta.get("meta", {}).get("episode_steps")
        if n:
            return int(n)
    return 0


def _needs_actions(sessions: Sequence[Session]) -> None:
    missing = [str(s.path) for s in sessions if not s.has_actions]
    if missing:
        raise SessionError(f"{', '.join(missing)}: no recorded actions (a person played; the stick values are unknown), "
                           "so there is nothing to learn Q(obs, action) from; replay sessions recorded by the agent")


def replay_train(sessions: Sequence[str | Path | Session], agent: ReplayAgent, stack: int, run_path: str | Path,
                 epochs: int = 1, max_steps: int | None = None, checkpoint_every: int = 0, log_every: int = 100,
                 progress: bool = False, log: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Feed recorded transitions to ``agent.observe`` in order (no game); log, checkpoint and plot.

    Frames are read from disk through ``tf.data`` with prefetch, so reading
    overlaps training. Novelty is what the agent computes from the recorded
    frames; the recorded reward is not used for training.

    Args:
      sessions: session paths (or open sessions), one frame shape.
      agent: a :class:`ReplayAgent`.
      stack: frames per observation ``k``.
      run_path: the run directory; gets ``tb/`` (TensorBoard), ``checkpoints/``, ``training.png``.
      epochs: passes over the sessions.
      max_steps: stop after this many transitions.
      checkpoint_every: also checkpoint every this many transitions (0: only at the end).
      log_every: transitions per TensorBoard/metrics record.
      progress: show a progress bar.
      log: also called with each metrics record (e.g. ``RunDir.log``).

    Returns:
      A summary: ``transitions``, ``updates`` (transitions that trained), ``seconds``, ``checkpoint``, ``plot``, ``tensorboard``.
    """
    import tensorflow as tf
    from tqdm import tqdm

    sessions = open_sessions(sessions)
    _needs_actions(sessions)
    run_path = Path(run_path)
    run_path.mkdir(parents=True, exist_ok=True)
    writer = tf.summary.create_file_writer(str(run_path / "tb"))
    total = sum(s.steps for s in sessions) * epochs
    bar = tqdm(total=max_steps or total, disable=not progress, unit="step", dynamic_ncols=True)
    history: dict[str, list[tuple[int, float]]] = {}
    window: dict[str, list[float]] = {}
    step = updates = 0
    t0 = time.monotonic()
    from explorer.agent.checkpoint import Checkpointer
    checkpointer = Checkpointer(agent, run_path / "checkpoints")
    done = False
    with writer.as_default():
        for _ in range(epochs):
            for batch in sessions_dataset(sessions, stack, batch_size=64):
                b = {k: v.numpy() for k, v in batch.items()}
                for j in range(len(b["index"])):
                    metrics = agent.observe(b["obs"][j], b["action"][j], b["next_obs"][j], bool(b["first"][j]), bool(b["last"][j]))
                    step += 1
                    updates += "critic_loss" in metrics
                    for k, v in metrics.items():
                        window.setdefault(k, []).append(float(v))
                    if step % log_every == 0:
                        record = _flush_metrics(window, history, step)
                        if log is not None:
                            log(record)
                    if checkpoint_every and step % checkpoint_every == 0:
                        checkpointer.save(step)
                    bar.update(1)
                    if max_steps is not None and step >= max_steps:
                        done = True
                        break
                if done:
                    break
            if done:
                break
        if window:
            record = _flush_metrics(window, history, step)
            if log is not None:
                log(record)
    bar.close()
    writer.close()
    if step == 0:
        raise SessionError(f"no transitions in {', '.join(str(s.path) for s in sessions)}")
    if not (checkpoint_every and step % checkpoint_every == 0):
        checkpointer.save(step)
    checkpoint = checkpointer.latest
    plot = _plot_history(history, run_path / "training.png", f"replay of {len(sessions)} session(s), {step} transitions")
    return {"transitions": step, "updates": updates,
            "seconds": round(time.monotonic() - t0, 2), "checkpoint": str(checkpoint), "plot": str(plot),
            "tensorboard": str(run_path / "tb"), "final_metrics": {k: v[-1][1] for k, v in history.items()}}


def _flush_metrics(window: dict[str, list[float]], history: dict[str, list[tuple[int, float]]], step: int) -> dict[str, Any]:
    import tensorflow as tf

    record: dict[str, Any] = {"step": step}
    for k, values in window.items():
        if values:
            mean = float(np.mean(values))
            tf.summary.scalar(k, mean, step=step)
            history.setdefault(k, []).append((step, mean))
            record[k] = mean
    window.clear()
    return record


def _plot_history(history: dict[str, list[tuple[int, float]]], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in ("novelty", "critic_loss", "actor_loss", "q", "alpha") if k in history] or sorted(history)[:4]
    fig, axes = plt.subplots(len(keys) or 1, 1, figsize=(8, 2.2 * max(len(keys), 1)), sharex=True, squeeze=False)
    for ax, k in zip(axes[:, 0], keys, strict=False):
        xs, ys = zip(*history[k], strict=True)
        ax.plot(xs, ys, ".-", ms=3)
        ax.set_ylabel(k)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("transitions replayed")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# ---------------------------------------------------------------- replay: evaluation

PolicyFn = Callable[[np.ndarray, np.ndarray, int], np.ndarray]
"""``policy(obs uint8[k, H, W, C], prev_action float32[4], episode_step) -> float32[4]``, deterministic."""


def learning_agent_policy(agent: Any) -> PolicyFn:
    """The deterministic action (tanh of the actor's mean, no noise, on its stick range) of a :class:`explorer.agent.learner.LearningAgent`."""
    import tensorflow as tf

    def policy(obs: np.ndarray, prev_action: np.ndarray, episode_step: int) -> np.ndarray:
        k, h, w, c = obs.shape
        stacked = obs.transpose(1, 2, 0, 3).reshape(1, h, w, k * c)
        ctx = agent.context(prev_action, episode_step)[None]
        mean, _ = agent.learner.policy(tf.constant(stacked), tf.constant(ctx))
        return agent.learner.sticks(np.tanh(mean)).astype(np.float32)

    return policy


def evaluate_policy(sessions: Sequence[str | Path | Session], policy: PolicyFn, stack: int, run_path: str | Path,
                    novelty: Any = None) -> dict[str, Any]:
    """Run a policy over recorded sessions: novelty over time and the actions it would take against the recorded ones.

    Args:
      sessions: session paths (or open sessions).
      policy: a :data:`PolicyFn`.
      stack: frames per observation ``k``.
      run_path: the run directory; gets ``evaluation.json``, ``evaluation.npz``, ``tb/``,
        ``novelty.png`` and ``actions.png``.
      novelty: an :class:`explorer.agent.novelty.Novelty` to score the recorded frames with (reset at each
        episode start); None plots the recorded rewards only.

    Returns:
      The summary written to ``evaluation.json``.
    """
    import tensorflow as tf

    sessions = open_sessions(sessions)
    run_path = Path(run_path)
    run_path.mkdir(parents=True, exist_ok=True)
    policy_a: list[np.ndarray] = []
    recorded_a: list[np.ndarray] = []
    recorded_r: list[float] = []
    scored: list[float] = []
    firsts: list[bool] = []
    prev = np.zeros(4, np.float32)
    episode_step = 0
    for s in sessions:
        for block in s.transitions(stack):
            for j in range(len(block["index"])):
                obs, next_obs = block["obs"][j], block["next_obs"][j]
                if block["first"][j] or not firsts:
                    prev, episode_step = np.zeros(4, np.float32), 0
                    if novelty is not None:
                        novelty.reset(tf.constant(_stack(obs)))
                firsts.append(bool(block["first"][j]))
                policy_a.append(np.asarray(policy(obs, prev, episode_step), np.float32).reshape(4))
                action = block["action"][j]
                recorded_a.append(action)
                recorded_r.append(block["reward"][j])
                if novelty is not None:
                    a = np.nan_to_num(action, nan=0.0)
                    scored.append(float(novelty.reward(tf.constant(_stack(obs)), tf.constant(a), tf.constant(_stack(next_obs)))))
                # The policy's context is the previous action: the recorded one, or its own where none was recorded.
                prev = policy_a[-1] if np.isnan(action).any() else action
                episode_step += 1
                if block["last"][j]:
                    prev, episode_step = np.zeros(4, np.float32), 0
    if not policy_a:
        raise SessionError(f"no transitions in {', '.join(str(s.path) for s in sessions)}")
    pa, ra = np.stack(policy_a), np.stack(recorded_a)
    rr = np.asarray(recorded_r, np.float32)
    nov = np.asarray(scored, np.float32)
    known = ~np.isnan(ra).any(axis=1)
    from explorer.envs.pad import AXES

    summary: dict[str, Any] = {"transitions": len(pa), "sessions": [str(s.path) for s in sessions],
                               "policy_action_mean": dict(zip(AXES, pa.mean(0).tolist(), strict=True)),
                               "policy_action_std": dict(zip(AXES, pa.std(0).tolist(), strict=True)),
                               "recorded_actions": int(known.sum())}
    if known.any():
        err = pa[known] - ra[known]
        summary["action_mse"] = dict(zip(AXES, np.mean(err**2, 0).tolist(), strict=True))
        summary["action_sign_agreement"] = dict(zip(AXES, np.mean(np.sign(pa[known]) == np.sign(ra[known]), 0).tolist(), strict=True))
    if np.isfinite(rr).any():
        summary["recorded_reward_mean"] = float(np.nanmean(rr))
    if len(nov):
        summary["novelty_mean"] = float(nov.mean())
        summary["novelty_last_100_mean"] = float(nov[-100:].mean())
    writer = tf.summary.create_file_writer(str(run_path / "tb"))
    with writer.as_default():
        for i in range(len(pa)):
            if len(nov):
                tf.summary.scalar("eval/novelty", nov[i], step=i)
            if known[i]:
                tf.summary.scalar("eval/action_mse", float(np.mean((pa[i] - ra[i]) ** 2)), step=i)
    writer.close()
    np.savez(run_path / "evaluation.npz", policy_action=pa, recorded_action=ra, recorded_reward=rr, novelty=nov,
             first=np.asarray(firsts))
    summary["novelty_png"] = str(_plot_novelty(nov, rr, np.asarray(firsts), run_path / "novelty.png"))
    summary["actions_png"] = str(_plot_actions(pa, ra, run_path / "actions.png"))
    (run_path / "evaluation.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _stack(obs: np.ndarray) -> np.ndarray:
    k, h, w, c = obs.shape
    return obs.transpose(1, 2, 0, 3).reshape(h, w, k * c)


def _plot_novelty(novelty: np.ndarray, recorded: np.ndarray, first: np.ndarray, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 3.5))
    if len(novelty):
        ax.plot(novelty, lw=0.8, label="novelty (recomputed)")
    if np.isfinite(recorded).any():
        ax.plot(recorded, lw=0.8, alpha=0.7, label="reward (recorded)")
    for x in np.flatnonzero(first):
        ax.axvline(float(x), color="0.6", lw=0.5, ls="--")
    ax.set_xlabel("transition (dashed: episode start)")
    ax.set_ylabel("novelty")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right")
    else:
        ax.text(0.5, 0.5, "no novelty signal and no recorded rewards", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _plot_actions(policy: np.ndarray, recorded: np.ndarray, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from explorer.envs.pad import AXES

    fig, axes = plt.subplots(4, 1, figsize=(10, 7), sharex=True)
    for i, ax in enumerate(axes):
        if np.isfinite(recorded[:, i]).any():
            ax.plot(recorded[:, i], lw=0.8, label="recorded")
        ax.plot(policy[:, i], lw=0.8, label="policy")
        ax.set_ylim(-1.05, 1.05)
        ax.set_ylabel(AXES[i])
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right")
    axes[-1].set_xlabel("transition")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# ---------------------------------------------------------------- replay: command

def _checkpoint_config(checkpoint: Path) -> Path | None:
    # A run directory, or a checkpoint inside one (<run>/checkpoints/learner-N), uses that run's config by default.
    for parent in (checkpoint, *list(checkpoint.parents)[:2]):
        if (parent / "config.toml").is_file():
            return parent / "config.toml"
    return None


def cmd_replay(args: argparse.Namespace) -> int:
    from explorer.run.rundir import RunDir

    paths = find_sessions(args.sessions)
    if not paths:
        print(f"explorer: no sessions in {' '.join(args.sessions)}", file=sys.stderr)
        return 1
    sessions = open_sessions(paths)
    from explorer.config import quote
    extra = [f"run.dir={quote(args.out)}"] if args.out else []
    checkpoint = Path(args.evaluate) if args.evaluate else None
    config = _load_config(args, extra, _checkpoint_config(checkpoint) if checkpoint else None)
    shape = sessions[0].frame_shape
    if shape is None:
        print(f"explorer: {sessions[0].path} holds no frames", file=sys.stderr)
        return 1
    import keras
    keras.utils.set_random_seed(config.run.seed)
    stack = config.observation.stack
    agent = build_agent(config, shape, _episode_steps(sessions))
    if checkpoint is not None:
        from explorer.agent.checkpoint import Checkpointer
        if (checkpoint / "checkpoints").is_dir():  # a run directory: its latest checkpoint
            Checkpointer(agent, checkpoint / "checkpoints").restore()
        else:  # a checkpoint path prefix: <run>/checkpoints/learner-N
            Checkpointer(agent, checkpoint.parent).restore(str(checkpoint))
        run = RunDir(config.run.dir, "evaluate", config)
        summary = evaluate_policy(sessions, learning_agent_policy(agent), stack, run.path, novelty=agent.novelty)
        run.write_summary(summary)
        run.close()
        print(f"run directory: {run.path}")
        mse = summary.get("action_mse")
        print(f"{summary['transitions']} transitions; novelty mean {summary.get('novelty_mean', float('nan')):.3f}; "
              f"action MSE vs recorded {('n/a' if mse is None else ', '.join(f'{k} {v:.3f}' for k, v in mse.items()))}")
        return 0
    run = RunDir(config.run.dir, "replay", config)
    try:
        summary = replay_train(sessions, agent, stack, run.path, epochs=args.epochs, max_steps=args.steps,
                               checkpoint_every=args.checkpoint_every, progress=not args.no_progress, log=run.log)
    finally:
        agent.close()
    summary["sessions"] = [str(s.path) for s in sessions]
    run.write_summary(summary)
    run.close()
    print(f"run directory: {run.path}")
    print(f"{summary['transitions']} transitions replayed in {summary['seconds']:.1f} s; checkpoint {summary['checkpoint']}")
    return 0
