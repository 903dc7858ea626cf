"""Benchmark exploration on the built-in game: coverage of map cells per episode.

Compares, on ViZDoom my_way_home (525-step episodes) with the same seeds and step
budget: uniform random sticks, sticky random sticks (each held 8 steps), the
original question's agent (pixel novelty used directly as the loss: it fails
with "No gradients", and the guard says why), and explorer's learning agent
with each novelty signal. Coverage is the number of distinct 64x64-map-unit
cells the player stands in during an episode (positions are read for
measurement only, never shown to the agent).

    python tools/bench_explore.py --steps 50000 --seeds 0 1 2 --agents uniform sticky original episodic
    python tools/bench_explore.py --agents episodic --set learner.algo=td3 --set novelty.embedding=random
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import deque
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

CELL = 64.0  # map units per coverage cell
SIGNALS = ("episodic", "rnd", "forward", "pixel")


class UniformAgent:
    """Uniform random sticks every step."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def act(self, obs) -> np.ndarray:
        return self.rng.uniform(-1, 1, 4).astype(np.float32)

    def observe(self, *args) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass


class StickyAgent(UniformAgent):
    """Uniform random sticks, each held for ``hold`` steps."""

    def __init__(self, seed: int, hold: int = 8):
        super().__init__(seed)
        self.hold, self.t, self.a = hold, 0, np.zeros(4, np.float32)

    def act(self, obs) -> np.ndarray:
        if self.t % self.hold == 0:
            self.a = self.rng.uniform(-1, 1, 4).astype(np.float32)
        self.t += 1
        return self.a


class OriginalAgent(UniformAgent):
    """The original question: a CNN policy trained with the pixel novelty of frames as its loss.

    The first update fails (no gradient reaches the policy); the agent then acts
    with its untrained policy, which is what such a script effectively does.
    """

    def __init__(self, seed: int, obs_shape):
        import keras
        import tensorflow as tf

        from explorer.guard import check_gradients
        from explorer.novelty import pixel_difference
        keras.utils.set_random_seed(seed)
        k, h, w, c = obs_shape
        self.tf = tf
        self.model = keras.Sequential([keras.Input([h, w, k * c]), keras.layers.Rescaling(1 / 255),
                                       keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
                                       keras.layers.Flatten(), keras.layers.Dense(4, activation="tanh")])
        self.opt = keras.optimizers.Adam(1e-3)
        self.pixel_difference = pixel_difference
        self.check_gradients = check_gradients
        self.failure: str | None = None
        self.report: str | None = None

    def act(self, obs) -> np.ndarray:
        x = np.asarray(obs).transpose(1, 2, 0, 3).reshape(1, *np.asarray(obs).shape[1:3], -1)
        return self.model(x, training=False).numpy()[0]

    def observe(self, obs, action, next_obs, first, last) -> dict[str, float]:
        if self.failure is not None:
            return {}
        tf = self.tf

        def loss_fn():
            _ = self.model(np.asarray(obs).transpose(1, 2, 0, 3).reshape(1, *np.asarray(obs).shape[1:3], -1))
            return -self.pixel_difference(tf.constant(np.asarray(next_obs)[-1]), tf.constant(np.asarray(obs)))

        try:
            with tf.GradientTape() as tape:
                loss = loss_fn()
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.opt.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))
            self.failure = "no error (unexpected)"
        except Exception as err:  # Keras: "No gradients provided for any variable"
            self.failure = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
            self.report = str(self.check_gradients(loss_fn, self.model.trainable_variables))
        return {}


