"""ViZDoom as a built-in game: headless, synchronous by default.

The four stick axes reach the engine through :class:`DoomPad`, which turns
them into ViZDoom's analog delta controls (per tic):

=============  ==============================  ====================
axis           engine button                   scale (config.game)
=============  ==============================  ====================
camera x       ``TURN_LEFT_RIGHT_DELTA``       ``turn_scale`` deg
camera y       ``LOOK_UP_DOWN_DELTA``          ``look_scale`` deg
walk x         ``MOVE_LEFT_RIGHT_DELTA``       ``strafe_scale`` units
walk y         ``MOVE_FORWARD_BACKWARD_DELTA`` ``move_scale`` units
=============  ==============================  ====================

Positive camera x turns right, positive camera y looks up, positive walk y
moves forward, positive walk x strafes right. The player's position is
reported for measurement only and is never part of an observation.

Pad buttons reach the engine's binary buttons, in the order of :data:`BUTTONS`
(see :data:`ENGINE_BUTTONS`): A is ``USE``, which opens doors, presses switches
and rides lifts. Doom acts on a press, not on a held button: holding A uses
once; pressing again on a door that is still opening sends it back down.
The pad bridge takes actions of the four sticks and the buttons of
``pad.buttons``; a button of that list the engine does not take is unbound, as a
button a game has no use for: pressing it does nothing. Other pad buttons are
left unmapped on purpose: ``ATTACK`` (RT) spends ammunition, wakes
monsters and changes the picture without moving (novelty for nothing), and
``SPEED`` (clicking the left stick) does nothing here, because the delta
controls set the speed (``move_scale``); ``JUMP`` and ``CROUCH`` are not part of
Doom's maps, which were built without them.

The map is checked before the engine starts (a missing map would silently
start another one), and the engine process is tied to this one (see
:mod:`explorer.envs.doom.process`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from explorer.config import MAP_NAME, GameConfig, ObservationConfig, engine_args
from explorer.core import N_AXES, NEUTRAL, ExplorerError, clamp
from explorer.envs.doom import process as doom_process
from explorer.envs.doom.wad import Wad, WadError, read_wad
from explorer.envs.geometry import observation_shape, to_observation

_RESOLUTIONS = {"160x120": "RES_160X120", "320x240": "RES_320X240", "640x480": "RES_640X480"}

#: pad buttons the engine takes, in the order of :attr:`DoomGame.buttons` (Xbox 360 names, lower case)
BUTTONS: tuple[str, ...] = ("a",)
#: the ViZDoom button each pad button presses
ENGINE_BUTTONS: dict[str, str] = {"a": "USE"}
#: all buttons released, ``float32[len(BUTTONS)]``
RELEASED = np.zeros(len(BUTTONS), np.float32)

#: WADs shipped inside the vizdoom package, usable by name as ``game.wad``
BUNDLED_WADS = ("freedoom1", "freedoom2")

#: explorer's own scenarios (``<name>.cfg`` beside this module), found before ViZDoom's
OWN_SCENARIOS = Path(__file__).resolve().parent


class GameError(ExplorerError):
    """The game cannot be started with this configuration."""


@dataclass(frozen=True)
class Position:
    """Player position in map units and facing angle in degrees (measurement only)."""

    x: float
    y: float
    angle: float


class DoomGame:
    """A ViZDoom scenario as a :class:`~explorer.envs.live.screen.Screen` plus a clock.

    ``grab()`` returns the current frame. In synchronous mode ``advance()``
    applies the pad's current sticks for ``frame_skip`` tics; when the episode
    ends (``episode_ended``) the last frame stays current until
    ``new_episode()``. In real-time mode the engine runs at 35 tics/s on its
    own and ``advance()`` only pushes the newest sticks.

    With ``diagnostics`` (a keyword of the constructor for measuring tools such as
    ``tools/oracle_ceilings.py``, never a setting: a run's config cannot turn it on) the
    engine also renders its depth buffer and reports the map's walls, read with
    :meth:`depth` and :meth:`walls`; like :meth:`position`, they are never part of an
    observation.
    """

    def __init__(self, config: GameConfig, obs: ObservationConfig, *, diagnostics: bool = False):
        with doom_process.deferred_sigint():  # a Ctrl-C inside the extension's first import fails it (ImportError)
            import vizdoom as vzd

        self.config = config
        self.obs = obs
        self.shape = observation_shape(obs)
        self._vzd = vzd
        self._lock = threading.Lock()
        for note in doom_process.reap_leftovers():
            print(f"explorer: {note}", file=sys.stderr)
        if config.visible or config.realtime:
            problem = doom_process.display_problem()
            if problem is not None:
                raise GameError(f"game.visible/game.realtime open an engine window, but {problem}: set DISPLAY to a "
                                "running X server, or run under Xvfb (xvfb-run -a explorer ...)")
        game = vzd.DoomGame()
        _load_scenario(game, _scenario_path(config.scenario, vzd.scenarios_path))
        wad = _set_wad(game, config.wad, os.path.dirname(vzd.__file__)) if config.wad else None
        if config.map:
            game.set_doom_map(config.map)
        elif wad is not None and wad.maps:
            game.set_doom_map(wad.maps[0].lower())
        _check_map(game, config, os.path.dirname(vzd.__file__))
        game.set_screen_resolution(getattr(vzd.ScreenResolution, _RESOLUTIONS[config.resolution]))
        game.set_screen_format(vzd.ScreenFormat.RGB24)
        game.set_render_hud(False)
        game.set_render_crosshair(False)
        game.set_render_weapon(False)
        game.set_available_buttons([
            vzd.Button.TURN_LEFT_RIGHT_DELTA,
            vzd.Button.LOOK_UP_DOWN_DELTA,
            vzd.Button.MOVE_LEFT_RIGHT_DELTA,
            vzd.Button.MOVE_FORWARD_BACKWARD_DELTA,
            *(getattr(vzd.Button, ENGINE_BUTTONS[name]) for name in BUTTONS),
        ])
        game.set_available_game_variables([vzd.GameVariable.POSITION_X, vzd.GameVariable.POSITION_Y, vzd.GameVariable.ANGLE])
        game.set_episode_timeout(config.episode_steps * config.frame_skip + game.get_episode_start_time())
        game.set_window_visible(config.visible or config.realtime)
        game.set_mode(vzd.Mode.ASYNC_PLAYER if config.realtime else vzd.Mode.PLAYER)
        game.set_sound_enabled(False)
        if diagnostics:
            game.set_depth_buffer_enabled(True)
            game.set_sectors_info_enabled(True)
        self.diagnostics = diagnostics
        game.set_seed(config.seed)
        game.add_game_args("+freelook 1" if config.look_scale > 0 else "+freelook 0")
        for arg in engine_args(config.args):  # the allow-list again: a config built around its checks gets no more
            if arg[0] == "-skill":
                game.set_doom_skill(int(arg[1]))  # ViZDoom puts its own -skill first, which the engine would take
            else:
                game.add_game_args(" ".join(arg))
        _start(game, os.path.dirname(vzd.__file__))
        try:
            self._setup(game)
        except BaseException:
            game.close()
            raise

    def _setup(self, game: Any) -> None:
        """State of a started engine; the real-time engine thread starts here."""
        config = self.config
        self.game = game
        self.action = NEUTRAL.copy()
        self.buttons = RELEASED.copy()  # float32[len(BUTTONS)], 1 = pressed; replaced whole, never written in place
        self.episode = 0
        self.episode_step = 0
        self.total_steps = 0
        self.episode_ended = False
        self.outcome: str | None = None  # how the ended episode ended: "goal", "death" or "timeout"
        self.tics = 0  # engine tics run in real-time mode
        self._frame = self._read_frame()
        self._position = self._read_position()
        self._stop = threading.Event()
        self._engine: threading.Thread | None = None
        self.engine_error: BaseException | None = None
        if config.realtime:
            self._engine = threading.Thread(target=self._run_engine, name="vizdoom-engine", daemon=True)
            self._engine.start()

    #: part of the engine window's title, for window lookup (case-insensitive)
    window_title = "vizdoom"

    def _buttons(self) -> list[float]:
        c, a = self.config, self.action
        # LOOK_UP_DOWN_DELTA is positive downwards; camera y is positive upwards.
        return [float(a[0]) * c.turn_scale, -float(a[1]) * c.look_scale,
                float(a[2]) * c.strafe_scale, float(a[3]) * c.move_scale,
                *(1.0 if b > 0.5 else 0.0 for b in self.buttons)]

    def _run_engine(self) -> None:
        """Real-time mode: the engine runs tic after tic at its own 35 tics/s, as a game does,
        whatever the agent is doing; each tic takes the sticks as they are now."""
        try:
            while not self._stop.is_set():
                with self._lock:
                    if self.game.is_episode_finished():
                        self.game.new_episode()
                        self.episode += 1
                    self.game.set_action(self._buttons())
                    self.game.advance_action(1)  # returns at the engine's next tic
                    self.tics += 1
                    # Published for position(): readers never wait for the lock this thread holds across tics.
                    self._position = self._read_position()
        except BaseException as err:  # surfaced through check()
            if not self._stop.is_set():
                self.engine_error = err

    def check(self) -> None:
        """Raise in the caller's thread if the real-time engine thread died."""
        if self.engine_error is not None:
            raise GameError(f"the ViZDoom engine stopped: {type(self.engine_error).__name__}: {self.engine_error}")

    # Screen
    def grab(self) -> np.ndarray:
        if self.config.realtime:
            with self._lock:
                self._frame = self._read_frame()
        return self._frame

    def _read_frame(self) -> np.ndarray:
        state = self.game.get_state()
        if state is None or state.screen_buffer is None:
            return np.zeros(self.shape, np.uint8) if not hasattr(self, "_frame") else self._frame
        return to_observation(state.screen_buffer, self.obs)

    def close(self) -> None:
        self._stop.set()
        if self._engine is not None:
            self._engine.join(timeout=2.0)
        self.game.close()

    # Clock
    def advance(self) -> None:
        """Synchronous mode: apply the current sticks and buttons for one agent step (``frame_skip`` tics).

        When this step ends the episode, :attr:`outcome` says how: ``"goal"`` (the
        map ended it early: its exit, or a scenario's goal such as my_way_home's
        vest), ``"death"`` or ``"timeout"`` (``episode_steps`` ran out).

        In real-time mode the engine thread applies the sticks on its next tic; this does nothing.
        """
        c = self.config
        if c.realtime:
            return
        with self._lock, _engine_errors():
            self.game.make_action(self._buttons(), c.frame_skip)
            self.episode_step += 1
            self.total_steps += 1
            finished = self.game.is_episode_finished()
            self.episode_ended = finished or self.episode_step >= c.episode_steps
            if self.episode_ended:
                self.outcome = ("death" if self.game.is_player_dead()
                                else "goal" if finished and self.episode_step < c.episode_steps else "timeout")
            if not finished:
                self._frame = self._read_frame()

    def new_episode(self) -> None:
        """Start the next episode (the first one starts with the game)."""
        with self._lock, _engine_errors():
            self.game.new_episode()
            self.episode += 1
            self.episode_step = 0
            self.episode_ended = False
            self.outcome = None
            self._frame = self._read_frame()

    def position(self) -> Position:
        """Where the player is (map units, degrees): for measurement only.

        In real-time mode this is where the engine thread left the player after
        its latest tic; it never waits for that thread, which holds the engine
        from one tic to the next (waiting used to stall the control loop that
        measures coverage by up to a quarter of a second).
        """
        if self.config.realtime:
            return self._position
        with self._lock:
            return self._read_position()

    def depth(self) -> np.ndarray:
        """The engine's depth buffer of the current frame, ``uint8[height, width]`` at the render resolution
        (larger is farther; all zeros once the episode has ended): for measurement only.

        Raises:
          GameError: the game was built without ``diagnostics``.
        """
        state = self._diagnostic_state()
        if state is None or state.depth_buffer is None:
            w, h = (int(v) for v in self.config.resolution.split("x"))
            return np.zeros((h, w), np.uint8)
        return np.asarray(state.depth_buffer)

    def walls(self) -> np.ndarray:
        """The map's lines marked as blocking, ``float64[n, 4]`` rows of ``x1, y1, x2, y2`` in map units (its
        solid walls; doors, steps and ledges are two-sided lines and not among them; none once the episode
        has ended): for measurement only.

        Raises:
          GameError: the game was built without ``diagnostics``.
        """
        state = self._diagnostic_state()
        lines = [] if state is None or state.sectors is None else \
            [(ln.x1, ln.y1, ln.x2, ln.y2) for sector in state.sectors for ln in sector.lines if ln.is_blocking]
        return np.array(lines, np.float64).reshape(-1, 4)

    def sectors(self) -> list[tuple[float, float, np.ndarray]]:
        """The map's sectors as ``(floor height, ceiling height, lines)``, the lines ``float64[n, 4]`` rows of
        ``x1, y1, x2, y2`` in map units that bound the sector (a line between two sectors is listed by both;
        none once the episode has ended): for measurement only.

        Raises:
          GameError: the game was built without ``diagnostics``.
        """
        state = self._diagnostic_state()
        sectors = [] if state is None or state.sectors is None else state.sectors
        return [(float(s.floor_height), float(s.ceiling_height),
                 np.array([(ln.x1, ln.y1, ln.x2, ln.y2) for ln in s.lines], np.float64).reshape(-1, 4))
                for s in sectors]

    def _diagnostic_state(self) -> Any:
        if not self.diagnostics:
            raise GameError("the engine's depth and walls are read only from a DoomGame built with diagnostics=True")
        with self._lock:
            return self.game.get_state()

    def _read_position(self) -> Position:
        v = self.game.get_game_variable
        g = self._vzd.GameVariable
        return Position(float(v(g.POSITION_X)), float(v(g.POSITION_Y)), float(v(g.ANGLE)))


class DoomPad:
    """The pad bridge: a :class:`~explorer.envs.live.pad.Pad` whose sticks and buttons drive a :class:`DoomGame`.

    Button names are those of :data:`BUTTONS`; sticks and buttons are applied
    together on every engine step until changed.

    Args:
      game: the engine.
      buttons: the pad buttons of an action after its four sticks (``pad.buttons``): :meth:`send`
        presses each the engine takes while its value is above 0 and releases it otherwise (an
        action of the sticks alone releases them); buttons the engine does not take are unbound.
        Empty: :meth:`send` sets the sticks only, and buttons change through :meth:`press`,
        :meth:`release` and :meth:`send_buttons`.
    """

    def __init__(self, game: DoomGame, buttons: tuple[str, ...] = ()):
        self.game = game
        self.buttons = tuple(buttons)
        # (index into the action, index into the engine's buttons) of every bound button
        self._bound = [(N_AXES + i, BUTTONS.index(name)) for i, name in enumerate(self.buttons) if name in BUTTONS]

    def send(self, action: np.ndarray) -> None:
        a = clamp(action)
        if self.buttons:
            values = RELEASED.copy()
            for i, j in self._bound:
                values[j] = 1.0 if i < len(a) and a[i] > 0 else 0.0
            self.game.buttons = values  # one reference swap: the engine thread never sees half the buttons
        self.game.action = a[:N_AXES]  # one reference swap: the engine thread never sees half an action

    def send_buttons(self, states: Mapping[str, bool] | np.ndarray) -> None:
        """Set every button at once.

        Args:
          states: ``{name: pressed}`` for some of :data:`BUTTONS` (the others are
            released), or ``float32[len(BUTTONS)]`` in that order (> 0.5 is pressed).
        """
        if isinstance(states, Mapping):
            unknown = sorted(set(states) - set(BUTTONS))
            if unknown:
                raise ValueError(f"unknown pad button(s) {', '.join(unknown)}; the game takes {', '.join(BUTTONS)}")
            values = np.array([1.0 if states.get(name) else 0.0 for name in BUTTONS], np.float32)
        else:
            values = np.asarray(states, np.float32).reshape(-1)
            if values.shape != RELEASED.shape:
                raise ValueError(f"button states have {len(BUTTONS)} entries {BUTTONS}, got shape {np.shape(states)}")
            values = np.where(values > 0.5, 1.0, 0.0).astype(np.float32)  # NaN is released
        self.game.buttons = values  # one reference swap, as for the sticks

    def press(self, name: str) -> None:
        """Hold button ``name`` down until :meth:`release` or :meth:`neutral`."""
        self._set(name, 1.0)

    def release(self, name: str) -> None:
        self._set(name, 0.0)

    def _set(self, name: str, value: float) -> None:
        if name not in BUTTONS:
            raise ValueError(f"unknown pad button {name!r}; the game takes {', '.join(BUTTONS)}")
        values = self.game.buttons.copy()
        values[BUTTONS.index(name)] = value
        self.game.buttons = values

    def neutral(self) -> None:
        """Centre the sticks and release every button."""
        self.game.buttons = RELEASED.copy()
        self.send(NEUTRAL)

    def close(self) -> None:
        self.neutral()


def _scenario_path(scenario: str, bundled: str) -> str:
    if scenario.endswith(".cfg"):
        if not os.path.isfile(scenario):
            raise GameError(f"game.scenario = {scenario!r}: no such file")
        return scenario
    if not scenario or any(c in scenario for c in "/\\:") or scenario.startswith("."):
        raise GameError(f"game.scenario = {scenario!r} is neither a bundled scenario's name nor a .cfg path; give "
                        "a name such as my_way_home or freedoom, or the path of a .cfg file")
    for folder in (OWN_SCENARIOS, Path(bundled)):
        path = folder / f"{scenario}.cfg"
        if path.is_file():
            return str(path)
    names = sorted({f.stem for folder in (OWN_SCENARIOS, Path(bundled)) for f in folder.glob("*.cfg")})
    raise GameError(f"game.scenario = {scenario!r} is not a bundled scenario; choose one of {', '.join(names)} or give a .cfg path")


#: the largest scenario file read (ViZDoom's own are under 2 kB)
MAX_SCENARIO_BYTES = 1 << 20

#: the keys of a ViZDoom scenario file explorer lets through, lower case without underscores as ViZDoom
#: compares them: the game, its map, rules, rewards and what the engine renders. ``game_args`` is checked
#: against the allow-list of ``game.args``; ``doom_map`` must be a map's name
SCENARIO_KEYS = frozenset({
    "availablebuttons", "availablegamevariables", "gameargs", "buttonmaxvalue", "mode", "ticrate", "seed",
    "doomgamepath", "doomscenariopath", "doommap", "doomskill", "episodetimeout", "episodestarttime",
    "livingreward", "deathpenalty", "deathreward", "mapexitreward", "killreward", "itemreward", "secretreward",
    "fragreward", "hitreward", "hittakenpenalty", "hittakenreward", "damagemadereward", "damagetakenpenalty",
    "damagetakenreward", "healthreward", "armorreward", "screenresolution", "screenformat", "depthbufferenabled",
    "labelsbufferenabled", "automapbufferenabled", "automapmode", "automaprotate", "automaprendertextures",
    "automaprenderobjectsassprites", "objectsinfoenabled", "sectorsinfoenabled", "renderhud", "renderminimalhud",
    "renderweapon", "rendercrosshair", "renderdecals", "renderparticles", "rendereffectssprites", "rendermessages",
    "rendercorpses", "renderscreenflashes", "renderallframes", "windowvisible", "consoleenabled", "soundenabled",
    "audiobufferenabled", "audiobuffersize", "audiosamplingrate", "notificationsbufferenabled",
    "notificationsbuffersize"
})
#: keys refused with the reason
_REFUSED_KEYS = {"vizdoompath": "it names the program started as the engine",
                 "doomconfigpath": "it names a file the engine reads its settings from and writes them back to"}


def check_scenario_file(path: str) -> None:
    """Raise :class:`GameError` unless every setting in scenario file ``path`` is one explorer lets through.

    A scenario file (``.cfg``) is read by ViZDoom, which takes more from it than a scenario needs: the
    program to start as the engine (``vizdoom_path``), a settings file the engine writes
    (``doom_config_path``) and engine arguments (``game_args``). A file from elsewhere (a run directory, a
    download) must not get those: keys are checked against :data:`SCENARIO_KEYS`, read the way ViZDoom
    reads them (case and underscores ignored, ``key = value`` or ``key += value``, ``#`` comments).
    """
    for number, raw in enumerate(_read_scenario(path).split(b"\n"), 1):
        line = raw.decode("latin-1").strip()
        if not line or line.startswith("#") or "=" not in line:
            continue  # a comment, a list's items (no "="), or a line ViZDoom rejects itself
        key, _, value = line.partition("+=") if "+=" in line else line.partition("=")
        name = "".join(key.lower().split()).replace("_", "")
        where = f"game.scenario = {path!r}, line {number} ({key.strip()!r})"
        if name in _REFUSED_KEYS or name not in SCENARIO_KEYS:
            why = _REFUSED_KEYS.get(name, "it is not a scenario setting explorer knows")
            raise GameError(f"{where} is refused: {why}; remove the line, or use a bundled scenario")
        if name == "gameargs":
            try:
                engine_args([value.strip()])
            except ValueError as err:
                raise GameError(f"{where}: {err}") from None
        if name == "doommap" and not MAP_NAME.fullmatch(value.strip()):
            raise GameError(f"{where}: {value.strip()!r} is not a map's name (up to 8 letters, digits, _ or -)")


def _read_scenario(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SCENARIO_BYTES + 1)
    except OSError as err:
        raise GameError(f"game.scenario = {path!r} cannot be read: {err.strerror or err}") from None
    if len(data) > MAX_SCENARIO_BYTES:
        raise GameError(f"game.scenario = {path!r} is larger than {MAX_SCENARIO_BYTES >> 20} MB, which no scenario "
                        "file is; give a ViZDoom scenario (.cfg) file")
    return data


def _check_loaded(game: Any, path: str, engine: str, settings: str) -> None:
    """What ViZDoom took from scenario file ``path``, whatever key set it: the engine program and its
    settings file as they were, engine arguments on the allow-list."""
    if game.get_vizdoom_path() != engine or game.get_doom_config_path() != settings:
        raise GameError(f"game.scenario = {path!r} is refused: it names the program started as the engine or a "
                        "settings file the engine writes; remove that line, or use a bundled scenario")
    try:
        engine_args([game.get_game_args()])
    except ValueError as err:
        raise GameError(f"game.scenario = {path!r}: {err}") from None


def _load_scenario(game: Any, path: str) -> None:
    """``game.load_config(path)``, an error naming the file and its first bad line when ViZDoom rejects a line.

    A file ViZDoom takes is then checked (:func:`check_scenario_file`, and what it set) before anything
    else happens; the file is read whole first only to bound its size.
    """
    _read_scenario(path)
    engine, settings = game.get_vizdoom_path(), game.get_doom_config_path()
    with tempfile.TemporaryFile() as err:
        # ViZDoom prints what it rejects on the C++ side, to file descriptor 2, and only returns False.
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(err.fileno(), 2)
            ok = game.load_config(path)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        lines = [line.strip() for line in err.read().decode(errors="replace").splitlines() if line.strip()]
    if not ok:
        first = lines[0].split('". ', 1)[-1].removesuffix(" Line ignored.") if lines else "ViZDoom could not read it"
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        raise GameError(f"game.scenario = {path!r} is not a valid ViZDoom scenario file: {first}{more}; "
                        "fix the file (key = value lines, # comments) or choose a bundled scenario")
    check_scenario_file(path)
    _check_loaded(game, path, engine, settings)


def _set_wad(game: Any, name: str, package_dir: str) -> Wad | None:
    """Put ``game.wad`` in place of the scenario's WAD(s); returns what it holds (None for a pk3).

    An IWAD (a whole game, like the Freedoom WADs) replaces the scenario's game
    and drops its map WAD; a PWAD (or a pk3) replaces the map WAD, on the scenario's game.
    """
    if name in BUNDLED_WADS:
        path = Path(package_dir) / f"{name}.wad"
    else:
        path = Path(name).expanduser()
        if not path.is_file():
            raise GameError(f"game.wad = {name!r} is neither a bundled WAD ({', '.join(BUNDLED_WADS)}) nor an "
                            "existing file; give one of those names or the path of a .wad file")
    try:
        wad = read_wad(path)
    except WadError as err:
        if _is_zip(path):  # a pk3: ZDoom's zipped map package, taken as the map file without a map check
            game.set_doom_scenario_path(str(path))
            return None
        raise GameError(f"game.wad = {name!r}: {err}") from err
    except OSError as err:
        raise GameError(f"game.wad = {name!r}: {err}") from err
    if wad.kind == "IWAD":
        game.set_doom_game_path(str(path))
        game.set_doom_scenario_path("")
    else:
        game.set_doom_scenario_path(str(path))
    return wad


def _is_zip(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"PK\x03\x04"


def _default_iwad(package_dir: str) -> str:
    """The game WAD ViZDoom picks when none is set (its own search order), or "" when there is none."""
    for name in ("doom2.wad", "freedoom2.wad"):
        for folder in (".", package_dir):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                return path
    return ""


def _check_map(game: Any, config: GameConfig, package_dir: str) -> None:
    """Raise :class:`GameError` unless the map to start is in the game or map WAD (the engine would start another)."""
    wads = []
    for path, what in ((game.get_doom_game_path() or _default_iwad(package_dir), "game WAD"),
                       (game.get_doom_scenario_path(), "map WAD")):
        if not path:
            continue
        if not os.path.isfile(path):
            raise GameError(f"the scenario's {what} {path} does not exist; set game.wad to freedoom1, freedoom2 or a .wad path")
        try:
            wads.append(read_wad(path))
        except WadError:
            return  # a pk3 or another format the engine reads: its maps are not listed here
        except OSError as err:
            raise GameError(f"the scenario's {what}: {err}") from err
    maps = list(dict.fromkeys(m for w in wads for m in w.maps))
    name = (game.get_doom_map() or "map01").upper()
    if not wads or name in maps:
        return
    where = " + ".join(w.path.name for w in wads)
    key = f"game.map = {config.map!r}" if config.map else f"the scenario's map {name}"
    raise GameError(f"{key} is not in {where}; its maps: {', '.join(maps) or 'none'}")


@contextlib.contextmanager
def _engine_errors() -> Iterator[None]:
    """ViZDoom's own exceptions (an engine killed, out of memory or crashed) as one-line :class:`GameError`."""
    try:
        yield
    except Exception as err:
        if not type(err).__module__.startswith("vizdoom"):
            raise
        raise GameError(f"the ViZDoom engine stopped during the run ({type(err).__name__}: {err}): it was killed, ran "
                        "out of memory or crashed; the run stops") from err


def _start(game: Any, package_dir: str) -> None:
    """``game.init()`` with the engine tied to this process, Ctrl-C held back until it has started."""
    launcher = doom_process.engine_launcher(game.get_vizdoom_path() or os.path.join(package_dir, "vizdoom"))
    if launcher is not None:
        game.set_vizdoom_path(launcher)
        # the engine works in a folder of its own: the WADs it is given are found from anywhere
        if iwad := game.get_doom_game_path() or _default_iwad(package_dir):
            game.set_doom_game_path(os.path.abspath(iwad))
        if maps := game.get_doom_scenario_path():
            game.set_doom_scenario_path(os.path.abspath(maps))
    elif not os.access(os.getcwd(), os.W_OK):  # the engine would crash writing its settings there
        raise GameError(f"the ViZDoom engine writes _vizdoom.ini and _vizdoom/ into the working folder, and "
                        f"{os.getcwd()} is not writable: run explorer from a writable folder")
    os.environ[doom_process.OWNER_ENV] = str(os.getpid())  # read by the launcher and by reap_leftovers
    try:
        with doom_process.deferred_sigint():
            try:
                game.init()
            except Exception as err:
                raise GameError(f"ViZDoom failed to start ({type(err).__name__}: {err})") from err
    except KeyboardInterrupt:
        game.close()
        raise
