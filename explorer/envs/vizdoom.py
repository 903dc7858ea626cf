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
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from explorer.config import GameConfig, ObservationConfig
from explorer.core import NEUTRAL, ExplorerError, clamp
from explorer.envs.screen import observation_shape, to_observation

_RESOLUTIONS = {"160x120": "RES_160X120", "320x240": "RES_320X240", "640x480": "RES_640X480"}


class GameError(ExplorerError):
    """The game cannot be started with this configuration."""


@dataclass(frozen=True)
class Position:
    """Player position in map units and facing angle in degrees (measurement only)."""

    x: float
    y: float
    angle: float


class DoomGame:
    """A ViZDoom scenario as a :class:`~explorer.envs.screen.Screen` plus a clock.

    ``grab()`` returns the current frame. In synchronous mode ``advance()``
    applies the pad's current sticks for ``frame_skip`` tics; when the episode
    ends (``episode_ended``) the last frame stays current until
    ``new_episode()``. In real-time mode the engine runs at 35 tics/s on its
    own and ``advance()`` only pushes the newest sticks.
    """

    def __init__(self, config: GameConfig, obs: ObservationConfig):
        import vizdoom as vzd

        self.config = config
        self.obs = obs
        self.shape = observation_shape(obs)
        self._vzd = vzd
        self._lock = threading.Lock()
        game = vzd.DoomGame()
        game.load_config(_scenario_path(config.scenario, vzd.scenarios_path))
        if config.wad:
            if not Path(config.wad).is_file():
                raise GameError(f"game.wad = {config.wad!r} does not exist")
            game.set_doom_scenario_path(config.wad)
        if config.map:
            game.set_doom_map(config.map)
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
        ])
        game.set_available_game_variables([vzd.GameVariable.POSITION_X, vzd.GameVariable.POSITION_Y, vzd.GameVariable.ANGLE])
        game.set_episode_timeout(config.episode_steps * config.frame_skip + game.get_episode_start_time())
        game.set_window_visible(config.visible or config.realtime)
        game.set_mode(vzd.Mode.ASYNC_PLAYER if config.realtime else vzd.Mode.PLAYER)
        game.set_sound_enabled(False)
        game.set_seed(config.seed)
        game.add_game_args("+freelook 1" if config.look_scale > 0 else "+freelook 0")
        try:
            game.init()
        except Exception as err:
            raise GameError(f"ViZDoom failed to start ({type(err).__name__}: {err})"
                            + ("; a visible window needs a display (DISPLAY set, or run under Xvfb)" if config.visible or config.realtime else "")) from err
        self.game = game
        self.action = NEUTRAL.copy()
        self.episode = 0
        self.episode_step = 0
        self.total_steps = 0
        self.episode_ended = False
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
                float(a[2]) * c.strafe_scale, float(a[3]) * c.move_scale]

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
        """Synchronous mode: apply the current sticks for one agent step (``frame_skip`` tics).

        In real-time mode the engine thread applies the sticks on its next tic; this does nothing.
        """
        c = self.config
        if c.realtime:
            return
        with self._lock:
            self.game.make_action(self._buttons(), c.frame_skip)
            self.episode_step += 1
            self.total_steps += 1
            self.episode_ended = self.game.is_episode_finished() or self.episode_step >= c.episode_steps
            if not self.game.is_episode_finished():
                self._frame = self._read_frame()

    def new_episode(self) -> None:
        """Start the next episode (the first one starts with the game)."""
        with self._lock:
            self.game.new_episode()
            self.episode += 1
            self.episode_step = 0
            self.episode_ended = False
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

    def _read_position(self) -> Position:
        v = self.game.get_game_variable
        g = self._vzd.GameVariable
        return Position(float(v(g.POSITION_X)), float(v(g.POSITION_Y)), float(v(g.ANGLE)))


class DoomPad:
    """The pad bridge: a :class:`~explorer.envs.pad.Pad` whose sticks drive a :class:`DoomGame`."""

    def __init__(self, game: DoomGame):
        self.game = game

    def send(self, action: np.ndarray) -> None:
        self.game.action = clamp(action)  # one reference swap: the engine thread never sees half an action

    def neutral(self) -> None:
        self.send(NEUTRAL)

    def close(self) -> None:
        self.neutral()


def _scenario_path(scenario: str, bundled: str) -> str:
    if scenario.endswith(".cfg"):
        if not os.path.isfile(scenario):
            raise GameError(f"game.scenario = {scenario!r}: no such file")
        return scenario
    path = os.path.join(bundled, f"{scenario}.cfg")
    if not os.path.isfile(path):
        names = sorted(f[:-4] for f in os.listdir(bundled) if f.endswith(".cfg"))
        raise GameError(f"game.scenario = {scenario!r} is not a bundled scenario; choose one of {', '.join(names)} or give a .cfg path")
    return path
