"""The reach prior (learner.actions.plan_score = reach): the shipped weights, the checks that keep a weights
file from bringing anything but arrays, and the planner that sends the candidate it expects to go farthest."""
from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import tensorflow as tf

from explorer.agent.reach import (
    FRAME,
    MAX_BYTES,
    MAX_MODELS,
    WEIGHTS,
    Reach,
    build_reach,
    load_reach,
    save_reach,
)
from explorer.config import ConfigError, load
from explorer.core import ExplorerError, Step, settle
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
    (model,) = load_reach(path)
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
    _tampered_is_refused(*_valid(tmp_path), tamper, says)


def _tampered_is_refused(path, arrays, tamper, says):
    """``arrays`` changed by ``tamper`` and written to ``path`` are refused in one line that says ``says``."""
    tamper(arrays)
    np.savez(path, **arrays)
    with pytest.raises(ExplorerError, match=says) as err:
        load_reach(path)
    assert "\n" not in str(err.value) and "tools/traversability.py" in str(err.value)


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
    os.mkfifo(tmp_path / "pipe.npz")  # a read that would wait for a writer forever
    with pytest.raises(ExplorerError, match="are not a file"):
        load_reach(tmp_path / "pipe.npz")


def _agent(acting_copy: bool = False, *sets: str):
    base = load(None, ["learner.actions.plan_candidates=5", "learner.actions.plan_score=reach",
                       "learner.schedule.warmup_steps=0", "learner.networks.filters=[8]", "learner.networks.hidden=32",
                       "learner.networks.feature=32", "learner.schedule.replay_mb=8", "observation.stack=1", *sets])
    return build_agent(base, FRAME, acting_copy=acting_copy)


def test_reach_weights_plays_the_planner_with_a_prior_of_the_users_own(tmp_path):
    mine = build_reach()
    mine.set_weights([w + 0.01 * (i + 1) for i, w in enumerate(mine.get_weights())])
    save_reach(mine, tmp_path / "mine.npz")
    agent = _agent(False, f"learner.actions.reach_weights={str(tmp_path / 'mine.npz')!r}")
    (model,) = agent.actor.reach.models
    for got, want in zip(model.get_weights(), mine.get_weights(), strict=True):
        np.testing.assert_array_equal(got, want)
    shipped = _agent().actor.reach.models[0].get_weights()  # empty: the shipped prior
    assert not np.array_equal(shipped[0], model.get_weights()[0])
    with pytest.raises(ExplorerError, match=r"none\.npz cannot be read .*reach_weights = \"\""):
        _agent(False, f"learner.actions.reach_weights={str(tmp_path / 'none.npz')!r}")


def test_reach_weights_without_the_reach_planner_is_refused():
    with pytest.raises(ConfigError, match="reach_weights = 'mine.npz' names a reach prior"):
        load(None, ["learner.actions.reach_weights='mine.npz'", "learner.actions.plan_candidates=4"])
    assert load(None, []).learner.actions.reach_weights == ""


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


def test_plan_from_policy_samples_that_many_candidates_from_the_policy_and_the_rest_from_the_prior():
    base = load(None, ["learner.actions.plan_candidates=5", "learner.actions.plan_from_policy=2",
                       "learner.actions.plan_score=reach", "learner.schedule.warmup_steps=0",
                       "learner.networks.filters=[8]", "learner.networks.hidden=32", "learner.networks.feature=32",
                       "learner.schedule.replay_mb=8", "observation.stack=1"])
    agent = build_agent(base, FRAME)
    actor, seen = agent.actor, {}
    scores = actor._plan_scores

    def spy(obs, actions, ctx):
        seen["actions"] = actions.numpy()
        return scores(obs, actions, ctx)

    actor._plan_scores = spy
    obs = tf.constant(np.random.default_rng(1).integers(0, 256, (1, *FRAME), dtype=np.uint8))
    rng = copy.deepcopy(actor.rng)
    actor.act(Step(obs, first=True))
    dim = actor.sticks.dim
    rng.normal(size=dim)  # the decision's exploration noise
    draws = np.clip(rng.uniform(-1.0, 1.0, (3, dim)) + actor.sticks.prior, -1.0, 1.0)
    mean, log_std = actor.policy(obs, actor.last_ctx)
    samples = np.tanh(mean + np.exp(log_std) * rng.normal(size=(2, dim)))
    expected = np.stack([settle(actor.sticks(x.astype(np.float32)), actor.sticks.buttons) for x in [*draws, *samples]])
    assert seen["actions"].shape == (6, 5)  # the policy's own, 3 draws of the prior and 2 samples of the policy
    np.testing.assert_allclose(seen["actions"][1:], expected, atol=1e-5)
    with pytest.raises(ConfigError, match="plan_from_policy = 6 samples more"):
        load(None, ["learner.actions.plan_candidates=5", "learner.actions.plan_from_policy=6"])


