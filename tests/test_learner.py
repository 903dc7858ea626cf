"""The learning agent: TD targets by hand, the gradient path, the adder, learning on a tiny game, resume."""

from __future__ import annotations

import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from explorer.agent.guard import GradientPathError, check_gradients
from explorer.agent.learner import Learner, NonFiniteLossError, shift_crop, squash, td_targets
from explorer.agent.networks import StickRange
from explorer.agent.schedule import UpdateSchedule
from explorer.agent.trainer import InlineTrainer
from explorer.config import Config, LearnerConfig, NoveltyConfig
from explorer.core import Step, stack_frames
from explorer.envs.ring import FrameRing
from explorer.run.builder import build_agent
from explorer.run.driver import Driver
from explorer.run.observers import Training

SHAPE = (2, 16, 16, 1)  # k, H, W, C
# No action prior and the whole pad: the learning test must find "walk forward" by itself.
SMALL = {"learner.networks.filters": (8, 8), "learner.networks.feature": 32, "learner.networks.hidden": 64, "learner.schedule.batch_size": 32,
         "learner.schedule.warmup_steps": 100, "learner.schedule.update_every": 1, "learner.schedule.replay_mb": 8.0, "learner.seed": 3,
         "learner.actions.action_prior": (0.0, 0.0, 0.0, 0.0), "learner.actions.action_low": (-1.0, -1.0, -1.0, -1.0),
         "learner.actions.action_high": (1.0, 1.0, 1.0, 1.0)}


def make(learner: dict | None = None, novelty: NoveltyConfig | None = None, episode_steps: int = 525,
         buttons: tuple[str, ...] = (), tap_gap: int = 0, **kw):
    """The learning agent (explorer.run.builder) for SHAPE frames with SMALL networks and the ``learner``
    settings (dotted keys); sticks only unless ``buttons`` (tests/test_buttons.py covers the buttons)."""
    base = Config()
    config = base.model_copy(update={
        "pad": base.pad.model_copy(update={"buttons": buttons, "tap_gap": tap_gap}),
        "learner": learner_config({**SMALL, **(learner or {})}), "novelty": novelty or NoveltyConfig(),
        "observation": base.observation.model_copy(update={"stack": SHAPE[0]}),
        "game": base.game.model_copy(update={"episode_steps": episode_steps})})
    return build_agent(config, SHAPE[1:], **kw)


def learner_config(settings: dict) -> LearnerConfig:
    """The learner section of ``settings`` (dotted keys, ``{"learner.n_step": 2}``) over the defaults."""
    return Config().replace(**settings).learner


class WalkEnv:
    """A tiny game whose picture changes only while walk y is pushed forward (> 0.2).

    With ``recorded`` actions (and decision flags), its steps carry them in ``info`` as a
    recorded session's do.
    """

    def __init__(self, episode_steps: int = 50, recorded=None, starts=None, ends=None):
        self.episode_steps = episode_steps
        self.place = 0
        self.t = 0
        self.frame_shape = SHAPE[1:]
        self.ring = FrameRing(8, SHAPE[1:])
        self.recorded, self.starts, self.ends = recorded, starts, ends

    def frame(self) -> np.ndarray:
        return np.random.default_rng(self.place).integers(0, 256, SHAPE[1:], dtype=np.uint8)

    def _step(self, first=False, last=False) -> Step:
        info = {}
        if self.recorded is not None and self.t < len(self.recorded):
            info = {"action": np.asarray(self.recorded[self.t], np.float32), "reward": np.nan,
                    "starts": True if self.starts is None else self.starts[self.t],
                    "ends": True if self.ends is None else self.ends[self.t]}
        return Step(self.ring.latest(SHAPE[0]), first=first, last=last, t=time.monotonic(), info=info)

    def reset(self) -> Step:
        self.ring.reset()
        self.ring.push(self.frame())
        return self._step(first=True)

    def step(self, action) -> Step:
        if action[3] > 0.2:
            self.place += 1
        self.t += 1
        self.ring.push(self.frame())
        return self._step(last=self.t % self.episode_steps == 0)

    def idle(self) -> None:
        """Nothing to hold: this game has no pad."""

    def neutral(self) -> None:
        """Nothing to centre: this game has no pad."""

    def stats(self) -> dict:
        return {}

    def close(self) -> None:
        """Nothing to release."""


