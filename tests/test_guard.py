"""The gradient-path guard names broken variables and the likely cause."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from explorer.agent.guard import (
    CAUSE_NOT_READ,
    CAUSE_NUMPY,
    CAUSE_REBUILT,
    CAUSE_ZERO,
    GradientPathError,
    check_gradients,
)
from explorer.agent.novelty import pixel_difference


@pytest.fixture()
def policy() -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input([8, 8, 2]), keras.layers.Rescaling(1 / 255),
                             keras.layers.Conv2D(4, 3, strides=2, activation="relu", name="conv"),
                             keras.layers.Flatten(), keras.layers.Dense(4, activation="tanh", name="axes")])


FRAMES = tf.constant(np.random.default_rng(0).integers(0, 256, [2, 8, 8, 2], dtype=np.uint8))
NAMES = {"conv/kernel", "conv/bias", "axes/kernel", "axes/bias"}


def _broken_names(report) -> set[str]:
    return {b.name.split("/", 1)[1] for b in report.broken}


def test_connected_loss_is_ok(policy):
    report = check_gradients(lambda: -tf.reduce_mean(policy(FRAMES)), policy.trainable_variables)
    assert report.ok and report.checked == 4
    report.raise_if_broken()


def test_original_question_loss_novelty_from_frames_only(policy):
    def loss():
        _ = policy(FRAMES)  # the action goes to the game; the loss only sees frames
        return -pixel_difference(FRAMES[1, ..., -1:], FRAMES[:1, ..., -1:])
    report = check_gradients(loss, policy.trainable_variables)
    assert _broken_names(report) == NAMES
    assert {b.cause for b in report.broken} == {CAUSE_NOT_READ}
    with pytest.raises(GradientPathError, match="axes/kernel.*\n.*does not depend"):
        report.raise_if_broken()


def test_loss_through_argmax(policy):
    report = check_gradients(lambda: tf.reduce_mean(tf.cast(tf.argmax(policy(FRAMES), -1), tf.float32)),
                             policy.trainable_variables)
    assert _broken_names(report) == NAMES
    assert all("argmax" in b.cause for b in report.broken)


def test_loss_through_numpy_round_trip(policy):
    report = check_gradients(lambda: tf.reduce_mean(tf.constant(np.round(policy(FRAMES).numpy(), 1))),
                             policy.trainable_variables)
    assert _broken_names(report) == NAMES
    assert {b.cause for b in report.broken} == {CAUSE_NUMPY}


def test_model_rebuilt_inside_the_step(policy):
    def loss():
        fresh = keras.Sequential([keras.Input([8, 8, 2]), keras.layers.Flatten(), keras.layers.Dense(4)])
        return tf.reduce_mean(fresh(tf.cast(FRAMES, tf.float32)))
    report = check_gradients(loss, policy.trainable_variables)
    assert {b.cause for b in report.broken} == {CAUSE_REBUILT}


def test_partial_path_and_zero_gradient(policy):
    # only the last layer's bias reaches the loss through round(), a zero-gradient op
    report = check_gradients(lambda: tf.reduce_sum(policy.layers[-1].bias * 0.0) + tf.reduce_mean(policy(FRAMES)),
                             policy.trainable_variables)
    assert report.ok
    report = check_gradients(lambda: tf.reduce_sum(policy(FRAMES) * 0.0), policy.trainable_variables)
    assert {b.problem for b in report.broken} == {"zero"} and report.broken[0].cause == CAUSE_ZERO
