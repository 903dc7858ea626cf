"""The reach prior: how far a held action will take the player, judged from the newest frame.

A small CNN that reads one observation frame (``uint8[64, 64, 3]``) and an action
(camera x, walk x, walk y, as sent) and predicts how far, in hundreds of map units,
holding that action for 8 agent steps takes the player. It was trained offline
(``tools/traversability.py --ship``) on ``sticky_prior`` play of the built-in game's
public suite maps, with the engine's positions as its labels: prior knowledge of
Doom's pictures (walls close ahead, open corridors) that no run has to learn, since
a run has too few moves to learn it from (docs/experiments.md).

With ``learner.actions.plan_score = "reach"`` the actor sends, at each decision,
whichever of the policy's own action and ``plan_candidates`` draws of the prior it
expects to go farthest (:class:`Reach`).

The weights ship with the package as plain arrays (``reach_doom.npz``), loaded without
pickles into an architecture built here, with every array's count, shape and values
checked: the file cannot bring code or layers of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from explorer.config import REACH_FRAME
from explorer.core import ExplorerError

#: the weights shipped with the package, trained on the built-in game's suite maps
WEIGHTS = Path(__file__).resolve().parent / "reach_doom.npz"
#: the frame the model reads, ``(height, width, channels)``: the default observation's
FRAME = REACH_FRAME
#: the largest weights file read
MAX_BYTES = 4 << 20
#: agent steps the predicted distance is over: one held draw of the prior
HOLD = 8
#: map units per unit of the model's output: it predicts distances in hundreds of map units
UNITS = 100.0
#: the index of the kernel that joins the frame's 64 features and the action, among a model's weight arrays
JOINED = 10


#: the action inputs a model may read: the moves (camera x, walk x, walk y) alone, or the moves and the A button
MOVES = (3, 4)


def build_reach(inputs: int = 3) -> keras.Model:
    """Frame ``uint8[64, 64, 3]`` and action ``float32[inputs]`` (camera x, walk x, walk y and, with 4, the A
    button: it opens doors) to the predicted distance, in hundreds of map units."""
    if inputs not in MOVES:
        raise ValueError(f"a reach model reads {' or '.join(map(str, MOVES))} action inputs, not {inputs}")
    frame, action = keras.Input(FRAME, dtype="uint8"), keras.Input((inputs,))
    x = keras.layers.Rescaling(1 / 255)(frame)
    for width, kernel in [(16, 5), (32, 3), (32, 3), (32, 3)]:
        x = keras.layers.Conv2D(width, kernel, strides=2, activation="relu", padding="same")(x)
    x = keras.layers.Dense(64, activation="relu")(keras.layers.Flatten()(x))
    h = keras.layers.Dense(64, activation="relu")(keras.layers.Concatenate()([x, action]))
    h = keras.layers.Dense(64, activation="relu")(h)
    return keras.Model([frame, action], keras.layers.Dense(1)(h), name="reach")


def save_reach(model: keras.Model, path: str | Path) -> None:
    """Write ``model``'s weights as plain arrays ``w0``, ``w1``, ... (what :func:`load_reach` reads)."""
    arrays: dict[str, Any] = {f"w{i}": np.asarray(w, np.float32) for i, w in enumerate(model.get_weights())}
    np.savez_compressed(path, **arrays)


