"""The settings' schema: typed, frozen pydantic models, one per section, and the checks across keys.

Defaults live here, in code; ``config.toml`` at the top of the repository mirrors them with a
comment per key (a test keeps the two equal). :mod:`explorer.config.loader` reads files and
``--set`` overrides into these models. Nothing here depends on the machine: a config that fits
the schema is valid anywhere (whether a run of it fits in memory is for the modes to check,
:mod:`explorer.agent.memory`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError


class ConfigError(ValueError):
    """A configuration value is unknown, of the wrong type or out of range."""


#: the largest seed every seeded library takes (numpy's global generator and the engine take 32 bits)
MAX_SEED = 2**32 - 1

#: the parts seeded from ``run.seed`` unless their own ``seed`` is set: section -> offset added to ``run.seed``
#: (at ``run.seed = 0`` these are the parts' historical seeds, so the default run's numbers stay as they were)
DERIVED_SEEDS = {"game": 0, "learner": 0, "novelty": 1}


class _Section(BaseModel):
    # NaN and infinity are never meaningful settings (an infinite replay cap, a NaN entropy target).
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)


class CaptureConfig(_Section):
    """Where live frames come from.

    Coordinates are physical pixels of the whole desktop: the primary monitor's
    top-left corner is 0,0, and monitors left of or above it have negative
    coordinates. On Windows the process is made DPI-aware first, so display
    scaling (125 %, 150 %) does not change them.
    """

    source: Literal["region", "monitor", "window"] = Field(
        "region", description="region: left/top/width/height; monitor: a whole monitor; window: a window found by title")
    backend: Literal["auto", "mss", "dxcam"] = Field(
        "auto", description="auto, mss (GDI/X11 grabs, any OS) or dxcam (Windows Desktop Duplication) (docs/config.md#capture)")
    left: int = Field(0, description="region left edge, desktop pixels (negative left of the primary monitor)")
    top: int = Field(0, description="region top edge, desktop pixels (negative above the primary monitor)")
    width: int = Field(256, gt=0, description="region width, screen pixels")
    height: int = Field(256, gt=0, description="region height, screen pixels")
    monitor: int = Field(1, ge=0, description="monitor for source=monitor, numbered as mss numbers them (1 = first; "
                         "0 = all monitors together, mss only)")
    window_title: str = Field("", description="substring of the window title for source=window")
    window_check_s: float = Field(0.5, gt=0, description="source=window: seconds between checks that the window still exists with its title")
    fps: float = Field(60.0, gt=0, description="capture rate, frames per second")
    blank_seconds: float = Field(3.0, gt=0, description="a frame stream that stays uniform this long is reported as blank")
    stall_seconds: float = Field(1.0, gt=0, description="seconds without a new picture that stop a live run; more than 1 / fps (docs/config.md#capture)")

    @model_validator(mode="after")
    def _frames_within_the_stall_window(self) -> CaptureConfig:
        if self.fps * self.stall_seconds <= 1:
            raise ValueError(f"capture.fps = {self.fps:g} grabs a frame every {1 / self.fps:g} s, but "
                             f"capture.stall_seconds = {self.stall_seconds:g} stops a live run that long without a new "
                             f"frame, so every gap between two frames would stop it as stalled: raise capture.fps "
                             f"above {1 / self.stall_seconds:g} or capture.stall_seconds above {1 / self.fps:g}")
        return self


class ObservationConfig(_Section):
    """What the policy sees."""

    width: int = Field(64, gt=0, description="observation width, pixels")
    height: int = Field(64, gt=0, description="observation height, pixels")
    grayscale: bool = Field(False, description="convert frames to one grey channel (colour frames feed the default histogram novelty)")
    stack: int = Field(3, gt=0, description="newest frames stacked into one observation")


class RingConfig(_Section):
    """The TensorFlow frame ring."""

    capacity: int = Field(64, ge=2, description="frames held; must exceed observation.stack and novelty windows")


#: the Xbox 360 buttons and triggers a policy may hold (explorer.core.PAD_BUTTONS; Start, Back and Guide are not
#: among them: they open menus)
PadButton = Literal["a", "b", "x", "y", "lb", "rb", "lt", "rt", "ls", "rs",
                    "dpad_up", "dpad_down", "dpad_left", "dpad_right"]


class PadConfig(_Section):
    """Where stick values and buttons go."""

    backend: Literal["vgamepad", "null"] = Field(
        "vgamepad", description="vgamepad: a virtual Xbox 360 pad; null: sends nothing")
    camera_stick: Literal["right", "left"] = Field("right", description="stick that receives camera x/y")
    walk_stick: Literal["left", "right"] = Field("left", description="stick that receives walk x/y")
    invert_camera_y: bool = Field(False, description="flip the sign of camera y before sending")
    invert_walk_y: bool = Field(False, description="flip the sign of walk y before sending")
    buttons: tuple[PadButton, ...] = Field(
        ("a",), description="buttons and triggers the policy holds, one policy output each; [] sticks only (docs/config.md#pad)")
    tap_gap: int = Field(
        0, ge=0, description="steps a held button is released after each press (taps); 0: held; ViZDoom: 3 (docs/config.md#pad)")

    @model_validator(mode="after")
    def _distinct_buttons(self) -> PadConfig:
        twice = sorted({b for b in self.buttons if self.buttons.count(b) > 1})
        if twice:
            raise ValueError(f"pad.buttons lists {', '.join(twice)} more than once; list each button once")
        return self


#: the named keys the stop and pause hotkeys can be: the members of pynput's ``Key`` (``keyboard.Key[name]``,
#: which explorer.run.safety listens for); a key that types a character is named by that character. Kept here,
#: without importing pynput (the optional ``hotkeys`` extra), so a config is checked where pynput is missing;
#: a test keeps it equal to the installed pynput's.
HOTKEY_NAMES = ("alt", "alt_l", "alt_r", "alt_gr", "backspace", "caps_lock", "cmd", "cmd_l", "cmd_r", "ctrl", "ctrl_l",
                "ctrl_r", "delete", "down", "end", "enter", "esc", *(f"f{i}" for i in range(1, 21)), "home", "left",
                "page_down", "page_up", "right", "shift", "shift_l", "shift_r", "space", "tab", "up",
                "media_play_pause", "media_volume_mute", "media_volume_down", "media_volume_up", "media_previous",
                "media_next", "insert", "menu", "num_lock", "pause", "print_screen", "scroll_lock")


def hotkey_name(name: str) -> str:
    """``name`` as the hotkeys match it (lower case): a :data:`HOTKEY_NAMES` entry or one printable character.

    Raises:
      ValueError: neither; the message suggests the closest key name.
    """
    key = name.strip().lower()
    if key in HOTKEY_NAMES or (len(key) == 1 and key.isprintable() and not key.isspace()):
        return key
    import difflib
    close = difflib.get_close_matches(key, HOTKEY_NAMES, n=1, cutoff=0.5)
    aliases = {"escape": "esc", "return": "enter", "del": "delete", "ins": "insert", "pgup": "page_up",
               "pgdn": "page_down", "pageup": "page_up", "pagedown": "page_down", "control": "ctrl",
               "win": "cmd", "super": "cmd", "windows": "cmd", "printscreen": "print_screen", "break": "pause",
               " ": "space"}
    guess = aliases.get(key) or aliases.get(name) or (close[0] if close else None)
    hint = f"did you mean {guess!r}? " if guess else ""
    raise ValueError(f"{name!r} is not a key the hotkeys can listen for: {hint}use one character ('q') or a key "
                     f"name: f1..f20, esc, pause, insert, home, end, page_up, ...")


class ControlConfig(_Section):
    """The control loop and live-mode safety."""

    hz: float = Field(30.0, gt=0, description="live control tick rate, ticks per second")
    watchdog_ticks: int = Field(3, ge=1, description="pad goes neutral when no fresh action arrives within this many ticks")
    countdown_s: float = Field(3.0, ge=0, description="seconds of countdown before live mode takes the pad")
    stop_key: str = Field("f12", description="emergency-stop key in live mode (hotkeys extra): a pynput Key name (f1..f20, esc, ...) or one character")
    pause_key: str = Field("f11", description="pause/resume key in live mode (needs the hotkeys extra), named as "
                           "stop_key and other than it")
    max_seconds: float = Field(0.0, ge=0, description="live run length in seconds; 0 runs until stopped")
    pause_unfocused: bool = Field(True, description="Windows: centre the sticks and stop acting while the game window is not in front")

    @model_validator(mode="after")
    def _usable_keys(self) -> ControlConfig:
        keys = {}
        for field in ("stop_key", "pause_key"):
            try:
                keys[field] = hotkey_name(getattr(self, field))
            except ValueError as err:
                raise ValueError(f"control.{field} = {err}") from None
        if keys["stop_key"] == keys["pause_key"]:
            raise ValueError(f"control.stop_key and control.pause_key are both {keys['stop_key']!r}: that key would "
                             f"only stop the run and nothing could pause it; give them different keys")
        return self


_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")  # a dotted module name (game.module)


#: engine flags ``game.args`` may hold, each on its own: they change how the game plays and nothing else
ENGINE_FLAGS = ("-nomonsters", "-fast", "-respawn", "-deathmatch", "-altdeath")
#: engine flags ``game.args`` may hold with one whole number after them: flag -> (lowest, highest)
ENGINE_NUMBER_FLAGS = {"-skill": (1, 5)}
#: console variables ``game.args`` may set, as ``+name 0`` or ``+name 1``: rules of the game, nothing else
ENGINE_CVARS = ("sv_cheats", "sv_noautoaim", "sv_nomonsters", "sv_fastmonsters", "sv_infiniteammo")
#: the allow-list in words, for messages and docs
ENGINE_ARGS_ALLOWED = ", ".join([*ENGINE_FLAGS, *(f"{f} N ({lo}-{hi})" for f, (lo, hi) in ENGINE_NUMBER_FLAGS.items()),
                                 *(f"+{c} 0|1" for c in ENGINE_CVARS)])
#: what an engine argument may be made of: words of these characters separated by spaces
_ENGINE_ARG_TEXT = re.compile(r"[A-Za-z0-9_+\- ]*")


def engine_args(args: tuple[str, ...] | list[str]) -> list[tuple[str, ...]]:
    """``game.args`` as the engine will see them, one tuple per argument with its value (``("-skill", "4")``).

    The engine (ViZDoom, a ZDoom) takes far more than game rules on its command line: ``+logfile``,
    ``+exec``, ``-file``, ``-config``, ``-record`` and a bare word write, run or load files, ``-host`` and
    ``-join`` open the network. Only the allow-list above passes (:data:`ENGINE_ARGS_ALLOWED`).

    Raises:
      ValueError: an argument off the allow-list, or a value out of range; the message names it.
    """
    words = " ".join(args).split()
    out: list[tuple[str, ...]] = []
    i = 0
    while i < len(words):
        word, low = words[i], words[i].lower()
        value = words[i + 1] if i + 1 < len(words) else None
        if low in ENGINE_FLAGS:
            out.append((low,))
            i += 1
            continue
        if low in ENGINE_NUMBER_FLAGS or (low.startswith("+") and low[1:] in ENGINE_CVARS):
            lo, hi = ENGINE_NUMBER_FLAGS.get(low, (0, 1))
            if value is None or not (value.isascii() and value.isdigit()) or not lo <= int(value) <= hi:
                raise ValueError(f"engine argument {word!r} takes a whole number from {lo} to {hi} after it, got "
                                 f"{value!r}; game.args takes only {ENGINE_ARGS_ALLOWED}")
            out.append((low, str(int(value))))
            i += 2
            continue
        why = ("a console command or setting off the list (commands such as +logfile, +exec or +map write, run or "
               "load files)" if word.startswith("+") else
               "an engine option off the list (options such as -file, -iwad, -config, -record, -host or -join load or "
               "write files or open the network)" if word.startswith("-") else
               "a bare word, which the engine would load as a file")
        raise ValueError(f"engine argument {word!r} is refused: {why}; game.args takes only {ENGINE_ARGS_ALLOWED}")
    for arg in args:  # words the engine splits as explorer does: spaces between them, nothing else
        if not _ENGINE_ARG_TEXT.fullmatch(arg):
            bad = next(c for c in arg if not _ENGINE_ARG_TEXT.fullmatch(c))
            raise ValueError(f"engine argument {arg!r} holds {bad!r}: engine arguments are words of letters, "
                             f"digits, _, + and - separated by spaces; game.args takes only {ENGINE_ARGS_ALLOWED}")
    return out


#: a map's name in a WAD: up to 8 letters, digits, _ or - (the engine is told it on its command line)
MAP_NAME = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_-]{0,7})?")


class GameConfig(_Section):
    """The built-in game (ViZDoom)."""

    name: Literal["vizdoom", "synthetic", "gym"] = Field(
        "vizdoom", description="built-in game: vizdoom (ViZDoom), synthetic (a made-up room, no engine) or gym (docs/gym.md)")
    scenario: str = Field("my_way_home", description="bundled ViZDoom scenario, freedoom (a map as made, no rewards) or a .cfg path (docs/config.md#game)")
    wad: str = Field("", description="WAD to play: freedoom1, freedoom2 or a .wad path; empty keeps the scenario's (docs/config.md#game)")
    map: str = Field("", description="map inside the WAD, e.g. E1M1 or MAP01; empty keeps the scenario's, or the WAD's first")
    args: tuple[str, ...] = Field((), description="extra engine arguments, game rules only, e.g. [\"-nomonsters\"]; others refused (docs/security.md)")
    episode_steps: int = Field(525, gt=0, description="agent steps per episode")
    frame_skip: int = Field(4, ge=1, description="engine tics per agent step")
    resolution: Literal["160x120", "320x240", "640x480"] = Field("160x120", description="engine render resolution")
    turn_scale: float = Field(10.0, ge=0, description="degrees turned per tic at full camera x")
    look_scale: float = Field(0.0, ge=0, description="degrees looked up/down per tic at full camera y (0 keeps the view level)")
    move_scale: float = Field(25.0, ge=0, description="engine forward/back speed at full walk y (25 = Doom's walk, 50 = its run; larger is clamped)")
    strafe_scale: float = Field(25.0, ge=0, description="engine strafe speed at full walk x (same units as move_scale)")
    realtime: bool = Field(False, description="asynchronous engine at 35 tics/s with a visible window (live test bed)")
    visible: bool = Field(False, description="show the engine window (needs a display)")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="engine seed (unset: run.seed)")
    id: str = Field("", description="game.name = gym: the registered Gymnasium id, e.g. ALE/MontezumaRevenge-v5 or "
                    "MiniGrid-MultiRoom-N4-S5-v0")
    module: str = Field("", description="game.name = gym: module imported first to register game.id (empty: ale_py or minigrid, by id)")
    kwargs: dict[str, Any] = Field({}, description="game.name = gym: keyword arguments of gymnasium.make, e.g. "
                                   "{frameskip = 4} (a table)")
    actions: dict[str, dict[str, float]] = Field(
        {}, description="game.name = gym: the pad's inputs per env action; empty: from the env's action meanings (docs/gym.md)")
    position_key: str = Field("position", description="game.name = gym: info key holding the player's position (2 or 3 numbers), for coverage")
    cell: float = Field(0.0, ge=0, description="game.name = gym: coverage cell size, in the position's units; 0: the game's own (docs/gym.md)")

    @model_validator(mode="after")
    def _gym_id(self) -> GameConfig:
        if self.name == "gym" and not self.id:
            raise ValueError("game.name = gym needs game.id, a registered Gymnasium id such as ALE/MontezumaRevenge-v5 "
                             "or MiniGrid-MultiRoom-N4-S5-v0")
        # Gymnasium imports the module part of "module:id" itself: the one module a config may import is game.module
        if ":" in self.id:
            raise ValueError(f"game.id = {self.id!r} names a module before ':'; give the id alone and the module as "
                             "game.module")
        if self.module and not _MODULE.fullmatch(self.module):
            raise ValueError(f"game.module = {self.module!r} is not a module name (dotted Python names, such as ale_py "
                             "or minigrid)")
        return self

    @field_validator("args")
    @classmethod
    def _allowed_args(cls, args: tuple[str, ...]) -> tuple[str, ...]:
        try:
            engine_args(args)
        except ValueError as err:
            raise PydanticCustomError("engine_args", str(err)) from None
        return args

    @field_validator("map")
    @classmethod
    def _map_name(cls, name: str) -> str:
        if not MAP_NAME.fullmatch(name):
            raise PydanticCustomError("map_name", "game.map takes a map's name: up to 8 letters, digits, _ or -, "
                                      "e.g. E1M1 or MAP01")
        return name


class RunConfig(_Section):
    """A run of ``explorer explore`` or ``explorer play``."""

    dir: str = Field("runs", description="parent folder of run directories")
    steps: int = Field(50000, gt=0, description="agent steps for explore")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="the run's seed: Python, numpy, TensorFlow and each part whose seed is unset (docs/config.md#run)")
    agent: Literal["explorer", "random", "sticky", "sticky_prior"] = Field(
        "explorer", description="explorer (the learning agent) or a baseline: random, sticky, sticky_prior (docs/config.md#run)")
    sticky_steps: int = Field(8, ge=1, description="steps each random action is held for agent=sticky")
    eager: bool = Field(False, description="run TensorFlow functions eagerly (debugging)")
    log_every: int = Field(500, ge=1, description="agent steps between metric lines and TensorBoard scalars")
    threads: tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]] = Field(
        (0, 0), description="TensorFlow inter-op and intra-op threads; 0: TensorFlow's choice, one per op (docs/config.md#run)")
    workers: int = Field(1, ge=1, description="game instances feeding one learner (explore); above 1 each runs in a Ray actor (docs/scaling.md)")
    address: str = Field("", description="run.workers > 1: Ray cluster to join (its address, or auto); empty: RAY_ADDRESS, else a local one")
    ship_steps: int = Field(128, ge=1, description="run.workers > 1: agent steps a worker collects before it ships them "
                            "to the learner as one batch (frames uint8)")
    worker_restarts: int = Field(5, ge=0, description="run.workers > 1: times a worker whose game or process died is "
                                 "restarted before the run goes on without it")
    worker_cpus: float = Field(1.0, gt=0, description="run.workers > 1: CPUs Ray reserves for each worker (its game "
                               "and its policy's inference threads)")


class NoveltyConfig(_Section):
    """The intrinsic reward: how new a frame is."""

    signal: Literal["episodic", "rnd", "forward", "pixel", "oracle"] = Field(
        "episodic", description="episodic (kNN, Never Give Up), rnd, forward, pixel, or oracle (a diagnosis) (docs/config.md#novelty)")
    embedding: Literal["histogram", "pooled", "random", "inverse", "temporal", "reach"] = Field(
        "histogram", description="episodic embedding: histogram, pooled, random, inverse, temporal or reach (docs/config.md#novelty)")
    embed_dim: int = Field(64, gt=0, description="embedding width, features (random, inverse, temporal)")
    histogram_bins: int = Field(6, ge=2, le=16, description="histogram: bins per colour channel, 2-16 (6 on colour frames: 216 bins)")
    episodic_reward: Literal["distance", "new_place"] = Field(
        "distance", description="distance (kNN distance over its running mean) or new_place (1 per new place) (docs/config.md#novelty)")
    lifelong: Literal["none", "rnd"] = Field(
        "none", description="none, or rnd: a factor in [1, lifelong_max] on the episodic reward (docs/config.md#novelty)")
    lifelong_max: float = Field(5.0, ge=1.0, description="lifelong: largest factor on the episodic reward (L in Never Give Up)")
    lifelong_decay: float = Field(0.999, gt=0, lt=1, description="lifelong: decay of the running mean/variance that "
                                  "standardises the predictor's error, per agent step")
    place_quantile: float = Field(0.5, gt=0, lt=1, description="new_place: quantile of recent nearest-place distances a new place must exceed, 0-1")
    place_history: int = Field(2000, gt=0, description="new_place: recent nearest-place distances the quantile is taken over, agent steps")
    knn: int = Field(3, gt=0, description="neighbours averaged by the episodic kNN distance")
    exclude_recent: int = Field(25, ge=0, description="newest embeddings of the episode the kNN ignores, agent steps")
    heading_window: float = Field(0.0, ge=0, le=180, description="episodic: compare only frames faced within this many "
                                  "degrees; 0: all (docs/config.md#novelty)")
    turn_rate: float = Field(0.0, ge=0, le=3600, description="degrees turned per step at full camera x; 0: the "
                             "game's (docs/config.md#novelty)")
    episode_capacity: int = Field(1024, gt=1, description="embeddings kept per episode, agent steps (older are overwritten)")
    pixel_window: int = Field(8, gt=0, description="recent frames the pixel signal compares against")
    oracle_cell: float = Field(64.0, gt=0, description="oracle: side of a map cell, map units (64: the coverage figures' cells)")
    norm_decay: float = Field(0.99, gt=0, lt=1, description="decay of the running mean/variance that normalises rewards, per agent step")
    learning_rate: float = Field(1e-3, gt=0, description="Adam step size of learned novelty models (rnd/forward/inverse/temporal)")
    seed: int = Field(1, ge=0, le=MAX_SEED, description="seed of the novelty networks' initial weights (unset: run.seed + 1)")


_Stick = Annotated[float, Field(gt=-1.0, lt=1.0)]  # a stick value strictly inside [-1, 1]
_Bound = Annotated[float, Field(ge=-1.0, le=1.0)]  # a stick value in [-1, 1]


class NetworksConfig(_Section):
    """The learner's networks: their sizes, what they read besides the picture, how pictures are augmented."""

    hidden: int = Field(256, gt=0, description="width of critic and actor heads")
    feature: int = Field(128, gt=0, description="encoder output width")
    filters: tuple[Annotated[int, Field(gt=0)], ...] = Field(
        (16, 32, 32), description="conv filters per encoder layer (kernel 3, stride 2)")
    augment: int = Field(0, ge=0, description="random-shift augmentation of replayed pictures for the critics (DrQ), pixels; 0: off")
    shared_encoder: bool = Field(True, description="the actor reads the critic's encoder features instead of a CNN of its own (docs/config.md#learnernetworks)")
    context: bool = Field(True, description="feed the previous action, the episode-step fraction and recent novelty averages to actor and critics")
    view_strips: int = Field(0, ge=0, le=64, description="vertical view strips whose colour rarity feeds the context, 0-64; 0: off (docs/config.md#learnernetworks)")
    oracle_map: int = Field(0, ge=0, le=15, description="a diagnosis: N x N grid of visited map cells in the context, odd N; 0: off (docs/config.md#learnernetworks)")
    echo_units: int = Field(0, ge=0, le=512, description="units of a random fixed-weight memory of the episode (context), 0-512; 0: off (docs/config.md#learnernetworks)")
    recurrent_units: int = Field(0, ge=0, le=256, description="units of a trained recurrent core (GRU) over the episode, 0-256; 0: off (docs/config.md#learnernetworks)")
    recurrent_window: int = Field(16, ge=1, le=64, description="recurrent_units: agent steps the core is trained through, from a stored state, 1-64")

    @model_validator(mode="after")
    def _context_inputs(self) -> NetworksConfig:
        if self.oracle_map and (self.oracle_map % 2 == 0 or not self.context):
            raise ValueError(f"learner.networks.oracle_map = {self.oracle_map} needs an odd number of squares (the "
                             f"player's own in the middle) and learner.networks.context = true; got "
                             f"learner.networks.context = {str(self.context).lower()}")
        if self.view_strips and not self.context:
            raise ValueError(f"learner.networks.view_strips = {self.view_strips} feeds the strips through the context, "
                             f"but learner.networks.context = false: set learner.networks.context = true, or "
                             f"learner.networks.view_strips = 0")
        if self.echo_units and not self.context:
            raise ValueError(f"learner.networks.echo_units = {self.echo_units} feeds the memory through the context, "
                             f"but learner.networks.context = false: set learner.networks.context = true, or "
                             f"learner.networks.echo_units = 0")
        if self.recurrent_units and not (self.context and self.shared_encoder):
            raise ValueError(f"learner.networks.recurrent_units = {self.recurrent_units} reads its inputs from the "
                             f"context and is trained by the critics, whose encoder the actor shares: it needs "
                             f"learner.networks.context = true and learner.networks.shared_encoder = true (got "
                             f"{str(self.context).lower()} and {str(self.shared_encoder).lower()}), or "
                             f"learner.networks.recurrent_units = 0")
        return self


