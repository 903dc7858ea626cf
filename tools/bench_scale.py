"""How ``explore --workers N`` scales: steps, updates and transitions per second, and coverage over time.

Two modes:

``game`` (default)
    ``explorer explore`` with ``--workers N`` for each N (1 is the single process, no Ray), on the
    same config and update-to-data setting, each in a process of its own. The metric lines are
    timed as they appear, so every figure is taken after the warm-up: environment steps/s,
    learner updates/s, transitions/s taken into replay, the measured update-to-data ratio, and
    the run's cells per episode budget (last 20), and the plain mean of cells per episode over all its
    episodes against wall-clock minutes.

``ingest``
    The learner side alone: a real learner actor (training at its update-to-data setting, or as
    fast as it can with ``learner.schedule.lag_steps = 0``) takes batches from N synthetic workers that do
    nothing but hand out ready-made batches of uint8 frames. It measures how many transitions per
    second the coordinator and learner take in, and whether the learner's memory stays flat, to
    show where the design stops scaling.

Examples::

    python tools/bench_scale.py --workers 1 2 4 --steps 3000
    python tools/bench_scale.py --game synthetic --workers 1 2 4 --steps 4000
    python tools/bench_scale.py --mode ingest --workers 8 16 --seconds 30

Quote the figures with the machine, and with what else ran on it (``cat /proc/loadavg``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _follow(path: Path, lines: list[tuple[float, dict[str, Any]]], t0: float, stop: threading.Event) -> None:
    """Append each new line of ``path`` with the seconds since ``t0`` it was first seen."""
    done = 0
    while not stop.is_set():
        if path.is_file():
            text = path.read_text().splitlines()
            for line in text[done:]:
                if line.strip().endswith("}"):
                    lines.append((time.monotonic() - t0, json.loads(line)))
                    done += 1
        stop.wait(0.25)


def run_game(workers: int, steps: int, sets: list[str], out: Path) -> dict[str, Any]:
    """One ``explorer explore`` run; returns its figures after the warm-up."""
    out = out / f"workers-{workers}"
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "explorer.cli", "explore", "--steps", str(steps), "--out", str(out), "--no-progress",
           "--workers", str(workers)]
    for s in sets:
        cmd += ["--set", s]
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    lines: list[tuple[float, dict[str, Any]]] = []
    stop = threading.Event()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    follower = None
    while follower is None and proc.poll() is None:
        runs = sorted(out.glob("*-explore"))
        if runs:
            follower = threading.Thread(target=_follow, args=(runs[-1] / "metrics.jsonl", lines, t0, stop), daemon=True)
            follower.start()
        time.sleep(0.1)
    _, err = proc.communicate()
    stop.set()
    if proc.returncode != 0:
        raise SystemExit(f"workers={workers} failed: {err[-2000:]}")
    run = sorted(out.glob("*-explore"))[-1]
    time.sleep(0.5)
    _follow_once(run / "metrics.jsonl", lines, t0)
    summary = json.loads((run / "summary.json").read_text())
    return figures(workers, summary, lines, sets)


def _follow_once(path: Path, lines: list[tuple[float, dict[str, Any]]], t0: float) -> None:
    """Take the lines written after the last one seen (the end of a run)."""
    seen = len(lines)
    for line in path.read_text().splitlines()[seen:]:
        if line.strip().endswith("}"):
            lines.append((time.monotonic() - t0, json.loads(line)))


def _setting(sets: list[str], key: str, default: float) -> float:
    """The value ``--set`` gave ``key`` (or its old name, :data:`~explorer.config.MOVED_KEYS`) last (as the
    command line takes it), else ``default``."""
    from explorer.config import MOVED_KEYS

    names = {key, *(old for old, new in MOVED_KEYS.items() if new == key)}
    for s in reversed(sets):
        if s.split("=", 1)[0].strip() in names and "=" in s:
            return float(s.split("=", 1)[1])
    return default


def figures(workers: int, summary: dict[str, Any], lines: list[tuple[float, dict[str, Any]]],
            sets: list[str]) -> dict[str, Any]:
    """Rates between the first metric line after the warm-up and the last one, and coverage over time."""
    warmup = _setting(sets, "learner.schedule.warmup_steps", 1000)
    periodic = [(t, x) for t, x in lines if "episode" not in x and "step" in x]
    after = [(t, x) for t, x in periodic if x["step"] >= warmup + 1]
    (t_a, a), (t_b, b) = after[0], after[-1]
    dt = t_b - t_a
    steps = b["step"] - a["step"]
    out: dict[str, Any] = {"workers": workers, "steps": summary["steps"], "seconds_measured": round(dt, 1),
                           "steps_per_s": steps / dt if dt > 0 else float("nan")}
    if workers > 1:
        updates = b["updates"] - a["updates"]
        out["updates_per_s"] = updates / dt if dt > 0 else float("nan")
        out["transitions_per_s"] = (b["transitions"] - a["transitions"]) / dt if dt > 0 else float("nan")
        out["update_to_data"] = updates / steps if steps else float("nan")
        out["lost_batches"] = summary["lost_batches"]
        out["learner_rss_mb"] = [a.get("learner_rss_mb"), b.get("learner_rss_mb")]
    else:
        # One process makes one update per learner.schedule.update_every steps after the warm-up.
        every = _setting(sets, "learner.schedule.update_every", 1)
        out["updates_per_s"] = out["steps_per_s"] / every
        out["transitions_per_s"] = out["steps_per_s"]
        out["update_to_data"] = 1 / every
    episodes = [(t, x["cells"]) for t, x in lines if "episode" in x]
    out["cells_per_budget"] = summary.get("cells_per_budget", float("nan"))  # the run's own coverage figure
    out["cells_mean_all"] = float(np.mean([c for _, c in episodes])) if episodes else float("nan")
    out["episodes"] = len(episodes)
    out["cells_by_minute"] = _by_minute(episodes)
    out["distinct_cells"] = summary["distinct_cells"]
    return out


def _by_minute(episodes: list[tuple[float, int]]) -> list[tuple[int, float, int]]:
    """(minute, plain mean of cells per episode, episodes) of the episodes that ended in each wall-clock minute."""
    rows = []
    for minute in range(int(max((t for t, _ in episodes), default=0) // 60) + 1):
        cells = [c for t, c in episodes if minute * 60 <= t < (minute + 1) * 60]
        if cells:
            rows.append((minute + 1, float(np.mean(cells)), len(cells)))
    return rows


# ---------------------------------------------------------------- ingest


def run_ingest(workers: int, seconds: float, sets: list[str], out: Path) -> dict[str, Any]:
    """The learner side taking batches from ``workers`` synthetic workers for about ``seconds``."""
    import ray

    from explorer.agent.outbox import Batch
    from explorer.config import frame_shape, load
    from explorer.run.distributed import Coordinator, RemoteLearner, loopback_only
    from explorer.run.rundir import RunDir
    from explorer.run.workers import Report

    config = load(None, ["learner.schedule.lag_steps=0", "learner.schedule.warmup_steps=0", f"run.workers={workers}",
                         f"run.steps={10**9}", f"run.dir={str(out)!r}", "run.log_every=2000", *sets])
    h, w, c = frame_shape(config.observation)
    k, ship = config.observation.stack, config.run.ship_steps
    from explorer.core import action_dim
    a_dim = action_dim(config.pad.buttons)
    ctx = a_dim + 3 if config.learner.networks.context else 1  # explorer.agent.context.Context.dim

    class SyntheticWorker:
        """Hands out the same ready-made batch of ``ship`` transitions as fast as it is asked."""

        def __init__(self, index: int):
            rng = np.random.default_rng(index)
            t = ship
            self.batch = Batch(rng.integers(0, 256, (t + k, h, w, c), dtype=np.uint8),
                               (np.arange(t)[:, None] + np.arange(k)[None]).astype(np.int32),
                               (np.arange(t)[:, None] + np.arange(k)[None] + 1).astype(np.int32),
                               rng.uniform(-1, 1, (t, a_dim)).astype(np.float32), rng.uniform(0, 2, t).astype(np.float32),
                               np.full(t, 0.9, np.float32), np.zeros((t, ctx), np.float32), np.zeros((t, ctx), np.float32), t)
            self.index, self.pending = index, 0

        def collect(self, grant: int, run_steps: int, version: int, weights: Any) -> tuple[Any, Any]:
            steps, self.pending = self.pending, grant
            batch = self.batch if steps else Batch.empty((h, w, c), k, ctx, action_dim=a_dim)
            return batch, Report(self.index, "synthetic", steps=steps, transitions=len(batch), frames=len(batch.frames),
                                 nbytes=batch.nbytes, version=version, pid=os.getpid())

        def ping(self) -> str:
            return "synthetic"

        def stop(self) -> dict[str, Any]:
            return {}

    with loopback_only():  # this machine's alone, as explore's own local cluster
        ray.init(address="local", num_cpus=max(os.cpu_count() or 1, workers + 1), include_dashboard=False,
                 logging_level="warning", object_store_memory=256 * 2**20)
    try:
        run = RunDir(out, f"ingest-{workers}", config)
        learner = ray.remote(RemoteLearner).options(num_cpus=1).remote(config, str(run.path), (h, w, c), False, False)
        status = ray.get(learner.status.remote())
        handles = [ray.remote(SyntheticWorker).options(num_cpus=1).remote(i) for i in range(workers)]
        ray.get([hd.ping.remote() for hd in handles])
        samples: list[tuple[float, int, int, float]] = []
        t0 = time.monotonic()

        def sample(report: Any) -> None:
            st = coordinator.status
            if not samples or time.monotonic() - t0 - samples[-1][0] > 2.0:
                samples.append((time.monotonic() - t0, int(st["transitions"]), int(st["updates"]), float(st["rss_mb"])))

        coordinator = Coordinator(config, run, handles, learner, status, on_report=sample, progress=False)
        coordinator.loop(max_seconds=seconds)
        final = ray.get(learner.status.remote())
        learner.stop.remote()
        run.close()
    finally:
        ray.shutdown()
    steady = [s for s in samples if s[0] >= 3.0] or samples
    (ta, xa, ua, _), (tb, xb, ub, _) = steady[0], steady[-1]
    rss = [s[3] for s in samples if s[3]]
    return {"workers": workers, "seconds": round(tb - ta, 1), "transitions_per_s": (xb - xa) / (tb - ta),
            "updates_per_s": (ub - ua) / (tb - ta), "frame": f"{h}x{w}x{c}", "batch_transitions": ship,
            "mb_per_s": (xb - xa) / (tb - ta) * (h * w * c) / 2**20, "learner_rss_mb": [min(rss), max(rss)] if rss else [],
            "transitions": final["transitions"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["game", "ingest"], default="game")
    parser.add_argument("--workers", type=int, nargs="+", default=None, help="numbers of workers (game: 1 2 4; ingest: 8 16)")
    parser.add_argument("--steps", type=int, default=3000, help="game: agent steps per run")
    parser.add_argument("--seconds", type=float, default=30.0, help="ingest: seconds per measurement")
    parser.add_argument("--game", default="vizdoom", choices=["vizdoom", "synthetic"])
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default=None, help="folder for the runs (default: a temporary one)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-scale-"))
    print(f"load average before: {Path('/proc/loadavg').read_text().split()[:3]} on {os.cpu_count()} CPUs", file=sys.stderr)
    rows = []
    if args.mode == "game":
        sets = [f"game.name={args.game}", "learner.schedule.warmup_steps=500", "learner.schedule.update_every=2",
                "run.log_every=250", "learner.schedule.checkpoint_every=0", *args.sets]
        for n in args.workers or [1, 2, 4]:
            row = run_game(n, args.steps, sets, out)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
        base = rows[0]["steps_per_s"]
        print(f"\n{args.game}, {args.steps} steps per run, settings: {' '.join(sets)}")
        print("| workers | env steps/s | vs 1 | learner updates/s | transitions/s in | updates per step (setting) "
              "| cells per episode budget (last 20) | plain mean cells per episode (all) | episodes | lost batches |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['workers']} | {r['steps_per_s']:.0f} | {r['steps_per_s'] / base:.2f}x | {r['updates_per_s']:.1f} "
                  f"| {r['transitions_per_s']:.0f} | {r['update_to_data']:.2f} ({1 / _setting(sets, 'learner.schedule.update_every', 1):.2f}) "
                  f"| {r['cells_per_budget']:.1f} | {r['cells_mean_all']:.1f} | {r['episodes']} | {r.get('lost_batches', 0)} |")
        print("\nplain mean cells per episode by wall-clock minute (mean, episodes):")
        for r in rows:
            print(f"  {r['workers']} workers: " + ", ".join(f"min {m}: {c:.1f} ({n})" for m, c, n in r["cells_by_minute"]))
    else:
        for n in args.workers or [8, 16]:
            row = run_ingest(n, args.seconds, args.sets, out)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
        print("\n| synthetic workers | transitions/s in | MiB/s of frames | learner updates/s meanwhile | learner RSS MiB (min-max) |")
        print("|---|---|---|---|---|")
        for r in rows:
            rss = "-".join(f"{v:.0f}" for v in r["learner_rss_mb"])
            print(f"| {r['workers']} | {r['transitions_per_s']:.0f} | {r['mb_per_s']:.1f} | {r['updates_per_s']:.1f} | {rss} |")
    print(f"load average after: {Path('/proc/loadavg').read_text().split()[:3]}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
