"""Shared fixtures: seeded TensorFlow, small configs, and a private Xvfb display."""

from __future__ import annotations

import importlib.util
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# The processes the tests start must get SIGINT and SIGHUP as a terminal gives them, however this test run
# was started: a background job of a non-interactive shell ignores SIGINT and nohup ignores SIGHUP, and an
# ignored signal stays ignored in every child (explorer keeps it so, on purpose). A handled signal is reset
# to the default in each child at exec: SIGINT gets Python's own handler (KeyboardInterrupt, which the
# in-process tests of Ctrl-C expect), SIGHUP one that does nothing (this process survives a hangup as before).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda signum, frame: None)


@pytest.fixture(autouse=True)
def _seeded():
    import keras
    keras.utils.set_random_seed(1234)


@pytest.fixture(scope="session")
def xvfb():
    """Start a private Xvfb (1024x768x24) for the tests that need a display; yields the DISPLAY string."""
    exe = shutil.which("Xvfb")
    if exe is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    # -displayfd: Xvfb takes the first free display number and writes it to the pipe once it listens, so
    # two test processes never race for one display
    read, write = os.pipe()
    proc = subprocess.Popen([exe, "-displayfd", str(write), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(write,))
    os.close(write)
    number, deadline = b"", time.monotonic() + 30
    with os.fdopen(read, "rb", buffering=0) as pipe:
        while not number.endswith(b"\n"):
            ready, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))
            chunk = pipe.read(1) if ready else b""
            if not chunk:  # the pipe ended (Xvfb exited) or the wait ran out
                proc.kill()
                pytest.fail("Xvfb did not start")
            number += chunk
    name = f":{int(number)}"
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = name
    yield name
    proc.terminate()
    proc.wait(5)
    if old is None:
        os.environ.pop("DISPLAY", None)
    else:
        os.environ["DISPLAY"] = old


class FakeUinput:
    """Stands in for vgamepad's uinput device; keeps the events it sends (``{code name: value}`` per report)."""

    def __init__(self):
        self.batches = []
        self.id = {"vendor": 0x045E, "product": 0x028E}

    def send_events(self, events):
        self.batches.append({e.code.name: e.value for e in events})


@pytest.fixture
def fake_uinput(monkeypatch):
    """The real ``vgamepad.VX360Gamepad`` class with only its uinput device faked; yields the devices made."""
    vg_lin = pytest.importorskip("vgamepad.lin.virtual_gamepad", reason="vgamepad needs libevdev2 (apt-get install libevdev2)")
    created = []

    def create(self):
        created.append(FakeUinput())
        return created[-1]

    monkeypatch.setattr(vg_lin.VGamepad, "_create_gamepad_uinput_device", create)
    return created


@pytest.fixture(scope="session")
def load_tool():
    """``load_tool(name)``: the module ``tools/<name>.py``, with ``tools/`` on the path for its own imports of its
    sibling tools, and registered in ``sys.modules`` so that its process pools find its functions by name."""
    tools = Path(__file__).resolve().parent.parent / "tools"
    if str(tools) not in sys.path:
        sys.path.insert(0, str(tools))

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, tools / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    return load
