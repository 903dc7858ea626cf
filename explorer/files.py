"""Files that are either whole or absent: atomic writes (temporary name, fsync, rename) and JSON state.

JSON is written strictly (:func:`json_text`): JSON has no NaN or infinity, so a number that is not finite
is written as ``null``, and every JSON reader can read the file."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any


def remedy(err: OSError, elsewhere: str) -> str:
    """What to do about a write that failed with ``err``, ending in ``elsewhere`` (e.g. "choose another folder
    (--out)"): a full disk wants space, a read-only or forbidden folder wants permission."""
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"free space there, or {elsewhere}"
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"make it writable, or {elsewhere}"
    return elsewhere


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (a no-op where directories cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_save(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Have ``write`` write a file at a temporary path beside ``path``, then rename it to ``path``.

    The temporary name keeps the suffix (``.<stem>.<random>.tmp.png``), so writers
    that pick a format from it work, e.g. ``atomic_save(p, lambda tmp: fig.savefig(tmp))``.
    The file is flushed to disk before the rename and the rename after it, so
    ``path`` holds the old content or the new one, never a part; when ``write``
    fails, the temporary file is removed and ``path`` is untouched.

    Returns:
      ``path``.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{secrets.token_hex(4)}.tmp{path.suffix}")
    try:
        write(tmp)
        with open(tmp, "r+b") as f:  # writers such as savefig do not fsync
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def atomic_write(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` (``str`` is encoded as UTF-8) to ``path`` whole or not at all (see :func:`atomic_save`)."""
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            f.write(payload)

    return atomic_save(path, write)


def finite(value: Any) -> Any:
    """``value`` with every float that is not finite (NaN, infinity), in any list, tuple or dict, as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def json_text(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, **kwargs)`` as strict JSON: numbers that are not finite become ``null`` (see :func:`finite`)."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)


def write_json(path: Path, value: Any, **kwargs: Any) -> None:
    """``value`` as strict JSON (:func:`json_text`) at ``path``, atomically (the folder is created if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json_text(value, **kwargs))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
