"""A live game on the desktop: capture in, a virtual pad out, in real time.

- :mod:`.screen`: the :class:`~.screen.Screen` protocol and its errors;
- :mod:`.desktop`: DPI awareness, windows found by title, the region a capture config names;
- :mod:`.mss_screen`, :mod:`.dxcam_screen`: the two capture backends;
- :mod:`.capture`: choosing a backend, and the thread that feeds the frame ring;
- :mod:`.pad`, :mod:`.watchdog`: the virtual Xbox 360 pad and what centres it when actions stop;
- :mod:`.winapi`: the Windows calls (DPI, the foreground window, ViGEmBus, XInput);
- :mod:`.env`: :class:`~.env.LiveEnv`, all of it as an :class:`~explorer.core.Env`.
"""
