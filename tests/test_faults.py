"""Live safety under faults: each one leaves the pad neutral and stops the run with a clear error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from explorer.agent.actor import RandomActor
from explorer.envs.live.env import LiveEnv, StalledCapture
from explorer.run.driver import Driver, NonFiniteAction
from explorer.testing.fakes import FakeScreen, RecordingPad

SHAPE = (16, 16, 1)
HANG_S = 300.0  # only a guard against a hang


def live(screen, pad, actor, seconds=HANG_S, **env_kw):
    # The capture's alarms (frames uniform, as FakeScreen.counting's are, or none new) go off after HANG_S unless
    # a test sets them: a loaded machine does not set them off in the tests that do not check them.
    env_kw = {"blank_s": HANG_S, "stall_s": HANG_S, "first_frame_timeout_s": HANG_S, **env_kw}
    env = LiveEnv(screen, pad, stack=3, ring_capacity=16, capture_fps=100, hz=50, watchdog_s=3 / 50, **env_kw)
    try:
        return Driver(env, actor).run(max_seconds=seconds)
    finally:
        env.close()


def test_stalled_capture_stops_the_run_with_the_pad_neutral():
    release = threading.Event()

    class Freezes(FakeScreen):
        def grab(self):
            if self.grabs >= 20:
                release.wait(HANG_S)  # the capture hangs (a window that stopped drawing, a stuck driver)
            return super().grab()

    pad = RecordingPad()
    try:
        # The run's time and the hang outlast any loaded machine: only the stall's detection ends the run.
        with pytest.raises(StalledCapture, match="no new frame"):
            live(Freezes.counting(SHAPE), pad, RandomActor(), seconds=HANG_S, stall_s=0.3)
        assert not release.is_set()  # it stopped while the capture still hung
    finally:
        release.set()
    assert pad.is_neutral and len(pad.sent) >= 5


def test_nan_action_never_reaches_the_pad():
    class Diverges(RandomActor):
        def act(self, step):
            self.n = getattr(self, "n", 0) + 1
            return np.array([0.5, np.nan, 0.0, 0.0]) if self.n > 10 else super().act(step)

    pad = RecordingPad()
    with pytest.raises(NonFiniteAction, match="non-finite"):
        live(FakeScreen.counting(SHAPE), pad, Diverges())
    assert len(pad.sent) == 10 and pad.is_neutral
    assert all(np.all(np.isfinite(a)) for a in pad.sent)


def test_sigterm_to_a_live_run_leaves_the_pad_neutral(tmp_path):
    log = tmp_path / "pad.log"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_faults import live, SHAPE
        from explorer.agent.actor import RandomActor
        from explorer.testing.fakes import FakeScreen, RecordingPad

        class Announce(RandomActor):
            def act(self, step):
                self.n = getattr(self, "n", 0) + 1
                if self.n == 5:
                    print("acting", flush=True)
                return super().act(step) * 0 + 0.8

        live(FakeScreen.counting(SHAPE), RecordingPad(log={str(log)!r}), Announce(), seconds=300)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "acting"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(HANG_S) == 143
    lines = log.read_text().splitlines()
    assert lines[0].startswith("send 0.8000")
    last_send = max(i for i, line in enumerate(lines) if line.startswith("send"))
    assert "neutral 0.0000 0.0000 0.0000 0.0000" in lines[last_send + 1:]
    assert lines[-1].endswith(" 0.0000 0.0000 0.0000 0.0000")  # and so it stayed, to the pad's close


def test_a_process_killed_while_saving_checkpoints_leaves_a_whole_one_to_resume(tmp_path):
    """SIGKILL lands wherever it lands; what is left restores whole, and the next save clears the rest."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_checkpoint import World

        world = World(rows=20000)  # a part big enough that a kill often lands inside a save
        ckpt = world.checkpointer({str(tmp_path)!r})
        step = 0
        while True:
            step += 1
            world.set(float(step))
            ckpt.save(step)
            print(step, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        for line in proc.stdout:
            if int(line) >= 3:
                break
        last = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(15)
    from test_checkpoint import World

    world = World(rows=20000)
    ckpt = world.checkpointer(tmp_path)
    step = ckpt.restore()
    assert step >= last
    assert world.values()["scale"] == float(step) and world.counters == {"steps": step}
    assert int(world.arrays["frames"][0, 0]) == step % 256
    ckpt.save(step + 1)
    assert not list(tmp_path.glob("*_temp*"))
    assert sorted(p.name for p in tmp_path.glob("state-*")) == [f"state-{step}", f"state-{step + 1}"]
