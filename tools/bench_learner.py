"""The learner alone on synthetic data: updates per second and where one update's time goes.

Builds the default learning agent (``explorer.run.builder.build_agent``) for the
default observation (64x64 colour frames, 3 stacked), fills its replay with
random frames and transitions, then times

- whole updates, ``Learner.step()`` (sampling included), back to back;
- the parts of one update, each compiled on its own and timed alone: sampling a
  batch from replay, the critic update (with its target update), the actor
  update, the entropy-weight update.

So a regression shows in one command. Run it alone: two cores shared with
anything else give noise, not figures::

    python tools/bench_learner.py                      # the default config
    python tools/bench_learner.py --set learner.schedule.batch_size=64 --seconds 20
    python tools/bench_learner.py --threads 1 1        # inter- and intra-op threads (default: run.threads)
    python tools/bench_learner.py --set learner.xla=true   # the update as one XLA cluster
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402


def fill(agent, transitions: int, seed: int = 0) -> None:
    """``transitions`` random transitions (frames, actions, rewards, contexts) into the agent's replay."""
    r = agent.replay
    rng = np.random.default_rng(seed)
    k = r.stack
    frames = rng.integers(0, 256, (64, *r.frame_shape), dtype=np.uint8)
    ids = [r.push_frame(frames[i % 64]) for i in range(k)]
    for i in range(transitions):
        nxt = r.push_frame(frames[(i + k) % 64])
        next_ids = np.append(ids[1:], nxt)
        r.add(np.array(ids), rng.uniform(-1, 1, r.action.shape[1]).astype(np.float32), float(rng.uniform(0, 2)), 0.97**5,
              next_ids, rng.uniform(0, 1, r.ctx.shape[1]).astype(np.float32),
              rng.uniform(0, 1, r.ctx.shape[1]).astype(np.float32))
        ids = next_ids


def timed(fn, seconds: float, warm: int = 3) -> tuple[float, int]:
    """Mean milliseconds per call of ``fn()`` over about ``seconds``, after ``warm`` calls; and the calls made."""
    for _ in range(warm):
        fn()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return (time.perf_counter() - t0) / n * 1e3, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measuring time of the whole-update figure")
    ap.add_argument("--transitions", type=int, default=5000, help="transitions put in replay first")
    ap.add_argument("--threads", type=int, nargs=2, metavar=("INTER", "INTRA"), help="TensorFlow thread pools")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="section.key=value")
    ap.add_argument("--json", metavar="PATH", help="also write the figures here")
    args = ap.parse_args(argv)

    import tensorflow as tf

    from explorer.config import load
    from explorer.run.builder import build_agent, configure_threads, seed_everything

    config = load(None, args.overrides)
    configure_threads(tuple(args.threads) if args.threads else config.run.threads)  # as explore and play do
    seed_everything(config.run.seed)
    from explorer.envs.geometry import observation_shape
    t0 = time.perf_counter()
    agent = build_agent(config, observation_shape(config.observation))
    build_s = time.perf_counter() - t0  # tracing, and with learner.xla compiling, the update included
    fill(agent, args.transitions)
    learner = agent.learner
    b = config.learner.schedule.batch_size

    step_ms, n = timed(learner.step, args.seconds)
    sample_ms, _ = timed(lambda: learner.replay.sample(b), args.seconds / 4)
    batch = {k: tf.convert_to_tensor(v) for k, v in learner.replay.sample(b).items()}
    convert_ms, _ = timed(lambda: {k: tf.convert_to_tensor(v) for k, v in learner.replay.sample(b).items()},
                          args.seconds / 4)
    # Each part compiled the way the learner compiles its update (a tf.function, or an XLA cluster
    # with its NaN/Inf checks when learner.xla), called on the same batch.
    critic = learner._compile(lambda batch: learner._critic_step(batch)[2])
    critic_ms, _ = timed(lambda: critic(batch), args.seconds / 4)
    features = learner.encoder(batch["obs"])

    def actor_update(batch):
        with tf.GradientTape() as tape:
            loss, metrics = learner.actor_loss(batch["obs"], batch["ctx"], features)
        learner._apply(learner.actor_opt, tape, loss, learner.actor.trainable_variables, 10.0, "actor")
        return {"logp_axes": metrics["logp_axes"]}

    actor = learner._compile(actor_update)
    actor_ms, _ = timed(lambda: actor(batch), args.seconds / 4)
    logp_axes = actor(batch)[0]["logp_axes"]

    def alpha_update(batch):
        with tf.GradientTape() as tape:
            alpha_loss = -tf.reduce_sum(learner.log_alpha * tf.stop_gradient(logp_axes + config.learner.target_entropy / 4))
        learner._apply(learner.alpha_opt, tape, alpha_loss, [learner.log_alpha], 10.0, "alpha")
        return {"alpha_loss": alpha_loss}

    alpha = learner._compile(alpha_update)
    alpha_ms, _ = timed(lambda: alpha(batch), args.seconds / 8)
    figures = {"updates_per_s": 1e3 / step_ms, "build_s": build_s, "xla": config.learner.xla, "update_ms": step_ms, "updates_timed": n,
               "sample_ms": sample_ms, "sample_and_convert_ms": convert_ms, "critic_ms": critic_ms,
               "actor_ms": actor_ms, "alpha_ms": alpha_ms, "batch_size": b,
               "threads": {"inter": tf.config.threading.get_inter_op_parallelism_threads(),
                           "intra": tf.config.threading.get_intra_op_parallelism_threads()},
               "cpus": os.cpu_count(), "overrides": args.overrides}
    print(f"learner alone, batch {b}{', XLA' if config.learner.xla else ''}: {figures['updates_per_s']:.1f} updates/s "
          f"({step_ms:.1f} ms per update, {n} timed; agent built in {build_s:.1f} s)")
    print(f"one update, parts timed alone: sample {sample_ms:.2f} ms (+ to tensors {convert_ms - sample_ms:.2f} ms), "
          f"critic + targets {critic_ms:.2f} ms, actor {actor_ms:.2f} ms, entropy weight {alpha_ms:.2f} ms")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