class Recorded:
    """Replays the env's recorded actions and decision flags through a learning actor."""

    def __init__(self, actor):
        self.actor = actor

    def act(self, step):
        return step.info["action"]

    def observe(self, step, action, next_step):
        return self.actor.record(step, action, next_step, starts=step.info["starts"], ends=step.info["ends"])


def play(agent, env: WalkEnv, steps: int, train: bool = True) -> tuple[list[np.ndarray], list[float]]:
    """Run ``agent`` on ``env`` through the driver (its own actions, or the env's recorded ones);
    returns the actions sent and the novelty of each step."""
    actor = agent.actor if env.recorded is None else Recorded(agent.actor)
    driver = Driver(env, actor)
    if train:
        Training(InlineTrainer(agent.learner, UpdateSchedule.from_config(agent.learner.config)),
                 lambda: agent.actor.steps).attach(driver)
    actions: list[np.ndarray] = []
    rewards: list[float] = []
    driver.on_step(lambda t: (actions.append(t.action), rewards.append(t.metrics["novelty"])))
    driver.run(max_steps=steps)
    return actions, rewards


def policy_mean(agent, obs: np.ndarray, ctx: np.ndarray) -> np.ndarray:
    return agent.actor.policy(tf.constant(obs), ctx)[0]


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
    agent = make({"learner.schedule.warmup_steps": 10_000, "learner.gamma": 0.5, "learner.n_step": 2}, episode_steps=4)
    _, rewards = play(agent, WalkEnv(episode_steps=4, recorded=[[0, 0, 0, 1]] * 4), 4)
    r = agent.replay
    assert r.written == 4
    np.testing.assert_allclose(r.reward[:4], [rewards[0] + 0.5 * rewards[1], rewards[1] + 0.5 * rewards[2],
                                              rewards[2] + 0.5 * rewards[3], rewards[3]], rtol=1e-5)
    np.testing.assert_allclose(r.discount[:4], [0.25, 0.25, 0.0, 0.0])
    # next observation of transition 0 is two frames on
    np.testing.assert_array_equal(r.next_ids[0], r.obs_ids[2])


def test_a_truncated_episode_bootstraps_and_an_ended_one_does_not():
    from explorer.agent.adder import NStepAdder

    class Sink:
        def __init__(self):
            self.frames, self.rows = 0, []

        def push_frame(self, frame):
            self.frames += 1
            return self.frames - 1

        def add(self, obs_ids, action, reward, discount, next_ids, ctx, next_ctx):
            self.rows.append((reward, discount))

    for truncated, want in ((False, [0.0, 0.0]), (True, [0.25, 0.5])):
        sink = Sink()
        adder = NStepAdder(sink, gamma=0.5, n_step=2)
        frame, ctx = np.zeros((1, 1, 1), np.uint8), np.zeros(1, np.float32)
        for t in range(2):
            adder.add(np.zeros((1, 1, 1, 1), np.uint8), np.zeros(4), 1.0, frame, first=t == 0, last=t == 1,
                      starts=True, ends=True, ctx=ctx, next_ctx=ctx, truncated=truncated and t == 1)
        assert [r for r, _ in sink.rows] == [1.5, 1.0] and [d for _, d in sink.rows] == want, sink.rows


def test_action_repeat_holds_each_decision_and_replays_it_as_one_transition():
    agent = make({"learner.schedule.warmup_steps": 10_000, "learner.gamma": 0.5, "learner.n_step": 1, "learner.action_repeat": 3}, episode_steps=7)
    env = WalkEnv(episode_steps=7)
    actions, rewards = play(agent, env, 7)
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
    assert not np.array_equal(agent.actor.act(env.reset()), actions[6])


