"""Shared fixtures: seeded TensorFlow, small configs, and a private Xvfb display."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


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
    for number in range(91, 120):
        if not os.path.exists(f"/tmp/.X{number}-lock"):
            break
    name = f":{number}"
    proc = subprocess.Popen([exe, name, "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(f"/tmp/.X11-unix/X{number}"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"Xvfb {name} did not start")
        time.sleep(0.05)
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = name
    yield name
    proc.terminate()
    proc.wait(5)
    if old is None:
        os.environ.pop("DISPLAY", None)
    else:
        os.environ["DISPLAY"] = old
