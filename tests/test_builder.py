"""The builder's parts are seeded from ``run.seed``: one seed repeats a run, another changes it."""

from __future__ import annotations

import json

import numpy as np
import tensorflow as tf

from explorer import cli

SMALL = ["--no-progress", "--set", "game.episode_steps=50", "--set", "learner.schedule.warmup_steps=30",
         "--set", "learner.schedule.batch_size=8", "--set", "learner.networks.filters=[4]", "--set", "learner.networks.hidden=16",
         "--set", "learner.networks.feature=16", "--set", "learner.schedule.replay_mb=2", "--set", "run.log_every=10",
         "--set", "novelty.embedding=random"]  # a novelty network of its own, so novelty.seed counts too


def explore(tmp_path, name: str, *sets: str) -> tuple[dict[str, np.ndarray], list[dict]]:
    """Weights of the final checkpoint and the metric lines of a 60-step explore run."""
    out = tmp_path / name
    extra = [a for s in sets for a in ("--set", s)]
    assert cli.main(["explore", "--steps", "60", "--out", str(out), *SMALL, *extra]) == 0
    (run,) = out.iterdir()
    reader = tf.train.load_checkpoint(str(run / "checkpoints" / "learner-60"))
    weights = {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
               if "OPTIMIZER" not in k and k != "_CHECKPOINTABLE_OBJECT_GRAPH"}
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return weights, lines


def test_run_seed_seeds_the_learning_agent_and_the_game(tmp_path):
    first, first_lines = explore(tmp_path, "a", "run.seed=3")
    again, again_lines = explore(tmp_path, "b", "run.seed=3")
    other, other_lines = explore(tmp_path, "c", "run.seed=4")
    assert first.keys() == again.keys() == other.keys()
    assert [k for k in first if not np.array_equal(first[k], again[k])] == [], "one seed must repeat the run"
    assert first_lines == again_lines
    # network init (targets start as copies), the trained actor, the replay's sampler and noise
    # generators, and the novelty network's embeddings of what the game showed all move
    moved = ["target_encoder/_operations/2/_kernel/.ATTRIBUTES/VARIABLE_VALUE",
             "actor_opt/_trainable_variables/0/.ATTRIBUTES/VARIABLE_VALUE",
             "rng/_state_var/.ATTRIBUTES/VARIABLE_VALUE", "novelty/memory/.ATTRIBUTES/VARIABLE_VALUE"]
    assert [k for k in moved if np.array_equal(first[k], other[k])] == []
    assert [r.get("action/mean_walk_y") for r in first_lines] != [r.get("action/mean_walk_y") for r in other_lines]
    # parts whose seeds are set keep them whatever run.seed says
    pinned, pinned_lines = explore(tmp_path, "d", "run.seed=4", "game.seed=3", "learner.seed=3", "novelty.seed=4")
    assert [k for k in first if not np.array_equal(first[k], pinned[k])] == []
    assert pinned_lines == first_lines