def test_recorded_decisions_are_replayed_where_they_were_recorded():
    agent = make({"learner.schedule.warmup_steps": 10_000, "learner.gamma": 0.5, "learner.n_step": 2, "learner.action_repeat": 4}, episode_steps=3)
    # a decision held for two steps, then another; the same action twice is still two decisions when so recorded
    recorded = [[0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 1, 0]]
    env = WalkEnv(episode_steps=3, recorded=recorded, starts=[True, False, True], ends=[False, True, True])
    _, rewards = play(agent, env, 3)
    r = agent.replay
    assert r.written == 2
    np.testing.assert_allclose(r.reward[:2], [rewards[0] + 0.5 * rewards[1] + 0.25 * rewards[2], rewards[2]], rtol=1e-5)
    np.testing.assert_allclose(r.discount[:2], [0.0, 0.0])
    np.testing.assert_array_equal(r.action[:2], [recorded[0], recorded[2]])

    split = make({"learner.schedule.warmup_steps": 10_000, "learner.gamma": 0.5, "learner.n_step": 1}, episode_steps=3)
    env = WalkEnv(episode_steps=3, recorded=[[0, 0, 0, 1]] * 3)  # flags absent: every step its own decision
    _, rewards = play(split, env, 3)
    assert split.replay.written == 3
    np.testing.assert_allclose(split.replay.reward[:3], rewards, rtol=1e-5)


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_every_policy_variable_gets_a_finite_nonzero_gradient(algo, shared):
    learner = make({"learner.algo": algo, "learner.networks.shared_encoder": shared}).learner
    batch = learner.dummy_batch()
    features = learner.encoder(batch["obs"])
    variables = learner.actor.trainable_variables
    with tf.GradientTape() as tape:
        loss, _ = learner.actor_loss(batch["obs"], batch["ctx"], features)
    grads = tape.gradient(loss, variables)
    assert len(variables) >= (6 if shared else 8)  # the head's three layers, and an encoder's when not shared
    for v, g in zip(variables, grads, strict=True):
        assert g is not None, v.path
        assert np.all(np.isfinite(g.numpy())) and np.any(g.numpy() != 0), v.path
    assert check_gradients(lambda: learner.actor_loss(batch["obs"], batch["ctx"], features)[0], variables).ok


def test_shared_encoder_actor_head_gets_gradients_and_the_encoder_learns_from_the_critic():
    agent = make({"learner.networks.shared_encoder": True, "learner.networks.augment": 2})
    learner = agent.learner
    batch = learner.dummy_batch()
    features = learner.encoder(batch["obs"])
    head = learner.actor.trainable_variables
    assert not {id(v) for v in head} & {id(v) for v in learner.encoder.trainable_variables}
    assert check_gradients(lambda: learner.actor_loss(batch["obs"], batch["ctx"], features)[0], head).ok
    assert check_gradients(lambda: learner.critic_loss(batch)[0], learner.encoder.trainable_variables).ok
    # the acting policy is the critic's encoder followed by the head
    obs = np.random.default_rng(0).integers(0, 256, SHAPE, dtype=np.uint8)
    ctx = agent.context.value()
    before = policy_mean(agent, obs, ctx)
    conv = learner.encoder.get_layer("critic_encoder_conv0")
    conv.kernel.assign_add(tf.ones_like(conv.kernel))
    assert not np.allclose(before, policy_mean(agent, obs, ctx))


def test_nan_loss_is_a_clear_error():
    learner = make().learner
    batch = {k: v.numpy() for k, v in learner.dummy_batch().items()}
    batch["reward"][0] = np.nan
    with pytest.raises(NonFiniteLossError, match=r"^training diverged after \d updates: critic loss is NaN/Inf$"):
        learner.train(batch)


def test_learner_refuses_a_broken_path():
    class ArgmaxLearner(Learner):
        def actor_loss(self, obs, ctx, features):
            a, _, _ = self._sample(obs, ctx, training=True)
            hard = tf.one_hot(tf.argmax(a, -1), 4)  # a discretised action inside the loss
            q = tf.reduce_min(self.heads([features, hard, ctx]), -1)
            return -tf.reduce_mean(q), {}

    agent = make({"learner.networks.shared_encoder": False})
    with pytest.raises(GradientPathError, match="actor loss(.|\n)*actor_encoder_conv0/kernel(.|\n)*argmax"):
        ArgmaxLearner(learner_config({**SMALL, "learner.networks.shared_encoder": False}), (16, 16, 2), agent.context.dim, agent.replay)


