"""What the Gymnasium adapter costs per step beyond the env's own step (target: at most 0.5 ms).

Steps a game through :class:`~explorer.envs.gym.env.GymEnv` with random pad actions, timing inside
each step the env's own ``step`` and ``reset`` (and its ``render()`` where the adapter renders) and the whole step;
the difference is the adapter: the pad mapping, the picture, its resize to the observation, the frame
ring and the position. Measured in the same steps, so a busy machine slows both alike::

    python tools/bench_gym.py                      # ALE/MontezumaRevenge-v5 and MiniGrid-MultiRoom-N4-S5-v0
    python tools/bench_gym.py --id ALE/Pong-v5 --steps 2000
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from explorer.config import load
from explorer.envs.gym.env import GymEnv


class Timed:
    """The env, its ``step``, ``reset`` and ``render`` timed (seconds spent inside them, summed)."""

    def __init__(self, env: Any):
        self.env = env
        self.inside = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def step(self, action: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.env.step(action)
        finally:
            self.inside += time.perf_counter() - t0

    def reset(self, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.env.reset(**kwargs)
        finally:
            self.inside += time.perf_counter() - t0

    def render(self) -> Any:
        t0 = time.perf_counter()
        try:
            return self.env.render()
        finally:
            self.inside += time.perf_counter() - t0


def bench(game_id: str, steps: int, seed: int = 0) -> dict[str, float]:
    """Per-step milliseconds: the env's own, the whole step through explorer, and their difference (median
    of blocks of 100 steps, so a pause of the machine in one block does not count)."""
    config = load(None, ["game.name=gym", f"game.id={game_id}"])
    env = GymEnv(config.game, config.observation, config.observation.stack, config.ring.capacity, config.pad.buttons)
    timed = Timed(env.env)
    env.env = timed
    rng = np.random.default_rng(seed)
    actions = rng.uniform(-1, 1, (steps, 4 + len(config.pad.buttons))).astype(np.float32)
    own, whole = [], []
    try:
        env.reset()
        for block in np.array_split(actions, max(steps // 100, 1)):
            timed.inside = 0.0
            t0 = time.perf_counter()
            for a in block:
                if env.step(a).last:
                    env.reset()
            whole.append((time.perf_counter() - t0) / len(block))
            own.append(timed.inside / len(block))
    finally:
        env.close()
    over = np.median(np.subtract(whole, own))
    return {"env_ms": 1e3 * float(np.median(own)), "step_ms": 1e3 * float(np.median(whole)), "overhead_ms": 1e3 * float(over)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--id", action="append", dest="ids", help="Gymnasium id (repeatable)")
    parser.add_argument("--steps", type=int, default=1000, help="steps measured per game")
    args = parser.parse_args()
    for game_id in args.ids or ["ALE/MontezumaRevenge-v5", "MiniGrid-MultiRoom-N4-S5-v0"]:
        bench(game_id, 100)  # warm-up: TensorFlow's first ops, the emulator's caches
        r = bench(game_id, args.steps)
        print(f"{game_id}: env step {r['env_ms']:.3f} ms, through explorer {r['step_ms']:.3f} ms, "
              f"adapter overhead {r['overhead_ms']:.3f} ms per step")


if __name__ == "__main__":
    main()
