"""The reach prior (learner.actions.plan_score = reach): the shipped weights, the checks that keep a weights
file from bringing anything but arrays, and the planner that sends the candidate it expects to go farthest."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from explorer.agent.reach import (
    FRAME,
    MAX_BYTES,
    WEIGHTS,
    Reach,
    build_reach,
    load_reach,
    save_reach,
)
from explorer.config import ConfigError, load
from explorer.core import ExplorerError, Step
from explorer.run.builder import build_agent


def test_the_shipped_weights_load_and_score_each_candidate():
    assert WEIGHTS.is_file() and WEIGHTS.stat().st_size < MAX_BYTES
    reach = Reach()
    frame = np.random.default_rng(0).integers(0, 256, FRAME, dtype=np.uint8)
    sent = np.array([[0.0, 0.0, 0.0, 1.0, -1.0], [0.5, 0.0, -1.0, 0.6, 1.0], [-0.5, 0.0, 1.0, 0.8, -1.0]], np.float32)
    scores = reach(frame, sent).numpy()
    assert scores.shape == (3,) and np.all(np.isfinite(scores)) and len(set(np.round(scores, 5))) == 3


def _valid(tmp_path):
    path = tmp_path / "reach.npz"
    save_reach(build_reach(), path)
    return path, dict(np.load(path))


def test_a_weights_file_written_by_save_reach_loads_as_it_was(tmp_path):
    path, arrays = _valid(tmp_path)
    model = load_reach(path)
    for i, w in enumerate(model.get_weights()):
        np.testing.assert_array_equal(w, arrays[f"w{i}"])


@pytest.mark.parametrize("tamper, says", [
    (lambda a: a.update(w0=np.zeros((3, 3), np.float32)), "array w0"),
    (lambda a: a.update(w1=np.full_like(a["w1"], np.nan)), "array w1"),
    (lambda a: a.update(w2=a["w2"].astype(np.int32)), "array w2"),
    (lambda a: a.pop("w3"), "not the model's"),
    (lambda a: a.update(extra=np.zeros(1, np.float32)), "not the model's"),
    (lambda a: a.update(w0=np.array([object()] * 4, dtype=object)), "not the model's"),
], ids=["shape", "nan", "integers", "missing", "extra", "pickle"])
def test_a_weights_file_that_is_not_the_models_arrays_is_refused_in_one_line(tmp_path, tamper, says):
    path, arrays = _valid(tmp_path)
    tamper(arrays)
    np.savez(path, **arrays)
    with pytest.raises(ExplorerError, match=says) as err:
        load_reach(path)
    assert "\n" not in str(err.value) and "reinstall explorer" in str(err.value)


def test_a_missing_an_oversized_or_a_garbled_weights_file_is_refused(tmp_path):
    with pytest.raises(ExplorerError, match="cannot be read"):
        load_reach(tmp_path / "none.npz")
    big = tmp_path / "big.npz"
    big.write_bytes(b"\0" * (MAX_BYTES + 1))
    with pytest.raises(ExplorerError, match="more than"):
        load_reach(big)
    garbled = tmp_path / "garbled.npz"
    garbled.write_bytes(b"not an archive")
    with pytest.raises(ExplorerError, match="not the model's"):
        load_reach(garbled)


def _agent(acting_copy: bool = False):
    base = load(None, ["learner.actions.plan_candidates=5", "learner.actions.plan_score=reach",
                       "learner.schedule.warmup_steps=0", "learner.networks.filters=[8]", "learner.networks.hidden=32",
                       "learner.networks.feature=32", "learner.schedule.replay_mb=8", "observation.stack=1"])
    return build_agent(base, FRAME, acting_copy=acting_copy)


@pytest.mark.parametrize("acting_copy", [False, True], ids=["inline", "acting-copy"])
def test_the_reach_planner_sends_the_candidate_the_prior_expects_to_go_farthest(acting_copy):
    agent = _agent(acting_copy)
    assert agent.actor.planner is None and agent.learner.planner() is None and agent.learner.model_head is None
    seen = {}
    scores = agent.actor._plan_scores

    def spy(obs, actions, ctx):
        out = scores(obs, actions, ctx)
        seen["obs"], seen["actions"], seen["scores"] = obs, actions.numpy(), out.numpy()
        return out

    agent.actor._plan_scores = spy
    rng = np.random.default_rng(1)
    obs = tf.constant(rng.integers(0, 256, (1, *FRAME), dtype=np.uint8))
    agent.actor.act(Step(obs, first=True))
    assert seen["actions"].shape == (6, 5)  # the policy's own and 5 draws, each with A
    expected = Reach()(seen["obs"][-1], seen["actions"]).numpy()
    np.testing.assert_allclose(seen["scores"], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(agent.actor.held, seen["actions"][int(np.argmax(seen["scores"]))], atol=1e-6)
    if acting_copy:
        agent.actor.set_weights(agent.learner.get_weights())  # no planner head to publish: the prior is fixed


@pytest.mark.parametrize("sets", [["observation.grayscale=true"], ["observation.width=84", "observation.height=84"]])
def test_the_reach_planner_is_refused_on_frames_it_was_not_trained_on(sets):
    with pytest.raises(ConfigError, match="plan_score = reach reads 64 x 64 colour frames"):
        load(None, ["learner.actions.plan_candidates=4", "learner.actions.plan_score=reach", *sets])
    assert load(None, ["learner.actions.plan_score=reach", *sets])  # no planner (plan_candidates = 0): nothing read


def test_the_reach_planner_reads_frames_not_the_critics_encoder():
    config = load(None, ["learner.actions.plan_candidates=4", "learner.actions.plan_score=reach",
                         "learner.networks.shared_encoder=false"])
    assert config.learner.actions.plan_score == "reach"
    with pytest.raises(ConfigError, match="shared_encoder"):
        load(None, ["learner.actions.plan_candidates=4", "learner.networks.shared_encoder=false"])