@pytest.mark.parametrize("variant", [{"learner.networks.shared_encoder": False}, {"learner.networks.shared_encoder": True, "learner.networks.augment": 2}])
def test_learns_to_push_the_stick_that_changes_the_picture(variant):
    agent = make(variant, NoveltyConfig(embedding="pooled", knn=1, exclude_recent=0), episode_steps=50)
    actions, _ = play(agent, WalkEnv(), 500)
    late = np.array(actions[-100:])
    assert np.mean(late[:, 3] > 0.2) > 0.8, np.mean(late, 0)
    early = np.array(actions[:100])
    assert np.mean(early[:, 3] > 0.2) < 0.5


@pytest.mark.parametrize("extra", [{}, {"learner.action_repeat": 3}, {"learner.networks.view_strips": 4},
                                   {"learner.networks.echo_units": 16},
                                   {"learner.networks.recurrent_units": 8, "learner.networks.recurrent_window": 4},
                                   {"learner.actions.plan_candidates": 4, "learner.action_repeat": 2}])
def test_resume_gives_the_same_next_action(tmp_path, extra):
    learner = {"learner.schedule.warmup_steps": 50, **extra}
    agent = make(learner, episode_steps=50)
    env = WalkEnv()
    play(agent, env, 122)  # with repeat 3: one step into a held decision (episodes restart at 100)
    agent.checkpointer(tmp_path / "checkpoints").save(agent.actor.steps)
    place, t, saved = env.place, env.t, len(agent.replay)
    agent.actor.new_episode = True  # a resumed run starts a new episode: so does this one
    after, _ = play(agent, env, 5)

    resumed = make(learner, episode_steps=50)
    assert resumed.actor.steps == 0
    resumed.checkpointer(tmp_path / "checkpoints").restore()
    resumed.actor.new_episode = True
    assert resumed.actor.steps == 122 and len(resumed.replay) == saved > 0
    env2 = WalkEnv()
    env2.place, env2.t = place, t
    after2, _ = play(resumed, env2, 5)
    np.testing.assert_allclose(after2[0], after[0], atol=1e-6)
    np.testing.assert_allclose(np.array(after2), np.array(after), atol=1e-4)


def test_action_prior_centres_the_warm_up_sticks_and_the_untrained_policy():
    prior = (0.0, -0.3, 0.0, 0.6)
    agent = make({"learner.schedule.warmup_steps": 2000, "learner.actions.action_prior": prior})
    obs = np.zeros(SHAPE, np.uint8)
    step = Step(tf.constant(obs), first=True)
    warm = np.array([agent.actor.act(step) for _ in range(2000)])
    np.testing.assert_allclose(warm.mean(0), prior, atol=0.15)
    ctx = agent.context.value()
    mean = policy_mean(agent, obs, ctx)
    np.testing.assert_allclose(np.tanh(mean), prior, atol=0.02)  # the actor's outputs start near zero
    plain = make()
    mean0 = policy_mean(plain, obs, ctx)
    np.testing.assert_allclose(mean - mean0, np.arctanh(prior), atol=1e-5)


