"""explorer: a curiosity-driven game agent on a virtual Xbox 360 pad.

Frames come from a screen (``mss`` capture, a built-in game, or a recording),
a CNN policy turns the newest frames into stick values for a pad, and the
agent learns on-line to seek novelty. Importing the package needs no display
and no pad driver: backends are imported when chosen.
"""

import os as _os
from importlib import metadata as _metadata

# TensorFlow's C++ start-up chatter (oneDNN notices) buries the program's own output.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

try:  # the one place the version is written is pyproject.toml
    __version__ = _metadata.version("explorer")
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