def load_reach(path: str | Path | None = None) -> keras.Model:
    """:func:`build_reach` with the weights at ``path`` (by default :data:`WEIGHTS`, read when called).

    Raises:
      ExplorerError: the file is missing, larger than :data:`MAX_BYTES`, not an array file, or its arrays are
        not the model's in count, shape or finite values.
    """
    path = Path(WEIGHTS if path is None else path)
    try:
        size = path.stat().st_size
    except OSError as err:
        raise ExplorerError(f"the reach prior's weights {path} cannot be read ({err.strerror}): reinstall explorer "
                            "(pip install -e .), or set learner.actions.plan_score to model or critic") from err
    if size > MAX_BYTES:
        raise ExplorerError(f"the reach prior's weights {path} are {size} bytes, more than the {MAX_BYTES} read: "
                            "reinstall explorer")
    try:
        with np.load(path, allow_pickle=False) as data:
            names = sorted(data.files, key=lambda n: (len(n), n))
            count = len(build_reach().get_weights())
            if names != [f"w{i}" for i in range(count)]:
                raise ValueError(f"arrays {names[:4]}... where w0..w{count - 1} were expected")
            arrays = [np.asarray(data[f"w{i}"]) for i in range(count)]
    except (OSError, ValueError, EOFError) as err:
        raise ExplorerError(f"the reach prior's weights {path} are not the model's ({err}): reinstall explorer") from err
    # the action's width is read off the first layer after the frame's and action's join
    inputs = arrays[JOINED].shape[0] - 64 if arrays[JOINED].ndim == 2 else -1
    if inputs not in MOVES:
        raise ExplorerError(f"the reach prior's weights {path}: array w{JOINED} is {list(arrays[JOINED].shape)}, the "
                            f"model takes [{' or '.join(str(64 + k) for k in MOVES)}, 64]: reinstall explorer")
    model = build_reach(inputs)
    shapes = [tuple(w.shape) for w in model.get_weights()]
    for i, (a, shape) in enumerate(zip(arrays, shapes, strict=True)):
        if a.shape != shape or a.dtype.kind != "f" or not np.all(np.isfinite(a)):
            raise ExplorerError(f"the reach prior's weights {path}: array w{i} is {a.dtype}{list(a.shape)}, the model "
                                f"takes finite float{list(shape)}: reinstall explorer")
    model.set_weights([a.astype(np.float32) for a in arrays])
    return model


def reach_features(model: keras.Model | None = None) -> keras.Model:
    """The reach prior's picture half: frame ``uint8[64, 64, 3]`` to the 64 features its distance is judged from
    (how open the view is, and which way), a fixed embedding for the episodic novelty
    (``novelty.embedding = "reach"``). ``model`` is :func:`load_reach`'s (by default the shipped weights)."""
    model = model if model is not None else load_reach()
    frame = model.inputs[0]
    flat = next(layer for layer in model.layers if isinstance(layer, keras.layers.Flatten))
    dense = next(layer for layer in model.layers if isinstance(layer, keras.layers.Dense) and layer.input is flat.output)
    return keras.Model(frame, dense.output, name="reach_features")


class Reach:
    """Scores candidate actions by the distance the reach prior expects each to cover from a frame.

    Args:
      model: :func:`load_reach`'s model (by default the shipped weights).
      buttons: the pad's buttons, in the order they follow the sticks in an action as sent.
    """

    def __init__(self, model: keras.Model | None = None, buttons: Sequence[str] = ("a",)):
        self.model = model if model is not None else load_reach()
        self.reads_a = int(self.model.inputs[1].shape[-1]) == 4
        self.a_at = 4 + buttons.index("a") if "a" in buttons else None

    def __call__(self, frame: Any, sent: Any) -> tf.Tensor:
        """``float32[K]``: the predicted 8-step distance of each of ``sent`` (``float32[K, 4 + n]``, actions as
        sent: camera x, camera y, walk x, walk y, buttons) from ``frame`` (``uint8[64, 64, 3]``)."""
        sent = tf.convert_to_tensor(sent, tf.float32)
        k = tf.shape(sent)[0]
        frames = tf.repeat(tf.convert_to_tensor(frame, tf.uint8)[None], k, axis=0)
        moves = tf.gather(sent, [0, 2, 3], axis=1)
        if self.reads_a:  # A's column, or never pressed on a pad without it
            a = sent[:, self.a_at:self.a_at + 1] if self.a_at is not None else tf.zeros([k, 1])
            moves = tf.concat([moves, a], axis=1)
        return self.model([frames, moves], training=False)[:, 0]
