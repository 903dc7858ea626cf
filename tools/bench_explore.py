"""Benchmark exploration on the built-in game: coverage of map cells per episode.

Compares, on ViZDoom my_way_home (525-step episodes) with the same seeds and step
budget: uniform random sticks, sticky random sticks (each held 8 steps; with
``sticky_prior``, moved by ``learner.action_prior`` and put on ``learner.action_low``/
``action_high`` as the learner's warm-up sticks are), the
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
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from explorer.core import stack_frames  # noqa: E402

SIGNALS = ("episodic", "rnd", "forward", "pixel")


class OriginalAgent:
    """The original question: a CNN policy trained with the pixel novelty of frames as its loss.

    The first update fails (no gradient reaches the policy); the agent then acts
    with its untrained policy, which is what such a script effectively does.
    """

    def __init__(self, seed: int, obs_shape):
        import keras
        import tensorflow as tf

        from explorer.agent.guard import check_gradients
        from explorer.agent.novelty import pixel_difference
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

    def close(self) -> None:
        pass

    def act(self, step) -> np.ndarray:
        return self.model(stack_frames(np.asarray(step.obs))[None], training=False).numpy()[0]

    def observe(self, step, action, next_step) -> dict[str, float]:
        if self.failure is not None:
            return {}
        tf = self.tf
        obs, next_obs = np.asarray(step.obs), np.asarray(next_step.obs)

        def loss_fn():
            _ = self.model(stack_frames(obs)[None])
            return -self.pixel_difference(tf.constant(next_obs[-1]), tf.constant(obs))

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


def run(agent_name: str, seed: int, steps: int, overrides: list[str], out: Path) -> dict:
    """One run through ``explorer explore``'s own path (ring, loop, agent, coverage); returns its figures."""
    from explorer.config import load, quote
    from explorer.run.explore import explore

    sets = [f"game.seed={seed}", f"run.seed={seed}", f"learner.seed={seed}", f"run.steps={steps}",
            "game.scenario=my_way_home", "game.episode_steps=525", f"run.dir={quote(str(out / 'runs'))}",
            f"run.log_every={max(steps // 20, 1)}"]
    agent = None
    if agent_name == "uniform":
        sets.append("run.agent=random")
    elif agent_name == "sticky":
        sets += ["run.agent=sticky", "run.sticky_steps=8"]
    elif agent_name == "sticky_prior":  # the learner's stick range and prior, without learning
        sets += ["run.agent=sticky_prior", "run.sticky_steps=8", *overrides]
    elif agent_name == "original":
        sets.append("run.agent=random")  # replaced by the agent below
        config = load(None, sets)
        agent = OriginalAgent(seed, (config.observation.stack, config.observation.height, config.observation.width,
                                     1 if config.observation.grayscale else 3))
    else:
        sets += ["run.agent=explorer", f"novelty.signal={agent_name}", *overrides]
    config = load(None, sets)
    summary = explore(config, progress=False, actor=agent)
    lines = (Path(summary["run_dir"]) / "metrics.jsonl").read_text().splitlines()
    curve = [(r["step"], r["cells"]) for r in map(json.loads, lines) if "episode" in r]
    per_episode = summary["cells_per_episode"]
    seconds = summary["seconds"]
    result = {"agent": agent_name, "seed": seed, "steps": steps, "run_dir": summary["run_dir"],
              "overrides": overrides if agent_name not in ("uniform", "sticky", "original") else [],
              "per_episode": per_episode, "curve": curve, "coverage_last20": summary["cells_per_episode_last20"],
              "total_cells": summary["distinct_cells"], "steps_per_s": summary["steps_per_s"],
              "updates_per_s": summary["updates"] / seconds if seconds else 0.0, "wall_s": seconds,
              "failure": getattr(agent, "failure", None), "guard": getattr(agent, "report", None)}
    print(f"[{agent_name} s{seed}] {result['coverage_last20']:.1f} cells/episode (last 20), {result['total_cells']} cells, "
          f"{result['steps_per_s']:.1f} steps/s, {result['updates_per_s']:.1f} updates/s", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=50_000, help="agent steps per run")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--agents", nargs="+", default=["uniform", "sticky", "original", *SIGNALS],
                    help=f"uniform, sticky, sticky_prior (sticky moved by learner.action_prior, on the learner's stick range), original, "
                         f"or a novelty signal ({', '.join(SIGNALS)})")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="learner.KEY=VALUE or novelty.KEY=VALUE for the learning agents")
    ap.add_argument("--threads", type=int, default=0, help="TensorFlow intra-op threads (0 = default)")
    ap.add_argument("--out", default="runs/bench_explore", help="folder for results.json, coverage.png and the runs")
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
            r = run(name, seed, args.steps, args.overrides, out)
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
