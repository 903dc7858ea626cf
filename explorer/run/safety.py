"""Stopping safely: signals that end a run at a step boundary, the countdown before live mode takes
the pad, and the stop/pause hotkeys."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.config import HOTKEY_NAMES, hotkey_name
from explorer.core import ExplorerError, Stopped, Terminated
from explorer.run.driver import Controls

#: the signals that stop a run: Ctrl-C, a polite kill, the terminal going away
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@dataclass
class Kept:
    """What a run leaves behind to use, filled in as the run makes it; ``str()`` says it in words.

    Each is named only if it exists when asked (a run directory that held nothing is removed;
    a checkpoint cut short by a second signal is cleaned away).

    Attributes:
      run_dir: the run directory.
      checkpoints: its checkpoint folder; the newest whole checkpoint in it is named.
      session: the session the run recorded.
    """

    run_dir: Path | None = None
    checkpoints: Path | None = None
    session: Path | None = None
    started: bool = False  #: the run's loop began (set by the mode)

    def checkpoint(self) -> str | None:
        """The newest whole checkpoint, or None."""
        if self.checkpoints is None:
            return None
        from explorer.agent.checkpoint import latest_checkpoint
        return latest_checkpoint(self.checkpoints)

    def __str__(self) -> str:
        items = []
        if (checkpoint := self.checkpoint()) is not None:
            items.append(f"checkpoint {checkpoint}")
        if self.session is not None and self.session.exists():
            items.append(f"session {self.session}")
        if self.run_dir is not None and self.run_dir.exists():
            items.append(f"run directory {self.run_dir}")
        if not items:
            return "nothing was kept"
        return "kept " + (items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1])

    def add_to(self, err: ExplorerError, resume: str | None = None) -> ExplorerError:
        """``err`` (of the same type where it can be made again) with what the run kept added to its message,
        when the run had begun and the message does not say it already.

        Args:
          err: what stopped the run.
          resume: how to continue the run from its checkpoint, suggested when there is one; ``{run_dir}``
            in it is the run directory.
        """
        if not self.started or err.says_what_was_kept:
            return err
        text = join_sentences(str(err), str(self))
        if resume and self.checkpoint() is not None:
            text += f"; {resume.format(run_dir=self.run_dir)}"
        try:
            again = type(err)(text)
        except Exception:  # an error class that takes other arguments
            again = ExplorerError(text)
        again.says_what_was_kept = True
        return again

    @contextlib.contextmanager
    def on_error(self, resume: str | None = None) -> Iterator[None]:
        """Errors leaving the block say what the run kept (see :meth:`add_to`)."""
        try:
            yield
        except ExplorerError as err:
            raise self.add_to(err, resume) from err


def join_sentences(text: str, more: str) -> str:
    """``text; more``, or ``text More`` when ``text`` ends a sentence (``?``, ``.``, ``!``)."""
    if text.endswith(("?", ".", "!")):
        return f"{text} {more[:1].upper()}{more[1:]}"
    return f"{text}; {more}"


class SignalStop:
    """Stop signals received during :func:`stop_on_signals`, and blocks a second one waits for.

    Attributes:
      received: the signals received, oldest first.
    """

    def __init__(self, controls: Controls, announce: bool):
        self.controls = controls
        self.announce = announce
        self.received: list[int] = []
        self._held = 0
        self._pending: int | None = None

    def handle(self, signum: int, frame: Any) -> None:
        self.received.append(signum)
        name = signal.Signals(signum).name
        if len(self.received) == 1:
            self.controls.request_stop(name)  # a stop already under way keeps its reason
            if self.announce:
                _say(f"\nexplorer: {name}: stopping at the next step and keeping what was done; send it again "
                     f"to stop at once\n")
        elif self._held:
            self._pending = signum  # raised when the write under way is whole
        else:
            _raise(signum)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A write (a checkpoint, the end of a session) that a second signal lets finish before it stops the run."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            if not self._held and self._pending is not None:
                signum, self._pending = self._pending, None
                _raise(signum)


def _raise(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


@contextlib.contextmanager
def stop_on_signals(controls: Controls, kept: Kept | None = None, announce: bool = True) -> Iterator[SignalStop]:
    """The first Ctrl-C, SIGTERM or SIGHUP asks the run to stop; a second one stops it at once.

    The first sets the stop event, with the signal's name (``"SIGINT"``, ...) as
    ``controls.reason`` unless a stop was already under way: the driver ends at its next
    step and the mode keeps what it has (its checkpoint, summary and session). A second
    raises ``KeyboardInterrupt`` (SIGINT) or :class:`~explorer.core.Terminated` where the
    main thread is (after the write under way in a :meth:`SignalStop.held` block), which
    unwinds the run with the pad centred; leaving this block, it becomes
    :class:`~explorer.core.Stopped`, whose message says what was ``kept``. Outside the main
    thread only the stop switch is given (signals reach only the main thread).

    Args:
      controls: the run's stop switch.
      kept: what the run has made so far, to name when it is stopped at once.
      announce: say on stderr, at the first signal, that the run is stopping.

    Yields:
      The :class:`SignalStop`: wrap writes that must not be cut short in its ``held()``.
    """
    stop = SignalStop(controls, announce)
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.signal(sig, stop.handle) for sig in _not_ignored(STOP_SIGNALS)}
    try:
        yield stop
    except (KeyboardInterrupt, Terminated) as err:
        signum = err.signum if isinstance(err, Terminated) else int(signal.SIGINT)
        name = signal.Signals(signum).name
        how = f"a second {name}" if len(stop.received) > 1 else name
        raise Stopped(f"stopped at once by {how}; the pad is neutral; {kept or Kept()}", signum) from None
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`~explorer.core.Terminated` in the block (main thread only), as
    Ctrl-C raises ``KeyboardInterrupt``: a command stopped before its run starts unwinds and says so."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in _not_ignored(STOP_SIGNALS) if sig != signal.SIGINT}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _not_ignored(signals: tuple[int, ...]) -> list[int]:
    """Those of ``signals`` that this process does not ignore: what started it ignoring one (``nohup``
    ignores SIGHUP, a shell script's ``&`` ignores SIGINT) meant the run to go on through it."""
    return [sig for sig in signals if signal.getsignal(sig) is not signal.SIG_IGN]


def signal_number(name: str) -> int | None:
    """The number of a stop signal's name (``"SIGINT"`` -> 2), or None when ``name`` is not one."""
    return next((int(s) for s in STOP_SIGNALS if signal.Signals(s).name == name), None)


def _say(text: str) -> None:
    # os.write, not print: a handler may run in the middle of a print to stderr (a progress bar)
    with contextlib.suppress(OSError, ValueError):
        os.write(sys.stderr.fileno(), text.encode())


def countdown(seconds: float, controls: Controls, out: Any = sys.stderr) -> bool:
    """Count down before live mode takes control; False if a stop came meanwhile."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        print(f"\rtaking the pad in {left:4.1f} s — switch to the game window now", end="", file=out, flush=True)
        if controls.stop.wait(min(0.1, left)):
            print(file=out)
            return False
    if seconds > 0:
        print("\rtaking the pad now" + " " * 40, file=out, flush=True)
    return True


#: how long :meth:`Hotkeys.stop` waits for the listener's thread to end, seconds
HOTKEYS_JOIN_S = 5.0


class Hotkeys:
    """Global stop and pause keys through ``pynput`` (``pip install 'explorer[hotkeys]'``).

    Each key's name (checked at load, :func:`explorer.config.hotkey_name`) is resolved to the
    key pynput reports when it is pressed: ``keyboard.Key[name]`` for a named key, the typed
    character otherwise. Without ``pynput``, without a keyboard to listen to, or on a platform
    that lacks a configured key, live mode still stops on Ctrl-C and SIGTERM;
    :attr:`available` says which case holds and :attr:`reason` why.
    """

    def __init__(self, controls: Controls, stop_key: str, pause_key: str):
        self.controls = controls
        self.stop_key = hotkey_name(stop_key)
        self.pause_key = hotkey_name(pause_key)
        self.available = False
        self.reason = ""
        self._listener: Any = None
        self._stop_target: Any = None
        self._pause_target: Any = None

    def keys(self, keyboard: Any) -> tuple[Any, Any]:
        """The stop and pause keys as ``keyboard`` (``pynput.keyboard``) reports them when pressed.

        Raises:
          KeyError: this platform's pynput has no such key.
        """
        return resolve_key(keyboard, self.stop_key), resolve_key(keyboard, self.pause_key)

    def press(self, key: Any) -> None:
        """What a key press does: the stop key stops the run, the pause key pauses or resumes it."""
        if _same_key(key, self._stop_target):
            self.controls.request_stop(f"stop key {self.stop_key}")
        elif _same_key(key, self._pause_target):
            self.controls.toggle_pause()

    def start(self, timeout_s: float = 2.0) -> Hotkeys:
        """Start listening; :attr:`available` is True once the listener is ready (within ``timeout_s``)."""
        try:
            from pynput import keyboard
        except Exception as err:  # not installed, or no display to listen on
            self.reason = f"pynput unavailable ({_said(err)})"
            return self
        try:
            self._stop_target, self._pause_target = self.keys(keyboard)
        except KeyError as err:
            self.reason = f"pynput has no key {err} on this platform: choose another control.stop_key/pause_key"
            return self
        try:
            self._listener = keyboard.Listener(on_press=self.press, daemon=True)
            self._listener.start()
        except Exception as err:
            self.reason = f"cannot listen to the keyboard ({_said(err)})"
            return self
        deadline = time.monotonic() + timeout_s
        while not getattr(self._listener, "_ready", True) and self._listener.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._listener.is_alive():
            try:
                self._listener.join(0)  # re-raises what stopped the listener's thread
                self.reason = "the keyboard listener stopped as it started (no display or keyboard to listen to?)"
            except Exception as err:
                self.reason = f"cannot listen to the keyboard ({_said(err)})"
            return self
        if not getattr(self._listener, "_ready", True):
            self.reason = f"the keyboard listener was not ready within {timeout_s:g} s"
            return self
        self.available = True
        return self

    def stop(self) -> None:
        """Stop listening, and wait for the listener to let go of the display (it may close next). A listener
        whose thread ended, or that never became ready, is left alone: pynput's ``stop()`` waits for it to
        become ready, which it then never does."""
        listener, self._listener = self._listener, None
        if listener is not None and listener.is_alive() and getattr(listener, "_ready", True):
            listener.stop()
            # pynput's X11 listener asks for its recording to end on the connection that records, where
            # X does not read it until the next key, so its thread would read on, and fail once the
            # display is gone: ask again on its other connection, which X reads at once
            stopper, context = getattr(listener, "_display_stop", None), getattr(listener, "_context", None)
            if stopper is not None and context is not None:
                with contextlib.suppress(Exception):
                    stopper.record_disable_context(context)
                    stopper.flush()
            listener.join(HOTKEYS_JOIN_S)


def resolve_key(keyboard: Any, name: str) -> Any:
    """The key ``keyboard`` (``pynput.keyboard``) reports for a hotkey name (a :data:`HOTKEY_NAMES` entry or a
    character); KeyError when this platform's pynput lacks it."""
    if name in HOTKEY_NAMES:
        return keyboard.Key[name]
    return keyboard.KeyCode.from_char(name)


def _said(err: BaseException) -> str:
    """An error on one line: pynput puts its remedies on lines of their own."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


def _same_key(pressed: Any, target: Any) -> bool:
    if target is None or pressed is None:
        return False
    char = getattr(target, "char", None)
    if char is not None:  # a character: either case (Shift held, Caps Lock)
        got = getattr(pressed, "char", None)
        return isinstance(got, str) and got.lower() == char
    # a named key comes as its Key member, or on some platforms as the key code it stands for
    return bool(pressed == target or pressed == getattr(target, "value", None))