def test_stick_range_maps_the_policy_and_the_prior_onto_it():
    """walk y in [0, 1] (never backwards) and camera x in [-0.5, 0.5], prior walk y 0.75 (squashed: 0.5)."""
    rng = {"learner.actions.action_low": (-0.5, -1.0, -1.0, 0.0), "learner.actions.action_high": (0.5, 1.0, 1.0, 1.0),
           "learner.actions.action_prior": (0.0, 0.0, 0.0, 0.75)}
    sticks = StickRange(learner_config({**SMALL, **rng}))
    np.testing.assert_allclose(sticks.prior, [0.0, 0.0, 0.0, 0.5], atol=1e-7)
    np.testing.assert_allclose(sticks(np.array([-1.0, -1.0, 0.0, -1.0])), [-0.5, -1.0, 0.0, 0.0], atol=1e-7)
    np.testing.assert_allclose(sticks(tf.constant([1.0, 0.5, 1.0, 0.0])).numpy(), [0.5, 0.5, 1.0, 0.5], atol=1e-7)
    full = np.array([0.3, -0.7, 0.9, 0.1], np.float32)
    assert StickRange(learner_config(SMALL))(full) is full  # the full range changes nothing

    agent = make({**rng, "learner.schedule.warmup_steps": 300})
    obs = np.zeros(SHAPE, np.uint8)
    step = Step(tf.constant(obs), first=True)
    acted = np.array([agent.actor.act(step) for _ in range(300)])  # warm-up sticks
    agent.actor.steps = 300
    acted = np.concatenate([acted, [agent.actor.act(step) for _ in range(300)]])  # the policy's, noise included
    low, high = np.array(rng["learner.actions.action_low"]), np.array(rng["learner.actions.action_high"])
    assert np.all(acted >= low - 1e-6) and np.all(acted <= high + 1e-6)
    assert acted[:, 3].min() < 0.1 and acted[:, 3].max() > 0.9  # the range is used, not just respected
    mean = policy_mean(agent, obs, agent.context.value())
    np.testing.assert_allclose(sticks(np.tanh(mean))[3], 0.75, atol=0.02)  # starts at the prior
    # the actor loss and the TD targets see the same stick values the pad gets
    batch = agent.learner.dummy_batch()
    a, _, _ = agent.learner._sample(batch["obs"], batch["ctx"], training=False)
    assert np.all(a.numpy() >= low - 1e-6) and np.all(a.numpy() <= high + 1e-6)


def _state(learner: Learner, rng: bool = True) -> dict[str, np.ndarray]:
    """What a checkpoint of the learner holds: weights, optimiser slots, entropy weight, update count and
    (``rng``) random state, by name."""
    out = {}
    for name, item in learner.checkpoint_items().items():
        if isinstance(item, tf.random.Generator):
            variables = [item.state] if rng else []
        elif isinstance(item, tf.Variable):
            variables = [item]
        elif isinstance(item, keras.Model):
            variables = item.weights
        else:
            variables = item.variables
        out |= {f"{name}/{i}": np.array(v.numpy()) for i, v in enumerate(variables)}
    return out


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_xla_update_starts_where_the_graph_update_does_and_trains(algo):
    graph = make({"learner.algo": algo}).learner
    xla = make({"learner.algo": algo, "learner.xla": True}).learner
    # compiling (one call on a dummy batch at build) leaves every variable as it was built
    built, compiled = _state(graph), _state(xla)
    assert built.keys() == compiled.keys() and len(built) > 40
    for name, value in built.items():
        np.testing.assert_array_equal(compiled[name], value, err_msg=name)
    before = [w.numpy() for w in xla.actor.weights + xla.heads.weights]
    batch = {k: v.numpy() for k, v in xla.dummy_batch(seed=1).items()}
    metrics: dict[str, float] = {}
    for _ in range(4):  # TD3: two of them train the critics alone
        metrics |= {k: float(v) for k, v in xla.train(batch).items()}
    assert int(xla.updates.numpy()) == 4
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert {"critic_loss", "actor_loss", "q"} <= metrics.keys()
    after = [w.numpy() for w in xla.actor.weights + xla.heads.weights]
    changed = [not np.array_equal(a, b) for a, b in zip(before, after, strict=True)]
    assert all(changed)
    # the same updates without XLA: the same losses up to float rounding and random draws (XLA draws
    # other numbers from the same generator state); measured within 3 %
    graph_metrics: dict[str, float] = {}
    for _ in range(4):
        graph_metrics |= {k: float(v) for k, v in graph.train(batch).items()}
    assert graph_metrics.keys() == metrics.keys()
    np.testing.assert_allclose(metrics["critic_loss"], graph_metrics["critic_loss"], rtol=0.1)