class ActionsConfig(_Section):
    """What the actor sends (the stick range and the prior) and how it varies it (noise, options, a planner)."""

    action_prior: tuple[_Stick, _Stick, _Stick, _Stick] = Field(
        (0.0, 0.0, 0.0, 0.8), description="stick values (camera x/y, walk x/y) the policy is centred on, inside the range (docs/config.md#learneractions)")
    action_low: tuple[_Bound, _Bound, _Bound, _Bound] = Field(
        (-0.5, -1.0, -1.0, 0.6), description="lowest stick value the policy sends per axis (camera x/y, walk x/y) (docs/config.md#learneractions)")
    action_high: tuple[_Bound, _Bound, _Bound, _Bound] = Field(
        (0.5, 1.0, 1.0, 1.0), description="highest stick value the policy can send on each axis (see action_low)")
    press_share: float = Field(0.5, ge=0.01, le=0.99, description="share of the prior's draws pressing a "
                               "button, 0.01-0.99; ViZDoom: 0.95 (docs/config.md#learneractions)")
    noise_rho: float = Field(0.9, ge=0, lt=1, description="AR(1) time correlation of exploration noise per decision")
    random_options: float = Field(0.0, ge=0, le=1, description="chance per decision of a random option held option_steps decisions, 0-1 (docs/config.md#learneractions)")
    option_steps: int = Field(8, ge=1, description="decisions a random option is held for (random_options), and a "
                              "residual's proposal (residual)")
    residual: float = Field(0.0, ge=0, le=2, description="scale of the actor's correction to a sticky_prior proposal, 0-2; 0: off (docs/config.md#learneractions)")
    plan_candidates: int = Field(0, ge=0, le=256, description="actions a one-step planner scores per decision, 0-256; 0: off (ViZDoom: 8, docs/config.md#game)")
    plan_score: Literal["model", "critic", "reach"] = Field("model", description="plan_candidates' score: model, critic or reach (ViZDoom: reach) (docs/config.md#learneractions)")
    plan_from_policy: int = Field(0, ge=0, le=256, description="plan_candidates drawn from the policy, not the "
                                  "prior (docs/config.md#learneractions)")
    replan_below: float = Field(0.0, ge=0, lt=1, description="reach: end a hold expected to go under this share "
                                "of its first reach (docs/config.md#learneractions)")
    plan_memory: float = Field(0.0, ge=0, le=16, description="reach: weight of new ground on a dead-reckoned "
                               "path of the episode, 0-16 (docs/config.md#learneractions)")
    plan_route: int = Field(0, ge=0, le=64, description="reach: decisions in a dead-reckoned cell, then go "
                            "to a frontier, 0-64; 0: off (docs/config.md#learneractions)")
    route_after: int = Field(0, ge=0, le=64, description="places from pixels: visits, then go to "
                             "a place visited less, 0-64; 0: off (docs/config.md#learneractions)")
    return_share: float = Field(0.0, ge=0, lt=1, description="share of the best episode's novelty to return "
                                "along, 0-1; 0: off (docs/config.md#learneractions)")
    model_weight: float = Field(1.0, gt=0, description="plan_candidates: weight of the planner model's loss beside "
                                "the critics' in the encoder's update")
    reach_weights: str = Field("", max_length=4096, description="reach: a reach prior's weights file; empty: "
                               "the shipped Doom prior (docs/config.md#learneractions)")

    @model_validator(mode="after")
    def _prior_inside_range(self) -> ActionsConfig:
        for i, axis in enumerate(("camera x", "camera y", "walk x", "walk y")):
            low, high, prior = self.action_low[i], self.action_high[i], self.action_prior[i]
            if not low < high:
                raise ValueError(f"learner.actions.action_low.{i} ({axis}) = {low} must be below "
                                 f"learner.actions.action_high.{i} = {high}")
            if not low < prior < high:
                raise ValueError(f"learner.actions.action_prior.{i} ({axis}) = {prior} must lie strictly between "
                                 f"learner.actions.action_low.{i} = {low} and learner.actions.action_high.{i} = "
                                 f"{high}; move the prior inside the range or widen the range")
        if self.plan_from_policy > self.plan_candidates:
            raise ValueError(f"learner.actions.plan_from_policy = {self.plan_from_policy} samples more of the planner's "
                             f"candidates from the policy than learner.actions.plan_candidates = "
                             f"{self.plan_candidates} it has: lower it to {self.plan_candidates} or less")
        if self.replan_below and not (self.plan_candidates and self.plan_score == "reach"):
            raise ValueError(f"learner.actions.replan_below = {self.replan_below} asks the reach prior whether a held "
                             f"decision still goes somewhere, but the planner is not the reach prior "
                             f"(plan_candidates = {self.plan_candidates}, plan_score = {self.plan_score}): set "
                             f"learner.actions.plan_score = reach with plan_candidates > 0, or replan_below = 0")
        if self.plan_memory and not (self.plan_candidates and self.plan_score == "reach"):
            raise ValueError(f"learner.actions.plan_memory = {self.plan_memory:g} weighs the reach prior's candidates "
                             f"by new ground, but the planner is not the reach prior (plan_candidates = "
                             f"{self.plan_candidates}, plan_score = {self.plan_score}): set "
                             f"learner.actions.plan_score = reach with plan_candidates > 0, or plan_memory = 0")
        if self.plan_route and not (self.plan_candidates and self.plan_score == "reach"):
            raise ValueError(f"learner.actions.plan_route = {self.plan_route} routes by the reach prior's "
                             f"candidates, but the planner is not the reach prior (plan_candidates = "
                             f"{self.plan_candidates}, plan_score = {self.plan_score}): set "
                             f"learner.actions.plan_score = reach with plan_candidates > 0, or plan_route = 0")
        if self.reach_weights and not (self.plan_candidates and self.plan_score == "reach"):
            raise ValueError(f"learner.actions.reach_weights = {self.reach_weights!r} names a reach prior, but the "
                             f"planner is not the reach prior (plan_candidates = {self.plan_candidates}, plan_score "
                             f"= {self.plan_score}): set learner.actions.plan_score = reach with plan_candidates > "
                             f"0, or reach_weights = \"\"")
        if self.residual and (self.plan_candidates or self.random_options):
            raise ValueError(f"learner.actions.residual = {self.residual} is the actor's only way to vary its prior: "
                             f"it needs learner.actions.plan_candidates = 0 and learner.actions.random_options = 0")
        return self


