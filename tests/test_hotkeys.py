"""The stop and pause keys: names checked at load against what the listener understands, the two keys
distinct, and the doctor's hotkey line the result of starting the real listener."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from explorer import cli
from explorer.config import HOTKEY_NAMES, ConfigError, hotkey_name, load
from explorer.run import doctor
from explorer.run.driver import Controls
from explorer.run.safety import Hotkeys

needs_pynput = pytest.mark.skipif(importlib.util.find_spec("pynput") is None,
                                  reason="pynput is not installed (the hotkeys extra)")


@pytest.mark.parametrize(("setting", "suggestion"), [("control.stop_key=escape", "'esc'"),
                                                      ("control.pause_key=Escape", "'esc'"),
                                                      ("control.stop_key=return", "'enter'"),
                                                      ("control.pause_key=pgdn", "'page_down'"),
                                                      ("control.stop_key=f21", "'f2"),
                                                      ("control.pause_key=' '", "'space'")])
def test_a_key_name_the_listener_does_not_know_is_refused_at_load_with_the_close_name(setting, suggestion):
    with pytest.raises(ConfigError) as err:
        load(None, [setting])
    text = str(err.value)
    assert "\n" not in text and setting.split("=")[0] in text and f"did you mean {suggestion}" in text, text


def test_the_command_line_says_it_in_one_line_and_exits_before_anything_runs(capsys):
    assert cli.main(["play", "--dry-run", "--set", "control.stop_key=escape"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "control.stop_key = 'escape'" in err and "did you mean 'esc'" in err


@pytest.mark.parametrize("keys", [("f12", "f12"), ("F11", "f11"), ("q", "Q")])
def test_the_stop_key_cannot_be_the_pause_key(keys):
    with pytest.raises(ConfigError, match="control.stop_key and control.pause_key are both"):
        load(None, [f"control.stop_key={keys[0]!r}", f"control.pause_key={keys[1]!r}"])


def test_named_keys_and_single_characters_are_accepted_in_either_case():
    config = load(None, ["control.stop_key='Esc'", "control.pause_key='p'"])
    assert hotkey_name(config.control.stop_key) == "esc" and hotkey_name(config.control.pause_key) == "p"
    assert all(hotkey_name(name) == name for name in HOTKEY_NAMES)


@needs_pynput
def test_the_key_names_are_the_members_of_pynputs_key():
    """The list checked at load (without pynput) is the installed pynput's ``Key``: no name accepted that the
    listener cannot resolve, none it knows refused. pynput's own key list, read without a display."""
    code = "import json; from pynput.keyboard import _base; print(json.dumps(list(_base.Key.__members__)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, "PYNPUT_BACKEND": "dummy"}).stdout
    assert sorted(HOTKEY_NAMES) == sorted(json.loads(out))


class _FakeKeyboard:
    """``pynput.keyboard`` as the listener uses it: a Key enum, KeyCode.from_char and a Listener."""

    def __init__(self) -> None:
        import enum

        class KeyCode:
            def __init__(self, char: str | None = None, vk: int | None = None):
                self.char, self.vk = char, vk

            @classmethod
            def from_char(cls, char: str) -> KeyCode:
                return cls(char=char)

            def __eq__(self, other: object) -> bool:
                return isinstance(other, KeyCode) and (self.char, self.vk) == (other.char, other.vk)

            __hash__ = None  # type: ignore[assignment]

        self.KeyCode = KeyCode
        self.Key = enum.Enum("Key", {name: KeyCode(vk=i) for i, name in enumerate(HOTKEY_NAMES)})
        self.listeners: list[object] = []
        keyboard = self

        class Listener:
            def __init__(self, on_press, daemon=True):
                self.on_press, self._ready, self.stopped = on_press, True, False
                keyboard.listeners.append(self)

            def start(self) -> None:
                """Nothing runs: the test hands presses to on_press itself."""

            def is_alive(self) -> bool:
                return not self.stopped

            def stop(self) -> None:
                self.stopped = True

            def join(self, timeout: float | None = None) -> None:
                """pynput's listener is a thread: stopping waits for it (this one has ended at stop())."""
                assert self.stopped, "joined before it was asked to stop"

        self.Listener = Listener


