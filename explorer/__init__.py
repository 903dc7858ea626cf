"""explorer: a curiosity-driven game agent on a virtual Xbox 360 pad.

Frames come from a screen (``mss`` capture, a built-in game, or a recording),
a CNN policy turns the newest frames into stick values for a pad, and the
agent learns on-line to seek novelty. Importing the package needs no display
and no pad driver: backends are imported when chosen.
"""

import os as _os

# TensorFlow's C++ start-up chatter (oneDNN notices) buries the program's own output.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"