class ScheduleConfig(_Section):
    """When the learner trains, how much it keeps, and when it checkpoints and publishes its weights."""

    batch_size: int = Field(32, gt=0, description="transitions per update")
    update_every: int = Field(1, ge=1, description="agent steps between updates (updates per step 1/update_every); ViZDoom: 2 (docs/config.md#learnerschedule)")
    warmup_steps: int = Field(1000, ge=0, description="agent steps of correlated random sticks before the actor acts and learning starts")
    replay_mb: float = Field(600.0, gt=0, description="memory cap of the replay, MiB of uint8 frames")
    checkpoint_every: int = Field(10000, ge=0, description="agent steps between checkpoints in explore (0: only at the end); one is always written on exit")
    overlap: bool = Field(False, description="explore: train on a thread of its own while the actor takes its next step (docs/config.md#learnerschedule)")
    publish_every: int = Field(10, ge=1, description="live mode and run.workers > 1: updates between weight snapshots "
                               "handed to the acting policies")
    lag_steps: int = Field(2000, ge=0, description="run.workers > 1: agent steps the learner may fall behind before the workers wait; 0: never")


class LiveConfig(_Section):
    """Learning in live mode, beside the control loop."""

    between_ticks: bool = Field(True, description="live mode: updates start only in the control loop's wait for a tick (docs/config.md#learnerlive)")
    max_updates_per_s: float = Field(0.0, ge=0, description="live mode: cap on learner updates per second (0: as fast as the CPU allows)")


