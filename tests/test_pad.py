"""Pads: the vgamepad backend against the real ``vgamepad.VX360Gamepad`` class
(only the uinput device creation is faked), the fakes, and neutral on exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from explorer.config import PadConfig
from explorer.envs.live.pad import NullPad, PadError, VGamepadPad, clamp, make_pad, neutral_on_exit
from explorer.envs.live.watchdog import Watchdog
from explorer.testing.fakes import RecordingPad

vg_lin = pytest.importorskip("vgamepad.lin.virtual_gamepad", reason="vgamepad needs libevdev2 (apt-get install libevdev2)")
libevdev = pytest.importorskip("libevdev")


def test_vgamepad_backend_drives_the_real_vx360_class(fake_uinput):
    pad = VGamepadPad(PadConfig())
    assert type(pad.gamepad).__name__ == "VX360Gamepad"
    dev = fake_uinput[0]
    pad.send(np.array([0.5, -0.25, 1.0, 2.0]))  # walk y out of range: clamped, not wrapped
    ev = dev.batches[-1]
    assert ev["ABS_RX"] == round(0.5 * 32767)
    assert ev["ABS_RY"] == ~round(-0.25 * 32767)  # the Linux xpad driver inverts y; vgamepad mirrors it
    assert ev["ABS_X"] == 32767
    assert ev["ABS_Y"] == ~32767
    pad.send(np.array([-3.0, np.nan, 0.0, -1.0]))
    ev = dev.batches[-1]
    assert ev["ABS_RX"] == -32767 and ev["ABS_RY"] == ~0 and ev["ABS_Y"] == ~-32767
    n = len(dev.batches)
    pad.close()
    assert len(dev.batches) == n + 1  # reset() then update(): one report sent
    ev = dev.batches[-1]
    assert ev["ABS_X"] == 0 and ev["ABS_RX"] == 0 and ev["ABS_Y"] == ~0 and ev["ABS_RY"] == ~0


def test_stick_mapping_and_inversion_are_configurable(fake_uinput):
    pad = VGamepadPad(PadConfig(camera_stick="left", walk_stick="right", invert_camera_y=True))
    pad.send(np.array([0.1, 0.2, 0.3, 0.4]))
    ev = fake_uinput[0].batches[-1]
    assert ev["ABS_X"] == round(0.1 * 32767) and ev["ABS_Y"] == ~round(-0.2 * 32767)
    assert ev["ABS_RX"] == round(0.3 * 32767) and ev["ABS_RY"] == ~round(0.4 * 32767)
    with pytest.raises(PadError, match="different sticks"):
        VGamepadPad(PadConfig(camera_stick="left", walk_stick="left"))


def test_missing_uinput_says_what_to_do(monkeypatch):
    def no_uinput(self):
        raise FileNotFoundError(2, "No such file or directory", "/dev/uinput")

    monkeypatch.setattr(vg_lin.VGamepad, "_create_gamepad_uinput_device", no_uinput)
    with pytest.raises(PadError) as err:
        VGamepadPad(PadConfig())
    assert "/dev/uinput" in str(err.value) and "--dry-run" in str(err.value)


def test_missing_libevdev_says_what_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "vgamepad":
            raise OSError("libevdev.so.2: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(PadError, match="libevdev2"):
        VGamepadPad(PadConfig())


def test_clamp_and_null_pad():
    np.testing.assert_array_equal(clamp([2, -2, np.nan, np.inf]), [1, -1, 0, 1])
    with pytest.raises(ValueError, match="4 stick axes"):
        clamp([1, 2, 3])
    pad = make_pad(PadConfig(), dry_run=True)
    assert isinstance(pad, NullPad)
    pad.send(np.ones(4))
    pad.close()
    assert np.all(pad.last == 0)


def test_neutral_on_normal_end_and_on_exception():
    pad = RecordingPad()
    with neutral_on_exit(pad):
        pad.send(np.ones(4))
    assert pad.is_neutral and pad.calls[-1][0] == "neutral"
    pad = RecordingPad()
    with pytest.raises(ZeroDivisionError), neutral_on_exit(pad):
        pad.send(np.ones(4))
        1 / 0  # noqa: B018
    assert pad.is_neutral


def test_sigterm_leaves_the_sticks_neutral(tmp_path):
    """A real SIGTERM to a process holding a pad: it centres the pad and exits 143."""
    log = tmp_path / "calls.txt"
    script = textwrap.dedent(f"""
        import time, numpy as np
        from explorer.envs.live.pad import neutral_on_exit
        class FilePad:
            def __init__(self): self.f = open({str(log)!r}, "w", buffering=1)
            def send(self, a): self.f.write("send\\n")
            def neutral(self): self.f.write("neutral\\n")
            def close(self): self.neutral()
        pad = FilePad()
        with neutral_on_exit(pad):
            pad.send(np.ones(4))
            print("ready", flush=True)
            time.sleep(30)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.stdout.readline().strip() == "ready"
    proc.terminate()
    assert proc.wait(10) == 143
    assert log.read_text().split() [-1] == "neutral"


def test_watchdog_centres_a_stalled_pad():
    pad = RecordingPad()
    pad.send(np.ones(4))
    # Started after the send and not fed until the stall is seen: however slow the machine, one stall, one trip.
    dog = Watchdog(pad, timeout_s=0.1).start()
    try:
        deadline = time.monotonic() + 300  # only a guard against a hang: it waits for the trip
        while not pad.is_neutral and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pad.is_neutral, "the watchdog never centred the stalled pad"
        time.sleep(0.35)  # more checks of the same stall
        assert dog.trips == 1  # once per stall, not every check
        pad.send(np.ones(4))
        fed = time.monotonic()
        dog.feed()
        time.sleep(0.05)
        # Fed less than timeout_s ago, the pad is left alone (a machine too loaded to wake this thread in
        # time may rightly see it centred once timeout_s has passed).
        assert not pad.is_neutral or time.monotonic() - fed > dog.timeout_s
    finally:
        dog.stop()


def test_vigembus_missing_at_import_is_a_clear_error(monkeypatch, tmp_path):
    """On Windows, importing vgamepad connects to ViGEmBus and raises RuntimeError when the driver is missing."""
    from explorer.envs.live.pad import PadError, _create_vx360

    fake = tmp_path / "vgamepad"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise RuntimeError('VIGEM_ERROR_BUS_NOT_FOUND')\n")
    monkeypatch.delitem(sys.modules, "vgamepad", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PadError, match="ViGEmBus driver is not installed"):
        _create_vx360()
