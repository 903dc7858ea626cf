"""Windows Desktop Duplication capture through ``dxcam``: DirectX-safe, one monitor at a time.

GDI grabs (``mss`` on Windows) see many DirectX games and borderless
full-screen windows as black or frozen; Desktop Duplication copies what the
compositor shows. It captures one monitor (a DXGI output) at a time, in
coordinates local to that monitor, and says when nothing changed since the
last grab (``grab`` returns None). An output is lost on a resolution change or
when a game takes exclusive full screen: the screen then releases its camera,
finds the region again (the window may have moved) and opens a new camera.

Regions and monitor numbers are the same as with ``mss``: physical desktop
pixels, monitors numbered as ``mss`` numbers them.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer.config import CaptureConfig, ObservationConfig
from explorer.envs.geometry import Region, Window, observation_shape, to_observation
from explorer.envs.live.desktop import WindowWatch, dpi_aware, resolve_region, window_problem
from explorer.envs.live.screen import OutputLost, ScreenError


class DxcamUnavailable(ScreenError):
    """Desktop Duplication cannot start here (dxcam missing, Remote Desktop, no GPU output)."""


@dataclass(frozen=True)
class Output:
    """A monitor as dxcam knows it: adapter and output index, and where it lies on the desktop."""

    device: int
    index: int
    region: Region


def dxcam_outputs(dxcam: Any) -> list[Output]:
    """Every output dxcam can capture, with its desktop rectangle (physical pixels).

    dxcam has no public call for where an output lies on the desktop; its
    factory keeps each output's DXGI descriptor (``DesktopCoordinates``), which
    is read here. Without it (another dxcam version) only the primary output is
    known, from ``output_info()``: it lies at 0,0.
    """
    outputs = getattr(getattr(dxcam, "__factory", None), "outputs", None)
    found = []
    if outputs is not None:
        for device, outs in enumerate(outputs):
            for index, out in enumerate(outs):
                with contextlib.suppress(Exception):  # positions change with the display settings
                    out.update_desc()
                rc = out.desc.DesktopCoordinates
                found.append(Output(device, index, Region(rc.left, rc.top, rc.right - rc.left, rc.bottom - rc.top)))
        return found
    for line in dxcam.output_info().splitlines():
        m = re.match(r"Device\[(\d+)\] Output\[(\d+)\]: Res:\((\d+), (\d+)\) Rot:\d+ Primary:(\w+)", line.strip())
        if m and m[5] == "True":
            found.append(Output(int(m[1]), int(m[2]), Region(0, 0, int(m[3]), int(m[4]))))
    return found


def pick_output(region: Region, outputs: list[Output], capture: CaptureConfig) -> Output:
    """The output that holds all of ``region``.

    Raises:
      ScreenError: the region spans several monitors or lies on none dxcam knows.
    """
    for out in outputs:
        if region.inside(out.region):
            return out
    touched = [out for out in outputs if region.overlap(out.region)]
    if len(touched) > 1:
        fix = ("set capture.monitor to one monitor (1, 2, ...)" if capture.source == "monitor"
               else "move the window wholly onto one monitor" if capture.source == "window"
               else "make the region fit on one monitor")
        raise ScreenError(f"capture region {region} spans {len(touched)} monitors, and dxcam captures one monitor "
                          f"at a time: {fix}, or set capture.backend = \"mss\"")
    known = "; ".join(f"{o.region.width}x{o.region.height} at {o.region.left},{o.region.top}" for o in outputs)
    raise ScreenError(f"capture region {region} is on no monitor dxcam can capture (it knows: {known or 'none'}): "
                      "put the game on the primary monitor, or set capture.backend = \"mss\"")


def _import_dxcam() -> Any:
    try:
        import dxcam
    except Exception as err:  # missing, or no Direct3D device to enumerate
        raise DxcamUnavailable(f"dxcam cannot load ({type(err).__name__}: {err}): pip install dxcam, "
                               "or set capture.backend = \"mss\"") from err
    return dxcam


def _mss_monitors() -> list[dict[str, int]]:
    import mss
    sct = mss.MSS() if hasattr(mss, "MSS") else mss.mss()
    try:
        return [dict(m) for m in sct.monitors]
    finally:
        sct.close()


class DxcamScreen:
    """Grabs a region of one monitor with dxcam (Windows Desktop Duplication).

    ``grab`` returns None when nothing changed on that monitor since the last
    grab, and raises :class:`~explorer.envs.live.screen.OutputLost` while the output is
    lost (it reopens at most every ``retry_s``). With ``capture.source =
    "window"`` it checks every ``capture.window_check_s`` that the window is
    still there.

    Args:
      capture: the capture section (region, monitor or window).
      obs: the observation section (frame shape).
      retry_s: seconds between attempts to reopen a lost output.
      first_frame_s: how long a new camera may take to give its first picture.
    """

    backend = "dxcam"
    note = ""  # why this backend was chosen (set by make_screen)
    blank_hint = ("Desktop Duplication sees some exclusive full-screen games and protected video as black: run the "
                  "game in borderless windowed mode")

    def __init__(self, capture: CaptureConfig, obs: ObservationConfig, retry_s: float = 0.5,
                 first_frame_s: float = 1.0):
        dpi_aware()
        self.capture = capture
        self.obs = obs
        self.shape = observation_shape(obs)
        self.retry_s = retry_s
        self.first_frame_s = first_frame_s
        self.recoveries = 0
        self.window: Window | None = None
        self._dxcam = _import_dxcam()
        self._camera: Any = None
        self._lost_reason = ""
        self._next_try = 0.0
        self._seen_frame = False
        self._open()
        self.watch = WindowWatch(self.window, capture.window_check_s) if self.window is not None else None

    def _open(self) -> None:
        """Find the region and the output that holds it, and open a camera there."""
        region, window = resolve_region(self.capture, _mss_monitors())
        output = pick_output(region, dxcam_outputs(self._dxcam), self.capture)
        try:
            # Colour conversion in dxcam needs OpenCV; BGRA is the duplication's own format and needs none.
            camera = self._dxcam.create(device_idx=output.device, output_idx=output.index, output_color="BGRA")
        except Exception as err:
            raise DxcamUnavailable(
                f"dxcam could not open the monitor at {output.region.left},{output.region.top} "
                f"({type(err).__name__}: {err}); Desktop Duplication does not work over Remote Desktop and on some "
                "virtual machines: set capture.backend = \"mss\"") from err
        self.region, self.window, self.output, self._camera = region, window, output, camera
        left, top = region.left - output.region.left, region.top - output.region.top
        self.local = (left, top, left + region.width, top + region.height)  # dxcam's (left, top, right, bottom)
        self._seen_frame = False

    def _lose(self, err: BaseException) -> None:
        out = self.output.region
        self._lost_reason = (f"Desktop Duplication lost the monitor at {out.left},{out.top} ({type(err).__name__}: "
                             f"{err}), as on a resolution change or when a game takes exclusive full screen "
                             "(borderless windowed mode avoids it)")
        with contextlib.suppress(Exception):
            self._camera.release()
        self._camera = None

    def _reopen(self) -> None:
        now = time.monotonic()
        if now < self._next_try:
            raise OutputLost(self._lost_reason)
        self._next_try = now + self.retry_s
        if self.window is not None:
            problem = window_problem(self.window)
            if problem is not None:
                raise ScreenError(f"the captured window {self.window.title!r} {problem}: stopping rather than acting "
                                  "on whatever is on screen there now. Start the game again and rerun")
        try:
            self._open()
        except ScreenError as err:  # the display is still changing; try again later
            raise OutputLost(f"{self._lost_reason}; reopening: {err}") from err
        if self.watch is not None and self.window is not None:
            self.watch.window = self.window
        self.recoveries += 1

    def grab_raw(self) -> np.ndarray | None:
        """The region at full resolution, ``uint8[h, w, 3]`` RGB; None when unchanged since the last grab."""
        if self.watch is not None:
            self.watch.check()
        if self._camera is None:
            self._reopen()
        deadline = time.monotonic() + self.first_frame_s
        while True:
            try:
                bgra = self._camera.grab(region=self.local)
            except Exception as err:  # COM errors, a region the resized output no longer holds
                self._lose(err)
                raise OutputLost(self._lost_reason) from err
            if bgra is not None:
                self._seen_frame = True
                return np.asarray(bgra)[..., 2::-1]
            if self._seen_frame or time.monotonic() > deadline:
                return None
            time.sleep(0.01)  # a new camera can take a moment to show its first picture

    def grab(self) -> np.ndarray | None:
        raw = self.grab_raw()
        return None if raw is None else to_observation(np.ascontiguousarray(raw), self.obs)

    def close(self) -> None:
        if self._camera is not None:
            with contextlib.suppress(Exception):
                self._camera.release()
            self._camera = None