class LearnerConfig(_Section):
    """The surrogate learner: twin critics fitted to novelty, an actor that climbs them."""

    algo: Literal["sac", "td3"] = Field("sac", description="sac: squashed Gaussian with learned entropy weight; td3: deterministic actor plus noise")
    gamma: float = Field(0.97, gt=0, lt=1, description="discount per agent step")
    n_step: int = Field(5, ge=1, description="decisions of novelty summed before bootstrapping (n-step TD)")
    action_repeat: int = Field(1, ge=1, description="agent steps each actor decision is held for, a replayed transition (ViZDoom: 8, docs/config.md#game)")
    actor_lr: float = Field(3e-4, gt=0, description="actor Adam step size")
    critic_lr: float = Field(3e-4, gt=0, description="critic Adam step size")
    alpha_lr: float = Field(3e-4, gt=0, description="SAC entropy-weight Adam step size")
    init_alpha: float = Field(0.1, gt=0, description="SAC initial entropy weight")
    target_entropy: float = Field(-2.0, description="SAC target entropy, nats summed over the stick axes and buttons (docs/config.md#learner)")
    tau: float = Field(0.01, gt=0, le=1, description="target network Polyak rate per update")
    clip_norm: float = Field(10.0, gt=0, description="global-norm gradient clip per optimiser")
    td3_noise: float = Field(0.3, ge=0, description="TD3 exploration noise std (stick units)")
    td3_target_noise: float = Field(0.2, ge=0, description="TD3 target-policy smoothing std")
    td3_policy_delay: int = Field(2, ge=1, description="TD3 critic updates per actor update")
    preact_penalty: float = Field(1e-3, ge=0, description="penalty on squared pre-tanh actor means (keeps sticks off saturation)")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="seed of network init, exploration noise and replay sampling (unset: run.seed)")
    eager: bool = Field(False, description="run the train step eagerly (debugging)")
    xla: bool = Field(False, description="compile the whole update as one XLA cluster; off by default (docs/config.md#learner)")
    networks: NetworksConfig = Field(NetworksConfig(), description="the networks (docs/config.md#learnernetworks)")
    actions: ActionsConfig = Field(ActionsConfig(), description="what the actor sends and how it varies it (docs/config.md#learneractions)")
    schedule: ScheduleConfig = Field(ScheduleConfig(), description="when it trains, keeps, checkpoints and publishes (docs/config.md#learnerschedule)")
    live: LiveConfig = Field(LiveConfig(), description="live mode's learning (docs/config.md#learnerlive)")

    @model_validator(mode="after")
    def _across_groups(self) -> LearnerConfig:
        networks, actions = self.networks, self.actions
        if actions.plan_candidates and actions.plan_score != "reach" and not networks.shared_encoder:
            raise ValueError(f"learner.actions.plan_candidates = {actions.plan_candidates} predicts from the critic's "
                             f"encoder, which the actor reads only with learner.networks.shared_encoder = true: set "
                             f"it, or learner.actions.plan_candidates = 0")
        if actions.residual and not networks.context:
            raise ValueError(f"learner.actions.residual = {actions.residual} reads its proposal from the context: it "
                             f"needs learner.networks.context = true, or learner.actions.residual = 0")
        if networks.recurrent_units and actions.plan_candidates and actions.plan_score == "critic":
            raise ValueError(f"learner.networks.recurrent_units = {networks.recurrent_units} is read by the critics "
                             f"through a core the critic planner does not run: with it use learner.actions.plan_score "
                             f"= reach or model, or learner.networks.recurrent_units = 0")
        return self


