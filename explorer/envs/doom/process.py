"""The ViZDoom engine as an operating-system process: its start, its death, what it leaves behind.

ViZDoom runs the game in a child process (the ``vizdoom`` binary), started from a
thread of the controlling process, and talks to it through three POSIX
shared-memory files, ``/dev/shm/ViZDoom{SM,MQCtr,MQDoom}<instance id>`` (about
10 MB together). When the controlling process is killed, nothing closes the
engine: it lives on as an orphan that ignores SIGTERM, and the files stay.
A terminal's Ctrl-C reaches the engine too (it is in the same process group),
and an engine that dies while ViZDoom is starting it crashes the controller.

On Linux the engine is started through a small launcher (:func:`engine_launcher`)
that, before it becomes the engine:

- asks the kernel to SIGKILL it when its parent dies (``PR_SET_PDEATHSIG``;
  the flag survives ``execve``, and it must be set in the engine's own process:
  set in the controller it would not reach a grandchild). The parent the kernel
  watches is the thread that forked, ViZDoom's launching thread, which waits
  for the engine to exit and so lives exactly as long as it;
- ignores SIGINT, so Ctrl-C reaches only the controller, which then closes the
  engine the ordinary way (the engine and the launcher start with SIGINT
  blocked, see :func:`deferred_sigint`, so no Ctrl-C can catch them half way);
- carries :data:`OWNER_ENV`, the controller's pid, in its environment, so that a
  later run can tell an engine left by a dead run (:func:`reap_leftovers`);
- works in a folder of its own (``engine`` in its private folder): the engine writes its settings
  (``_vizdoom.ini``) and a ``_vizdoom/`` folder into its working folder, and crashes
  where it cannot (a read-only working folder), so it never runs in the user's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

#: environment variable holding the pid of the process that controls an engine
OWNER_ENV = "EXPLORER_ENGINE_OWNER"

#: ViZDoom's shared-memory files: screen buffers and state, and two message queues
SHM_FILE = re.compile(r"^ViZDoom(?:SM|MQCtr|MQDoom)([A-Za-z0-9]{10})$")

_LAUNCHER_CODE = """\
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
owner = os.environ.get({owner_env!r}, "")
if owner and os.getppid() != int(owner):
    sys.exit(70)  # the controller died before the flag above was set
signal.signal(signal.SIGINT, signal.SIG_IGN)  # started with SIGINT blocked (deferred_sigint); now for good
signal.pthread_sigmask(signal.SIG_UNBLOCK, {{signal.SIGINT}})
os.chdir({home!r})  # the engine writes _vizdoom.ini and _vizdoom/ into its working folder
os.execv({engine!r}, [{engine!r}, *sys.argv[1:]])
"""


def is_linux() -> bool:
    return sys.platform.startswith("linux")


def engine_launcher(engine: str) -> str | None:
    """Path of an executable that starts ``engine`` (the ``vizdoom`` binary) tied to its parent.

    Give it to ``DoomGame.set_vizdoom_path`` and put the controller's pid in
    ``os.environ[OWNER_ENV]`` before ``init()``. The launcher is a ``/bin/sh``
    script that runs this Python with ``-I -S``; it is written once per engine
    path into a private folder (``$XDG_RUNTIME_DIR`` or the temp folder).

    The engine runs in ``engine`` in that folder, whatever the controller's working folder.

    Returns:
      The launcher's path, or None where it cannot be used (not Linux, no
      writable private folder, a folder mounted ``noexec``): the engine then
      starts directly, in the controller's working folder, and
      :func:`reap_leftovers` is what stops it after a crash.
    """
    if not is_linux() or not sys.executable or not os.path.isfile(engine):
        return None
    folder = _private_folder()
    if folder is None:
        return None
    home = folder / "engine"
    code = _LAUNCHER_CODE.format(owner_env=OWNER_ENV, engine=engine, home=str(home))
    text = ("#!/bin/sh\n# Starts the ViZDoom engine so that it dies with the process that controls it.\n"
            f"exec {shlex.quote(sys.executable)} -I -S -c {shlex.quote(code)} \"$@\"\n")
    path = folder / f"vizdoom-launcher-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    try:
        home.mkdir(mode=0o700, exist_ok=True)
        # The engine creates _vizdoom/ when it finds none, and exits when that fails because another engine
        # created it a moment before: two engines started at once in a new home (--workers, a first run after
        # a reboot) would race for it. Made here first, every engine finds it.
        (home / "_vizdoom").mkdir(mode=0o700, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(text)
            tmp.chmod(0o700)
            os.replace(tmp, path)
    except OSError:
        return None
    return str(path) if os.access(path, os.X_OK) else None


def _private_folder() -> Path | None:
    """``$XDG_RUNTIME_DIR/explorer-<uid>`` (or in the temp folder), created if needed; None unless it is a
    folder of this user's alone (what is run from it must not be writable by others)."""
    folder = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"explorer-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        return None
    return folder


