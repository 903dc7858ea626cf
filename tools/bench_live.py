"""Benchmark live mode on the real-time test bed (ViZDoom at 35 tics/s in a window on X).

Runs ``explorer play --game`` (capture thread → ring → policy → pad bridge, with
learning on) for a fixed time and prints achieved capture fps, control Hz
against the target, capture→pad latency p50/p95/p99, ticks missed, learner
updates/s and resident memory at start and end. In the same run it measures
the original question's loop on the same window, made runnable: a synchronous
``pyautogui.screenshot()`` → resize → model → pixel novelty → gradient step →
``sleep(0.1)``.

Usage::

    python tools/bench_live.py --seconds 60            # starts its own Xvfb when DISPLAY is unset
    python tools/bench_live.py --seconds 600 --skip-original   # the 10-minute memory check

The original loop needs ``pyautogui``'s Linux screenshot helper: Debian's
``scrot`` (it is run with ``XDG_SESSION_TYPE=x11``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np


def start_xvfb() -> subprocess.Popen | None:
    if os.environ.get("DISPLAY"):
        return None
    exe = shutil.which("Xvfb")
    if exe is None:
        sys.exit("no DISPLAY and no Xvfb: apt-get install xvfb, or run on a desktop")
    number = next(n for n in range(80, 120) if not os.path.exists(f"/tmp/.X{n}-lock"))
    proc = subprocess.Popen([exe, f":{number}", "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(f"/tmp/.X11-unix/X{number}"):
        time.sleep(0.05)
    os.environ["DISPLAY"] = f":{number}"
    return proc


class MemorySampler:
    """Resident memory of this process, sampled every second."""

    def __init__(self) -> None:
        import psutil
        self.proc = psutil.Process()
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.wait(1.0):
            self.samples.append((time.monotonic() - t0, self.proc.memory_info().rss / 2**20))

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def figures(self, skip_s: float = 10.0) -> dict[str, float]:
        """RSS (MiB) after the warm-up ``skip_s`` and at the end, and the relative change."""
        rss = [(t, m) for t, m in self.samples if t >= skip_s] or self.samples
        if not rss:
            return {}
        start, end = rss[0][1], rss[-1][1]
        out = {"rss_from_s": round(rss[0][0]), "rss_start_mib": round(start, 1), "rss_end_mib": round(end, 1),
               "rss_max_mib": round(max(m for _, m in rss), 1), "rss_change_pct": round(100 * (end - start) / start, 2)}
        # The steady growth rate, fitted over the second half of the run: what decides whether a run
        # of hours fits in memory. Shorter runs are still in the learner's start-up (its warm-up
        # steps alone take ~35 s at 30 Hz, then the first updates build their graphs).
        if rss[-1][0] >= 300:
            late = np.array([(t, m) for t, m in rss if t >= rss[-1][0] / 2])
            out["rss_growth_mib_per_min"] = round(60 * float(np.polyfit(late[:, 0], late[:, 1], 1)[0]), 3)
        return out


def run_explorer(seconds: float, overrides: list[str], out: str, rss_after: float = 60.0) -> dict:
    from explorer.config import load
    from explorer.run.play import play
    config = load(None, [f"run.dir={out!r}", "control.countdown_s=0", f"control.max_seconds={seconds}",
                         "capture.source=window", "capture.window_title=vizdoom", "game.realtime=true",
                         "game.visible=true", *overrides], game=True)  # as explorer play --game takes them
    with MemorySampler() as mem:
        summary = play(config, with_game=True)
    summary["memory"] = mem.figures(skip_s=min(rss_after, seconds / 4))
    summary["target_hz"] = config.control.hz
    return summary


def run_original(seconds: float) -> dict:
    """The original question's loop, made runnable, on the test-bed window.

    Its loss depends on screenshots only, so ``tape.gradient`` returns None for
    every weight (the bug); here the None gradients are skipped instead of
    crashing, so the loop's speed can be measured. It drives the game through
    the same pad bridge.
    """
    os.environ.setdefault("XDG_SESSION_TYPE", "x11")
    import pyautogui
    import tensorflow as tf

    from explorer.config import load
    from explorer.envs import make_game
    from explorer.envs.doom.game import DoomPad
    from explorer.envs.live.desktop import find_window

    game_config = load(None, ["game.realtime=true", "game.visible=true"])
    game = make_game(game_config)
    pad = DoomPad(game, game_config.pad.buttons)
    try:
        time.sleep(0.5)
        r = find_window("vizdoom")
        size = 256
        model = tf.keras.Sequential([
            tf.keras.Input((size, size, 3)),
            tf.keras.layers.Rescaling(1.0 / 255),
            tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu"), tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu"), tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(64, 3, padding="same", activation="relu"), tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(128), tf.keras.layers.Dense(128), tf.keras.layers.Dense(128), tf.keras.layers.Dense(4),
        ])
        optimizer = tf.keras.optimizers.SGD()
        images: list[tf.Tensor] = []
        ticks, none_grads = 0, 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            time.sleep(0.1)
            shot = pyautogui.screenshot(region=(r.left, r.top, r.width, r.height)).resize((size, size))
            x = tf.convert_to_tensor(np.asarray(shot)[None], tf.float32)
            images = [*images, x][-50:]
            with tf.GradientTape() as tape:
                out = model(x, training=True)
                pad.send(out[0].numpy())
                gray = tf.image.rgb_to_grayscale(x)
                memory = tf.image.rgb_to_grayscale(tf.concat(images, 0))
                novelty = tf.reduce_mean(tf.reduce_sum(tf.abs(gray - memory), axis=[1, 2, 3]))
                loss = 1.0 - novelty / 1e7
            grads = tape.gradient(loss, model.trainable_weights)
            none_grads += sum(g is None for g in grads)
            pairs = [(g, v) for g, v in zip(grads, model.trainable_weights, strict=True) if g is not None]
            if pairs:
                optimizer.apply_gradients(pairs)
            ticks += 1
        elapsed = time.monotonic() - t0
    finally:
        pad.neutral()
        game.close()
    return {"hz": ticks / elapsed, "ticks": ticks, "seconds": elapsed,
            "none_gradients_per_step": none_grads / max(ticks, 1), "weights": len(model.trainable_weights)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="length of the explorer run (s)")
    p.add_argument("--original-seconds", type=float, default=20.0, help="length of the original loop's run (s)")
    p.add_argument("--skip-original", action="store_true")
    p.add_argument("--rss-after", type=float, default=60.0,
                   help="seconds of start-up left out of the memory figures (at most a quarter of the run)")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="config override for explorer")
    p.add_argument("--out", default="runs/bench_live")
    args = p.parse_args()
    xvfb = start_xvfb()
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        ours = run_explorer(args.seconds, args.overrides, args.out, args.rss_after)
        original = None if args.skip_original else run_original(args.original_seconds)
    finally:
        if xvfb is not None:
            xvfb.terminate()
    loop = ours["loop"]
    learner = ours.get("learner", {})
    rows = [
        ("capture fps", f"{ours['capture_fps']:.1f}"),
        ("control Hz (target)", f"{loop['hz']:.2f} ({ours['target_hz']:g})"),
        ("capture→pad latency p50/p95/p99 ms", f"{loop['latency_p50_ms']:.1f} / {loop['latency_p95_ms']:.1f} / {loop['latency_p99_ms']:.1f}"),
        ("ticks missed", str(loop["missed_ticks"])),
        ("watchdog trips (seconds into the run)", f"{loop['watchdog_trips']} {loop.get('watchdog_trips_after_s', '')}"),
        ("longest time between two sends, ms", str(loop.get("longest_gap_ms"))),
        ("learner updates/s", f"{learner.get('updates_per_s', float('nan')):.1f}"),
        (f"RSS after {ours['memory'].get('rss_from_s')} s → end MiB (change)", f"{ours['memory'].get('rss_start_mib')} → {ours['memory'].get('rss_end_mib')} ({ours['memory'].get('rss_change_pct')} %)"),
        ("RSS growth over the second half, MiB/min", str(ours["memory"].get("rss_growth_mib_per_min", "n/a (needs --seconds 300 or more)"))),
    ]
    if original is not None:
        rows += [("original loop Hz", f"{original['hz']:.2f}"),
                 ("explorer / original control rate", f"{loop['hz'] / original['hz']:.1f}x"),
                 ("original: None gradients per step", f"{original['none_gradients_per_step']:.0f} of {original['weights']}")]
    width = max(len(r[0]) for r in rows)
    print(f"\nlive benchmark, {args.seconds:g} s on the ViZDoom test bed")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    (Path(args.out) / "bench_live.json").write_text(json.dumps({"explorer": ours, "original": original}, indent=2, default=str))


if __name__ == "__main__":
    main()