@pytest.mark.parametrize("check", ["critic loss", "actor loss"])
def test_xla_nan_loss_is_the_same_one_line_error_and_nothing_after_it_is_applied(check, monkeypatch):
    if check == "actor loss":  # an actor loss gone Inf while the critic loss stays finite
        actor_loss = Learner.actor_loss

        def infinite(self, *args):
            loss, metrics = actor_loss(self, *args)
            return loss + np.inf, metrics
        monkeypatch.setattr(Learner, "actor_loss", infinite)
    learner = make({"learner.xla": True}).learner
    batch = {k: v.numpy() for k, v in learner.dummy_batch().items()}
    if check == "critic loss":
        learner.train(batch)
        batch["reward"][0] = np.nan
    done = int(learner.updates.numpy())
    before = _state(learner, rng=False)
    with pytest.raises(NonFiniteLossError) as err:
        learner.train(batch)
    # the critic half of an update counts it, as without XLA
    done += check == "actor loss"
    assert str(err.value) == f"training diverged after {done} updates: {check} is NaN/Inf"
    after = _state(learner, rng=False)
    assert after.keys() == before.keys()
    # what the failed check guards and everything after it is left as it was (random draws moved)
    kept = [n for n in before if not n.startswith(("encoder/", "heads/", "target_", "critic_opt/", "updates/"))]
    if check == "critic loss":
        kept = list(before)
    assert {"actor/0", "actor_opt/0", "log_alpha/0", "alpha_opt/0"} <= set(kept)
    for name in kept:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert all(np.all(np.isfinite(value)) for value in after.values())
    if check == "actor loss":  # the critic update before it was applied
        assert not np.array_equal(after["heads/0"], before["heads/0"])


def test_random_options_hold_random_sticks_for_their_decisions_and_survive_a_checkpoint():
    agent = make({"learner.schedule.warmup_steps": 0, "learner.actions.random_options": 0.2, "learner.actions.option_steps": 5, "learner.actions.noise_rho": 0.0})
    step = Step(tf.constant(np.zeros(SHAPE, np.uint8)), first=False)
    agent.actor.new_episode = False  # one long episode (act() alone never ends one)
    acts = np.array([agent.actor.act(step) for _ in range(400)])
    same = np.all(acts[1:] == acts[:-1], axis=1)  # the policy's noisy actions never repeat exactly
    runs, n = [], 1
    for s in same:
        if s:
            n += 1
        else:
            runs.append(n)
            n = 1
    options = [r for r in runs if r > 1]
    assert options and all(r % 5 == 0 for r in options)  # held for option_steps decisions (back to back: 10, 15)
    share = sum(options) / len(acts)
    assert 0.3 < share < 0.8  # 0.2 per decision, 5 decisions each: about half the steps
    lo, hi = np.array(SMALL["learner.actions.action_low"]), np.array(SMALL["learner.actions.action_high"])
    assert (acts >= lo).all() and (acts <= hi).all()
    agent.actor.option_left = 3
    state = agent.actor.state()
    fresh = make({"learner.schedule.warmup_steps": 0, "learner.actions.random_options": 0.2, "learner.actions.option_steps": 5})
    fresh.actor.load(state)
    assert fresh.actor.option_left == 3 and np.array_equal(fresh.actor.option, agent.actor.option)
    del state["option"], state["option_left"]  # a checkpoint from before random options
    fresh.actor.load(state)
    assert fresh.actor.option is None and fresh.actor.option_left == 0
    off = make({"learner.schedule.warmup_steps": 0, "learner.actions.noise_rho": 0.0})
    off.actor.new_episode = False
    acts = np.array([off.actor.act(step) for _ in range(100)])
    assert not np.any(np.all(acts[1:] == acts[:-1], axis=1))  # off: the policy decides every step


# ---------------------------------------------------------------- the planner (learner.actions.plan_candidates)

class GreyWalkEnv(WalkEnv):
    """WalkEnv whose every place is one grey level: the colour histogram tells places apart."""

    def frame(self) -> np.ndarray:
        return np.full(SHAPE[1:], (self.place * 37) % 256, np.uint8)


