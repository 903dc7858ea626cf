"""One checkpoint, three modes: explore trains it, play acts with it, replay evaluates it, with the same inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explorer import cli
from explorer.agent.actor import LearningActor
from explorer.config import load
from explorer.core import action_dim
from explorer.run.driver import Controls
from explorer.testing.fakes import FakeScreen

# a batch of 8 decisions comes before step 120 when each is held 8 steps (ViZDoom's learner.action_repeat)
SMALL = ["--set", "game.episode_steps=50", "--set", "learner.schedule.warmup_steps=40", "--set", "learner.schedule.batch_size=8",
         "--set", "learner.networks.filters=[8]", "--set", "learner.networks.hidden=32", "--set", "learner.networks.feature=32",
         "--set", "learner.schedule.replay_mb=8", "--set", "observation.stack=1"]


@pytest.mark.parametrize("extra", [[],  # ViZDoom's: the reach planner, each decision held 8 steps
                                   ["--set", "learner.actions.plan_candidates=0", "--set", "learner.action_repeat=1"],
                                   ["--set", "learner.actions.plan_candidates=4", "--set", "learner.actions.plan_score=model"],
                                   ["--set", "learner.actions.plan_candidates=4", "--set", "learner.actions.plan_score=critic"],
                                   ["--set", "learner.actions.residual=0.5", "--set", "learner.actions.plan_candidates=0"],
                                   ["--set", "learner.networks.echo_units=16"],
                                   ["--set", "learner.networks.recurrent_units=8", "--set", "learner.networks.recurrent_window=4"]],
                         ids=["default-reach", "no-planner", "model-planner", "critic-planner", "residual", "echo", "recurrent"])
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
    # play stops once it has what the test checks, however slowly a loaded machine ticks: enough decisions,
    # with the previous action, the step fraction and the novelty averages each having moved
    controls = Controls()
    enough = {"decisions": 0, "context": 0}

    def moved(played, n):
        contexts = np.stack([c for c, _ in played])
        return np.ptp(contexts[:, :n]) > 0 and np.ptp(contexts[:, n]) > 0 and np.ptp(contexts[:, n + 1]) > 0

    def spy(self, obs, ctx):
        mean, log_std = policy(self, obs, ctx)
        calls["now"].append((np.array(ctx), np.array(mean)))
        if enough["decisions"] and len(calls["now"]) >= enough["decisions"] and moved(calls["now"], enough["context"]):
            controls.request_stop("the test has what it checks")
        return mean, log_std

    monkeypatch.setattr(LearningActor, "policy", spy)

    # play --dry-run from the checkpoint; no weights are published during the run, so it acts with the checkpoint's
    from explorer.run.play import play

    repeat = load(run / "config.toml").learner.action_repeat  # the policy decides once per repeat ticks
    config = load(run / "config.toml", [f"run.dir={str(tmp_path / 'play')!r}", f"record.dir={str(tmp_path / 'sessions')!r}",
                                        "control.countdown_s=0", "control.hz=20", "capture.fps=20",
                                        "control.max_seconds=300",  # a bound for a hang only: the spy stops play
                                        "learner.schedule.publish_every=1000000000"])
    rng = np.random.default_rng(0)
    screen = FakeScreen([rng.integers(0, 255, config.observation.height * config.observation.width * 3, dtype=np.uint8)
                         .reshape(config.observation.height, config.observation.width, 3) for _ in range(40)])
    n = action_dim(config.pad.buttons)  # the context: previous action, step fraction, two novelty averages
    want = enough["decisions"] = 20 if repeat == 1 else 8
    enough["context"] = n
    summary = play(config, dry_run=True, resume=run, screen=screen, controls=controls)
    enough["decisions"] = 0  # replay runs to the session's end
    played = calls["now"]
    calls["now"] = []
    assert summary["stopped_by"] == controls.reason, summary["loop"]  # stopped on the decisions, not the time bound
    assert summary["dry_run"] and summary["session"] and len(played) >= want, (summary["loop"], len(played))

    assert cli.main(["replay", summary["session"], "--evaluate", str(run), "--out", str(tmp_path / "eval")]) == 0
    evaluated = calls["now"]
    assert len(evaluated) == len(played)
    for i, ((ctx_p, mean_p), (ctx_e, mean_e)) in enumerate(zip(played, evaluated, strict=True)):
        np.testing.assert_allclose(ctx_e, ctx_p, atol=1e-6, err_msg=f"context at step {i}")
        np.testing.assert_allclose(mean_e, mean_p, atol=1e-5, err_msg=f"policy output at step {i}")
    assert moved(played, n)  # the previous actions, the step fraction and the novelty averages
    (eval_run,) = list((tmp_path / "eval").iterdir())
    evaluation = json.loads((eval_run / "evaluation.json").read_text())
    # every tick is a transition; the policy decided at the first of each repeat ticks, in play and replay alike
    assert evaluation["transitions"] == evaluation["recorded_actions"] >= len(played)
    assert len(played) == -(-evaluation["transitions"] // repeat)


TRAINED = ["--set", "game.name='synthetic'", "--set", "pad.invert_walk_y=true", "--set", "pad.tap_gap=2",
           "--set", "learner.actions.action_low=[-0.2, -0.3, -0.4, 0.7]", "--set", "learner.actions.action_high=[0.2, 0.3, 0.4, 0.9]",
           "--set", "game.episode_steps=40"]


def test_play_resume_acts_with_the_runs_settings_and_stops_on_one_that_would_change_the_policy(
        tmp_path, monkeypatch, capsys):
    """A play resumed from a run takes the run's config.toml as its base (its stick range, inverted walk axis,
    taps, horizon), as explore --resume does, with --set on top; a --set that changes what the trained policy
    sees or does is refused in one line naming each setting, in play and explore alike."""
    from explorer.run import play as play_mod
    from explorer.testing.fakes import RecordingPad

    assert cli.main(["explore", "--steps", "60", "--out", str(tmp_path / "explore"), "--no-progress",
                     *SMALL, *TRAINED]) == 0
    (run,) = list((tmp_path / "explore").iterdir())
    trained = load(run / "config.toml")

    seen: dict[str, object] = {}
    real = play_mod.play

    def play_on_fakes(config, **kwargs):
        seen["config"] = config
        pad = seen["pad"] = RecordingPad()
        rng = np.random.default_rng(0)
        shape = (config.observation.height, config.observation.width, 3)
        screen = FakeScreen([rng.integers(0, 255, shape, dtype=np.uint8) for _ in range(8)])
        return real(config, pad=pad, screen=screen, countdown_s=0, **kwargs)

    monkeypatch.setattr(play_mod, "play", play_on_fakes)
    capsys.readouterr()
    assert cli.main(["play", "--resume", str(run), "--dry-run", "--seconds", "1.5", "--out", str(tmp_path / "play"),
                     "--record", str(tmp_path / "sessions"), "--set", "control.hz=20"]) == 0
    config = seen["config"]
    for key in ("pad", "learner", "observation", "novelty"):
        assert getattr(config, key) == getattr(trained, key), key
    assert config.game.episode_steps == 40 and config.pad.invert_walk_y and config.pad.tap_gap == 2
    assert config.control.hz == 20  # the command line's settings on top
    sent = np.array(seen["pad"].sent)  # type: ignore[attr-defined]
    assert len(sent) >= 5
    low, high = np.array(trained.learner.actions.action_low), np.array(trained.learner.actions.action_high)
    assert np.all(sent[:, :4] >= low - 1e-6) and np.all(sent[:, :4] <= high + 1e-6), sent[:, :4]

    seen.clear()
    capsys.readouterr()
    assert cli.main(["play", "--resume", str(run), "--dry-run", "--set", "pad.invert_walk_y=false",
                     "--set", "learner.actions.action_high=[0.5, 0.3, 0.4, 0.9]"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and not seen, err
    assert "pad.invert_walk_y = false (the run's: true)" in err and "learner.actions.action_high = [0.5, 0.3, 0.4, 0.9]" in err

    assert cli.main(["explore", "--resume", str(run), "--steps", "80", "--no-progress", "--set", "pad.tap_gap=0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "pad.tap_gap = 0 (the run's: 2)" in err, err

    # replay --evaluate takes the run's settings the same way, a --config file merged over them
    other = tmp_path / "other.toml"
    other.write_text("[learner.actions]\naction_low = [-0.5, -1.0, -1.0, 0.6]\n", encoding="utf-8")
    (session,) = list((tmp_path / "sessions").iterdir())
    assert cli.main(["replay", str(session), "--evaluate", str(run), "--config", str(other),
                     "--out", str(tmp_path / "eval")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"explorer: --evaluate {run}: --config") and \
        "learner.actions.action_low = [-0.5, -1.0, -1.0, 0.6] (the run's: [-0.2, -0.3, -0.4, 0.7])" in err, err


#: a run these settings describe needs 3.9 GiB (replay 3.4, batch 0.5); the machine is told 3 GiB are free
TOO_BIG = ["--set", "learner.schedule.replay_mb=3500", "--set", "learner.schedule.batch_size=1000",
           "--set", "learner.action_repeat=1"]  # a first update inside explore's 2000 steps: no warning before the line
TOO_BIG_LINE = ("explorer: this run needs at least 3.9 GiB of memory but 3.0 GiB are free: replay 3.4 GiB "
                "(learner.schedule.replay_mb = 3500); batch 0.5 GiB (learner.schedule.batch_size = 1000); lower learner.schedule.replay_mb or "
                "learner.schedule.batch_size, or free memory\n")


@pytest.fixture
def three_gib_free(monkeypatch):
    from explorer.agent import memory

    monkeypatch.setattr(memory, "free_memory", lambda: 3 * 2**30)


@pytest.mark.parametrize("argv", [
    ["explore", "--steps", "2000"],
    ["explore", "--steps", "2000", "--workers", "2"],  # the learner of many workers holds the same replay
    ["play", "--dry-run", "--seconds", "1"],
])
def test_each_mode_refuses_a_run_that_cannot_fit_in_one_line_and_leaves_nothing(argv, tmp_path, capsys,
                                                                                 three_gib_free):
    runs = tmp_path / "runs"
    assert cli.main([*argv, "--out", str(runs), *TOO_BIG]) == 2  # a setting to change, as at load
    assert capsys.readouterr().err == TOO_BIG_LINE
    assert not runs.exists() or not any(runs.iterdir())
    # the same settings load, on this machine as on any: only starting the run is refused
    assert load(None, [s for s in TOO_BIG if s != "--set"]).learner.schedule.replay_mb == 3500


def test_replay_and_evaluate_refuse_a_run_that_cannot_fit_before_reading_sessions(tmp_path, three_gib_free):
    from explorer.config import ConfigError
    from explorer.run.replay import evaluate, replay_train

    config = load(None, [s for s in TOO_BIG if s != "--set"])
    missing = [tmp_path / "no-such-session"]  # never opened: the memory is checked first
    for run in (lambda: replay_train(config, missing, tmp_path / "replay"),
                lambda: evaluate(config, missing, tmp_path / "no-checkpoint", tmp_path / "evaluate")):
        with pytest.raises(ConfigError) as err:
            run()
        assert f"explorer: {err.value}\n" == TOO_BIG_LINE
    assert not (tmp_path / "replay").exists() and not (tmp_path / "evaluate").exists()