def run(agent_name: str, seed: int, steps: int, overrides: list[str], log_every: int) -> dict:
    from explorer.config import Config
    from explorer.games.vizdoom import DoomGame, DoomPad
    config = Config().replace(**{"game.seed": seed, "game.scenario": "my_way_home", "game.episode_steps": 525})
    game = DoomGame(config.game, config.observation)
    pad = DoomPad(game)
    k = config.observation.stack
    obs_shape = (k, *game.shape)
    if agent_name == "uniform":
        agent = UniformAgent(seed)
    elif agent_name == "sticky":
        agent = StickyAgent(seed)
    elif agent_name == "original":
        agent = OriginalAgent(seed, obs_shape)
    else:
        from explorer.config import LearnerConfig, NoveltyConfig
        from explorer.learner import build_agent
        sections: dict[str, dict] = {"learner": {"seed": seed}, "novelty": {"signal": agent_name}}
        for text in overrides:
            key, value = text.split("=", 1)
            section, field = key.split(".", 1)
            try:
                sections[section][field] = json.loads(value)
            except json.JSONDecodeError:
                sections[section][field] = value  # a bare word is a string
        agent = build_agent(LearnerConfig(**sections["learner"]), NoveltyConfig(**sections["novelty"]),
                            obs_shape, config.game.episode_steps)
    frames = deque([game.grab()] * k, maxlen=k)
    first = True
    cells: set = set()
    all_cells: set = set()
    per_episode: list[int] = []
    curve: list[tuple[int, int]] = []
    metrics_log: list[dict] = []
    actions: deque = deque(maxlen=2000)
    t0 = time.perf_counter()
    for step in range(steps):
        p = game.position()
        cell = (int(p.x // CELL), int(p.y // CELL))
        cells.add(cell)
        all_cells.add(cell)
        obs = np.stack(frames)
        action = agent.act(obs)
        actions.append(action)
        pad.send(action)
        game.advance()
        last = game.episode_ended
        frames.append(game.grab())  # after the last step, the episode's last frame
        next_obs = np.stack(frames)
        m = agent.observe(obs, action, next_obs, first, last)
        if len(m) > 1:
            metrics_log.append(m)
        first = last
        if last:
            per_episode.append(len(cells))
            curve.append((step + 1, len(cells)))
            cells = set()
            game.new_episode()
            frames = deque([game.grab()] * k, maxlen=k)
        if log_every and (step + 1) % log_every == 0:
            recent = per_episode[-10:]
            last_m = {key: round(v, 3) for key, v in (metrics_log[-1] if metrics_log else {}).items()}
            print(f"[{agent_name} s{seed}] step {step + 1} cov(last10)={np.mean(recent) if recent else 0:.1f} "
                  f"total={len(all_cells)} {((step + 1) / (time.perf_counter() - t0)):.1f} steps/s "
                  f"mean action {np.round(np.mean(actions, 0), 2)} mean |action| {np.round(np.mean(np.abs(actions), 0), 2)} {last_m}", flush=True)
    wall = time.perf_counter() - t0
    game.close()
    agent.close()
    updates = int(getattr(getattr(agent, "learner", None), "updates", np.int64(0)).numpy()) if hasattr(agent, "learner") else 0
    return {"agent": agent_name, "seed": seed, "steps": steps, "game": config.game.model_dump(mode="json"),
            "overrides": overrides, "per_episode": per_episode, "curve": curve,
            "coverage_last20": float(np.mean(per_episode[-20:])) if per_episode else 0.0,
            "total_cells": len(all_cells), "steps_per_s": steps / wall, "updates_per_s": updates / wall,
            "wall_s": wall, "failure": getattr(agent, "failure", None), "guard": getattr(agent, "report", None)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=50_000, help="agent steps per run")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--agents", nargs="+", default=["uniform", "sticky", "original", *SIGNALS],
                    help=f"uniform, sticky, original, or a novelty signal ({', '.join(SIGNALS)})")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="learner.KEY=VALUE or novelty.KEY=VALUE for the learning agents")
    ap.add_argument("--threads", type=int, default=0, help="TensorFlow intra-op threads (0 = default)")
    ap.add_argument("--out", default="/tmp/research/bench", help="folder for results.json and coverage.png")
    ap.add_argument("--log-every", type=int, default=5000)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if args.threads:
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.agents:
        for seed in args.seeds:
            r = run(name, seed, args.steps, args.overrides, args.log_every)
            results.append(r)
            (out / "results.json").write_text(json.dumps(results))
            if r["failure"]:
                print(f"[{name} s{seed}] update failed: {r['failure']}\n{r['guard']}", flush=True)
    print(f"\n{'agent':<10} {'seeds':<8} {'cells/episode (last 20)':>24} {'total cells':>12} {'steps/s':>9} {'updates/s':>10}")
    for name in args.agents:
        rs = [r for r in results if r["agent"] == name]
        cov = [r["coverage_last20"] for r in rs]
        print(f"{name:<10} {len(rs):<8} {np.mean(cov):>15.1f} ± {np.std(cov):<6.1f} {np.mean([r['total_cells'] for r in rs]):>12.1f} "
              f"{np.mean([r['steps_per_s'] for r in rs]):>9.1f} {np.mean([r['updates_per_s'] for r in rs]):>10.1f}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for name in args.agents:
        for r in (r for r in results if r["agent"] == name):
            if r["curve"]:
                xs, ys = zip(*r["curve"], strict=True)
                smooth = np.convolve(ys, np.ones(5) / 5, mode="valid") if len(ys) >= 5 else ys
                ax.plot(xs[len(xs) - len(smooth):], smooth, label=f"{name} s{r['seed']}")
    ax.set_xlabel("agent steps")
    ax.set_ylabel("cells visited per episode (5-episode mean)")
    ax.set_title("my_way_home exploration coverage")
    ax.legend(fontsize=7)
    fig.savefig(out / "coverage.png", dpi=100)
    print(f"wrote {out / 'results.json'} and {out / 'coverage.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
