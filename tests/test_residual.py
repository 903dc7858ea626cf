"""learner.actions.residual: the actor corrects a proposal drawn as sticky_prior draws, so an untrained policy plays like it."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from pydantic import ValidationError
from test_learner import WalkEnv, make, play

from explorer.agent.context import Context, Proposal
from explorer.agent.networks import corrected
from explorer.config import LearnerConfig

PRIOR = np.array([0.0, 0.0, 0.0, 0.6], np.float32)


def test_a_proposal_is_held_then_redrawn_and_a_second_reset_at_the_same_start_keeps_it():
    ctx = Context(True, horizon=100, action_dim=4, proposal=Proposal(PRIOR, hold=3, seed=5))
    at = ctx.proposal_at
    assert at == 4 + 3 and ctx.dim == 4 + 3 + 4 + 1
    ctx.reset()
    first = ctx.value()
    ctx.reset()  # the actor and the scoring both reset at an episode's first step
    np.testing.assert_array_equal(ctx.value(), first)
    seen = []
    for _ in range(7):
        v = ctx.value()
        seen.append((v[at:at + 4].copy(), v[at + 4]))
        ctx.advance(np.zeros(4, np.float32), 0.0)
    proposals = [p for p, _ in seen]
    for block in ((0, 1, 2), (3, 4, 5)):  # held three steps, each block its own draw
        for t in block:
            np.testing.assert_array_equal(proposals[t], proposals[block[0]])
    assert not np.array_equal(proposals[0], proposals[3]) and not np.array_equal(proposals[3], proposals[6])
    np.testing.assert_allclose([left for _, left in seen], [1, 2 / 3, 1 / 3, 1, 2 / 3, 1 / 3, 1], rtol=1e-6)
    stacked = np.stack(proposals)
    assert np.all(np.abs(stacked) <= 1.0)
    ctx.reset()  # a new episode after steps: a new proposal at once
    assert ctx.value()[at + 4] == 1.0 and not np.array_equal(ctx.value()[at:at + 4], proposals[6])


def test_proposals_come_through_a_checkpoint_and_follow_the_prior():
    ctx = Context(True, horizon=100, action_dim=4, proposal=Proposal(PRIOR, hold=2, seed=1))
    for _ in range(5):
        ctx.value()
        ctx.advance(np.zeros(4, np.float32), 0.0)
    again = Context(True, horizon=100, action_dim=4, proposal=Proposal(PRIOR, hold=2, seed=99))
    again.load(ctx.state())
    for _ in range(6):
        np.testing.assert_array_equal(again.value(), ctx.value())
        again.advance(np.zeros(4, np.float32), 0.0)
        ctx.advance(np.zeros(4, np.float32), 0.0)
    many = Proposal(PRIOR, hold=1, seed=0)
    draws = []
    for _ in range(4000):
        draws.append(many.value()[:4])
        many.advance()
    # uniform in [-1, 1] moved by the prior and clipped: walk y pushed forward, the rest centred
    np.testing.assert_allclose(np.mean(draws, 0), [0, 0, 0, 0.51], atol=0.04)


def test_the_warm_up_plays_the_proposal_and_an_untrained_policy_stays_within_the_residual_of_it():
    agent = make({"learner.actions.residual": 0.3, "learner.schedule.warmup_steps": 20, "learner.actions.option_steps": 4}, episode_steps=200)
    at = agent.context.proposal_at
    seen = []
    original = agent.actor.act

    def act(step):
        action = original(step)
        seen.append((agent.actor.last_ctx[at:at + 4].copy(), action))
        return action

    agent.actor.act = act
    play(agent, WalkEnv(episode_steps=200), 60, train=False)
    for t, (proposal, action) in enumerate(seen):
        if t < 20:  # warm-up: exactly sticky_prior's sticks
            np.testing.assert_array_equal(action, proposal, err_msg=f"step {t}")
        else:  # the policy's squashed output is in (-1, 1): at most 0.3 away on every axis
            assert np.all(np.abs(action - proposal) <= 0.3 + 1e-6), t
    late = np.stack([a - p for p, a in seen[20:]])
    assert np.abs(late).max() > 0.01  # the correction is sent, noise included


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_the_learner_corrects_the_proposal_its_batch_context_carries_and_its_gradients_flow(algo):
    learner = make({"learner.actions.residual": 0.25, "learner.algo": algo}).learner
    at = learner.proposal_at
    batch = learner.dummy_batch()
    ctx = batch["ctx"].numpy()
    ctx[:, at:at + 4] = np.where(np.arange(len(ctx))[:, None] % 2 == 0, 1.0, -1.0)
    sent, _, _ = learner._sample(batch["obs"], tf.constant(ctx), training=False)
    sent = sent.numpy()
    assert np.all(sent[0::2] >= 0.75 - 1e-6) and np.all(sent[1::2] <= -0.75 + 1e-6)
    features = learner.encoder(batch["obs"])
    with tf.GradientTape() as tape:
        loss, _ = learner.actor_loss(batch["obs"], batch["ctx"], features)
    grads = tape.gradient(loss, learner.actor.trainable_variables)
    assert all(g is not None and np.any(g.numpy() != 0) for g in grads)


def test_corrected_by_hand():
    np.testing.assert_allclose(corrected(np.array([0.9, -0.2]), np.array([1.0, -0.5]), 0.5), [1.0, -0.45])
    out = corrected(tf.constant([0.9, -0.2]), tf.constant([1.0, -0.5]), 0.5)
    np.testing.assert_allclose(out.numpy(), [1.0, -0.45])


@pytest.mark.parametrize("other, says", [({"networks": {"context": False}}, "learner.networks.context = true"),
                                         ({"actions": {"plan_candidates": 4}}, "learner.actions.plan_candidates = 0"),
                                         ({"actions": {"random_options": 0.1}}, "learner.actions.random_options = 0")])
def test_a_residual_that_cannot_read_its_proposal_is_refused(other, says):
    with pytest.raises(ValidationError, match=says):
        LearnerConfig.model_validate({**other, "actions": {"residual": 0.5, **other.get("actions", {})}})


def test_a_damaged_proposal_in_a_checkpoint_is_refused():
    agent = make({"learner.actions.residual": 0.5})
    state = agent.actor.state()
    state["context"]["proposal"]["left"] = 10**6
    with pytest.raises(ValueError, match="context.proposal.left"):
        agent.actor.validate_state(state)
    state = agent.actor.state()
    state["context"]["proposal"]["action"] = [0.0, 0.0, 0.0, 7.0]
    with pytest.raises(ValueError, match="proposal"):
        agent.actor.validate_state(state)
    state = agent.actor.state()
    state["context"]["proposal"]["rng"] = {"bit_generator": "MT19937"}
    with pytest.raises(ValueError, match="context.proposal.rng"):
        agent.actor.validate_state(state)