def test_a_press_of_the_configured_keys_stops_and_pauses_through_the_listener(monkeypatch):
    keyboard = _FakeKeyboard()
    monkeypatch.setitem(sys.modules, "pynput", type(sys)("pynput"))
    monkeypatch.setitem(sys.modules, "pynput.keyboard", keyboard)
    sys.modules["pynput"].keyboard = keyboard  # type: ignore[attr-defined]
    controls = Controls()
    hotkeys = Hotkeys(controls, "Esc", "q").start()
    assert hotkeys.available, hotkeys.reason
    (listener,) = keyboard.listeners
    listener.on_press(keyboard.Key.f12)  # not a configured key
    listener.on_press(keyboard.KeyCode.from_char("w"))
    assert not controls.stop.is_set() and not controls.paused.is_set()
    listener.on_press(keyboard.KeyCode.from_char("Q"))  # Shift or Caps Lock held
    assert controls.paused.is_set()
    listener.on_press(keyboard.Key.esc)
    assert controls.stop.is_set() and controls.reason == "stop key esc"
    hotkeys.stop()
    assert listener.stopped


def test_doctor_says_the_keys_are_off_when_pynput_cannot_be_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynput", None)  # import pynput raises ImportError
    check = doctor._check("hotkeys", lambda: doctor.check_hotkeys(load(None, [])), required=False)
    assert check.status == "missing" and "work" not in check.detail, check
    assert "no stop or pause key" in check.detail and "Ctrl-C" in check.detail


def test_doctor_says_the_keys_are_off_when_the_listener_dies_as_it_starts(monkeypatch):
    keyboard = _FakeKeyboard()

    class Dying(keyboard.Listener):  # type: ignore[name-defined,misc]
        def __init__(self, on_press, daemon=True):
            super().__init__(on_press, daemon)
            self._ready = False

        def start(self) -> None:
            self.stopped = True

        def join(self, timeout=None) -> None:
            raise OSError("no keyboard device")

        def stop(self) -> None:  # pynput's waits until the listener is ready: for ever, once its thread died
            raise AssertionError("stop() of a listener that never became ready")

    keyboard.Listener = Dying
    monkeypatch.setitem(sys.modules, "pynput", type(sys)("pynput"))
    monkeypatch.setitem(sys.modules, "pynput.keyboard", keyboard)
    sys.modules["pynput"].keyboard = keyboard  # type: ignore[attr-defined]
    check = doctor._check("hotkeys", lambda: doctor.check_hotkeys(load(None, [])), required=False)
    assert check.status == "missing" and "no keyboard device" in check.detail, check


@needs_pynput
@pytest.mark.display
def test_doctor_starts_the_real_listener_and_presses_the_configured_keys(xvfb):
    config = load(None, ["control.stop_key='q'", "control.pause_key='scroll_lock'"])
    check = doctor._check("hotkeys", lambda: doctor.check_hotkeys(config), required=False)
    assert check.status == "ok", check
    assert "'q'" in check.detail and "Key.scroll_lock" in check.detail


@needs_pynput
@pytest.mark.display
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_real_listener_that_cannot_reach_the_display_is_off_and_stopping_it_returns(xvfb, monkeypatch):
    """pynput loaded with a display, then the listener's own connection fails (the display went away): the keys
    are reported off, and stopping them does not wait for ever for a listener that never became ready."""
    import threading

    from pynput import keyboard  # noqa: F401  (bound to the display while it is there)

    monkeypatch.setenv("DISPLAY", "")
    hotkeys = Hotkeys(Controls(), "f12", "f11").start()
    assert not hotkeys.available and "listener" in hotkeys.reason, hotkeys.reason
    stopping = threading.Thread(target=hotkeys.stop, daemon=True)
    stopping.start()
    stopping.join(30)
    assert not stopping.is_alive(), "Hotkeys.stop() hangs"
