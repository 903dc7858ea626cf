"""Pads: where the four stick axes and the policy's buttons go.

An action is ``float32[4 + n]`` in [-1, 1]: camera x, camera y (right stick by
default), walk x, walk y (left stick by default), in the order of :data:`AXES`,
then one value per button of ``pad.buttons`` (pressed while above 0; a trigger
pulled by ``max(value, 0)``). Positive y is up on the stick (forward for walk,
look up for camera). An action of the four sticks alone releases every button.
Every pad has :meth:`Pad.neutral`, which centres both sticks and releases every
button and trigger, and :func:`neutral_on_exit`, which makes sure it is called
however a run ends.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

import numpy as np

from explorer.config import PadConfig
from explorer.core import N_AXES, NEUTRAL, TRIGGERS, ExplorerError, Terminated, clamp


class PadError(ExplorerError):
    """The pad cannot be created or driven; the message says what to install or fix."""


@runtime_checkable
class Pad(Protocol):
    """Something that takes stick values and buttons."""

    def send(self, action: np.ndarray) -> None:
        """Set the sticks and buttons to ``action`` (``float32[4 + n]``, [-1, 1], sticks in the order of :data:`AXES`)."""

    def neutral(self) -> None:
        """Centre both sticks and release every button, now."""

    def close(self) -> None:
        """Neutral, and release the device."""


class NullPad:
    """Sends nothing (dry runs); remembers the last action for inspection."""

    def __init__(self) -> None:
        self.last = NEUTRAL.copy()

    def send(self, action: np.ndarray) -> None:
        self.last = clamp(action)

    def neutral(self) -> None:
        self.last = np.zeros_like(self.last) if len(self.last) > N_AXES else NEUTRAL.copy()

    def close(self) -> None:
        self.neutral()


#: ``vgamepad.XUSB_BUTTON`` member of each pad button (the triggers are set by value, not pressed)
XUSB_NAMES = {"a": "XUSB_GAMEPAD_A", "b": "XUSB_GAMEPAD_B", "x": "XUSB_GAMEPAD_X", "y": "XUSB_GAMEPAD_Y",
              "lb": "XUSB_GAMEPAD_LEFT_SHOULDER", "rb": "XUSB_GAMEPAD_RIGHT_SHOULDER",
              "ls": "XUSB_GAMEPAD_LEFT_THUMB", "rs": "XUSB_GAMEPAD_RIGHT_THUMB",
              "dpad_up": "XUSB_GAMEPAD_DPAD_UP", "dpad_down": "XUSB_GAMEPAD_DPAD_DOWN",
              "dpad_left": "XUSB_GAMEPAD_DPAD_LEFT", "dpad_right": "XUSB_GAMEPAD_DPAD_RIGHT"}


def button_values(action: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` button values of a clamped action; an action of the sticks alone releases them all."""
    values = np.zeros(n, np.float32)
    given = action[N_AXES:N_AXES + n]
    values[:len(given)] = given
    return values


class VGamepadPad:
    """A virtual Xbox 360 pad through ``vgamepad`` (ViGEmBus on Windows, uinput on Linux).

    ``vgamepad`` does not clamp float stick values (out-of-range values wrap
    around silently), so every value is clamped here, and ``update()`` follows
    every change. Buttons of ``pad.buttons`` are pressed (``press_button``) while
    their value is above 0 and released (``release_button``) otherwise; ``lt``
    and ``rt`` are pulled by ``max(value, 0)``. :meth:`neutral` resets the whole
    report: sticks centred, every button released, triggers at rest.
    """

    def __init__(self, config: PadConfig | None = None, gamepad: Any = None):
        self.config = config or PadConfig()
        if self.config.camera_stick == self.config.walk_stick:
            raise PadError(f"pad.camera_stick and pad.walk_stick are both {self.config.camera_stick!r}; give them different sticks")
        self._lock = threading.Lock()
        self.gamepad = gamepad if gamepad is not None else _create_vx360()
        self._buttons = [self._button(name) for name in self.config.buttons]

    def _stick(self, name: str):
        return self.gamepad.right_joystick_float if name == "right" else self.gamepad.left_joystick_float

    def _button(self, name: str) -> Any:
        """``set(value)`` for one button or trigger of ``pad.buttons``."""
        pad = self.gamepad
        if name in TRIGGERS:
            pull = pad.left_trigger_float if name == "lt" else pad.right_trigger_float
            return lambda v: pull(value_float=max(float(v), 0.0))
        import vgamepad  # loaded already: the gamepad is one of its pads

        code = getattr(vgamepad.XUSB_BUTTON, XUSB_NAMES[name])
        return lambda v: pad.press_button(button=code) if v > 0 else pad.release_button(button=code)

    def send(self, action: np.ndarray) -> None:
        a = clamp(action)
        cam_y = -a[1] if self.config.invert_camera_y else a[1]
        walk_y = -a[3] if self.config.invert_walk_y else a[3]
        buttons = button_values(a, len(self._buttons))
        with self._lock:
            self._stick(self.config.camera_stick)(x_value_float=float(a[0]), y_value_float=float(cam_y))
            self._stick(self.config.walk_stick)(x_value_float=float(a[2]), y_value_float=float(walk_y))
            for set_button, value in zip(self._buttons, buttons, strict=True):
                set_button(value)
            self.gamepad.update()

    def neutral(self) -> None:
        with self._lock:
            self.gamepad.reset()
            self.gamepad.update()

    def close(self) -> None:
        self.neutral()