class RecordConfig(_Section):
    """Recording sessions to disk (see docs/sessions.md)."""

    dir: str = Field("", description="record explore/play runs as sessions under this folder; empty records nothing")
    chunk_frames: int = Field(64, ge=1, le=4096, description="frames per compressed chunk file (a crash loses at most one chunk)")


class Config(_Section):
    """The whole configuration."""

    capture: CaptureConfig = CaptureConfig()
    observation: ObservationConfig = ObservationConfig()
    ring: RingConfig = RingConfig()
    pad: PadConfig = PadConfig()
    control: ControlConfig = ControlConfig()
    game: GameConfig = GameConfig()
    run: RunConfig = RunConfig()
    novelty: NoveltyConfig = NoveltyConfig()
    learner: LearnerConfig = LearnerConfig()
    record: RecordConfig = RecordConfig()

    # sections whose seed was derived from run.seed (not set): they are left out of to_dict, so a
    # config written into a run and loaded back with another run.seed derives them again
    _derived_seeds: frozenset[str] = PrivateAttr(frozenset())

    @model_validator(mode="wrap")
    @classmethod
    def _derive_seeds(cls, data: Any, handler: ModelWrapValidatorHandler[Config]) -> Config:
        if not isinstance(data, dict):
            return handler(data)
        data, derived = dict(data), []
        run = data.get("run")
        base = run.seed if isinstance(run, RunConfig) else run.get("seed", 0) if isinstance(run, dict) else 0
        # a run.seed that is not a seed (a string, out of range) is refused by its own check, alone
        if type(base) is int and 0 <= base <= MAX_SEED:  # noqa: E721
            for section, offset in DERIVED_SEEDS.items():
                given = data.get(section)
                if isinstance(given, BaseModel):
                    if "seed" not in given.model_fields_set:
                        data[section] = given.model_copy(update={"seed": (base + offset) % (MAX_SEED + 1)})
                        derived.append(section)
                elif given is None or (isinstance(given, dict) and "seed" not in given):
                    data[section] = {**(given or {}), "seed": (base + offset) % (MAX_SEED + 1)}
                    derived.append(section)
        config = handler(data)
        config._derived_seeds = frozenset(derived)
        return config

    @model_validator(mode="after")
    def _consistent(self) -> Config:
        problems = config_problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (tuples as lists), ready for TOML; seeds derived from ``run.seed`` are left out."""
        tree = self.model_dump(mode="json")
        for section in self._derived_seeds:
            del tree[section]["seed"]
        return tree

    def seeds(self) -> dict[str, int]:
        """The seed each seeded part uses, by setting name (``run.seed``, ``learner.seed``, ...)."""
        return {"run.seed": self.run.seed, **{f"{s}.seed": getattr(self, s).seed for s in DERIVED_SEEDS}}

    def setting(self, key: str) -> Any:
        """The value of the dotted ``key``: ``run.steps``, or a group's setting ``learner.schedule.warmup_steps``."""
        value: Any = self
        for name in key.split("."):
            value = getattr(value, name)
        return value

    def replace(self, **overrides: Any) -> Config:
        """A copy with dotted keys replaced, e.g. ``replace(**{"run.steps": 10})``."""
        from explorer.config.loader import load, toml_literal
        return load(None, [f"{k}={toml_literal(v)}" for k, v in overrides.items()], base=self)