@contextlib.contextmanager
def deferred_sigint() -> Iterator[None]:
    """Hold Ctrl-C back while the block runs (the engine's start-up); deliver it once the block has ended.

    SIGINT is blocked in the calling thread for the duration. Threads started
    in the block inherit that mask, and so do the processes they start, through
    ``fork`` and ``execve``: the engine (and its launcher) start with SIGINT
    blocked, so a Ctrl-C sent to the whole process group by a terminal cannot
    kill them half way, which crashes ViZDoom's controller. A Ctrl-C that
    arrives meanwhile is recorded and, once the block has ended, goes to
    whatever handler was in place (by default a ``KeyboardInterrupt`` raised
    here). Outside the main thread (where Python handles no signals) this does
    nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    blocking = hasattr(signal, "pthread_sigmask")  # not on Windows
    if blocking:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if blocking:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a pending Ctrl-C arrives now
        signal.signal(signal.SIGINT, previous)  # runs the handlers of signals that arrived before it swaps
        if caught:
            signal.raise_signal(signal.SIGINT)


def reap_leftovers(shm_dir: str = "/dev/shm", min_age_s: float = 1.0) -> list[str]:
    """Stop the engines and delete the shared-memory files that runs which died left behind.

    An engine has lost its controller when its parent process does not map the
    engine's message queue (the controller maps it before it starts the engine;
    an orphan's parent is init or a subreaper). Such an engine is stopped
    (SIGKILL: it ignores SIGTERM) when it carries :data:`OWNER_ENV`, i.e. an
    explorer run started it; one without the tag is only reported. A ViZDoom
    file in ``shm_dir`` is deleted when it is older than ``min_age_s``, no
    process maps it, and no process names its instance on its command line (an
    engine being started); only files of this user are touched.

    Returns:
      One line per thing done or found, for stderr (empty when nothing was left).
    """
    if not is_linux():
        return []
    import psutil

    notes: list[str] = []
    named: set[str] = set()  # instance ids on a live command line
    stopped: list[psutil.Process] = []
    for proc in psutil.process_iter(["pid", "ppid", "name", "cmdline"]):
        ident = _instance_id(proc.info["cmdline"] or [])
        if ident is None:
            continue
        maps = _maps(proc.info["ppid"], f"{shm_dir}/ViZDoomMQCtr{ident}")
        # a parent whose maps cannot be read (another user's, seen from a container) is judged lost only
        # when it is init, which adopts orphans
        if proc.info["name"] == "vizdoom" and (maps is False or (maps is None and proc.info["ppid"] == 1)):
            owner = _owner(proc)
            if owner is None:
                notes.append(f"ViZDoom engine {proc.pid} has lost the process that controlled it; explorer did not "
                             f"start it and leaves it alone: 'kill -9 {proc.pid}' frees its memory")
            elif _kill(proc):
                stopped.append(proc)
                notes.append(f"stopped ViZDoom engine {proc.pid} left running by explorer process {owner}, which died")
                continue
        named.add(ident)
    psutil.wait_procs(stopped, timeout=3.0)
    removed = _remove_unused(Path(shm_dir), named, min_age_s)
    if removed:
        runs = len({ident for _, _, ident in removed})
        notes.append(f"deleted {len(removed)} ViZDoom shared-memory files ({sum(s for _, s, _ in removed) / 1e6:.1f} MB) "
                     f"in {shm_dir} left by {runs} engine{'s' if runs > 1 else ''} of runs that died")
    return notes


def _maps(pid: int, path: str) -> bool | None:
    """Whether process ``pid`` has the file at ``path`` mapped; None when its maps cannot be read."""
    try:
        return path.encode() in Path(f"/proc/{pid}/maps").read_bytes()
    except OSError:
        return None


def _instance_id(cmdline: list[str]) -> str | None:
    if "+viz_instance_id" in cmdline:
        i = cmdline.index("+viz_instance_id")
        if i + 1 < len(cmdline):
            return cmdline[i + 1]
    return None


def _kill(proc) -> bool:
    import psutil
    try:
        proc.kill()
    except psutil.Error:
        return False
    return True


def _owner(proc) -> int | None:
    import psutil
    try:
        owner = proc.environ().get(OWNER_ENV, "")
    except psutil.Error:
        return None
    return int(owner) if owner.isdigit() else None


def _remove_unused(shm_dir: Path, named: set[str], min_age_s: float) -> list[tuple[Path, int, str]]:
    """Delete ViZDoom files in ``shm_dir`` that no live process uses; returns (path, bytes, instance id) of each."""
    import time
    try:
        entries = list(shm_dir.iterdir())
    except OSError:
        return []
    now = time.time()
    candidates: list[tuple[Path, int, str]] = []
    for path in entries:
        match = SHM_FILE.match(path.name)
        if match is None or match[1] in named:
            continue
        try:
            info = path.lstat()
        except OSError:
            continue
        if (stat.S_ISREG(info.st_mode) and now - info.st_mtime >= min_age_s
                and (info.st_uid == os.getuid() or os.getuid() == 0)):
            candidates.append((path, info.st_size, match[1]))
    if not candidates:
        return []
    mapped = _mapped_names(shm_dir)
    removed = []
    for path, size, ident in candidates:
        if path.name not in mapped:
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append((path, size, ident))
    return removed


def _mapped_names(shm_dir: Path) -> set[str]:
    """Names of the files in ``shm_dir`` that some process has mapped (from ``/proc/*/maps``)."""
    prefix = f"{shm_dir}/".encode()
    names: set[str] = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            data = maps.read_bytes()
        except OSError:
            continue
        start = data.find(prefix)
        while start >= 0:
            end = data.find(b"\n", start)
            names.add(data[start + len(prefix):end if end >= 0 else None].decode(errors="replace"))
            start = data.find(prefix, start + 1)
    return names


def display_problem() -> str | None:
    """Why a visible engine window would find no display, or None when the X server answers.

    ViZDoom's engine crashes (segfault) when it opens a window without a
    display, so this is asked before starting it. Only Linux is checked.
    """
    if not is_linux():
        return None
    name = os.environ.get("DISPLAY", "")
    if not name:
        return "DISPLAY is not set"
    try:
        from Xlib import display as xdisplay
    except ImportError:  # python-xlib is a Linux dependency; without it, let the engine try
        return None
    try:
        xdisplay.Display(name).close()
    except Exception as err:  # Xlib raises its own DisplayError family and plain OSErrors
        reason = (str(err).splitlines() or [""])[0]
        return f"the X server at DISPLAY={name!r} does not answer ({type(err).__name__}: {reason})"
    return None
