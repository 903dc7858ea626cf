"""How well does each novelty signal follow the player's true novelty? An offline check in minutes.

A full coverage benchmark (``tools/bench_explore.py``) takes half an hour per
run and varies by about 3 cells between seeds. This tool answers a narrower
question much faster: under the same sticky random play (each random action
held for 8 steps) on ``my_way_home``, does a signal pay more where the player
really reaches new ground? The reference is *position novelty*: the distance
from the player to the nearest point it stood on earlier in the episode, more
than 25 steps ago, capped at one 64-unit cell; positions are read from the
engine for this measurement only. Each signal runs through its own ``Novelty``
class, reset at every episode start and called once per step in order, as the
agent calls it; learned signals train on random batches of the transitions seen
so far, one batch every 2 steps.

It prints the Spearman rank correlation between each signal and position
novelty: over all steps; over the steps on which the player walked (at least
half its usual stride), where a signal must tell new ground from ground walked
before; over sums of 20-step windows (what an n-step return sees); and over
those sums among windows at the same time of their episodes (50-step bins),
which is what choosing a move asks of a signal: early in an episode nearly
every step finds new ground, and a signal that only follows that trend scores
well on the sums but cannot tell one move from another. Higher is better; 1
would be position novelty itself.

    python tools/novelty_fidelity.py --steps 5250
    python tools/novelty_fidelity.py --set observation.grayscale=false \\
        --signals episodic episodic:heading_window=30,knn=1,norm_decay=0.9999 pixel

A signal's heading window (``novelty.heading_window``) turns with the camera x
of the random play, at the game's own turn rate (``novelty.turn_rate``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

DEFAULT_SIGNALS = ["episodic", "episodic:heading_window=30,knn=1,norm_decay=0.9999", "episodic:embedding=random",
                   "episodic:embedding=pooled", "rnd", "forward", "pixel"]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation (ties broken by order, enough for continuous signals)."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def window_sums(x: np.ndarray, episode: np.ndarray, width: int) -> np.ndarray:
    """Sums of ``width`` consecutive values that stay inside one episode (NaN where they would not)."""
    out = np.full(len(x), np.nan)
    c = np.concatenate([[0.0], np.cumsum(x)])
    for i in range(len(x) - width + 1):
        if episode[i] == episode[i + width - 1]:
            out[i] = c[i + width] - c[i]
    return out


def same_time_spearman(a: np.ndarray, b: np.ndarray, when: np.ndarray, width: int = 50) -> float:
    """Mean rank correlation of ``a`` and ``b`` among steps at the same time of their episodes (``when``, in
    bins of ``width`` steps), weighted by each bin's steps: whether a signal ranks what follows one moment of
    an episode, the choice an agent faces, rather than following the episode's own trend (early steps all
    find new ground). Bins of fewer than 10 steps are left out; NaN when none is left."""
    total, weight = 0.0, 0
    bins = when // width
    for k in np.unique(bins):
        m = bins == k
        if m.sum() >= 10 and np.ptp(a[m]) > 0 and np.ptp(b[m]) > 0:
            total += spearman(a[m], b[m]) * int(m.sum())
            weight += int(m.sum())
    return total / weight if weight else float("nan")


def play(config, steps: int, seed: int):
    """Sticky random play. Per step: the index of its next frame, the position, the episode and the action;
    and the frames, and the index of each episode's first frame."""
    from explorer.agent.actor import RandomActor
    from explorer.envs import make_game
    from explorer.envs.doom.game import DoomPad
    game = make_game(config)
    pad = DoomPad(game)
    agent = RandomActor(seed, sticky_steps=8)  # the sticky baseline of tools/bench_explore.py
    frames, starts = [game.grab().copy()], [0]
    step_next, positions, episodes, actions = [], [], [], []
    episode = 0
    try:
        for _ in range(steps):
            action = agent.act(None)  # a random actor ignores the step
            pad.send(action)
            game.advance()
            p = game.position()
            frames.append(game.grab().copy())
            step_next.append(len(frames) - 1)
            positions.append((p.x, p.y))
            episodes.append(episode)
            actions.append(action)
            if game.episode_ended:
                episode += 1
                game.new_episode()
                frames.append(game.grab().copy())
                starts.append(len(frames) - 1)
    finally:
        pad.neutral()
        game.close()
    return frames, starts, np.array(step_next), np.array(positions), np.array(episodes), np.array(actions)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5250, help="agent steps of sticky random play (525 per episode)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--signals", nargs="+", default=DEFAULT_SIGNALS,
                    help="SIGNAL or SIGNAL:key=value,key=value with novelty.* keys, e.g. episodic:embedding=histogram")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="section.key=value for the whole run")
    ap.add_argument("--window", type=int, default=20, help="steps per window sum")
    ap.add_argument("--exclude", type=int, default=25,
                    help="position novelty ignores the newest positions, steps (so it measures new ground, not motion)")
    ap.add_argument("--out", default="", help="write the figures as JSON here")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import tensorflow as tf

    from explorer.agent.novelty import make_novelty
    from explorer.config import load
    from explorer.run.builder import turn_rate

    base = ["game.scenario=my_way_home", "game.episode_steps=525", f"game.seed={args.seed}", *args.overrides]
    config = load(None, base)
    stack, n_step = config.observation.stack, config.learner.n_step
    frames, starts, step_next, pos, episode, actions = play(config, args.steps, args.seed)
    first_frame = np.zeros(len(frames), np.int64)  # each frame's episode start
    for s in starts:
        first_frame[s:] = s

    def stacked(i: int) -> np.ndarray:
        ids = [max(i - k, first_frame[i]) for k in range(stack - 1, -1, -1)]
        return np.concatenate([frames[j] for j in ids], axis=-1)

    # position novelty: distance to the nearest position of the episode older than --exclude steps, capped at one cell
    truth = np.full(len(pos), np.nan)
    for t in range(len(pos)):
        earlier = pos[(episode == episode[t]) & (np.arange(len(pos)) < t - args.exclude)]
        if len(earlier):
            truth[t] = min(float(np.sqrt(((earlier - pos[t]) ** 2).sum(1)).min()), 64.0)
    truth_w = window_sums(np.nan_to_num(truth), episode, args.window)
    # steps on which the player walked (at least half its usual stride): there, novelty means new ground, not motion
    stride = np.r_[0.0, np.sqrt((np.diff(pos, axis=0) ** 2).sum(1))]
    stride[np.r_[True, episode[1:] != episode[:-1]]] = 0.0
    walking = stride >= 0.5 * np.percentile(stride, 90)
    when = np.zeros(len(episode), np.int64)  # each step's step of its episode
    for t in range(1, len(episode)):
        when[t] = when[t - 1] + 1 if episode[t] == episode[t - 1] else 0
    width = max(len(spec) for spec in args.signals)
    print(f"{len(actions)} steps, {episode[-1] + 1} episode{'s' if episode[-1] else ''} of sticky random play ({walking.mean():.0%} walking); "
          f"Spearman correlation with position novelty:\n"
          f"  {'signal':<{width}} {'per step':>8} {'walking':>8} {f'{args.window}-step sums':>14} {'same time':>9}")
    rng = np.random.default_rng(args.seed)
    # transitions whose n-step successor is in the same episode, for training the learned signals
    valid = np.flatnonzero(episode[:len(episode) - n_step + 1] == episode[n_step - 1:])
    results = {}
    for spec in args.signals:
        name, _, rest = spec.partition(":")
        sets = [f"novelty.signal={name}"] + [f"novelty.{kv}" for kv in rest.split(",") if kv]
        signal_config = load(None, base + sets)
        novelty = make_novelty(signal_config.novelty, frames[0].shape, stack, turn_rate=turn_rate(signal_config))
        train = tf.function(novelty.train)
        reward = np.zeros(len(actions))
        for t in range(len(actions)):
            nxt = step_next[t]
            if t == 0 or episode[t] != episode[t - 1]:
                novelty.reset(tf.constant(stacked(first_frame[nxt])))
            obs = tf.constant(stacked(nxt - 1))
            reward[t] = float(novelty.reward(obs, tf.constant(actions[t]), tf.constant(stacked(nxt))))
            seen = valid[valid <= t - n_step]
            if t % 2 == 1 and len(seen) >= 64:
                idx = rng.choice(seen, 64)
                train(tf.constant(np.stack([stacked(step_next[i] - 1) for i in idx])),
                              tf.constant(actions[idx]),
                              tf.constant(np.stack([stacked(step_next[i + n_step - 1]) for i in idx])))
        ok = ~np.isnan(truth)
        w = window_sums(reward, episode, args.window)
        okw = ~np.isnan(w) & ~np.isnan(truth_w)
        okm = ok & walking
        results[spec] = {"step": spearman(reward[ok], truth[ok]), "walking": spearman(reward[okm], truth[okm]),
                         "window": spearman(w[okw], truth_w[okw]),
                         "same_time": same_time_spearman(w[okw], truth_w[okw], when[okw])}
        r = results[spec]
        print(f"  {spec:<{width}} {r['step']:8.2f} {r['walking']:8.2f} {r['window']:14.2f} {r['same_time']:9.2f}",
              flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"steps": len(actions), "overrides": args.overrides, "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