# ---------------------------------------------------------------- checks across keys

#: the frame ``(height, width, channels)`` learner.actions.plan_score = reach reads: the one it was trained on
REACH_FRAME = (64, 64, 3)

#: What a built-in game brings: settings that default to other values when a command plays that game
#: (``explorer explore``, ``explorer play --game``, the benchmarks) and the run's own file or command line
#: leaves them unset. ViZDoom ships a reach prior (:mod:`explorer.agent.reach`, trained offline on the
#: public suite's pictures): the actor holds each decision 8 steps, and every decision sends whichever of
#: its own action and 8 draws of the prior the reach prior expects to go farthest; the learner updates
#: every 2 steps, 4 times per decision (docs/experiments.md, "updates per decision"). Doom opens a door on a
#: fresh press of USE (A), never on a held one: the prior presses A on most draws, sent as taps. A run
#: writes the values it used into its ``config.toml``, so ``--resume``, ``--evaluate`` and ``play --resume``
#: see them.
GAME_DEFAULTS: dict[str, dict[str, Any]] = {
    "vizdoom": {"learner.action_repeat": 8, "learner.actions.plan_candidates": 8,
                "learner.actions.plan_score": "reach", "learner.schedule.update_every": 2,
                "learner.actions.press_share": 0.95, "pad.tap_gap": 3},
}

#: the settings of :data:`GAME_DEFAULTS` that belong to the reach prior and its 8-step decisions, brought
#: only for the frames it reads
REACH_SETTINGS = ("learner.action_repeat", "learner.actions.plan_candidates", "learner.actions.plan_score",
                  "learner.schedule.update_every")


def game_defaults(game: str, frame: tuple[int, int, int]) -> dict[str, Any]:
    """The settings ``game`` brings (:data:`GAME_DEFAULTS`) for observation frames ``(H, W, C)``.

    The reach prior reads the frames it was trained on (:data:`REACH_FRAME`); with other frames the game
    brings the rest of its settings (:data:`REACH_SETTINGS` keep the schema's defaults).
    """
    brought = dict(GAME_DEFAULTS.get(game, {}))
    if brought.get("learner.actions.plan_score") == "reach" and tuple(frame) != REACH_FRAME:
        return {key: value for key, value in brought.items() if key not in REACH_SETTINGS}
    return brought


#: convolutions (kernel 3, stride 2, no padding) of the fixed random CNNs in :mod:`explorer.novelty`
NOVELTY_CNN_LAYERS = 2


def frame_shape(observation: ObservationConfig) -> tuple[int, int, int]:
    """``(H, W, C)`` of one observation frame: pixels, pixels, channels (1 grey, 3 colour)."""
    return (observation.height, observation.width, 1 if observation.grayscale else 3)


def replay_slots(frame: tuple[int, ...], stack: int, memory_mb: float) -> int:
    """Frames the replay keeps under ``memory_mb`` MiB, and transitions (one slot per frame).

    Each ``uint8[H, W, C]`` frame costs its ``H*W*C`` bytes plus 64 for its
    transition's ids, action, reward and context; the replay never holds fewer
    than four observations of ``stack`` frames.
    """
    return max(4 * stack, int(memory_mb * 2**20 / (math.prod(frame) + 64)))


def replay_problems(frame: tuple[int, ...], stack: int, learner: LearnerConfig) -> list[str]:
    """What makes a replay of ``frame``-sized frames under ``learner`` useless, one sentence each.

    Frames usually follow ``observation``; a replay of recorded sessions has the sessions' frames.
    """
    schedule, strips = learner.schedule, learner.networks.view_strips
    n = replay_slots(frame, stack, schedule.replay_mb)
    per_frame = math.prod(frame) + 64
    holds = (f"learner.schedule.replay_mb = {schedule.replay_mb:g} holds {n} transitions of "
             f"{'x'.join(str(s) for s in frame)} frames")
    problems = []
    if strips > frame[1]:
        problems.append(f"learner.networks.view_strips = {strips} splits frames {frame[1]} pixels wide into more "
                        f"strips than they have columns (empty strips have no colours to score): lower "
                        f"learner.networks.view_strips to {frame[1]} or less, or widen the frames (observation.width)")
    if schedule.batch_size > n:
        # training waits for a batch's worth of transitions, which never come
        need = math.ceil(schedule.batch_size * per_frame / 2**20 * 10) / 10
        problems.append(f"{holds}; learner.schedule.batch_size = {schedule.batch_size} needs at least "
                        f"{schedule.batch_size}: raise learner.schedule.replay_mb (to {need:.1f} or more) or lower "
                        f"learner.schedule.batch_size")
    # A transition is sampled only while all its frames are held. Across an episode start its oldest
    # frame lies this many frames back; with fewer held, sampling never finds one and waits forever.
    span = 2 * stack + (learner.n_step + 1) * learner.action_repeat - 1
    if n < span:
        problems.append(f"{holds}, but one transition reaches back 2 * observation.stack + (learner.n_step + 1) * "
                        f"learner.action_repeat - 1 = {span} frames (observation.stack = {stack}, learner.n_step = "
                        f"{learner.n_step}, learner.action_repeat = {learner.action_repeat}), so no transition could "
                        f"be sampled: raise learner.schedule.replay_mb or lower learner.n_step or "
                        f"learner.action_repeat")
    return problems


