"""The doctor's pad line on Linux says what it checked: the device plugged in, what it was sent once centred,
and its device node gone once unplugged."""

from __future__ import annotations

import gc
import os
import weakref

import pytest

from explorer.config import load
from explorer.run import doctor

vg_lin = pytest.importorskip("vgamepad.lin.virtual_gamepad", reason="vgamepad needs libevdev2 (apt-get install libevdev2)")


class NodeUinput:
    """vgamepad's uinput device, faked: a device node (a file) that exists while the device does."""

    def __init__(self, node, keep=False):
        self.devnode, self.keep, self.batches = str(node), keep, []
        open(self.devnode, "w").close()

    def send_events(self, events):
        self.batches.append({e.code.name: e.value for e in events})

    def __del__(self):
        if not self.keep and os.path.exists(self.devnode):
            os.remove(self.devnode)


@pytest.fixture
def uinput(monkeypatch, tmp_path):
    """Faked uinput devices, one per pad made (weak references: the pad alone holds its device). ``keep``
    leaves the node behind."""
    made, options = [], {"keep": False}

    def create(self):
        device = NodeUinput(tmp_path / f"event{len(made)}", **options)
        made.append(weakref.ref(device))
        return device

    monkeypatch.setattr(vg_lin.VGamepad, "_create_gamepad_uinput_device", create)
    monkeypatch.setattr(doctor, "_windows", lambda: False)
    return made, options


def test_the_pad_line_names_the_device_its_centred_report_and_its_node_gone(uinput, tmp_path):
    made, _ = uinput
    check = doctor._check("pad driver", lambda: doctor.check_pad(load(None, [])))
    node = str(tmp_path / "event0")
    assert check.status == "ok", check
    assert f"plugged in as {node}" in check.detail and f"unplugged ({node} is gone)" in check.detail
    assert "sticks at 0, buttons and triggers released" in check.detail
    assert not os.path.exists(node)


def test_a_pad_that_does_not_centre_fails(uinput, monkeypatch):
    monkeypatch.setattr("explorer.envs.live.pad.VGamepadPad.neutral", lambda self: self.gamepad.update())  # no reset
    check = doctor._check("pad driver", lambda: doctor.check_pad(load(None, [])))
    assert check.status == "FAIL" and "after centring it the device was sent" in check.detail, check
    assert "ABS_X" in check.detail and "BTN_SOUTH" in check.detail


def test_a_device_node_left_behind_is_a_warning(uinput, tmp_path):
    made, options = uinput
    options["keep"] = True
    check = doctor._check("pad driver", lambda: doctor.check_pad(load(None, [])))
    made.clear()
    gc.collect()
    assert check.status == "warn" and "is still there" in check.detail, check
