"""Benchmark sessions on disk: what recording costs the control thread, and how fast replay reads.

1. Record at a fixed tick (30 Hz, 128x128 RGB frames by default) for a few
   seconds and time each ``Recorder.add`` on the calling thread (target: mean
   well under 1 ms).
2. Record a longer session as fast as possible, then read it back through
   ``tf.data`` as stacked transitions (target: at least 2,000 transitions/s).

Usage: ``python tools/bench_record.py [--seconds 10] [--frames 4000] [--size 128] [--dir DIR]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from explorer.envs.sessions.reader import Session, sessions_dataset  # noqa: E402
from explorer.envs.sessions.writer import Recorder  # noqa: E402
from explorer.timing import Pacer  # noqa: E402


def game_like_frames(n: int, size: int, seed: int = 0) -> list[np.ndarray]:
    """Frames that compress like a game view: smooth shapes that move, plus a little sensor noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    out = []
    for i in range(n):
        phase = i / 15.0
        r = 127 + 100 * np.sin(6 * x + phase)
        g = 127 + 100 * np.cos(5 * y - phase)
        b = 127 + 100 * np.sin(4 * (x + y) + 0.5 * phase)
        img = np.stack([r, g, b], -1) + rng.normal(0, 4, (size, size, 3))
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return out


def paced(n: int, hz: float, work) -> np.ndarray:
    """Call ``work(i)`` at ``hz`` for ``n`` ticks; the time each call took, ms."""
    costs = np.zeros(n)
    pacer = Pacer(hz)
    for i in range(n):
        t0 = time.perf_counter()
        work(i)
        costs[i] = time.perf_counter() - t0
        pacer.wait()
    return costs * 1e3


def stats(c: np.ndarray) -> dict[str, float]:
    return {"mean_ms": float(c.mean()), "p50_ms": float(np.percentile(c, 50)),
            "p99_ms": float(np.percentile(c, 99)), "max_ms": float(c.max())}


def bench_record(path: Path, seconds: float, hz: float, size: int) -> dict[str, object]:
    frames = game_like_frames(64, size)
    action = np.zeros(4, np.float32)
    n = int(seconds * hz)
    # The same paced loop copying each frame and nothing else: the noise floor of this machine.
    sink = []
    baseline = paced(n, hz, lambda i: sink.append(np.array(frames[i % len(frames)], copy=True)) or sink.clear())
    with Recorder(path, {"bench": "record"}, chunk_frames=64) as rec:
        def add(i: int) -> None:
            action[:] = np.sin(i / 10.0)
            rec.add(frames[i % len(frames)], action, 0.5, first=i == 0, last=i == n - 1)
        costs = paced(n, hz, add)
        waited = rec.wait_s
    return {"ticks": n, "record": stats(costs), "baseline": stats(baseline), "queue_wait_s": waited}


def bench_replay(path: Path, frames_n: int, size: int, stack: int, batch: int) -> dict[str, float]:
    frames = game_like_frames(256, size, seed=1)
    t0 = time.perf_counter()
    with Recorder(path, {"bench": "replay"}, chunk_frames=64, block_s=None) as rec:
        for i in range(frames_n):
            rec.add(frames[i % len(frames)], np.full(4, 0.1, np.float32), 1.0, first=i % 500 == 0, last=i % 500 == 499)
    write_s = time.perf_counter() - t0
    size_mb = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20
    ds = sessions_dataset([Session(path)], stack, batch)
    it = iter(ds)
    next(it)  # start-up (tracing the pipeline) is not throughput
    t0 = time.perf_counter()
    n = 0
    for b in it:
        n += int(b["index"].shape[0])
    read_s = time.perf_counter() - t0
    return {"frames": frames_n, "write_s": write_s, "disk_mb": size_mb, "raw_mb": frames_n * size * size * 3 / 2**20,
            "transitions": n, "transitions_per_s": n / read_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="length of the paced recording")
    ap.add_argument("--hz", type=float, default=30.0, help="tick rate of the paced recording")
    ap.add_argument("--frames", type=int, default=4000, help="frames in the replay session")
    ap.add_argument("--size", type=int, default=128, help="frame height and width (RGB)")
    ap.add_argument("--stack", type=int, default=3, help="frames per observation")
    ap.add_argument("--batch", type=int, default=64, help="transitions per batch")
    ap.add_argument("--dir", help="where to write (default: a temporary folder, removed after)")
    args = ap.parse_args()
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_record-"))
    try:
        r = bench_record(root / "paced", args.seconds, args.hz, args.size)
        for key, what in (("record", "Recorder.add() on the control thread"), ("baseline", "a bare frame copy (noise floor)")):
            c = r[key]
            print(f"{key}: {r['ticks']} ticks at {args.hz:g} Hz, {args.size}x{args.size}x3 frames, {what}: "
                  f"mean {c['mean_ms']:.3f} ms, p50 {c['p50_ms']:.3f} ms, p99 {c['p99_ms']:.3f} ms, max {c['max_ms']:.3f} ms")
        print(f"record target: mean < 1 ms; time blocked on a full queue {r['queue_wait_s']:.3f} s; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        p = bench_replay(root / "replay", args.frames, args.size, args.stack, args.batch)
        print(f"replay: {p['frames']} frames written in {p['write_s']:.1f} s ({p['frames'] / p['write_s']:.0f} frames/s), "
              f"{p['disk_mb']:.1f} MiB on disk ({p['raw_mb']:.1f} MiB raw); read {p['transitions']} transitions "
              f"(stack {args.stack}, batch {args.batch}) through tf.data at {p['transitions_per_s']:.0f} transitions/s "
              f"(target: >= 2,000)")
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