def test_the_reach_embedding_gives_the_novelty_the_prior_s_picture_features():
    from explorer.agent.novelty import make_novelty
    from explorer.agent.reach import reach_features
    from explorer.config import NoveltyConfig

    n = make_novelty(NoveltyConfig(signal="episodic", embedding="reach", knn=1, exclude_recent=0), FRAME, stack=1)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (2, *FRAME), dtype=np.uint8)
    np.testing.assert_allclose(n.embed(frames).numpy(), reach_features()(frames).numpy(), atol=1e-6)
    first, other = tf.constant(frames[0]), tf.constant(frames[1])
    n.reset(first)
    a = tf.zeros([4])
    assert float(n.reward(first, a, other)) > 0  # the first frame is in memory: another picture is novel
    assert float(n.reward(first, a, other)) < 1e-3  # and the same one again is not
    with pytest.raises(ConfigError, match="novelty.embedding = reach reads 64 x 64 colour frames"):
        load(None, ["novelty.embedding=reach", "observation.grayscale=true"])


def test_replan_below_ends_a_held_decision_the_newer_frame_expects_to_go_nowhere():
    base = load(None, ["learner.actions.plan_candidates=5", "learner.actions.plan_score=reach",
                       "learner.action_repeat=8", "learner.actions.replan_below=0.5", "learner.schedule.warmup_steps=0",
                       "learner.networks.filters=[8]", "learner.networks.hidden=32", "learner.networks.feature=32",
                       "learner.schedule.replay_mb=8", "observation.stack=1"])
    actor = build_agent(base, FRAME).actor
    bounds = []
    record = actor.record

    def spy(step, action, next_step, starts, ends):
        bounds.append((starts, ends))
        return record(step, action, next_step, starts, ends)

    actor.record = spy
    start = Step(tf.constant(np.random.default_rng(1).integers(0, 256, (1, *FRAME), dtype=np.uint8)), first=True)
    action = actor.act(start)
    chosen = actor.held_reach
    same = Step(start.obs)  # the same picture: still as far to go, the hold goes on
    assert float(actor._held_score(same.obs[-1], tf.constant(actor.held[None]))[0]) == pytest.approx(chosen)
    actor.observe(start, action, same)
    assert bounds[-1] == (True, False)
    actor.act(same)
    assert not actor.started and actor.held_steps == 2
    wall = Step(tf.zeros((1, *FRAME), tf.uint8))  # a picture the prior expects to go less than half as far from
    assert float(actor._held_score(wall.obs[-1], tf.constant(actor.held[None]))[0]) < 0.5 * chosen
    actor.observe(same, action, wall)
    assert bounds[-1] == (False, True)  # the decision ends here for learning too
    actor.act(wall)
    assert actor.started and actor.held_steps == 1  # and the next step decides anew


def test_replan_below_without_the_reach_planner_is_refused():
    with pytest.raises(ConfigError, match="replan_below = 0.5 asks the reach prior"):
        load(None, ["learner.actions.replan_below=0.5", "learner.actions.plan_score=model",
                    "learner.actions.plan_candidates=4"])
    with pytest.raises(ConfigError, match="replan_below = 0.5 asks the reach prior"):
        load(None, ["learner.actions.replan_below=0.5"])


@pytest.mark.parametrize("inputs", [3, 4])
def test_a_weights_file_of_either_action_width_loads_as_its_own_model(tmp_path, inputs):
    path = tmp_path / "reach.npz"
    save_reach(build_reach(inputs), path)
    assert load_reach(path)[0].inputs[1].shape[-1] == inputs
    arrays = dict(np.load(path))
    arrays["w10"] = np.zeros((64 + 5, 64), np.float32)  # an action of 5 inputs: no model of this package's
    np.savez(path, **arrays)
    with pytest.raises(ExplorerError, match="array w10"):
        load_reach(path)


