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


def build_reach() -> keras.Model:
    """Frame ``uint8[64, 64, 3]`` and action ``float32[3]`` (camera x, walk x, walk y) to the predicted 8-step
    distance, in hundreds of map units."""
    frame, action = keras.Input(FRAME, dtype="uint8"), keras.Input((3,))
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
    model = build_reach()
    shapes = [tuple(w.shape) for w in model.get_weights()]
    try:
        with np.load(path, allow_pickle=False) as data:
            names = sorted(data.files, key=lambda n: (len(n), n))
            if names != [f"w{i}" for i in range(len(shapes))]:
                raise ValueError(f"arrays {names[:4]}... where w0..w{len(shapes) - 1} were expected")
            arrays = [np.asarray(data[f"w{i}"]) for i in range(len(shapes))]
    except (OSError, ValueError, EOFError) as err:
        raise ExplorerError(f"the reach prior's weights {path} are not the model's ({err}): reinstall explorer") from err
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
    """

    def __init__(self, model: keras.Model | None = None):
        self.model = model if model is not None else load_reach()

    def __call__(self, frame: Any, sent: Any) -> tf.Tensor:
        """``float32[K]``: the predicted 8-step distance of each of ``sent`` (``float32[K, 4 + n]``, actions as
        sent: camera x, camera y, walk x, walk y, buttons) from ``frame`` (``uint8[64, 64, 3]``)."""
        sent = tf.convert_to_tensor(sent, tf.float32)
        k = tf.shape(sent)[0]
        frames = tf.repeat(tf.convert_to_tensor(frame, tf.uint8)[None], k, axis=0)
        moves = tf.gather(sent, [0, 2, 3], axis=1)
        return self.model([frames, moves], training=False)[:, 0]