def test_the_planner_alone_learns_to_walk_where_the_picture_is_new():
    # The policy barely learns (a tiny actor step size): whatever walks forward more often after the
    # warm-up is the planner's choice among random draws, from its model of the frame one decision on.
    novelty = NoveltyConfig(histogram_bins=16, knn=1, exclude_recent=0)
    agent = make({"learner.actions.plan_candidates": 8, "learner.action_repeat": 2, "learner.actor_lr": 1e-9}, novelty, episode_steps=50)
    actions, _ = play(agent, GreyWalkEnv(), 800)
    planned = np.mean(np.array(actions[-200:])[:, 3] > 0.2)
    metrics = agent.learner.step()
    assert np.isfinite(metrics["model_loss"]) and metrics["model_loss"] >= 0

    alone = make({"learner.action_repeat": 2, "learner.actor_lr": 1e-9}, novelty, episode_steps=50)
    actions, _ = play(alone, GreyWalkEnv(), 800)
    unplanned = np.mean(np.array(actions[-200:])[:, 3] > 0.2)
    assert planned > 0.65 and unplanned < 0.55, (planned, unplanned)


def test_the_planner_sends_the_candidate_it_scores_farthest_from_the_episode():
    agent = make({"learner.actions.plan_candidates": 5, "learner.schedule.warmup_steps": 0})
    seen = {}
    scores = agent.actor._plan_scores

    def spy(obs, actions, ctx):
        out = scores(obs, actions, ctx)
        seen["actions"], seen["scores"] = actions.numpy(), out.numpy()
        return out

    agent.actor._plan_scores = spy
    env = WalkEnv()
    step = env.reset()
    for _ in range(40):  # past novelty.exclude_recent, so the episode has something to compare with
        action = agent.actor.act(step)
        next_step = env.step(action)
        agent.actor.observe(step, action, next_step)
        step = next_step
    assert seen["actions"].shape == (6, 4) and np.all(seen["scores"] >= 0)
    np.testing.assert_allclose(agent.actor.held, seen["actions"][int(np.argmax(seen["scores"]))], atol=1e-6)


