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

A weights file holds one model or an ensemble of up to :data:`MAX_MODELS` trained apart;
an ensemble judges each draw by its models' mean, which errs less than any one of them
(docs/experiments.md). The weights ship with the package as plain arrays
(``reach_doom.npz``), loaded without pickles into an architecture built here, with every
array's count, shape and values checked, and every array's header read before its data:
the file cannot bring code, layers or sizes of its own.
"""

from __future__ import annotations

import math
import re
import stat
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

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
#: the most models a weights file's ensemble holds
MAX_MODELS = 8
#: agent steps the predicted distance is over: one held draw of the prior
HOLD = 8
#: map units per unit of the model's output: it predicts distances in hundreds of map units
UNITS = 100.0
#: the index of the kernel that joins the frame's 64 features and the action, among a model's weight arrays
JOINED = 10


#: the action inputs a model may read: the moves (camera x, walk x, walk y) alone, or the moves and the A button
MOVES = (3, 4)


#: a view change (:func:`view_change`) per unit of a reach model trained on it: it brings the labels near the
#: scale of the position-trained model's, a few units for a held draw
VIEW_UNITS = 10.0


def view_change(before: np.ndarray, after: np.ndarray, turns: bool = False, chunk: int = 4096) -> np.ndarray:
    """How far the view moved between frames ``before`` and ``after`` (``uint8[N, H, W, C]`` each), in
    :data:`VIEW_UNITS`, judged from the pixels alone: a reach label that needs no position from the game.

    The mean absolute difference of the frames: in a game whose camera stays put while the player moves (a
    room of Montezuma's Revenge, a MiniGrid maze drawn whole) what changes is the player's place, or the room.
    With ``turns`` (a first-person camera that turns) each row of each frame is first sorted by value in each
    channel, so that a turn, which slides the rows sideways, changes it little. How well either ranks moves
    by the distance the game measures is in docs/experiments.md ("A reach prior from pixels alone")."""
    out = np.empty(len(before), np.float32)
    for at in range(0, len(before), chunk):
        a = before[at:at + chunk].astype(np.float32)
        b = after[at:at + chunk].astype(np.float32)
        if turns:
            a, b = np.sort(a, axis=2), np.sort(b, axis=2)
        out[at:at + chunk] = np.abs(a - b).mean(axis=(1, 2, 3)) / VIEW_UNITS
    return out


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


def save_reach(models: keras.Model | Sequence[keras.Model], path: str | Path | IO[bytes]) -> None:
    """Write a model's weights as plain arrays ``w0``, ``w1``, ..., or an ensemble's as ``m0_w0``, ...,
    ``m1_w0``, ... (what :func:`load_reach` reads)."""
    models = [models] if isinstance(models, keras.Model) else list(models)
    if not 1 <= len(models) <= MAX_MODELS:
        raise ValueError(f"a reach weights file holds 1 to {MAX_MODELS} models, not {len(models)}")
    prefix = (lambda j: "") if len(models) == 1 else (lambda j: f"m{j}_")
    arrays: dict[str, Any] = {f"{prefix(j)}w{i}": np.asarray(w, np.float32)
                              for j, model in enumerate(models) for i, w in enumerate(model.get_weights())}
    np.savez_compressed(path, **arrays)


def _arrays(path: Path, most: int) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` at ``path``, at most ``most`` of them, each header read and their sizes bounded
    before their data is."""
    arrays: dict[str, np.ndarray] = {}
    total = 0
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        if len(members) > most:
            raise ValueError(f"{len(members)} arrays")
        for member in members:
            name = member.filename.removesuffix(".npy")
            if member.file_size > MAX_BYTES or not re.fullmatch(r"(m\d+_)?w\d+", name):
                raise ValueError(f"an array {name!r} of {member.file_size} bytes")
            with archive.open(member) as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, _, dtype = read(f)
                total += math.prod(shape) * dtype.itemsize
                if dtype.hasobject or total > MAX_BYTES:
                    raise ValueError(f"array {name} is {dtype}{list(shape)}, past the {MAX_BYTES} bytes read")
            with archive.open(member) as f:
                arrays[name] = np.lib.format.read_array(f, allow_pickle=False)
    return arrays


def load_reach(path: str | Path | None = None) -> tuple[keras.Model, ...]:
    """The models of the weights file at ``path`` (by default :data:`WEIGHTS`, read when called), each a
    :func:`build_reach` with its arrays: one for a file of ``w0``, ``w1``, ..., an ensemble's for ``m0_w0``, ...

    Raises:
      ExplorerError: the file is missing, larger than :data:`MAX_BYTES`, not an array file, or its arrays are
        not one to :data:`MAX_MODELS` models' of one action width, in count, shape or finite values.
    """
    shipped = path is None or Path(path) == Path(WEIGHTS)
    path = Path(WEIGHTS if path is None else path)
    fix = ("reinstall explorer" if shipped else "write it again with tools/traversability.py, or set "
           "learner.actions.reach_weights = \"\" for the shipped prior")
    try:
        info = path.stat()
    except OSError as err:
        raise ExplorerError(f"the reach prior's weights {path} cannot be read ({err.strerror}): "
                            f"{'reinstall explorer (pip install -e .)' if shipped else fix}, or set "
                            "learner.actions.plan_score to model or critic") from err
    if not stat.S_ISREG(info.st_mode):  # a pipe or a device could hang or never end the read
        raise ExplorerError(f"the reach prior's weights {path} are not a file: {fix}")
    if info.st_size > MAX_BYTES:
        raise ExplorerError(f"the reach prior's weights {path} are {info.st_size} bytes, more than the {MAX_BYTES} "
                            f"read: {fix}")
    count = len(build_reach().get_weights())
    try:
        arrays = _arrays(path, MAX_MODELS * count)
        names = sorted(arrays, key=lambda n: (len(n), n))
        single = [f"w{i}" for i in range(count)]
        k = len(names) // count
        prefixes = [""] if names == single else [f"m{j}_" for j in range(k)]
        if not 1 <= k <= MAX_MODELS or sorted(names) != sorted(f"{p}{w}" for p in prefixes for w in single):
            raise ValueError(f"arrays {names[:4]}... where w0..w{count - 1}, or m0_w0.. for each of up to "
                             f"{MAX_MODELS} models, were expected")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise ExplorerError(f"the reach prior's weights {path} are not the model's ({err}): {fix}") from err
    models = tuple(_model(path, p, [arrays[f"{p}{w}"] for w in single], fix) for p in prefixes)
    if len({int(m.inputs[1].shape[-1]) for m in models}) > 1:
        raise ExplorerError(f"the reach prior's weights {path}: its models read actions of different widths: {fix}")
    return models


def _model(path: Path, prefix: str, arrays: list[np.ndarray], fix: str) -> keras.Model:
    """:func:`build_reach` with ``arrays``, checked in shape and values (``prefix``: their names' in the file;
    ``fix``: what the error says to do)."""
    # the action's width is read off the first layer after the frame's and action's join
    inputs = arrays[JOINED].shape[0] - 64 if arrays[JOINED].ndim == 2 else -1
    if inputs not in MOVES:
        raise ExplorerError(f"the reach prior's weights {path}: array {prefix}w{JOINED} is "
                            f"{list(arrays[JOINED].shape)}, the model takes "
                            f"[{' or '.join(str(64 + k) for k in MOVES)}, 64]: {fix}")
    model = build_reach(inputs)
    shapes = [tuple(w.shape) for w in model.get_weights()]
    for i, (a, shape) in enumerate(zip(arrays, shapes, strict=True)):
        if a.shape != shape or a.dtype.kind != "f" or not np.all(np.isfinite(a)):
            raise ExplorerError(f"the reach prior's weights {path}: array {prefix}w{i} is {a.dtype}{list(a.shape)}, "
                                f"the model takes finite float{list(shape)}: {fix}")
    model.set_weights([a.astype(np.float32) for a in arrays])
    return model


def reach_features(model: keras.Model | None = None) -> keras.Model:
    """The reach prior's picture half: frame ``uint8[64, 64, 3]`` to the 64 features its distance is judged from
    (how open the view is, and which way), a fixed embedding for the episodic novelty
    (``novelty.embedding = "reach"``). ``model`` is one of :func:`load_reach`'s (by default the shipped file's
    first)."""
    model = model if model is not None else load_reach()[0]
    frame = model.inputs[0]
    flat = next(layer for layer in model.layers if isinstance(layer, keras.layers.Flatten))
    dense = next(layer for layer in model.layers if isinstance(layer, keras.layers.Dense) and layer.input is flat.output)
    return keras.Model(frame, dense.output, name="reach_features")


def reach_head(model: keras.Model) -> keras.Model:
    """The reach prior's other half: :func:`reach_features`' 64 features and the action to the distance, so
    that a frame's features are computed once for all of a decision's candidates."""
    join = next(layer for layer in model.layers if isinstance(layer, keras.layers.Concatenate))
    features, action = keras.Input((64,)), keras.Input((int(model.inputs[1].shape[-1]),))
    h = join([features, action])
    for layer in model.layers[model.layers.index(join) + 1:]:
        h = layer(h)
    return keras.Model([features, action], h, name="reach_head")


class Reach:
    """Scores candidate actions by the distance the reach prior expects each to cover from a frame: with an
    ensemble, by its models' mean.

    Args:
      models: :func:`load_reach`'s models, or one model (by default the shipped file's).
      buttons: the pad's buttons, in the order they follow the sticks in an action as sent.
    """

    def __init__(self, models: keras.Model | Sequence[keras.Model] | None = None, buttons: Sequence[str] = ("a",)):
        models = load_reach() if models is None else [models] if isinstance(models, keras.Model) else models
        self.models = tuple(models)
        widths = {int(m.inputs[1].shape[-1]) for m in self.models}
        if len(widths) != 1:
            raise ValueError(f"a reach ensemble is one or more models of one action width, not {sorted(widths)}")
        self.reads_a = widths == {4}
        self.a_at = 4 + buttons.index("a") if "a" in buttons else None
        self.halves = [(reach_features(m), reach_head(m)) for m in self.models]

    def __call__(self, frame: Any, sent: Any) -> tf.Tensor:
        """``float32[K]``: the predicted 8-step distance of each of ``sent`` (``float32[K, 4 + n]``, actions as
        sent: camera x, camera y, walk x, walk y, buttons) from ``frame`` (``uint8[64, 64, 3]``)."""
        sent = tf.convert_to_tensor(sent, tf.float32)
        k = tf.shape(sent)[0]
        frame = tf.convert_to_tensor(frame, tf.uint8)[None]
        moves = tf.gather(sent, [0, 2, 3], axis=1)
        if self.reads_a:  # A's column, or never pressed on a pad without it
            a = sent[:, self.a_at:self.a_at + 1] if self.a_at is not None else tf.zeros([k, 1])
            moves = tf.concat([moves, a], axis=1)
        total = 0.0
        for features, head in self.halves:  # the frame's features once per model, not once per candidate
            total += head([tf.repeat(features(frame, training=False), k, axis=0), moves], training=False)[:, 0]
        return total / len(self.halves)
