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
        from explorer.agent.actors import PolicyAgent
        from explorer.agent.networks import build_policy
        from explorer.config import load
        from explorer.envs import make_game
        from explorer.envs.ring import FrameRing

        # Something real to capture: the game running in real time in a 640x480 window.
        from explorer.envs.screen import CaptureThread, MssScreen, find_window
        from explorer.envs.vizdoom import DoomPad
        from explorer.run.driver import GameClock, LiveClock, run_loop
        from explorer.testing.fakes import RecordingPad
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
        ring = FrameRing(config.ring.capacity, screen.shape)
        # The loop alone, with a CNN policy that does not learn (tools/bench_live.py measures learning).
        agent = PolicyAgent(build_policy((screen.shape[0], screen.shape[1], screen.shape[2] * config.observation.stack)))
        agent.act(np.zeros((config.observation.stack, *screen.shape), np.uint8))
        capture = CaptureThread(screen, ring, config.capture.fps)
        live = run_loop(LiveClock(capture, ring, config.control.hz), ring, agent, RecordingPad(),
                        config.observation.stack, max_seconds=args.seconds, watchdog_s=3 / config.control.hz)
        capture_fps = capture.achieved_fps()
        window_game.close()

        game = make_game(config)
        def step() -> None:
            game.advance()
            if game.episode_ended:
                game.new_episode()

        game_raw = rate(step, args.seconds / 2)
        game.close()
        game = make_game(config)
        ring = FrameRing(config.ring.capacity, game.shape)
        agent = PolicyAgent(build_policy((game.shape[0], game.shape[1], game.shape[2] * config.observation.stack)))
        sync = run_loop(GameClock(game, ring), ring, agent, DoomPad(game), config.observation.stack,
                        max_seconds=args.seconds)
        game.close()
    finally:
        if xvfb is not None:
            xvfb.terminate()
    print(f"capture, 256x256 region: grab {grab_raw:.0f}/s; grab + downscale + ring push {grab_push:.0f}/s; "
          f"capture thread at {config.capture.fps:g} fps target: {capture_fps:.1f} fps")
    print(f"frame ring: resident memory +{ring_kib:.1f} KiB per 1000 frames pushed, once warm")
    print(f"live loop at {config.control.hz:g} Hz target with the CNN policy: {live.hz:.2f} Hz, latency p50/p95/p99 "
          f"{live.latency_ms(50):.2f} / {live.latency_ms(95):.2f} / {live.latency_ms(99):.2f} ms, missed ticks {live.missed_ticks}, "
          f"dropped frames {live.dropped_frames}")
    print(f"built-in game: engine alone {game_raw:.0f} steps/s; synchronous loop with the CNN policy {sync.hz:.0f} steps/s")


if __name__ == "__main__":
    main()