def _create_vx360() -> Any:
    try:
        import vgamepad
    except OSError as err:  # libevdev missing on Linux
        raise PadError(
            f"vgamepad could not load its driver library ({err}). On Debian/Ubuntu install it with "
            "'sudo apt-get install libevdev2'; on Windows reinstall vgamepad, which installs ViGEmBus."
        ) from err
    except ImportError as err:
        raise PadError(f"vgamepad is not installed ({err}); install it with 'pip install vgamepad'") from err
    except RuntimeError as err:  # on Windows, importing vgamepad connects to ViGEmBus (VIGEM_ERROR_BUS_NOT_FOUND)
        from explorer.envs.live.winapi import vigem_hint
        raise PadError(f"could not create a virtual Xbox 360 pad: {vigem_hint(err)}") from err
    try:
        return vgamepad.VX360Gamepad()
    except (OSError, PermissionError) as err:
        if sys.platform.startswith("linux"):
            hint = ("a virtual pad needs write access to /dev/uinput: 'sudo modprobe uinput' and add your user "
                    "to the group that owns /dev/uinput (or run with --dry-run to send nothing)")
        else:
            hint = ("install the ViGEmBus driver (https://github.com/nefarius/ViGEmBus/releases) and reboot, "
                    "or run with --dry-run to send nothing")
        raise PadError(f"could not create a virtual Xbox 360 pad ({err}): {hint}") from err
    except Exception as err:  # vgamepad's Windows backend raises AssertionError without ViGEmBus
        raise PadError(
            f"could not create a virtual Xbox 360 pad ({type(err).__name__}: {err}): install the ViGEmBus driver "
            "(https://github.com/nefarius/ViGEmBus/releases), or run with --dry-run to send nothing") from err


def make_pad(config: PadConfig, dry_run: bool = False) -> Pad:
    """The pad the config names; ``dry_run`` always gives a :class:`NullPad`."""
    if dry_run or config.backend == "null":
        return NullPad()
    return VGamepadPad(config)


class HasNeutral(Protocol):
    def neutral(self) -> None: ...


@contextlib.contextmanager
def neutral_on_exit(pad: HasNeutral) -> Iterator[HasNeutral]:
    """Centre the pad (or an env holding one) however the block ends: normally, by exception, Ctrl-C or SIGTERM.

    Where nothing else handles SIGTERM (a mode's own stop handler does), it is
    turned into an exception for the duration (main thread only), so the block
    unwinds and the pad is centred before the process exits with 143.
    """
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if in_main else None
    own = in_main and previous in (signal.SIG_DFL, None)
    if own:
        def on_term(signum: int, frame: Any) -> None:
            raise Terminated(signum)
        signal.signal(signal.SIGTERM, on_term)
    try:
        yield pad
    except Terminated as err:
        if not own:
            raise
        pad.neutral()
        raise SystemExit(128 + err.signum) from None
    finally:
        try:
            pad.neutral()
        finally:
            if own:
                signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
