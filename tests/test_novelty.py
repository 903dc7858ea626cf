"""Novelty math by hand, and the signals' behaviour on frames."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from explorer.agent.novelty import (
    colour_histogram,
    ema_update,
    knn_distance,
    make_novelty,
    pixel_difference,
    running_quantile,
)
from explorer.config import NoveltyConfig

MEMORY = tf.constant([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0], [99.0, 99.0]])


def test_knn_distance_by_hand():
    # distances from the origin: 0, 5, 10 (row 3 not yet written)
    d = knn_distance(tf.constant([0.0, 0.0]), MEMORY, tf.constant(3), k=2)
    assert float(d) == pytest.approx((0 + 5) / 2, abs=1e-3)
    d = knn_distance(tf.constant([3.0, 4.0]), MEMORY, tf.constant(3), k=3)
    assert float(d) == pytest.approx((0 + 5 + 5) / 3, abs=1e-3)


def test_knn_distance_uses_only_valid_rows_and_fewer_than_k():
    assert float(knn_distance(tf.constant([0.0, 0.0]), MEMORY, tf.constant(2), k=10)) == pytest.approx(2.5, abs=1e-3)
    assert float(knn_distance(tf.constant([0.0, 0.0]), MEMORY, tf.constant(0), k=3)) == -1.0
    # a ring that wrapped: every row is valid
    d = knn_distance(tf.constant([99.0, 99.0]), MEMORY, tf.constant(9), k=1)
    assert float(d) == pytest.approx(0.0, abs=1e-3)


def test_knn_distance_excludes_the_newest_entries():
    # count 3, exclude 1: entry 2 ([6, 8]) is too recent; nearest of [0,0], [3,4] to [6,8] is 5
    d = knn_distance(tf.constant([6.0, 8.0]), MEMORY, tf.constant(3), k=1, exclude=1)
    assert float(d) == pytest.approx(5.0, abs=1e-3)
    # a wrapped ring: count 6 over 4 slots holds entries 4, 5, 2, 3 in slots 0..3;
    # exclude 2 drops entries 5 and 4 (slots 1 and 0), leaving slots 2, 3
    d = knn_distance(tf.constant([0.0, 0.0]), MEMORY, tf.constant(6), k=2, exclude=2)
    assert float(d) == pytest.approx((10.0 + np.hypot(99, 99)) / 2, abs=1e-2)
    assert float(knn_distance(tf.constant([0.0, 0.0]), MEMORY, tf.constant(2), k=1, exclude=2)) == -1.0


def test_running_quantile_by_hand():
    ring = tf.constant([5.0, 1.0, 3.0, 0.0])
    # only the first 3 entries are written: sorted 1, 3, 5
    assert float(running_quantile(ring, tf.constant(3), 0.5)) == 3.0
    assert float(running_quantile(ring, tf.constant(3), 0.9)) == 3.0  # lower value, no interpolation
    assert float(running_quantile(ring, tf.constant(7), 0.99)) == 3.0  # wrapped: 0, 1, 3, 5 -> index 2
    assert float(running_quantile(ring, tf.constant(0), 0.5)) == 0.0


def test_new_place_rewards_only_a_new_place_once():
    config = NoveltyConfig(embedding="random", episodic_reward="new_place", place_quantile=0.5)
    signal = make_novelty(config, (8, 8, 1), 1)
    rng = np.random.default_rng(0)
    start, elsewhere = (tf.constant(rng.integers(0, 256, (8, 8, 1), dtype=np.uint8)) for _ in range(2))
    signal.reset(start)
    zero = tf.zeros(4)
    # standing still (the same picture) never earns after the start; the first view of another place earns 1, once
    rewards = [float(signal.reward(start, zero, f)) for f in (start, start, start, elsewhere, elsewhere, start)]
    assert rewards[1:] == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert int(signal.count.numpy()) == 2 + (rewards[0] == 1.0)  # the start, the new place (and the first step)
    signal.reset(start)  # a new episode forgets its places
    assert int(signal.count.numpy()) == 1
    assert float(signal.reward(start, zero, elsewhere)) == 1.0


def test_pixel_difference_by_hand():
    frame = tf.fill([2, 2, 1], tf.constant(10, tf.uint8))
    recent = tf.stack([tf.zeros([2, 2, 1], tf.uint8), tf.fill([2, 2, 1], tf.constant(20, tf.uint8))])
    assert float(pixel_difference(frame, recent)) == pytest.approx(10 / 255)


def test_ema_update_by_hand():
    mean, var = ema_update(tf.constant(0.0), tf.constant(0.0), tf.constant(4.0), 0.5, tf.constant(True))
    assert (float(mean), float(var)) == (4.0, 0.0)
    mean, var = ema_update(tf.constant(4.0), tf.constant(0.0), tf.constant(8.0), 0.5, tf.constant(False))
    assert float(mean) == pytest.approx(6.0)
    assert float(var) == pytest.approx(0.5 * 16.0)


def test_episodic_ignores_recent_frames_until_old_enough():
    n = make_novelty(NoveltyConfig(signal="episodic", knn=1, exclude_recent=2), (16, 16, 1), stack=2)
    a = tf.zeros([4])
    n.reset(_obs(0))  # entry 0
    assert float(n.reward(_obs(0), a, _obs(1))) == 1.0  # nothing old enough: "as new as usual"
    assert float(n.reward(_obs(1), a, _obs(1))) == 1.0  # entry 1 is too recent to count
    first_real = float(n.reward(_obs(1), a, _obs(0)))  # back to entry 0's frame, now old enough
    assert first_real == pytest.approx(1.0, rel=1e-3)  # defines the running mean
    assert float(n.mean) < 0.01  # ... and the distance was ~0


def test_raw_is_the_score_before_normalising_and_zero_with_nothing_to_compare():
    n = make_novelty(NoveltyConfig(signal="episodic", knn=1, exclude_recent=0), (16, 16, 1), stack=2)
    a = tf.zeros([4])
    n.reset(_obs(0))
    for i in (1, 2, 2, 3):
        reward = float(n.reward(_obs(i - 1), a, _obs(i)))
        # the normalised reward is the raw distance over the running mean (as updated by this step)
        assert float(n.raw) == pytest.approx(reward * float(n.mean), rel=1e-4, abs=1e-6)
    assert float(n.raw) > 0
    n.reward(_obs(3), a, _obs(3))  # a frame the episode holds: distance 0
    assert float(n.raw) < 1e-3
    late = make_novelty(NoveltyConfig(signal="episodic", knn=1, exclude_recent=5), (16, 16, 1), stack=2)
    late.reset(_obs(0))
    assert float(late.reward(_obs(0), a, _obs(1))) == 1.0 and float(late.raw) == 0.0  # nothing old enough


def test_colour_histogram_by_hand():
    # 2 bins per channel: a pixel's bin is 4*[r>=128] + 2*[g>=128] + [b>=128]
    frame = np.array([[[0, 0, 0], [255, 0, 0]], [[200, 127, 0], [0, 0, 128]]], np.uint8)
    h = colour_histogram(frame, 2).numpy()
    want = np.zeros(8)
    want[[0, 4, 1]] = np.sqrt([0.25, 0.5, 0.25])
    np.testing.assert_allclose(h, want, atol=1e-6)
    # a batch gives one histogram per frame; a grey frame has bins**1 entries
    assert colour_histogram(np.stack([frame] * 3), 2).shape == (3, 8)
    np.testing.assert_allclose(colour_histogram(np.array([[[0], [255]], [[255], [90]]], np.uint8), 3).numpy(),
                               np.sqrt([0.25, 0.25, 0.5]), atol=1e-6)


def test_histogram_embedding_ignores_where_colours_sit_but_sees_new_colours():
    n = make_novelty(NoveltyConfig(signal="episodic", embedding="histogram", histogram_bins=4, knn=1, exclude_recent=0),
                     (8, 8, 3), stack=1)
    rng = np.random.default_rng(0)
    room = np.zeros((8, 8, 3), np.uint8)
    room[:, :4] = [200, 20, 20]  # a red wall on the left, a brown floor on the right
    room[:, 4:] = [120, 80, 40]
    a = tf.zeros([4])
    n.reset(tf.constant(room))
    assert float(n.reward(tf.constant(room), a, tf.constant(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)))) == 1.0
    turned = np.roll(room, 3, axis=1)  # the same room seen after turning: colours moved across the picture
    assert float(n.reward(tf.constant(room), a, tf.constant(turned))) < 1e-3
    other = room.copy()
    other[:, :4] = [20, 20, 200]  # a room with a blue wall
    assert float(n.reward(tf.constant(room), a, tf.constant(other))) > 0.3


def _obs(seed: int, shape=(16, 16, 2)) -> tf.Tensor:
    return tf.constant(np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8))


@pytest.mark.parametrize("embedding", ["pooled", "random"])
def test_episodic_repeated_frame_is_not_novel_new_frame_is(embedding):
    n = make_novelty(NoveltyConfig(signal="episodic", embedding=embedding, knn=1, exclude_recent=0), (16, 16, 1), stack=2)
    a = tf.zeros([4])
    first = _obs(0)
    n.reset(first)
    r_new = float(n.reward(first, a, _obs(1)))
    r_same = float(n.reward(first, a, _obs(1)))
    assert r_new == pytest.approx(1.0)  # the first raw value defines the running mean
    assert r_same < 0.01 * r_new
    n.reset(first)  # a new episode forgets the old one
    assert float(n.reward(first, a, _obs(1))) > 0.5


@pytest.mark.parametrize("signal", ["rnd", "forward", "pixel"])
def test_signals_reward_and_train(signal):
    n = make_novelty(NoveltyConfig(signal=signal), (16, 16, 1), stack=2)
    n.reset(_obs(0))
    r = float(n.reward(_obs(0), tf.zeros([4]), _obs(1)))
    assert np.isfinite(r) and r > 0
    batch = tf.stack([_obs(i) for i in range(4)])
    metrics = n.train(batch, tf.zeros([4, 4]), tf.stack([_obs(i + 4) for i in range(4)]))
    assert (signal == "pixel") == (not metrics)
    for v in metrics.values():
        assert np.isfinite(float(v))


def test_pixel_signal_sees_change_only():
    n = make_novelty(NoveltyConfig(signal="pixel"), (16, 16, 1), stack=2)
    n.reset(_obs(0))
    n.reward(_obs(0), tf.zeros([4]), _obs(1))  # sets the running mean
    still = float(n.reward(_obs(1), tf.zeros([4]), _obs(1)))
    assert still < float(n.reward(_obs(1), tf.zeros([4]), _obs(2)))


def test_inverse_embedding_learns_from_actions():
    n = make_novelty(NoveltyConfig(signal="episodic", embedding="inverse", learning_rate=1e-3), (16, 16, 1), stack=2)
    obs = tf.stack([_obs(i) for i in range(8)])
    nxt = tf.stack([_obs(i + 8) for i in range(8)])
    actions = tf.constant(np.random.default_rng(0).uniform(-1, 1, [8, 4]), tf.float32)
    before = n.embed(n.newest(obs)).numpy()
    losses = [float(n.train(obs, actions, nxt)["inverse_loss"]) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]
    assert not np.allclose(before, n.embed(n.newest(obs)).numpy())


def test_temporal_embedding_pulls_successors_together():
    n = make_novelty(NoveltyConfig(signal="episodic", embedding="temporal", learning_rate=1e-3), (16, 16, 1), stack=2)
    obs = tf.stack([_obs(i) for i in range(8)])
    nxt = tf.stack([_obs(i + 100) for i in range(8)])  # "a few steps later" pairs
    losses = [float(n.train(obs, tf.zeros([8, 4]), nxt)["temporal_loss"]) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]
    e = tf.math.l2_normalize(n.embed(n.newest(obs)), -1)
    f = tf.math.l2_normalize(n.embed(n.newest(nxt)), -1)
    sim = tf.matmul(e, f, transpose_b=True).numpy()
    assert np.mean(np.diag(sim)) > np.mean(sim[~np.eye(8, dtype=bool)]) + 0.2


def test_lifelong_factor_falls_on_what_was_trained_on_and_stays_in_its_range():
    config = NoveltyConfig(signal="episodic", embedding="random", knn=1, exclude_recent=0, lifelong="rnd",
                           lifelong_max=3.0, lifelong_decay=0.9, learning_rate=3e-3)
    n = make_novelty(config, (16, 16, 1), stack=2)
    assert n.lifelong is not None and n.lifelong.rnd.predictor in n.learned()
    seen = tf.stack([_obs(i) for i in range(8)])
    losses = [float(n.train(seen, tf.zeros([8, 4]), seen)["lifelong_loss"]) for _ in range(60)]
    assert losses[-1] < 0.3 * losses[0]
    errors = n.lifelong.rnd.errors(n.newest(seen)).numpy()
    unseen = n.lifelong.rnd.errors(n.newest(tf.stack([_obs(i + 50) for i in range(8)]))).numpy()
    assert unseen.mean() > 3 * errors.mean()  # new frames are predicted worse than the ones trained on
    factors = []
    for i in range(8):  # the running statistics learn what seen frames score
        factors.append(float(n.lifelong.factor(n.newest(seen[i]))))
    new = float(n.lifelong.factor(n.newest(_obs(99))))
    assert factors[0] == 1.0  # the first frame starts the statistics
    assert all(1.0 <= f <= 3.0 for f in factors) and new == pytest.approx(3.0)  # clipped at lifelong_max


def test_lifelong_multiplies_the_episodic_reward():
    plain = make_novelty(NoveltyConfig(signal="episodic", embedding="random", knn=1, exclude_recent=0), (16, 16, 1), stack=2)
    both = make_novelty(NoveltyConfig(signal="episodic", embedding="random", knn=1, exclude_recent=0, lifelong="rnd",
                                      lifelong_decay=0.5), (16, 16, 1), stack=2)
    a = tf.zeros([4])
    for n in (plain, both):
        n.reset(_obs(0))
    rewards = [(float(plain.reward(_obs(i), a, _obs(i + 1))), float(both.reward(_obs(i), a, _obs(i + 1)))) for i in range(12)]
    assert all(b >= p * (1 - 1e-5) and b <= p * 5.0 * (1 + 1e-5) for p, b in rewards)
    assert any(b > p * 1.01 for p, b in rewards)  # the factor is not always 1
    assert "lifelong_predictor" in both.checkpoint_items() and "lifelong_predictor" not in plain.checkpoint_items()


def test_oracle_rewards_a_new_cell_once_per_episode_and_needs_a_position():
    from types import SimpleNamespace

    from explorer.agent.novelty import ORACLE_DECAY, OracleNovelty
    from explorer.core import ExplorerError

    n = make_novelty(NoveltyConfig(signal="oracle", oracle_cell=64.0), (16, 16, 1), stack=2)
    assert isinstance(n, OracleNovelty)
    at = lambda x, y: {"position": SimpleNamespace(x=x, y=y, angle=0.0)}  # noqa: E731
    n.reset(_obs(0))
    assert n.score(_obs(0), np.zeros(4), _obs(1), at(10.0, 10.0)) == pytest.approx(1.0)  # the rate starts at 1
    assert n.score(_obs(1), np.zeros(4), _obs(2), at(60.0, 5.0)) == 0.0  # the same 64-unit cell
    assert float(n.raw) == 0.0
    rate = ORACLE_DECAY * 1.0 * ORACLE_DECAY + (1 - ORACLE_DECAY)  # after a 0, then a 1
    assert n.score(_obs(2), np.zeros(4), _obs(3), at(70.0, 5.0)) == pytest.approx(1.0 / rate)  # the next cell
    assert float(n.raw) == 1.0  # a new cell, before the rate divides it
    assert n.score(_obs(3), np.zeros(4), _obs(4), at(-1.0, 5.0)) > 0  # x = -1 is cell -1, not 0
    n.reset(_obs(0))  # a new episode: the first cell is new again
    assert n.score(_obs(0), np.zeros(4), _obs(1), at(10.0, 10.0)) > 0
    with pytest.raises(ExplorerError, match="does not report"):
        n.score(_obs(0), np.zeros(4), _obs(1), {})


def test_knn_distances_are_knn_distance_row_by_row():
    from explorer.agent.novelty import knn_distances

    rng = np.random.default_rng(0)
    memory = tf.constant(rng.normal(size=(6, 3)), tf.float32)
    queries = tf.constant(rng.normal(size=(4, 3)), tf.float32)
    for count, k, exclude in ((9, 2, 1), (3, 5, 0), (2, 1, 2)):
        got = knn_distances(queries, memory, tf.constant(count), k, exclude).numpy()
        want = [float(knn_distance(q, memory, tf.constant(count), k, exclude)) for q in queries]
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_replay_gives_the_frame_one_decision_on_for_the_planner():
    from explorer.agent.replay import Replay

    replay = Replay((2, 2, 1), 2, 1, 1.0, seed=0, after=3)
    ids = [replay.push_frame(np.full((2, 2, 1), i, np.uint8)) for i in range(10)]
    replay.add(np.array(ids[0:2]), np.zeros(4), 0.0, 1.0, np.array(ids[6:8]), np.zeros(1), np.zeros(1))  # 3 on: id 4
    replay.add(np.array(ids[4:6]), np.zeros(4), 0.0, 0.0, np.array(ids[5:7]), np.zeros(1), np.zeros(1))  # episode ends at 6
    batch = replay.sample(16)
    newest = batch["obs"][:, 0, 0, -1]
    want = np.where(newest == 1, 4, 6)
    np.testing.assert_array_equal(batch["after"][:, 0, 0, 0], want)


def _turning(window: float, turn_rate: float = 180.0):
    return make_novelty(NoveltyConfig(signal="episodic", embedding="random", knn=1, exclude_recent=0, heading_window=window),
                        (16, 16, 1), stack=2, turn_rate=turn_rate)


def _turn(camera_x: float) -> tf.Tensor:
    return tf.constant([camera_x, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("window", [30.0, 0.0])
def test_heading_window_compares_a_frame_only_with_frames_seen_facing_its_way(window):
    n = _turning(window)
    n.reset(_obs(0))  # frame 0, facing 0 degrees
    n.reward(_obs(0), _turn(0.0), _obs(1))  # frame 1, still facing 0: the running mean
    back = float(n.reward(_obs(1), _turn(1.0), _obs(0)))  # frame 0 again, turned to face 180 degrees
    if window:
        assert back == 1.0  # nothing was seen facing 180 yet: "as new as usual", not "seen"
        assert float(n.reward(_obs(0), _turn(1.0), _obs(0))) < 1e-3  # facing 0 again: frame 0 was seen so
    else:
        assert back < 1e-3  # every frame counts: the same picture, seen before


def test_heading_wraps_and_restarts_with_each_episode():
    n = _turning(30.0, turn_rate=100.0)
    n.reset(_obs(0))
    n.reward(_obs(0), _turn(0.0), _obs(1))  # the running mean
    for _ in range(4):  # 400 degrees: facing 40, and nothing seen within 30 degrees of 100, 200, 300 or 40
        assert float(n.reward(_obs(0), _turn(1.0), _obs(1))) == 1.0
    assert float(n.heading) == pytest.approx(40.0)
    assert float(n.reward(_obs(1), _turn(-0.3), _obs(0))) < 1e-3  # 10 degrees: within the window of frame 0's 0
    n.reset(_obs(2))
    assert float(n.heading) == 0.0 and int(n.count) == 1 and float(n.facing[0]) == 0.0


def test_heading_window_needs_a_turn_rate_and_is_checkpointed_with_the_memory():
    unknown = make_novelty(NoveltyConfig(signal="episodic", heading_window=30.0), (16, 16, 1), stack=2)
    assert unknown.facing is None and "facing" not in unknown.checkpoint_items()  # no turn rate: every frame counts
    off = _turning(0.0)
    assert off.facing is None and "facing" not in off.checkpoint_items()
    on = _turning(30.0)
    assert {"facing", "heading"} <= set(on.checkpoint_items())


def test_turn_rate_is_the_games_own_unless_set():
    from explorer.config import load
    from explorer.run.builder import turn_rate
    assert turn_rate(load(None, [])) == 40.0  # game.turn_scale 10 degrees per tic x game.frame_skip 4 tics
    assert turn_rate(load(None, ["game.turn_scale=5", "game.frame_skip=2"])) == 10.0
    assert turn_rate(load(None, ["novelty.turn_rate=12.5"])) == 12.5  # a live game's, measured by its user
    gym = ["game.name=gym", 'game.id="MiniGrid-Empty-5x5-v0"']
    assert turn_rate(load(None, gym)) == 0.0  # discrete actions: no view to turn