def test_the_reach_prior_reads_the_a_button_where_the_pad_sends_it():
    model = build_reach(4)
    reach_a_first, reach_a_second, no_a = Reach(model, ("a",)), Reach(model, ("b", "a")), Reach(model, ())
    frame = np.random.default_rng(0).integers(0, 256, FRAME, dtype=np.uint8)
    moves = np.array([[0.3, 0.0, -0.2, 0.9], [-0.4, 0.0, 0.5, 0.7]], np.float32)
    pressed, released = np.ones((2, 1), np.float32), np.zeros((2, 1), np.float32)
    with_a = model([np.repeat(frame[None], 2, 0), np.c_[moves[:, [0, 2, 3]], pressed]], training=False)[:, 0].numpy()
    without = model([np.repeat(frame[None], 2, 0), np.c_[moves[:, [0, 2, 3]], released]], training=False)[:, 0].numpy()
    assert not np.allclose(with_a, without)  # the button is an input the model reads
    np.testing.assert_allclose(reach_a_first(frame, np.c_[moves, pressed]).numpy(), with_a, atol=1e-6)
    np.testing.assert_allclose(reach_a_second(frame, np.c_[moves, released, pressed]).numpy(), with_a, atol=1e-6)
    np.testing.assert_allclose(no_a(frame, moves).numpy(), without, atol=1e-6)  # a pad without A never presses it


def _scores(model, frame, moves):
    """What one model predicts for each of ``moves`` from ``frame``, the plain way: the frame once per move."""
    return model([np.repeat(frame[None], len(moves), 0), moves], training=False)[:, 0].numpy()


def test_an_ensemble_file_loads_its_models_and_scores_each_draw_by_their_mean(tmp_path):
    models = [build_reach() for _ in range(3)]
    path = tmp_path / "ensemble.npz"
    save_reach(models, path)
    assert sorted(np.load(path).files)[:2] == ["m0_w0", "m0_w1"]
    loaded = load_reach(path)
    assert len(loaded) == 3
    for model, again in zip(models, loaded, strict=True):
        for w, v in zip(model.get_weights(), again.get_weights(), strict=True):
            np.testing.assert_array_equal(w, v)
    frame = np.random.default_rng(0).integers(0, 256, FRAME, dtype=np.uint8)
    sent = np.random.default_rng(1).uniform(-1, 1, (6, 5)).astype(np.float32)
    each = np.stack([_scores(m, frame, sent[:, [0, 2, 3]]) for m in models])
    assert not np.allclose(each[0], each[1])  # models trained (here: drawn) apart differ
    np.testing.assert_allclose(Reach(loaded)(frame, sent).numpy(), each.mean(0), atol=1e-5)
    np.testing.assert_allclose(Reach(models[1])(frame, sent).numpy(), each[1], atol=1e-5)  # one model: its own


@pytest.mark.parametrize("tamper, says", [
    (lambda a: a.pop("m1_w3"), "not the model's"),
    (lambda a: a.update(m2_w0=a["m1_w0"], m2_w1=a["m1_w1"]), "not the model's"),  # a third model, partly
    (lambda a: a.update(w0=a["m0_w0"]), "not the model's"),  # one model's names beside an ensemble's
    (lambda a: a.update(m1_w10=np.zeros((64 + 4, 64), np.float32)), "different widths"),
    (lambda a: a.update(m1_w5=np.full_like(a["m1_w5"], np.inf)), "array m1_w5"),
], ids=["missing", "partial", "mixed-names", "mixed-widths", "inf"])
def test_an_ensemble_file_that_is_not_its_models_arrays_is_refused_in_one_line(tmp_path, tamper, says):
    path = tmp_path / "ensemble.npz"
    save_reach([build_reach(), build_reach()], path)
    _tampered_is_refused(path, dict(np.load(path)), tamper, says)


def test_more_models_than_an_ensemble_holds_are_refused_on_write_and_on_read(tmp_path):
    model = build_reach()
    with pytest.raises(ValueError, match=f"1 to {MAX_MODELS} models"):
        save_reach([model] * (MAX_MODELS + 1), tmp_path / "many.npz")
    weights = model.get_weights()
    np.savez(tmp_path / "many.npz", **{f"m{j}_w{i}": w for j in range(MAX_MODELS + 1) for i, w in enumerate(weights)})
    with pytest.raises(ExplorerError, match="not the model's"):
        load_reach(tmp_path / "many.npz")


def test_an_array_whose_header_claims_more_than_the_file_may_hold_is_refused_before_its_data_is_read(tmp_path):
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (1 << 20, 1 << 10)})
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w") as z:  # a 4 GiB array announced in a few bytes
        z.writestr("w0.npy", header.getvalue() + b"\0" * 64)
    with pytest.raises(ExplorerError, match="not the model's") as err:
        load_reach(path)
    assert "1048576, 1024" in str(err.value)
    header = io.BytesIO()  # dimensions whose product overflows 64 bits
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (1 << 32, 1 << 32)})
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w0.npy", header.getvalue())
    with pytest.raises(ExplorerError, match="past the"):
        load_reach(path)
