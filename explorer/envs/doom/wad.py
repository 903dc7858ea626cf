"""Doom WAD files: which maps they hold, read from the WAD directory before an engine starts.

A WAD begins with a 12-byte header (``IWAD`` or ``PWAD``, the number of lumps,
the offset of the directory, both little-endian int32); the directory is one
16-byte entry per lump (offset, size, name of up to 8 ASCII bytes padded with
NULs). A map is a marker lump (``E1M1``, ``MAP01``, any name) directly followed
by ``THINGS`` (classic format) or ``TEXTMAP`` (UDMF).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

#: lumps that follow a map's marker lump, in the classic format and in UDMF
_MAP_DATA = frozenset({"THINGS", "TEXTMAP"})


class WadError(ValueError):
    """A file is not a WAD, or its directory is damaged."""


@dataclass(frozen=True)
class Wad:
    """What a WAD holds that matters before starting it."""

    path: Path
    kind: str  # "IWAD" (a whole game) or "PWAD" (maps and data on top of one)
    maps: tuple[str, ...]  # map names in directory order, upper case


def read_wad(path: str | Path) -> Wad:
    """The kind and the maps of the WAD at ``path``.

    Raises:
      WadError: the file is not a WAD (no ``IWAD``/``PWAD`` header) or its
        directory lies outside the file.
      OSError: the file cannot be read.
    """
    path = Path(path)
    with path.open("rb") as f:
        header = f.read(12)
        if len(header) < 12 or header[:4] not in (b"IWAD", b"PWAD"):
            raise WadError(f"{path} is not a WAD file (it does not start with IWAD or PWAD)")
        count, offset = struct.unpack("<ii", header[4:])
        size = path.stat().st_size
        if count < 0 or offset < 12 or offset + 16 * count > size:
            raise WadError(f"{path}: the WAD directory ({count} lumps at byte {offset}) lies outside the "
                           f"{size}-byte file; the file is damaged or cut short")
        f.seek(offset)
        directory = f.read(16 * count)
    names = [directory[i + 8:i + 16].split(b"\0", 1)[0].decode("ascii", "replace").upper()
             for i in range(0, 16 * count, 16)]
    maps = tuple(name for name, following in zip(names, names[1:], strict=False) if following in _MAP_DATA)
    return Wad(path, header[:4].decode("ascii"), maps)
