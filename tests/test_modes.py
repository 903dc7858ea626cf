"""One checkpoint, three modes: explore trains it, play acts with it, replay evaluates it, with the same inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explorer import cli
from explorer.agent.actor import LearningActor
from explorer.config import load
from explorer.core import action_dim
from explorer.testing.fakes import FakeScreen

SMALL = ["--set", "game.episode_steps=50", "--set", "learner.warmup_steps=40", "--set", "learner.batch_size=16",
         "--set", "learner.filters=[8]", "--set", "learner.hidden=32", "--set", "learner.feature=32",
         "--set", "learner.replay_mb=8", "--set", "observation.stack=1"]


@pytest.mark.parametrize("extra", [[], ["--set", "learner.plan_candidates=4", "--set", "learner.action_repeat=2"]],
                         ids=["default", "planner"])
def test_a_checkpoint_sees_the_same_context_and_acts_the_same_in_explore_play_and_replay(tmp_path, monkeypatch, extra):
    """Explore trains a checkpoint on the built-in game; play --dry-run acts with it on a screen and records
    what it saw; replay --evaluate runs the checkpoint on that recording. Step by step, the context input
    (previous action, episode-step fraction, novelty averages) and the policy's output are the same.

    One frame per observation: live capture fills the ring between ticks with frames a session does not
    keep, so deeper stacks differ for reasons of capture timing, not of the agent's inputs.
    """
    assert cli.main(["explore", "--steps", "120", "--out", str(tmp_path / "explore"), "--no-progress", *SMALL,
                     *extra]) == 0
    (run,) = list((tmp_path / "explore").iterdir())

    calls: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"now": []}
    policy = LearningActor.policy

    def spy(self, obs, ctx):
        mean, log_std = policy(self, obs, ctx)
        calls["now"].append((np.array(ctx), np.array(mean)))
        return mean, log_std

    monkeypatch.setattr(LearningActor, "policy", spy)

    # play --dry-run from the checkpoint; no weights are published during the run, so it acts with the checkpoint's
    from explorer.run.play import play

    config = load(run / "config.toml", [f"run.dir={str(tmp_path / 'play')!r}", f"record.dir={str(tmp_path / 'sessions')!r}",
                                        "control.countdown_s=0", "control.hz=20", "capture.fps=20",
                                        "control.max_seconds=3",
                                        "learner.publish_every=1000000000"])
    rng = np.random.default_rng(0)
    screen = FakeScreen([rng.integers(0, 255, config.observation.height * config.observation.width * 3, dtype=np.uint8)
                         .reshape(config.observation.height, config.observation.width, 3) for _ in range(40)])
    summary = play(config, dry_run=True, resume=run, screen=screen)
    played = calls["now"]
    calls["now"] = []
    assert summary["dry_run"] and summary["session"] and len(played) >= 20, (summary["loop"], len(played))

    assert cli.main(["replay", summary["session"], "--evaluate", str(run), "--out", str(tmp_path / "eval")]) == 0
    evaluated = calls["now"]
    assert len(evaluated) == len(played)
    for i, ((ctx_p, mean_p), (ctx_e, mean_e)) in enumerate(zip(played, evaluated, strict=True)):
        np.testing.assert_allclose(ctx_e, ctx_p, atol=1e-6, err_msg=f"context at step {i}")
        np.testing.assert_allclose(mean_e, mean_p, atol=1e-5, err_msg=f"policy output at step {i}")
    contexts = np.stack([c for c, _ in played])
    n = action_dim(config.pad.buttons)  # the context: previous action, step fraction, two novelty averages
    assert np.ptp(contexts[:, n]) > 0 and np.ptp(contexts[:, n + 1]) > 0  # step fraction and novelty averages moved
    assert np.ptp(contexts[:, :n]) > 0  # the previous actions too
    (eval_run,) = list((tmp_path / "eval").iterdir())
    evaluation = json.loads((eval_run / "evaluation.json").read_text())
    assert evaluation["transitions"] == len(played) and evaluation["recorded_actions"] == len(played)
