"""The surrogate learner: TD targets by hand, the gradient path, learning on a tiny game, resume."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from explorer.agent.checkpoint import Checkpointer
from explorer.agent.guard import GradientPathError, check_gradients
from explorer.agent.learner import (
    Learner,
    NonFiniteLossError,
    StickRange,
    build_agent,
    shift_crop,
    squash,
    td_targets,
)
from explorer.config import LearnerConfig, NoveltyConfig

SHAPE = (2, 16, 16, 1)  # k, H, W, C
# No action prior and the whole pad: the learning test must find "walk forward" by itself.
SMALL = dict(filters=(8, 8), feature=32, hidden=64, batch_size=32, warmup_steps=100, update_every=1,
             replay_mb=8.0, seed=3, action_prior=(0.0, 0.0, 0.0, 0.0),
             action_low=(-1.0, -1.0, -1.0, -1.0), action_high=(1.0, 1.0, 1.0, 1.0))


class WalkGame:
    """A tiny game whose picture changes only while walk y is pushed forward (> 0.2)."""

    def __init__(self, episode_steps: int = 50):
        self.episode_steps = episode_steps
        self.place = 0
        self.t = 0

    def frame(self) -> np.ndarray:
        return np.random.default_rng(self.place).integers(0, 256, SHAPE[1:], dtype=np.uint8)

    def step(self, action: np.ndarray) -> bool:
        if action[3] > 0.2:
            self.place += 1
        self.t += 1
        return self.t % self.episode_steps == 0


def play(agent, game: WalkGame, steps: int, frames=None, recorded=None, rewards=None) -> tuple[list, list[np.ndarray]]:
    """Step ``agent`` through ``game``: its own actions, or the ``recorded`` ones; novelty goes into ``rewards``."""
    frames = frames if frames is not None else [game.frame()] * SHAPE[0]
    first, actions = True, []
    for i in range(steps):
        obs = np.stack(frames[-SHAPE[0]:])
        action = agent.act(obs) if recorded is None else np.asarray(recorded[i], np.float32)
        actions.append(action)
        last = game.step(action)
        frames = [*frames[-SHAPE[0] + 1:], game.frame()]
        metrics = agent.observe(obs, action, np.stack(frames), first, last)
        if rewards is not None:
            rewards.append(metrics["novelty"])
        first = last
        if last:
            frames = [game.frame()] * SHAPE[0]
    return frames, actions


def test_td_targets_by_hand():
    y = td_targets(tf.constant([1.0, 2.0]), tf.constant([0.9, 0.0]), tf.constant([10.0, 10.0]),
                   tf.constant([-1.0, -1.0]), alpha=0.5)
    np.testing.assert_allclose(y.numpy(), [1 + 0.9 * (10 + 0.5), 2.0], rtol=1e-6)
    y = td_targets(tf.constant([1.0]), tf.constant([0.5]), tf.constant([4.0]))
    np.testing.assert_allclose(y.numpy(), [3.0])


def test_squash_log_prob_by_hand():
    a, logp = squash(tf.zeros([1, 4]), tf.zeros([1, 4]), tf.zeros([1, 4]))
    np.testing.assert_allclose(a.numpy(), 0.0)
    np.testing.assert_allclose(logp.numpy(), np.full([1, 4], -0.5 * np.log(2 * np.pi)), rtol=1e-5)


def test_shift_crop_by_hand():
    x = tf.reshape(tf.range(16), [1, 4, 4, 1])
    same = shift_crop(x, 1, tf.constant([[1], [1]]))  # offset == pad: the picture stays where it was
    np.testing.assert_array_equal(same.numpy(), x.numpy())
    moved = shift_crop(x, 1, tf.constant([[0], [2]]))[0, :, :, 0].numpy()
    # one row down (the top row mirrored in), one column left (the right column mirrored in)
    np.testing.assert_array_equal(moved, [[1, 2, 3, 3], [1, 2, 3, 3], [5, 6, 7, 7], [9, 10, 11, 11]])


def test_n_step_returns_in_replay():
    agent = build_agent(LearnerConfig(**{**SMALL, "warmup_steps": 10_000, "gamma": 0.5, "n_step": 2}),
                        NoveltyConfig(), SHAPE, episode_steps=4)
    rewards: list[float] = []
    play(agent, WalkGame(episode_steps=4), 4, recorded=[[0, 0, 0, 1]] * 4, rewards=rewards)
    r = agent.replay
    assert r.written == 4
    np.testing.assert_allclose(r.reward[:4], [rewards[0] + 0.5 * rewards[1], rewards[1] + 0.5 * rewards[2],
                                              rewards[2] + 0.5 * rewards[3], rewards[3]], rtol=1e-5)
    np.testing.assert_allclose(r.discount[:4], [0.25, 0.25, 0.0, 0.0])
    # next observation of transition 0 is two frames on
    np.testing.assert_array_equal(r.next_ids[0], r.obs_ids[2])


def test_action_repeat_holds_each_decision_and_replays_it_as_one_transition():
    config = LearnerConfig(**{**SMALL, "warmup_steps": 10_000, "gamma": 0.5, "n_step": 1, "action_repeat": 3})
    agent = build_agent(config, NoveltyConfig(), SHAPE, episode_steps=7)
    game = WalkGame(episode_steps=7)
    rewards: list[float] = []
    _, actions = play(agent, game, 7, rewards=rewards)
    # decisions at steps 0, 3 and 6 (the episode's end cuts the third short)
    for start, end in ((0, 3), (3, 6)):
        for t in range(start, end):
            np.testing.assert_array_equal(actions[t], actions[start])
    assert not np.array_equal(actions[0], actions[3]) and not np.array_equal(actions[3], actions[6])
    r = agent.replay
    assert r.written == 3
    np.testing.assert_allclose(r.reward[:3], [rewards[0] + 0.5 * rewards[1] + 0.25 * rewards[2],
                                              rewards[3] + 0.5 * rewards[4] + 0.25 * rewards[5], rewards[6]], rtol=1e-5)
    np.testing.assert_allclose(r.discount[:3], [0.125, 0.125, 0.0])
    np.testing.assert_array_equal(r.action[:3], [actions[0], actions[3], actions[6]])
    # a decision's next observation is where the next decision starts
    np.testing.assert_array_equal(r.next_ids[0], r.obs_ids[1])
    np.testing.assert_array_equal(r.next_ids[1], r.obs_ids[2])
    # the next episode decides at its first step
    obs = np.stack([game.frame()] * 2)
    assert not np.array_equal(agent.act(obs), actions[6])


def test_recorded_actions_that_change_every_step_stay_one_step_transitions():
    config = LearnerConfig(**{**SMALL, "warmup_steps": 10_000, "gamma": 0.5, "n_step": 2, "action_repeat": 4})
    agent = build_agent(config, NoveltyConfig(), SHAPE, episode_steps=3)
    recorded = [[0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 1, 0]]  # a held decision of two steps, then another
    rewards: list[float] = []
    play(agent, WalkGame(episode_steps=3), 3, recorded=recorded, rewards=rewards)
    r = agent.replay
    assert r.written == 2
    np.testing.assert_allclose(r.reward[:2], [rewards[0] + 0.5 * rewards[1] + 0.25 * rewards[2], rewards[2]], rtol=1e-5)
    np.testing.assert_allclose(r.discount[:2], [0.0, 0.0])
    np.testing.assert_array_equal(r.action[:2], [recorded[0], recorded[2]])


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_every_policy_variable_gets_a_finite_nonzero_gradient(algo):
    learner = build_agent(LearnerConfig(**SMALL, algo=algo), NoveltyConfig(), SHAPE).learner
    batch = learner.dummy_batch()
    features = learner.encoder(batch["obs"])
    variables = learner.actor.trainable_variables
    with tf.GradientTape() as tape:
        loss, _ = learner.actor_loss(batch["obs"], batch["ctx"], features)
    grads = tape.gradient(loss, variables)
    assert len(variables) >= 8
    for v, g in zip(variables, grads, strict=True):
        assert g is not None, v.path
        assert np.all(np.isfinite(g.numpy())) and np.any(g.numpy() != 0), v.path
    assert check_gradients(lambda: learner.actor_loss(batch["obs"], batch["ctx"], features)[0], variables).ok


def test_shared_encoder_actor_head_gets_gradients_and_the_encoder_learns_from_the_critic():
    learner = build_agent(LearnerConfig(**SMALL, shared_encoder=True, augment=2), NoveltyConfig(), SHAPE).learner
    batch = learner.dummy_batch()
    features = learner.encoder(batch["obs"])
    head = learner.actor.trainable_variables
    assert not {id(v) for v in head} & {id(v) for v in learner.encoder.trainable_variables}
    assert check_gradients(lambda: learner.actor_loss(batch["obs"], batch["ctx"], features)[0], head).ok
    assert check_gradients(lambda: learner.critic_loss(batch)[0], learner.encoder.trainable_variables).ok
    # the acting policy is the critic's encoder followed by the head
    before = learner.policy(batch["obs"][:1], batch["ctx"][:1])[0]
    conv = learner.encoder.get_layer("critic_encoder_conv0")
    conv.kernel.assign_add(tf.ones_like(conv.kernel))
    assert not np.allclose(before, learner.policy(batch["obs"][:1], batch["ctx"][:1])[0])


def test_nan_loss_is_a_clear_error():
    learner = build_agent(LearnerConfig(**SMALL), NoveltyConfig(), SHAPE).learner
    batch = {k: v.numpy() for k, v in learner.dummy_batch().items()}
    batch["reward"][0] = np.nan
    with pytest.raises(NonFiniteLossError, match="critic loss is NaN/Inf"):
        learner.train(batch)


def test_learner_refuses_a_broken_path():
    class ArgmaxLearner(Learner):
        def actor_loss(self, obs, ctx, features):
            a, _, _ = self._sample(obs, ctx, training=True)
            hard = tf.one_hot(tf.argmax(a, -1), 4)  # a discretised action inside the loss
            q = tf.reduce_min(self.heads([features, hard, ctx]), -1)
            return -tf.reduce_mean(q), {}

    agent = build_agent(LearnerConfig(**SMALL), NoveltyConfig(), SHAPE)
    with pytest.raises(GradientPathError, match="actor loss(.|\n)*actor_encoder_conv0/kernel(.|\n)*argmax"):
        ArgmaxLearner(LearnerConfig(**SMALL), agent.novelty, (16, 16, 2), agent.ctx_dim)


@pytest.mark.parametrize("variant", [{}, {"shared_encoder": True, "augment": 2}])
def test_learns_to_push_the_stick_that_changes_the_picture(variant):
    agent = build_agent(LearnerConfig(**SMALL, **variant), NoveltyConfig(embedding="pooled", knn=1, exclude_recent=0),
                        SHAPE, episode_steps=50)
    _, actions = play(agent, WalkGame(), 500)
    late = np.array(actions[-100:])
    assert np.mean(late[:, 3] > 0.2) > 0.8, np.mean(late, 0)
    early = np.array(actions[:100])
    assert np.mean(early[:, 3] > 0.2) < 0.5


@pytest.mark.parametrize("repeat", [1, 3])
def test_resume_gives_the_same_next_action(tmp_path, repeat):
    config = LearnerConfig(**{**SMALL, "warmup_steps": 50, "action_repeat": repeat})
    agent = build_agent(config, NoveltyConfig(), SHAPE, episode_steps=50)
    game = WalkGame()
    frames, _ = play(agent, game, 122)  # with repeat 3: one step into a held decision (episodes restart at 100)
    Checkpointer(agent, tmp_path / "checkpoints").save(agent.steps)
    place, t = game.place, game.t
    _, after = play(agent, game, 5, frames)

    resumed = build_agent(config, NoveltyConfig(), SHAPE, episode_steps=50)
    Checkpointer(resumed, tmp_path / "checkpoints").restore()
    game2 = WalkGame()
    game2.place, game2.t = place, t
    _, after2 = play(resumed, game2, 5, frames)
    np.testing.assert_allclose(after2[0], after[0], atol=1e-6)
    np.testing.assert_allclose(np.array(after2), np.array(after), atol=1e-4)


def test_action_prior_centres_the_warm_up_sticks_and_the_untrained_policy():
    prior = (0.0, -0.3, 0.0, 0.6)
    agent = build_agent(LearnerConfig(**{**SMALL, "warmup_steps": 2000, "action_prior": prior}), NoveltyConfig(), SHAPE)
    obs = np.zeros(SHAPE, np.uint8)
    warm = np.array([agent.act(obs) for _ in range(2000)])
    np.testing.assert_allclose(warm.mean(0), prior, atol=0.15)
    ctx = agent.context(np.zeros(4, np.float32), 0)
    mean, _ = agent.learner.policy(tf.constant(agent._stack(obs)[None]), tf.constant(ctx[None]))
    np.testing.assert_allclose(np.tanh(mean), prior, atol=0.02)  # the actor's outputs start near zero
    plain = build_agent(LearnerConfig(**SMALL), NoveltyConfig(), SHAPE)
    mean0, _ = plain.learner.policy(tf.constant(agent._stack(obs)[None]), tf.constant(ctx[None]))
    np.testing.assert_allclose(mean - mean0, np.arctanh(prior), atol=1e-5)


def test_stick_range_maps_the_policy_and_the_prior_onto_it():
    """walk y in [0, 1] (never backwards) and camera x in [-0.5, 0.5], prior walk y 0.75 (squashed: 0.5)."""
    rng = dict(action_low=(-0.5, -1.0, -1.0, 0.0), action_high=(0.5, 1.0, 1.0, 1.0), action_prior=(0.0, 0.0, 0.0, 0.75))
    sticks = StickRange(LearnerConfig(**{**SMALL, **rng}))
    np.testing.assert_allclose(sticks.prior, [0.0, 0.0, 0.0, 0.5], atol=1e-7)
    np.testing.assert_allclose(sticks(np.array([-1.0, -1.0, 0.0, -1.0])), [-0.5, -1.0, 0.0, 0.0], atol=1e-7)
    np.testing.assert_allclose(sticks(tf.constant([1.0, 0.5, 1.0, 0.0])).numpy(), [0.5, 0.5, 1.0, 0.5], atol=1e-7)
    full = np.array([0.3, -0.7, 0.9, 0.1], np.float32)
    assert StickRange(LearnerConfig(**SMALL))(full) is full  # the full range changes nothing

    agent = build_agent(LearnerConfig(**{**SMALL, **rng, "warmup_steps": 300}), NoveltyConfig(), SHAPE)
    obs = np.zeros(SHAPE, np.uint8)
    acted = np.array([agent.act(obs) for _ in range(300)])  # warm-up sticks
    agent.steps = 300
    acted = np.concatenate([acted, [agent.act(obs) for _ in range(300)]])  # the policy's, noise included
    low, high = np.array(rng["action_low"]), np.array(rng["action_high"])
    assert np.all(acted >= low - 1e-6) and np.all(acted <= high + 1e-6)
    assert acted[:, 3].min() < 0.1 and acted[:, 3].max() > 0.9  # the range is used, not just respected
    ctx = agent.context(np.zeros(4, np.float32), 0)
    mean, _ = agent.learner.policy(tf.constant(agent._stack(obs)[None]), tf.constant(ctx[None]))
    np.testing.assert_allclose(sticks(np.tanh(mean))[3], 0.75, atol=0.02)  # starts at the prior
    # the actor loss and the TD targets see the same stick values the pad gets
    batch = agent.learner.dummy_batch()
    a, _, _ = agent.learner._sample(batch["obs"], batch["ctx"], training=False)
    assert np.all(a.numpy() >= low - 1e-6) and np.all(a.numpy() <= high + 1e-6)
