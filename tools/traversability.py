"""Can the picture say which of the prior's draws will get somewhere? A learned scorer, screened on held-out maps.

``tools/oracle_ceilings.py`` shows that choosing each of the prior's draws by a
perfect map of walls (``reach``: the longest free path) is worth a great deal on
some maps, with no memory at all. This tool asks how much of that a network can
see in the newest frame alone.

1. **Collect.** ``sticky_prior`` plays each suite map (``--data-steps`` steps at
   ``--data-seed``, a seed the screens do not use); each step keeps the newest frame
   (64 x 64 colour, as the agent sees it), the mean of the next 8 actions sent
   (camera x, walk x, walk y and, with ``--inputs 4``, the A button that opens doors)
   and how far the player got in the next ``--horizon`` steps, in map units, read from
   the engine for this measurement only. With ``--chooser-data`` the play of the chooser (each held
   draw the best of ``--draws`` by a reach prior) is added: the moves a chooser picks are those whose
   distance a prior overrates, and ``sticky_prior``'s play holds few of them.
2. **Train**, for each map, a small CNN on the other three maps (each frame also
   mirrored, with camera x and walk x negated): frame and action in, the distance
   out. It prints the Spearman correlation of its predictions with the
   distances on the map it never saw.
3. **Screen.** On each map, the model that never saw it chooses every draw: the best
   of ``--draws`` draws of the prior by predicted distance (``oracle_ceilings``'
   harness), beside ``sticky_prior`` in the same run.

Held-out models already in ``--out`` are reused, so a folder keeps the recipe it was trained with
(``recipe.json``: horizon, inputs, epochs, ``--augment``, seeds); another recipe is refused there.

``--ship`` instead trains one model on all four maps and writes the weights the
package ships for ``learner.actions.plan_score = "reach"`` (``explorer/agent/reach.py``).
``--join OUT IN...`` writes the models of several weights files as one ensemble,
which the package scores by its models' mean; ``--join-held-out OUT IN...`` does so
for each map's held-out priors of several ``--models-only`` folders.

``--labels pixels`` trains the same model on how far the *view* moved over the horizon, from the frames
alone (``explorer.agent.reach.view_change``): no position is read to train it, only to judge it, so the same
recipe trains a reach prior for any game, and ``--sessions DIR... --ship NPZ --labels pixels`` trains one on
recorded sessions of any game whose frames are 64 x 64 colour.

``--labels reachability`` labels the same windows by a second network trained first on the same play,
from its frames alone (:func:`train_reachability`): whether two frames of an episode are at most
:data:`NEAR` steps apart or at least :data:`FAR`. Its "how unlikely is it that the frame 8 steps on is near
this one" is the label: a learned temporal distance, which learns that a turn on the spot stays near.

With the default labels the model is trained with the engine's positions, so it is prior knowledge of
Doom's pictures, not something a run learns; the screen tells whether such a
prior is worth building into the agent.

    python tools/traversability.py --out runs/traversability --seeds 0 1 --jobs 2
    python tools/traversability.py --out runs/traversability --ship explorer/agent/reach_doom.npz
    python tools/traversability.py --join explorer/agent/reach_doom.npz runs/a.npz runs/b.npz
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import keras

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import oracle_ceilings  # noqa: E402
from bench_explore import ALL_MAPS, GYM_MAPS, MAPS  # noqa: E402

from explorer.agent.reach import UNITS, build_reach, load_reach, save_reach, view_change  # noqa: E402
from explorer.core import ExplorerError, Step  # noqa: E402
from explorer.files import atomic_save  # noqa: E402

#: agent steps a distance is measured over: one held draw of the prior
HOLD = oracle_ceilings.HOLD
#: distances are learned in hundreds of map units
SCALE = UNITS
#: steps a move is charged with the damage that follows it: a held draw, then the longest wait for the next blow of
#: a damaging floor (Doom's nukage strikes every 32 tics, 8 agent steps of 4 tics)
HURT = HOLD + 8
#: the columns of an action as sent (sticks, then the pad's buttons, A first) a model with 3 or 4 inputs reads
COLUMNS = {3: [0, 2, 3], 4: [0, 2, 3, 4]}

#: reachability's pairs: two frames of one episode at most NEAR steps apart are near, at least FAR apart far
#: (episodic curiosity through reachability's recipe, with a frame skip of 4 as here), and at most FAR_MOST
NEAR, FAR, FAR_MOST = 5, 25, 200
#: frame pairs a reachability network is trained on per epoch, per frame of play
PAIRS_PER_FRAME = 1


def build_reachability() -> keras.Model:
    """Two frames ``uint8[64, 64, 3]`` to the logit that they are near in time (:data:`NEAR`): a picture
    network (the reach prior's layers) gives each frame 64 features, and a comparator reads both, their product
    and their difference; the comparator is symmetric in the two frames."""
    import keras

    from explorer.agent.reach import FRAME

    frame = keras.Input(FRAME, dtype="uint8")
    x = keras.layers.Rescaling(1 / 255)(frame)
    for width, kernel in [(16, 5), (32, 3), (32, 3), (32, 3)]:
        x = keras.layers.Conv2D(width, kernel, strides=2, activation="relu", padding="same")(x)
    place = keras.Model(frame, keras.layers.Dense(64)(keras.layers.Flatten()(x)), name="place")
    a, b = keras.Input(FRAME, dtype="uint8"), keras.Input(FRAME, dtype="uint8")
    ea, eb = place(a), place(b)
    h = keras.layers.Concatenate()([ea + eb, ea * eb, keras.ops.abs(ea - eb)])
    h = keras.layers.Dense(64, activation="relu")(h)
    h = keras.layers.Dense(64, activation="relu")(h)
    return keras.Model([a, b], keras.layers.Dense(1)(h), name="reachability")


def pairs(episodes: np.ndarray, count: int, rng: np.random.Generator, usable: np.ndarray | None = None,
          gaps: tuple[int, int] = (NEAR, FAR)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` pairs of steps of one episode, half near (1 to ``gaps[0]`` steps apart, :data:`NEAR`) and half
    far (``gaps[1]``, :data:`FAR`, to :data:`FAR_MOST`), in a random order: first steps, second steps, and 1.0
    for near; ``usable``: the steps a pair may hold (by default all).

    Raises:
      ExplorerError: too few pairs of usable steps of one episode are that far apart."""
    n = len(episodes)
    ok = np.ones(n, bool) if usable is None else usable
    first, second, near = [], [], []
    for close, want in ((True, count // 2), (False, count - count // 2)):
        lo, hi = (1, gaps[0]) if close else (gaps[1], FAR_MOST)
        for _ in range(100):  # tries: each keeps the pairs whose steps are of one episode
            if want <= 0:
                break
            t = rng.integers(0, n, 2 * want)
            u = t + rng.integers(lo, hi + 1, 2 * want)
            t, u = t[u < n], u[u < n]
            keep = (episodes[t] == episodes[u]) & ok[t] & ok[u]
            t, u = t[keep][:want], u[keep][:want]
            swap = rng.random(len(t)) < 0.5  # either frame first
            first.append(np.where(swap, u, t))
            second.append(np.where(swap, t, u))
            near.append(np.full(len(t), float(close), np.float32))
            want -= len(t)
        if want > 0:
            raise ExplorerError(f"too few pairs of steps {lo} to {hi} apart in one episode: collect longer "
                                "episodes")
    order = rng.permutation(count)
    return np.concatenate(first)[order], np.concatenate(second)[order], np.concatenate(near)[order]


def train_reachability(files: list[Path], epochs: int, seed: int = 0, own: bool = False,
                       gaps: tuple[int, int] = (NEAR, FAR)) -> keras.Model:
    """:func:`build_reachability` trained on the frames of the play at ``files`` (each with its episodes),
    every pair mirrored at random (both frames alike); with ``own`` on the first :data:`OWN_SHARE` of each
    file's steps only; ``gaps``: near is at most ``gaps[0]`` steps apart, far at least ``gaps[1]``. Prints
    its accuracy on pairs of the last file it did not train on (of its last tenth)."""
    import keras

    frames, episodes, at = [], [], 0
    for path in files:
        d = np.load(path)
        f, e = d["frames"], d["episodes"]
        if own:
            k = int(OWN_SHARE * len(f))
            f, e = f[:k], e[:k]
        frames.append(f)
        episodes.append(e + at)  # no pair across two files
        at += int(e.max()) + 1
    frames_, episodes_ = np.concatenate(frames), np.concatenate(episodes)
    del frames
    n = len(frames_)
    judged = np.zeros(n, bool)
    judged[n - n // 10:] = True
    rng = np.random.default_rng(seed)

    class Pairs(keras.utils.PyDataset):
        def __init__(self) -> None:
            super().__init__()
            self.draw()

        def draw(self) -> None:
            self.a, self.b, self.near = pairs(episodes_, PAIRS_PER_FRAME * n, rng, ~judged, gaps)

        def __len__(self) -> int:
            return -(-len(self.a) // 256)

        def __getitem__(self, i: int) -> tuple:
            a, b = frames_[self.a[i * 256:(i + 1) * 256]], frames_[self.b[i * 256:(i + 1) * 256]]
            flip = rng.random(len(a)) < 0.5
            a = np.where(flip[:, None, None, None], a[:, :, ::-1], a)
            b = np.where(flip[:, None, None, None], b[:, :, ::-1], b)
            return (a, b), self.near[i * 256:(i + 1) * 256]

        def on_epoch_end(self) -> None:
            self.draw()

    keras.utils.set_random_seed(seed)
    net = build_reachability()
    net.compile(keras.optimizers.Adam(1e-3), keras.losses.BinaryCrossentropy(from_logits=True),
                metrics=[keras.metrics.BinaryAccuracy(threshold=0.0)])
    net.fit(Pairs(), epochs=epochs, verbose=2)
    try:
        a, b, near = pairs(episodes_, min(20_000, n), np.random.default_rng(seed + 1), judged, gaps)
    except ExplorerError:
        print("reachability: the last tenth of the play is too short to judge the network on", flush=True)
        return net
    logits = net.predict([frames_[a], frames_[b]], batch_size=1024, verbose=0)[:, 0]
    print(f"reachability: {np.mean((logits > 0) == (near > 0.5)):.3f} of {len(a)} pairs of the last tenth of the "
          "play judged near or far right", flush=True)
    return net


def far(net: keras.Model, before: np.ndarray, after: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """How far apart each pair of ``before`` and ``after`` frames is, by the reachability network ``net``: the
    probability that they are not near (0 to 1)."""
    out = np.empty(len(before), np.float32)
    for at in range(0, len(before), chunk):
        logit = net.predict([before[at:at + chunk], after[at:at + chunk]], batch_size=1024, verbose=0)[:, 0]
        out[at:at + chunk] = 1.0 / (1.0 + np.exp(logit))
    return out


def chooser_play(out: Path, map_name: str, seed: int, prior: Path) -> Path:
    """Where the play of ``prior``'s chooser on ``map_name`` is kept in ``out``.

    Named by the prior's content, so another prior, or this one retrained in place,
    never reuses this play; the same prior in another folder does. The file is hashed as it is read, never
    held whole: its size is checked only when the prior is loaded."""
    with open(prior, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()[:12]
    return out / f"data_{map_name}_{seed}_chosen_by_{digest}.npz"


def collect(map_name: str, seed: int, steps: int, path: Path, prior: Path | None = None, draws: int = 8) -> Path:
    """``sticky_prior``'s play on ``map_name``: newest frames, actions sent, positions, episode numbers. With
    ``prior`` (a weights file) the chooser's play instead: each held draw the best of ``draws`` draws of the
    prior by that reach prior, so the data hold the moves it picks, those it would misjudge."""
    from explorer.agent.actor import RandomActor
    from explorer.agent.networks import StickRange
    from explorer.config import load
    from explorer.envs import make_env

    config = load(None, [f"run.seed={seed}", *ALL_MAPS[map_name], "run.agent=sticky_prior",
                         f"run.sticky_steps={HOLD}"])
    env = make_env(config)
    doom = config.game.name == "vizdoom"
    sticks = StickRange(config.learner, config.pad.buttons)
    actor = (oracle_ceilings.ChoosingActor(seed, sticks, draws, reach_scorer(prior, config.pad.buttons)) if prior
             else RandomActor(seed, sticky_steps=HOLD, sticks=sticks))
    frames, actions, positions, episodes, hurt = [], [], [], [], []
    step, episode = env.reset(), 0
    try:
        health = _health(env) if doom else 0.0
        for _ in range(steps):
            frames.append(np.asarray(step.obs)[-1])
            p = step.info["position"]
            positions.append(_place(p))
            episodes.append(episode)
            action = actor.act(step)
            actions.append(action)
            step = env.step(action)
            if step.last:
                hurt.append(env.outcome == "death")
                step, episode = env.reset(), episode + 1
                health = _health(env) if doom else 0.0
            else:
                before, health = health, _health(env) if doom else 0.0
                hurt.append(health < before)
    finally:
        env.close()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, frames=np.array(frames), actions=np.array(actions), positions=np.array(positions),
                                episodes=np.array(episodes), hurt=np.array(hurt, bool))

    atomic_save(path, write)  # a collection stopped part-way leaves no file that a later run would reuse
    return path


def from_sessions(paths: list[str], path: Path, most: int) -> Path:
    """The play of recorded sessions (``explorer record``, or any run with ``record.dir``), as :func:`collect`
    writes play, at ``path``: frames, actions as sent, episode numbers; no positions, so it trains a reach prior
    on ``--labels pixels`` only. At most ``most`` steps are read; steps whose action the session does not know
    (a person's play) are kept as unknown and never learned from.

    Raises:
      ExplorerError: no session there, a session's frames are not the reach prior's, or none knows its actions.
    """
    from explorer.agent.reach import FRAME
    from explorer.envs.sessions.reader import find_sessions, open_sessions

    sessions = open_sessions(find_sessions(paths))
    if not sessions:
        raise ExplorerError(f"no recorded session in {' '.join(paths)}: give session folders or a folder of them")
    frames, actions, episodes, episode, total = [], [], [], -1, 0
    for session in sessions:
        if tuple(session.frame_shape or ()) != FRAME:
            raise ExplorerError(f"session {session.path} holds frames of {session.frame_shape}; the reach prior "
                                f"reads {FRAME}: record with observation.height = observation.width = 64 in colour")
        episode += 1  # a session never continues another's episode
        for chunk, steps in session.iter_chunks():
            take = min(len(chunk), most - total)
            episode_of = episode + np.cumsum(steps.first[:take]) - (1 if steps.first[:1].any() else 0)
            frames.append(chunk[:take])
            actions.append(steps.action[:take, :4])  # the sticks: every pad's first four columns
            episodes.append(episode_of)
            episode, total = (int(episode_of[-1]) if take else episode), total + take
            if total >= most:
                break
        if total >= most:
            break
    actions_ = np.concatenate(actions)
    if not np.isfinite(actions_).all(axis=1).any():
        raise ExplorerError("the sessions know none of their actions (a person's play, explorer record): record a "
                            "run that sends them (explore or play with record.dir)")
    n = len(actions_)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, frames=np.concatenate(frames), actions=actions_,
                                positions=np.full((n, 2), np.nan, np.float32), episodes=np.concatenate(episodes))

    atomic_save(path, write)
    return path


def samples(path: Path, horizon: int = HOLD, inputs: int = 3, hurt: bool = False,
            labels: str = "positions", turns: bool = True, labeler=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every step whose next ``horizon`` steps stay in its episode: its frame, the mean of the next ``HOLD``
    steps' actions (camera x, walk x, walk y and, with ``inputs`` 4, the A button) and the distance the player
    covered in ``horizon`` steps, in ``SCALE`` map units; with ``labels`` ``"pixels"`` instead how far the view
    moved in those steps, judged from its frames alone (:func:`explorer.agent.reach.view_change`; ``turns``:
    the camera turns, as in Doom); with ``"reachability"`` how far apart ``labeler`` (a trained reachability
    network, :func:`far`) judges the frames now and ``horizon`` steps on.

    With ``hurt``, a move the player is hurt or killed within ``HURT`` steps of (a held draw, then the longest
    wait for a damaging floor's next blow) counts as going nowhere, distance 0: the steps into a pit of nukage,
    which open ground otherwise rates highest. Such a move is kept whenever its draw's ``HOLD`` steps are of
    its episode, even if the episode ends (in death) within ``horizon`` steps.

    Raises:
      ExplorerError: ``hurt`` and the play was collected without the damage it took.
    """
    d = np.load(path)
    frames, actions, positions, episodes = d["frames"], d["actions"], d["positions"], d["episodes"]
    n = len(frames) - max(horizon, HOLD)
    inside = episodes[:n] == episodes[horizon:horizon + n]
    if labels == "pixels":
        distance = view_change(frames[:n], frames[horizon:horizon + n], turns)
    elif labels == "reachability":
        if labeler is None:
            raise ValueError("reachability labels need a trained reachability network")
        distance = np.zeros(n, np.float32)  # labelled only where the window stays in its episode
        distance[inside] = far(labeler, frames[:n][inside], frames[horizon:horizon + n][inside])
    elif not np.isfinite(positions).all():
        raise ExplorerError(f"{path} holds no positions (recorded sessions): train on it with --labels pixels")
    else:
        distance = np.hypot(*(positions[horizon:horizon + n] - positions[:n]).T) / SCALE
    known = np.isfinite(actions).all(axis=1)  # a recorded person's play: its actions are not known
    summed = np.cumsum(np.concatenate([np.zeros((1, actions.shape[1])), np.where(known[:, None], actions, 0)]), axis=0)
    mean = ((summed[HOLD:HOLD + n] - summed[:n]) / HOLD)[:, COLUMNS[inputs]]
    unknown = np.cumsum(np.concatenate([[0], ~known]))
    inside &= unknown[HOLD:HOLD + n] == unknown[:n]  # every action of the draw known
    if hurt:
        if "hurt" not in d:
            raise ExplorerError(f"{path} was collected without the damage the player took: collect it again "
                                "(give another --out)")
        harm = hurts(d["hurt"], episodes, HURT)[:n]
        drawn = episodes[:n] == episodes[HOLD:HOLD + n]  # the held draw's actions are all of this episode
        inside = inside | (harm & drawn)
        distance = np.where(harm, 0.0, distance)
    return frames[:n][inside], mean[inside].astype(np.float32), distance[inside].astype(np.float32)


def hurts(hurt: np.ndarray, episodes: np.ndarray, window: int) -> np.ndarray:
    """For each step, whether the player was hurt (or killed) in it or the ``window - 1`` steps after it, in the
    same episode: ``hurt[t]`` says the step ``t``'s action was followed by damage."""
    n = len(hurt)
    out = np.zeros(n, bool)
    for lag in range(min(window, n)):
        out[:n - lag] |= hurt[lag:] & (episodes[lag:] == episodes[:n - lag])
    return out


def colours(frames: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``frames`` (``uint8[B, H, W, 3]``) under a random light and tint each: a brightness gain in [0.6, 1.4]
    and a gain per channel in [0.8, 1.2], so that the model judges openness by shape, not by one map's colours."""
    gain = rng.uniform(0.6, 1.4, (len(frames), 1, 1, 1)) * rng.uniform(0.8, 1.2, (len(frames), 1, 1, 3))
    return np.clip(frames * gain.astype(np.float32), 0, 255).astype(np.uint8)


def train(data: dict[str, Path | list[Path]], held_out: str | None, epochs: int, path: Path, horizon: int = HOLD,
          inputs: int = 3, augment: bool = False, seed: int = 0, hurt: bool = False,
          labels: str = "positions", turns: bool = True, own: bool = False,
          report: dict | None = None, gaps: tuple[int, int] = (NEAR, FAR)) -> float:
    """Train :func:`explorer.agent.reach.build_reach` on every map of ``data`` but ``held_out`` (a map's play
    file, or several) and save it to ``path`` (a ``.keras`` model, or with ``.npz`` the arrays the package
    ships); returns the Spearman correlation of the predicted and true distances on ``held_out``'s first file
    (NaN with none). ``hurt``: a move followed by damage goes nowhere (:func:`samples`). ``labels``: what the
    model learns, the engine's distances (``"positions"``) or the view's change (``"pixels"``); it is judged
    against the engine's distances either way; ``turns``: the view's camera turns (:func:`samples`).

    With ``own``, ``data`` is one map's play and ``held_out`` that map: the model is trained on the first
    :data:`OWN_SHARE` of its steps and judged on the rest (a model from the map's own play, for labels that
    need no positions).

    With ``labels`` ``"reachability"`` a reachability network is trained first on the same play
    (:func:`train_reachability`, as many epochs, ``gaps`` its near and far) and labels it; the Spearman of
    its own labels on ``held_out`` (never trained on, or its own last quarter) with the true distances goes
    to ``report``'s ``"label"``."""
    import keras
    from novelty_fidelity import spearman

    files = {m: [p] if isinstance(p, Path) else list(p) for m, p in data.items()}
    trained_on = files[held_out] if own else [p for m, paths in files.items() if m != held_out for p in paths]
    labeler = train_reachability(trained_on, epochs, seed, own, gaps) if labels == "reachability" else None
    parts = [samples(p, horizon, inputs, hurt, labels, turns, labeler) for p in trained_on]
    if own:
        parts = [_cut(part, True) for part in parts]
    actions = np.concatenate([a for _, a, _ in parts])
    distances = np.concatenate([y for _, _, y in parts])
    if labels != "positions":  # in units of the play's mean label: a small sprite's game learns as a wide view's
        distances = distances / max(float(distances.mean()), 1e-6)
    n = len(distances)  # the frames, then the same mirrored (a turn or strafe the other way), in one array:
    frames = np.empty((2 * n, *parts[0][0].shape[1:]), np.uint8)  # each part freed once copied, so memory
    at = 0  # peaks near 3 copies of the play, not 4
    while parts:
        f = parts.pop(0)[0]
        frames[at:at + len(f)] = f
        at += len(f)
    frames[n:] = frames[:n, :, ::-1]
    actions = np.concatenate([actions, actions * np.array([-1, -1, 1, 1][:inputs], np.float32)])
    distances = np.concatenate([distances, distances])
    keras.utils.set_random_seed(seed)
    net = build_reach(inputs)
    net.compile(keras.optimizers.Adam(1e-3), "huber")
    if augment:  # a fresh light and tint for every frame of every epoch (colours)
        class Batches(keras.utils.PyDataset):
            def __init__(self) -> None:
                super().__init__()
                self.rng = np.random.default_rng(seed)
                self.order = self.rng.permutation(len(frames))

            def __len__(self) -> int:
                return -(-len(frames) // 256)

            def __getitem__(self, i: int) -> tuple:
                at = np.sort(self.order[i * 256:(i + 1) * 256])
                return (colours(frames[at], self.rng), actions[at]), distances[at]

            def on_epoch_end(self) -> None:
                self.order = self.rng.permutation(len(frames))

        net.fit(Batches(), epochs=epochs, verbose=2)
    else:
        net.fit([frames, actions], distances, batch_size=256, epochs=epochs, verbose=2, shuffle=True)
    if path.suffix == ".npz":
        save_reach(net, path)
    else:
        net.save(path)
    if held_out is None:
        return float("nan")
    f, a, y = samples(files[held_out][0], horizon, inputs, hurt)
    if own:
        f, a, y = _cut((f, a, y), False)
    if labeler is not None and report is not None:
        _, _, mine = samples(files[held_out][0], horizon, inputs, hurt, labels, turns, labeler)
        report["label"] = float(spearman(_cut((mine,), False)[0] if own else mine, y))
    return float(spearman(net.predict([f, a], batch_size=1024, verbose=0)[:, 0], y))


#: how far apart two rooms of a Gymnasium game are put, in its units: a move into another room is a long one
ROOM_APART = 1000.0


def _place(p) -> tuple[float, float]:
    """A position as the play's ``(x, y)``: in a game of rooms (Montezuma's Revenge) each room is set
    :data:`ROOM_APART` along x from the last, so that a move into another room is the longest there is."""
    room = getattr(p, "room", None) or 0
    return (float(p.x) + ROOM_APART * room, float(p.y))


#: the share of a map's own play a model of ``--protocol own`` is trained on; it is judged on the rest
OWN_SHARE = 0.75


def _cut(arrays: tuple[np.ndarray, ...], first: bool) -> tuple[np.ndarray, ...]:
    """The first :data:`OWN_SHARE` of :func:`samples`' arrays (``first``), or the rest after a gap of two held
    draws, so that no move of one part overlaps a move of the other."""
    k = int(OWN_SHARE * len(arrays[0]))
    return tuple(x[:k] if first else x[k + 2 * HOLD:] for x in arrays)


def _health(env) -> float:
    """The player's health in the built-in game, read from the engine for this measurement only."""
    import vizdoom

    return float(env.game.game.get_game_variable(vizdoom.GameVariable.HEALTH))


def scorer(path: Path):
    """The :class:`oracle_ceilings.ChoosingActor` score of the model at ``path`` (a ``.keras`` model, or weights
    as the package loads them): each candidate's predicted distance from the step's newest frame."""
    import keras

    if Path(path).suffix == ".npz":
        return reach_scorer(Path(path))
    net = keras.models.load_model(path)

    def score(step: Step, sent: np.ndarray) -> np.ndarray:
        frame = np.repeat(np.asarray(step.obs)[-1][None], len(sent), axis=0)
        columns = COLUMNS[int(net.inputs[1].shape[-1])]
        return net([frame, sent[:, columns].astype(np.float32)], training=False).numpy()[:, 0]

    return score


def reach_scorer(path: Path, buttons: tuple[str, ...] = ("a",)):
    """The :class:`oracle_ceilings.ChoosingActor` score of the weights file at ``path`` (one model or an
    ensemble), as the package's planner scores: :class:`explorer.agent.reach.Reach`."""
    from explorer.agent.reach import Reach

    reach = Reach(load_reach(path), tuple(buttons))

    def score(step: Step, sent: np.ndarray) -> np.ndarray:
        return reach(np.asarray(step.obs)[-1], sent.astype(np.float32)).numpy()

    return score


def join(out: Path, paths: list[Path]) -> int:
    """Write the models of the weights files at ``paths`` (each checked as the package checks its own) as one
    ensemble at ``out``; returns the number of models."""
    models = [model for path in paths for model in load_reach(path)]

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            save_reach(models, f)
        load_reach(tmp)  # what replaces out is what the package reads

    atomic_save(out, write)  # out may be one of paths: it holds the old models or the new, never a part
    return len(models)


def _collect(task: tuple) -> Path:
    return collect(*task)


def _screen(task: tuple) -> dict:
    agent, map_name, seed, steps, draws, model_path = task
    if agent == "sticky_prior":
        return oracle_ceilings.run("sticky_prior", map_name, seed, steps)
    return oracle_ceilings.run(agent, map_name, seed, steps, draws, scorer=scorer(Path(model_path)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/traversability", help="folder for the data, the models and results.json")
    ap.add_argument("--data-steps", type=int, default=40_000, help="steps of sticky_prior play collected per map")
    ap.add_argument("--data-seed", type=int, default=100, help="the seed of the collected play (not a screen's)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--horizon", type=int, default=HOLD, help="agent steps the distance is learned over (a draw is "
                    f"held {HOLD}; a door takes longer than that to open and pass)")
    ap.add_argument("--inputs", type=int, choices=sorted(COLUMNS), default=3,
                    help="action inputs: 3 the moves alone (the shipped prior), 4 the moves and the A button")
    ap.add_argument("--augment", action="store_true", help="train under a random light and tint per frame")
    ap.add_argument("--chooser-data", metavar="PRIORS", help="add the chooser's play to each model's data (the best "
                    "of --draws draws by a reach prior, --data-steps per map): for a held-out model, played on each "
                    "other map by PRIORS/reach_without_<map>.npz, a prior that never saw its map either; with --ship, "
                    "by the weights file PRIORS")
    ap.add_argument("--hurt", action="store_true", help="a move the player is hurt or killed within a draw of (and "
                    "the wait for a damaging floor's next blow) is learned as going nowhere")
    ap.add_argument("--labels", choices=["positions", "pixels", "reachability"], default="positions",
                    help="what the model learns: the distance the engine measured (the Doom reference), how far the "
                    "view moved, from the frames alone (explorer.agent.reach.view_change), or how far apart a "
                    "reachability network trained on the same play judges the frames now and a draw on; the last "
                    "two need no positions (a prior for any game); the model is judged against the engine's "
                    "distances either way")
    ap.add_argument("--gaps", type=int, nargs=2, default=[NEAR, FAR], metavar=("NEAR", "FAR"),
                    help="with --labels reachability: two frames at most NEAR steps apart are near, at least FAR "
                    f"(and at most {FAR_MOST}) far")
    ap.add_argument("--view", choices=["turning", "fixed"], help="with --labels pixels: the game's camera turns "
                    "with camera x (first person: Doom, the default on its maps) or stays put (a room of Montezuma's "
                    "Revenge, a MiniGrid maze: the default on the Gymnasium games and for --sessions)")
    ap.add_argument("--protocol", choices=["held-out", "own"], default="held-out", help="held-out: each map's "
                    "model is trained on the other maps' play; own: on the first 3/4 of the "
                    "map's own play, judged on the rest")
    ap.add_argument("--gym", action="store_true", help="the Gymnasium suite's games (Montezuma's Revenge, a MiniGrid "
                    "maze) instead of Doom's maps; with --models-only")
    ap.add_argument("--train-seed", type=int, default=0, help="the seed of the model's initial weights and batches")
    ap.add_argument("--steps", type=int, default=10_000, help="agent steps per screen run")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--draws", type=int, default=8, help="draws of the prior the model chooses among")
    ap.add_argument("--maps", nargs="+", choices=list(MAPS), help="screen on these maps only (default: all four)")
    ap.add_argument("--agents", nargs="+", choices=["sticky_prior", "traversability"],
                    default=["sticky_prior", "traversability"], help="the screen's agents")
    ap.add_argument("--jobs", type=int, default=1, help="collections and screen runs at a time")
    ap.add_argument("--models-only", action="store_true", help="collect and train the held-out models, also as the "
                    "arrays load_reach reads (reach_without_<map>.npz, for bench_explore --reach-held-out), no screen")
    ap.add_argument("--ship", metavar="NPZ", help="instead of the screen, train on every suite map and write the "
                    "weights the package ships (explorer/agent/reach_doom.npz)")
    ap.add_argument("--sessions", nargs="+", metavar="DIR", help="with --ship and --labels pixels: train on these "
                    "recorded sessions (explore or play with record.dir, frames of 64 x 64 colour; at most 4 x "
                    "--data-steps steps) instead of collecting Doom play: a reach prior for the game they recorded")
    ap.add_argument("--join", nargs="+", metavar="NPZ", help="run nothing: write the models of the second and later "
                    "weights files as one ensemble to the first")
    ap.add_argument("--join-held-out", nargs="+", metavar="DIR", help="run nothing: write each map's held-out priors "
                    "(reach_without_<map>.npz) of the second and later folders as one ensemble into the first")
    args = ap.parse_args(argv)
    joins = ([(Path(args.join[0]), [Path(p) for p in args.join[1:]])] if args.join else []) + [
        (Path(args.join_held_out[0]) / f"reach_without_{m}.npz",
         [Path(d) / f"reach_without_{m}.npz" for d in args.join_held_out[1:]]) for m in MAPS if args.join_held_out]
    for target, sources in joins:
        try:
            if not sources:
                raise ExplorerError("give the weights files to join after the file to write")
            target.parent.mkdir(parents=True, exist_ok=True)
            print(f"wrote {target}: {join(target, sources)} models")
        except (ExplorerError, ValueError) as err:
            print(f"traversability: {target}: {err}", file=sys.stderr)
            return 2
    if joins:
        return 0
    if not 1 <= args.gaps[0] < args.gaps[1] <= FAR_MOST:
        print(f"traversability: --gaps {args.gaps[0]} {args.gaps[1]}: give NEAR and FAR with 1 <= NEAR < FAR <= "
              f"{FAR_MOST}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if args.sessions:
        if not args.ship or args.labels == "positions":
            print("traversability: --sessions hold no positions: train a prior on them with --ship NPZ and "
                  "--labels pixels or reachability", file=sys.stderr)
            return 2
        if args.inputs != 3:
            print("traversability: --sessions train on the sticks alone: leave out --inputs 4", file=sys.stderr)
            return 2
        out.mkdir(parents=True, exist_ok=True)
        try:
            play = from_sessions(args.sessions, out / "data_sessions.npz", 4 * args.data_steps)
        except ExplorerError as err:
            print(f"traversability: {err}", file=sys.stderr)
            return 2
        train({"sessions": play}, None, args.epochs, Path(args.ship), args.horizon, args.inputs, args.augment,
              args.train_seed, labels=args.labels, turns=args.view == "turning", gaps=tuple(args.gaps))
        print(f"wrote {args.ship}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    maps = list(GYM_MAPS if args.gym else MAPS)
    own = args.protocol == "own"
    if args.gym and not args.models_only:
        print("traversability: the Gymnasium games have no chooser screen here: give --models-only, then "
              "python tools/bench_explore.py --gym --reach-own (or --reach-held-out) OUT", file=sys.stderr)
        return 2
    if args.gym and args.hurt:
        print("traversability: --hurt reads Doom's health: leave it out with --gym", file=sys.stderr)
        return 2
    view = args.view or ("fixed" if args.gym else "turning")
    models = {m: out / f"model_{'own' if own else 'without'}_{m}.keras" for m in maps}
    recipe = {"horizon": args.horizon, "inputs": args.inputs, "epochs": args.epochs, "augment": args.augment,
              "train_seed": args.train_seed, "data_seed": args.data_seed}
    if args.hurt:
        recipe["hurt"] = True
    if args.labels != "positions":
        if args.hurt:
            print(f"traversability: --hurt reads the damage from the engine: with --labels {args.labels} leave it "
                  "out", file=sys.stderr)
            return 2
        recipe.update(labels=args.labels, **({"view": view} if args.labels == "pixels" else {}))
        if args.labels == "reachability" and tuple(args.gaps) != (NEAR, FAR):
            recipe["gaps"] = args.gaps
    if own:
        recipe["protocol"] = "own"
    if args.gym:
        recipe["gym"] = True
    chooser = Path(args.chooser_data).resolve() if args.chooser_data else None
    if chooser is not None:
        priors = [chooser] if args.ship else [chooser / f"reach_without_{m}.npz" for m in maps]
        missing = [p for p in priors if not p.is_file()]
        if missing:
            print(f"traversability: --chooser-data: {missing[0]} is missing: give "
                  f"{'a weights file' if args.ship else 'a folder of held-out priors (--models-only)'}",
                  file=sys.stderr)
            return 2
        recipe.update(chooser_data=str(chooser), draws=args.draws)
    kept = out / "recipe.json"
    if not args.ship and any(p.exists() for p in models.values()):  # models are reused: this recipe's only
        try:
            theirs = json.loads(kept.read_text()) if kept.stat().st_size < 4096 else None
        except (OSError, ValueError):
            theirs = None
        if theirs != recipe:
            print(f"traversability: {out}'s held-out models were trained with {theirs or 'another recipe'}, "
                  f"not {recipe}: give another --out", file=sys.stderr)
            return 2
    if not args.ship:
        kept.write_text(json.dumps(recipe) + "\n")
    data = {m: out / f"data_{m}_{args.data_seed}.npz" for m in maps}
    todo = [(m, args.data_seed, args.data_steps, data[m]) for m in maps if not data[m].exists()]
    # the chooser's play, per map played and per prior: (map played, the prior's map left out or None)
    chosen: dict[tuple[str, str | None], Path] = {}
    if chooser is not None:
        for held in [None] if args.ship else maps:
            prior = chooser if held is None else chooser / f"reach_without_{held}.npz"
            for m in maps:
                if m != held:
                    chosen[m, held] = chooser_play(out, m, args.data_seed, prior)
                    if not chosen[m, held].exists():
                        todo.append((m, args.data_seed, args.data_steps, chosen[m, held], prior, args.draws))

    def data_for(held: str | None) -> dict[str, list[Path]]:
        return {m: [data[m], *([chosen[m, held]] if (m, held) in chosen else [])] for m in maps}

    with ProcessPoolExecutor(args.jobs) as pool:
        for path in pool.map(_collect, todo):
            print(f"collected {path}", flush=True)
    if args.ship:
        train(data_for(None), None, args.epochs, Path(args.ship), args.horizon, args.inputs, args.augment,
              args.train_seed, args.hurt, args.labels, view == "turning", gaps=tuple(args.gaps))
        print(f"wrote {args.ship}")
        return 0
    fidelity: dict[str, float] = {}
    for m in maps:
        if not models[m].exists():
            report: dict = {}
            fidelity[m] = train(data_for(m), m, args.epochs, models[m], args.horizon, args.inputs, args.augment,
                                args.train_seed, args.hurt, args.labels, view == "turning", own, report,
                                tuple(args.gaps))
            if "label" in report:
                fidelity[f"{m}_label"] = report["label"]
                print(f"{m}: Spearman of the reachability label and the true {args.horizon}-step distance: "
                      f"{report['label']:.3f}", flush=True)
            judged = "on the last quarter of its own play" if own else "never trained on"
            print(f"{m}: Spearman of predicted and true {args.horizon}-step distance, {judged}: "
                  f"{fidelity[m]:.3f}",
                  flush=True)
    if args.models_only:
        import keras

        name = "own" if own else "without"
        for m in maps:
            save_reach(keras.models.load_model(models[m]), out / f"reach_{name}_{m}.npz")
        print(f"wrote {', '.join(str(out / f'reach_{name}_{m}.npz') for m in maps)}")
        return 0
    tasks = [(a, m, s, args.steps, args.draws, str(models[m])) for m in args.maps or maps for s in args.seeds
             for a in args.agents]
    results = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for r in pool.map(_screen, tasks):
            print(json.dumps(r), flush=True)
            results.append(r)
    print("\n" + oracle_ceilings.table(results, args.maps or maps))
    (out / "results.json").write_text(json.dumps({"fidelity": fidelity, "runs": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
