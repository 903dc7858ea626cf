"""Figures for the body of the agent: capture rate, control-loop rate and latency, game speed.

Prints:
- mss capture of a 256x256 region (grab alone, and grab + downscale + ring push), frames/s;
- resident memory the ring gains per 1000 frames pushed, once warm (a live run pushes for hours);
- the live control loop at ``control.hz`` on that region with the default CNN policy
  (no learning): achieved Hz, capture→pad latency p50/p95/p99, missed ticks;
- the built-in game (ViZDoom my_way_home, frame skip 4): engine steps/s alone, and the
  synchronous loop with the CNN policy acting every step.

Starts its own Xvfb when DISPLAY is unset, and the game in a window to capture. Usage: ``python tools/bench_loop.py [--seconds 10]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_live import start_xvfb


def rate(fn, seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - t0)


def ring_growth_kib(ring, warm: int = 2_000, pushes: int = 20_000) -> float:
    """Resident KiB per 1000 frames pushed into ``ring`` after ``warm`` pushes."""
    import psutil
    proc = psutil.Process()
    frame = np.zeros(ring.shape, np.uint8)
    for _ in range(warm):
        ring.push(frame)
    before = proc.memory_info().rss
    for _ in range(pushes):
        ring.push(frame)
    return (proc.memory_info().rss - before) / 1024 / (pushes / 1000)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="length of each measurement (s)")
    args = p.parse_args()
    xvfb = start_xvfb()
    try:
        from explorer.config import load
        from explorer.core import Step
        from explorer.envs import make_game
        from explorer.envs.doom.env import DoomEnv
        from explorer.envs.live.desktop import find_window
        from explorer.envs.live.env import LiveEnv

        # Something real to capture: the game running in real time in a 640x480 window.
        from explorer.envs.live.mss_screen import MssScreen
        from explorer.envs.live.pad import NullPad
        from explorer.envs.ring import FrameRing
        from explorer.run.driver import Driver
        from explorer.testing.policies import FixedPolicyActor, build_policy
        window_game = make_game(load(None, ["game.realtime=true", "game.resolution='640x480'"]))
        time.sleep(1.0)
        w = find_window(window_game.window_title)
        config = load(None, [f"capture.left={w.left}", f"capture.top={w.top}", "capture.width=256",
                             "capture.height=256"])
        screen = MssScreen(config.capture, config.observation)
        ring = FrameRing(config.ring.capacity, screen.shape)
        grab_raw = rate(screen.grab_raw, args.seconds / 2)
        grab_push = rate(lambda: ring.push(screen.grab()), args.seconds / 2)
        screen.close()
        ring_kib = ring_growth_kib(ring)

        screen = MssScreen(config.capture, config.observation)
        # The loop alone, with a CNN policy that does not learn (tools/bench_live.py measures learning).
        actor = FixedPolicyActor(build_policy((screen.shape[0], screen.shape[1], screen.shape[2] * config.observation.stack)))
        actor.act(Step(np.zeros((config.observation.stack, *screen.shape), np.uint8)))
        env = LiveEnv(screen, NullPad(), stack=config.observation.stack, ring_capacity=config.ring.capacity,
                      capture_fps=config.capture.fps, hz=config.control.hz, watchdog_s=3 / config.control.hz)
        live = Driver(env, actor).run(max_seconds=args.seconds)
        env.close()
        capture_fps = env.capture.achieved_fps()
        window_game.close()

        game = make_game(config)
        def step() -> None:
            game.advance()
            if game.episode_ended:
                game.new_episode()

        game_raw = rate(step, args.seconds / 2)
        game.close()
        doom = DoomEnv(make_game(config), config.observation.stack, config.ring.capacity)
        actor = FixedPolicyActor(build_policy((doom.frame_shape[0], doom.frame_shape[1],
                                               doom.frame_shape[2] * config.observation.stack)))
        sync = Driver(doom, actor).run(max_seconds=args.seconds)
        doom.close()
    finally:
        if xvfb is not None:
            xvfb.terminate()
    print(f"capture, 256x256 region: grab {grab_raw:.0f}/s; grab + downscale + ring push {grab_push:.0f}/s; "
          f"capture thread at {config.capture.fps:g} fps target: {capture_fps:.1f} fps")
    print(f"frame ring: resident memory +{ring_kib:.1f} KiB per 1000 frames pushed, once warm")
    e = live.env
    print(f"live loop at {config.control.hz:g} Hz target with the CNN policy: {live.hz:.2f} Hz, latency p50/p95/p99 "
          f"{e['latency_p50_ms']:.2f} / {e['latency_p95_ms']:.2f} / {e['latency_p99_ms']:.2f} ms, "
          f"missed ticks {e['missed_ticks']}, dropped frames {e['dropped_frames']}")
    print(f"built-in game: engine alone {game_raw:.0f} steps/s; synchronous loop with the CNN policy {sync.hz:.0f} steps/s")


if __name__ == "__main__":
    main()