def test_the_critic_planner_sends_the_candidate_the_critics_value_most():
    agent = make({"learner.actions.plan_candidates": 5, "learner.actions.plan_score": "critic", "learner.schedule.warmup_steps": 0})
    assert agent.learner.model_head is None and agent.actor.planner[1] is agent.learner.heads
    seen = {}
    scores = agent.actor._plan_scores

    def spy(obs, actions, ctx):
        out = scores(obs, actions, ctx)
        seen["obs"], seen["actions"], seen["ctx"], seen["scores"] = obs, actions.numpy(), ctx.numpy(), out.numpy()
        return out

    agent.actor._plan_scores = spy
    env = WalkEnv()
    step = env.reset()
    for _ in range(3):
        action = agent.actor.act(step)
        next_step = env.step(action)
        agent.actor.observe(step, action, next_step)
        step = next_step
    assert seen["actions"].shape == (5, 4) and len(set(np.round(seen["scores"], 6))) > 1  # the draws alone
    features = agent.learner.encoder(stack_frames(seen["obs"])[None], training=False)
    q = agent.learner.heads([tf.repeat(features, 5, 0), tf.constant(seen["actions"]),
                             tf.constant(np.repeat(seen["ctx"][None], 5, 0))])
    np.testing.assert_allclose(seen["scores"], np.min(q.numpy(), -1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(agent.actor.held, seen["actions"][int(np.argmax(seen["scores"]))], atol=1e-6)


def test_an_acting_copy_scores_with_the_critics_the_learner_publishes():
    agent = make({"learner.actions.plan_candidates": 4, "learner.actions.plan_score": "critic", "learner.schedule.warmup_steps": 0}, acting_copy=True)
    copy = agent.actor.planner[1]
    assert copy is not agent.learner.heads
    play(agent, WalkEnv(), 80)  # the learner trains; the copy keeps the weights it was given
    trained = [w.numpy() for w in agent.learner.heads.weights]
    assert not all(np.allclose(a, b.numpy()) for a, b in zip(trained, copy.weights, strict=True))
    agent.actor.set_weights(agent.learner.get_weights())
    for a, b in zip(trained, copy.weights, strict=True):
        np.testing.assert_array_equal(a, b.numpy())


def test_the_critic_planner_learns_to_walk_where_the_picture_is_new():
    # As the model planner's test above: a tiny actor step size, so what walks forward more often after the
    # warm-up is the choice among random draws, here by the critics fitted to the novelty.
    novelty = NoveltyConfig(histogram_bins=16, knn=1, exclude_recent=0)
    agent = make({"learner.actions.plan_candidates": 8, "learner.actions.plan_score": "critic", "learner.action_repeat": 2,
                  "learner.actor_lr": 1e-9}, novelty,
                 episode_steps=50)
    actions, _ = play(agent, GreyWalkEnv(), 800)
    planned = np.mean(np.array(actions[-200:])[:, 3] > 0.2)
    alone = make({"learner.action_repeat": 2, "learner.actor_lr": 1e-9}, novelty, episode_steps=50)
    actions, _ = play(alone, GreyWalkEnv(), 800)
    unplanned = np.mean(np.array(actions[-200:])[:, 3] > 0.2)
    assert planned > 0.65 and unplanned < 0.55, (planned, unplanned)


def test_the_critic_planner_needs_no_episodic_memory():
    from explorer.config import load

    assert load(None, ["learner.actions.plan_candidates=4", "learner.actions.plan_score=critic", "novelty.signal=rnd"])


def test_the_planner_needs_the_episodic_memory_and_the_shared_encoder():
    from explorer.config import ConfigError, load

    with pytest.raises(ConfigError, match="novelty.signal = episodic"):
        load(None, ["learner.actions.plan_candidates=4", "novelty.signal=rnd"])
    with pytest.raises(ConfigError, match="shared_encoder"):
        load(None, ["learner.actions.plan_candidates=4", "learner.networks.shared_encoder=false"])


def test_the_critics_train_the_recurrent_core_and_the_actor_reads_it_with_their_weights():
    """learner.networks.recurrent_units: the critics' loss moves the GRU, its target follows by Polyak
    averaging, and the weights the policy acts with reach the context that stores the core's state."""
    agent = make({"learner.networks.recurrent_units": 8, "learner.networks.recurrent_window": 4,
                  "learner.schedule.warmup_steps": 50}, episode_steps=50)
    learner = agent.learner
    assert learner.core is not None and learner.target_core is not None
    gru = learner.core.get_layer("gru")
    before = [w.copy() for w in gru.get_weights()]
    target_before = [w.copy() for w in learner.target_core.get_layer("gru").get_weights()]
    play(agent, WalkEnv(), 120)
    assert int(learner.updates.numpy()) > 0
    after = gru.get_weights()
    assert all(np.abs(a - b).max() > 0 for a, b in zip(after, before, strict=True))
    target = learner.target_core.get_layer("gru").get_weights()
    assert any(np.abs(t - b).max() > 0 for t, b in zip(target, target_before, strict=True))
    assert all(np.abs(t - a).max() > 0 for t, a in zip(target, after, strict=True))  # it lags behind
    play(agent, WalkEnv(), 1, train=False)  # a step recorded: the context holds the weights the policy acts with
    held = agent.actor.context.recurrent.weights
    assert held is not None
    for h, a in zip(held, agent.actor.policy_net.get_layer("core").get_layer("gru").get_weights(), strict=True):
        np.testing.assert_array_equal(h, a)
    for h, a in zip(held, after, strict=True):
        np.testing.assert_array_equal(h, a)


@pytest.mark.parametrize("settings, match", [
    ({"learner.networks.recurrent_units": 8, "learner.networks.context": False}, "needs learner.networks.context = true"),
    ({"learner.networks.recurrent_units": 8, "learner.networks.shared_encoder": False}, "shared_encoder = true"),
    ({"learner.networks.recurrent_units": 8, "learner.actions.plan_candidates": 4, "learner.actions.plan_score": "critic"},
     "critic planner"),
])
def test_a_recurrent_core_the_networks_cannot_read_is_refused_at_load(settings, match):
    from explorer.config import ConfigError, load

    with pytest.raises(ConfigError, match=match):
        load(None, [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in settings.items()])