def check_replay(frame: tuple[int, ...], stack: int, learner: LearnerConfig) -> None:
    """Raise :class:`ConfigError` when a replay of ``frame``-sized frames cannot serve ``learner`` (see :func:`replay_problems`)."""
    problems = replay_problems(frame, stack, learner)
    if problems:
        raise ConfigError("; ".join(problems))


def conv_layers_fitting(side: int) -> int:
    """How many 3x3 stride-2 convolutions without padding a ``side``-pixel picture goes through (each needs 3 pixels)."""
    layers = 0
    while side >= 3:
        side = (side - 3) // 2 + 1
        layers += 1
    return layers


def config_problems(config: Config) -> list[str]:
    """Settings that contradict each other so that a run would crash, hang or learn nothing; one sentence each."""
    obs, learner, novelty = config.observation, config.learner, config.novelty
    h, w, _ = frame = frame_shape(obs)
    problems = []
    if config.ring.capacity <= obs.stack:
        problems.append(f"ring.capacity = {config.ring.capacity} must be larger than observation.stack = {obs.stack} "
                        f"(the ring serves the newest observation.stack frames while the next is written): "
                        f"raise ring.capacity or lower observation.stack")
    problems += replay_problems(frame, obs.stack, learner)
    fits = conv_layers_fitting(min(h, w))
    filters = learner.networks.filters
    if len(filters) > fits:
        problems.append(f"learner.networks.filters = {list(filters)} asks for {len(filters)} convolutions "
                        f"(kernel 3, stride 2), but frames of observation.height = {h} by observation.width = {w} "
                        f"pixels go through at most {fits}: drop entries from learner.networks.filters or raise "
                        f"observation.height and observation.width")
    if learner.networks.augment > min(h, w):
        problems.append(f"learner.networks.augment = {learner.networks.augment} pads each picture by more than "
                        f"its size "
                        f"(observation.height = {h}, observation.width = {w}): lower learner.networks.augment to "
                        f"{min(h, w)} or less")
    if novelty.signal in ("rnd", "forward"):
        cnn, instead = f"novelty.signal = {novelty.signal}", "novelty.signal = pixel or episodic"
    elif novelty.signal == "episodic" and novelty.embedding not in ("histogram", "reach"):
        cnn, instead = f"novelty.embedding = {novelty.embedding}", "novelty.embedding = histogram"
    else:
        cnn = instead = ""
    if cnn and conv_layers_fitting(min(h, w)) < NOVELTY_CNN_LAYERS:
        problems.append(f"{cnn} reads frames with a CNN of {NOVELTY_CNN_LAYERS} convolutions (kernel 3, stride 2) "
                        f"that needs at least 7 by 7 pixels, but observation.height = {h} and observation.width = "
                        f"{w}: raise them, or use {instead}")
    problems += worker_problems(config)
    plan = learner.actions.plan_candidates
    model = plan and learner.actions.plan_score == "model"
    if model and novelty.signal == "episodic" and novelty.embedding == "temporal":
        problems.append(f"learner.actions.plan_candidates = {plan} predicts embeddings as the novelty's "
                        f"model gives them, but novelty.embedding = temporal normalises them after: use another "
                        f"novelty.embedding, or learner.actions.plan_candidates = 0")
    if model and novelty.signal != "episodic":
        problems.append(f"learner.actions.plan_candidates = {plan} scores actions against the episodic "
                        f"novelty's memory of the episode, but novelty.signal = {novelty.signal}: set "
                        f"novelty.signal = episodic, learner.actions.plan_score = critic, or "
                        f"learner.actions.plan_candidates = 0")
    shape = (config.observation.height, config.observation.width, 1 if config.observation.grayscale else 3)
    readers = [("learner.actions.plan_score", "reach reads 64 x 64 colour frames, as it was trained",
                plan and learner.actions.plan_score == "reach"),
               ("novelty.embedding", "reach reads 64 x 64 colour frames, as the reach prior was trained",
                novelty.signal == "episodic" and novelty.embedding == "reach")]
    for key, reads, used in readers:  # the reach prior knows the frame it was trained on only
        if used and shape != REACH_FRAME:
            problems.append(f"{key} = {reads}, but observation.height = {shape[0]}, observation.width = {shape[1]} "
                            f"and observation.grayscale = {str(config.observation.grayscale).lower()}: use the "
                            f"default observation, or another {key}")
    problems += heading_problems(config)
    if (novelty.signal == "episodic" and novelty.episodic_reward == "distance"
            and novelty.exclude_recent >= novelty.episode_capacity):
        problems.append(f"novelty.exclude_recent = {novelty.exclude_recent} ignores all novelty.episode_capacity = "
                        f"{novelty.episode_capacity} embeddings an episode keeps, so every step would earn the same "
                        f"reward: make novelty.exclude_recent smaller than novelty.episode_capacity")
    return problems


#: tics per second of ViZDoom's engine in real time (``game.realtime``)
ENGINE_TICS_PER_S = 35


def turn_rate(config: Config) -> float:
    """Degrees the view turns per agent step at full camera x, for the episodic novelty's heading
    window: ``novelty.turn_rate``, else the headless built-in game's (``game.turn_scale`` x ``game.frame_skip``;
    the synthetic game turns as it does), else 0 (a Gymnasium game's actions do not turn a view)."""
    if config.novelty.turn_rate > 0:
        return config.novelty.turn_rate
    if config.game.name == "gym":
        return 0.0
    return config.game.turn_scale * config.game.frame_skip


def realtime_turn_rate(config: Config) -> float:
    """Degrees the built-in game in real time turns per live tick at full camera x, about: ``game.turn_scale``
    per engine tic, :data:`ENGINE_TICS_PER_S` tics a second, ``control.hz`` ticks a second."""
    return config.game.turn_scale * ENGINE_TICS_PER_S / config.control.hz


def heading_problem(novelty: NoveltyConfig, game: str) -> str:
    """The refusal of ``novelty.heading_window`` without ``novelty.turn_rate`` on ``game``, a game whose turn
    rate nothing else gives."""
    return (f"novelty.heading_window = {novelty.heading_window:g} needs a turn rate on {game}: set "
            f"novelty.turn_rate to the degrees the view turns per step at full camera x, or "
            f"novelty.heading_window = 0")


def heading_problems(config: Config) -> list[str]:
    """Where ``novelty.heading_window`` would do nothing, or turn the heading at a rate the game does not turn."""
    novelty, game = config.novelty, config.game
    if novelty.heading_window == 0:
        return []
    if novelty.signal != "episodic":
        return [f"novelty.heading_window = {novelty.heading_window:g} needs novelty.signal = \"episodic\" (only the "
                f"episodic memory compares frames by heading), but novelty.signal = {novelty.signal}: set "
                f"novelty.signal = episodic, or novelty.heading_window = 0"]
    if novelty.turn_rate > 0:
        return []
    if game.name == "gym":
        return [heading_problem(novelty, "game.name = gym (its actions turn no view by a known angle)")]
    if game.realtime and game.name == "vizdoom":
        return [heading_problem(novelty, f"game.realtime = true (a step is a tick of control.hz, not "
                                f"game.frame_skip tics: the view turns about game.turn_scale x {ENGINE_TICS_PER_S} "
                                f"tics/s / control.hz = {realtime_turn_rate(config):.3g} degrees in one)")]
    return []


def check_live_turn_rate(config: Config) -> None:
    """Raise a one-line :class:`ConfigError` when ``novelty.heading_window`` would turn the heading of a live game
    (``explorer play``) at the headless built-in game's rate: a live step is a tick of ``control.hz``, and only
    ``novelty.turn_rate`` says how far the game's view turns in one."""
    novelty = config.novelty
    if novelty.heading_window == 0 or novelty.turn_rate > 0:  # a window on another signal is refused at load
        return
    raise ConfigError(heading_problem(novelty, f"a live game (not the headless built-in game's game.turn_scale x "
                                      f"game.frame_skip = {turn_rate(config):g} degrees a step)"))


def recorded_turn_rate(meta: Mapping[str, Any]) -> float:
    """Degrees the view of the game a session recorded turned per step at full camera x, from what its recorder
    kept (``meta.json``'s ``meta``: ``source``, ``config``): the config's ``novelty.turn_rate``, else with
    ``source = game`` the headless built-in game's; 0 when it does not say (a screen, a Gymnasium or real-time
    game, a foreign session)."""
    settings: Any = meta.get("config")
    try:
        novelty, game = settings.get("novelty", {}), settings.get("game", {})
        rate = float(novelty.get("turn_rate", 0.0))
        if (not rate > 0 and meta.get("source") == "game" and game.get("name", "vizdoom") != "gym"
                and game.get("realtime", False) is False):
            defaults = GameConfig()
            rate = float(game.get("turn_scale", defaults.turn_scale)) * float(game.get("frame_skip", defaults.frame_skip))
    except (AttributeError, TypeError, ValueError):  # not a config as explorer writes it
        return 0.0
    return rate if math.isfinite(rate) and rate > 0 else 0.0


def check_recorded_turn_rate(config: Config, sessions: Mapping[str, Mapping[str, Any]]) -> None:
    """Raise a one-line :class:`ConfigError` when ``novelty.heading_window`` would turn the heading of recorded
    sessions (``explorer replay``) at a rate other than their game's: without ``novelty.turn_rate``, each of
    ``sessions`` (path -> ``meta.json``'s ``meta``) must say its game's (:func:`recorded_turn_rate`), and that
    must be the settings' (:func:`turn_rate`)."""
    novelty = config.novelty
    if novelty.heading_window == 0 or novelty.turn_rate > 0:
        return
    rates = {path: recorded_turn_rate(meta) for path, meta in sessions.items()}
    unknown = [path for path, rate in rates.items() if rate == 0]
    if unknown:
        raise ConfigError(heading_problem(novelty, f"the game {', '.join(unknown)} recorded (the session does not "
                                          f"say one: a screen, or a Gymnasium or real-time game)"))
    ours = turn_rate(config)
    other: dict[float, list[str]] = {}
    for path, rate in rates.items():
        if not math.isclose(rate, ours):
            other.setdefault(rate, []).append(path)
    if other:
        said = "; ".join(f"{rate:g} in {', '.join(paths)}" for rate, paths in other.items())
        fix = (f"set novelty.turn_rate = {next(iter(other)):g}" if len(set(rates.values())) == 1
               else "replay sessions of one turn rate together and set novelty.turn_rate to it")
        raise ConfigError(f"novelty.heading_window = {novelty.heading_window:g} would turn the heading {ours:g} "
                          f"degrees a step (game.turn_scale x game.frame_skip), but the recorded game turned "
                          f"{said}: {fix}, or novelty.heading_window = 0")


def worker_problems(config: Config) -> list[str]:
    """What ``run.workers > 1`` cannot do yet, one sentence each."""
    run = config.run
    if run.workers == 1:
        return []
    problems = []
    if run.agent != "explorer":
        problems.append(f"run.workers = {run.workers} runs the learning agent only, but run.agent = {run.agent}: "
                        f"run baselines with run.workers = 1")
    if config.record.dir:
        problems.append(f"run.workers = {run.workers} does not record sessions (record.dir = {config.record.dir!r}): "
                        f"record with run.workers = 1, or leave record.dir empty")
    if config.game.realtime or config.game.visible:
        problems.append(f"run.workers = {run.workers} runs headless, synchronous games: set game.realtime and "
                        f"game.visible to false")
    return problems


def explore_warnings(config: Config) -> list[str]:
    """What makes an explore run of the learning agent learn nothing, one sentence each (to print, not refuse).

    A short smoke run is legitimate, so these are warnings: the run goes on, and says what it measures.
    ``run.steps`` counts from the start of the run, resumptions included, as warm-up does.
    """
    run, learner = config.run, config.learner
    schedule = learner.schedule
    if run.agent != "explorer":
        return []
    if run.steps <= schedule.warmup_steps:
        return [f"run.steps = {run.steps} ends before learner.schedule.warmup_steps = {schedule.warmup_steps}: the "
                f"actor never acts and nothing is learned, so this run measures the warm-up's random sticks; raise "
                f"run.steps or lower learner.schedule.warmup_steps"]
    first = _first_update(learner)
    if run.steps <= first:
        return [f"run.steps = {run.steps} ends before the first update (after learner.schedule.warmup_steps = "
                f"{schedule.warmup_steps} steps and learner.schedule.batch_size = {schedule.batch_size} transitions "
                f"of learner.action_repeat = {learner.action_repeat} steps each): nothing is learned; raise "
                f"run.steps"]
    update = math.ceil(first / schedule.update_every) * schedule.update_every  # on multiples of update_every
    if run.steps < update:
        return [f"learner.schedule.update_every = {schedule.update_every} puts the first update at step {update}, "
                f"after run.steps = {run.steps}: nothing is learned; lower learner.schedule.update_every or raise "
                f"run.steps"]
    return []


def _first_update(learner: LearnerConfig) -> int:
    """The agent step after which the first update can come: past the warm-up, with a batch of transitions
    (one per decision of ``action_repeat`` steps, ``n_step`` more to complete their returns)."""
    schedule = learner.schedule
    return max(schedule.warmup_steps, (schedule.batch_size + learner.n_step) * learner.action_repeat)


def replay_warnings(config: Config, transitions: int) -> list[str]:
    """What makes a replay of ``transitions`` recorded steps learn nothing (to print before it starts)."""
    schedule = config.learner.schedule
    update = math.ceil(_first_update(config.learner) / schedule.update_every) * schedule.update_every
    if transitions >= update:
        return []
    return [f"replaying {transitions} recorded steps ends before the first update, at step {update} "
            f"(learner.schedule.warmup_steps = {schedule.warmup_steps}, learner.schedule.batch_size = "
            f"{schedule.batch_size}, learner.schedule.update_every = {schedule.update_every}): nothing is learned; "
            f"lower learner.schedule.warmup_steps, or replay more (--epochs, more sessions)"]
