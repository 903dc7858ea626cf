"""A memory of the run: return along its best episode, then explore (``learner.actions.return_share``).

Every episode of a run starts where the last one did, and a random explorer spends the start of each one
finding again what earlier episodes found. Go-Explore's answer is to remember where exploring paid and to go
back there before exploring further. This memory keeps one trajectory, the episode of the run whose
novelty summed highest so far (the novelty before normalising, ``Novelty.raw``: the normalised reward's
mean is near 1 in every episode, so its sums tell episodes apart by their length alone): each decision it
made (the action it held, from which step) and a small picture of the frame the decision was made on. A
new episode takes those decisions again, one after another, up to the decision by which that episode had
gathered ``return_share`` of its novelty, and then explores as usual. If the new episode sums more
novelty, it is the one kept: what the run finds after the return point becomes the next episode's way in.

Returning by taking the same decisions needs a game that repeats itself: the built-in game's maps without
monsters do, to the map unit. Before each returned decision the newest frame is compared with the one the
decision was made on; when they differ (another start, something that moved, a live game whose timing
varies) the return ends there and the episode explores from that step. Such a game gets today's explorer,
with one comparison of pictures per decision more. The memory lives as long as the process: it is empty at
the start of a run and after ``--resume``, and holds nothing a checkpoint needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: side of the small picture a decision's frame is kept as (mean of blocks of the frame, per channel)
SIDE = 8
#: mean absolute difference, in grey levels of the small pictures, above which a frame is not the one a
#: returned decision was made on
TOLERANCE = 2.0


def thumbnail(frame: np.ndarray) -> np.ndarray:
    """``float32[SIDE, SIDE, C]``: the block means of ``frame`` (``uint8[H, W, C]``); a frame under SIDE pixels
    on a side is kept whole."""
    if frame.shape[0] < SIDE or frame.shape[1] < SIDE:
        return np.asarray(frame, np.float32)
    h, w = frame.shape[0] // SIDE * SIDE, frame.shape[1] // SIDE * SIDE
    f = np.asarray(frame[:h, :w], np.float32)
    return f.reshape(SIDE, h // SIDE, SIDE, w // SIDE, -1).mean(axis=(1, 3))


@dataclass
class Trajectory:
    """The decisions of one episode: the step each started at, the action it held (as the actor holds it, before
    taps), the small picture it was made on, and the novelty summed over the episode before it."""

    starts: list[int] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    pictures: list[np.ndarray] = field(default_factory=list)
    gathered: list[float] = field(default_factory=list)
    total: float = 0.0

    def until(self, share: float) -> int:
        """Decisions to return along: those before the first one by whose start the episode had gathered
        ``share`` of its novelty (at least one)."""
        if self.total <= 0:
            return 0
        for i, g in enumerate(self.gathered):
            if g >= share * self.total:
                return max(i, 1)
        return len(self.starts)


class ReturnMemory:
    """The run's best episode, and the return along it of the episode under way.

    Args:
      share: ``learner.actions.return_share``: the share of the best episode's novelty to return to (0 < share < 1).
    """

    def __init__(self, share: float):
        if not 0.0 < share < 1.0:
            raise ValueError(f"learner.actions.return_share = {share} must lie between 0 and 1 (0 is off)")
        self.share = float(share)
        self.best: Trajectory | None = None
        self.returned: list[int] = []  # decisions each finished episode returned along, in order
        self.recording = False  # an episode joined part way (a resumed run's) is neither returned nor kept
        self.now = Trajectory()
        self.gathered, self.step, self.back, self.plan = 0.0, 0, 0, 0

    def reset(self) -> None:
        """A new episode: record it from its first step, and return along the best so far."""
        self.recording = True
        self.now = Trajectory()
        self.gathered = 0.0
        self.step = 0
        self.back = 0  # decisions of the best taken again so far
        self.plan = self.best.until(self.share) if self.best is not None else 0

    def returning(self, frame: np.ndarray) -> np.ndarray | None:
        """At a decision: the action the best episode held from this step on, when the return is under way and
        ``frame`` (the newest, ``uint8[H, W, C]``) is the one that decision was made on; None to decide anew
        (the return, once left, is not taken up again this episode)."""
        best = self.best
        if best is None or not self.recording or self.back >= self.plan or best.starts[self.back] != self.step:
            self.plan = 0
            return None
        if float(np.mean(np.abs(thumbnail(frame) - best.pictures[self.back]))) > TOLERANCE:
            self.plan = 0
            return None
        self.back += 1
        return best.actions[self.back - 1]

    def decided(self, action: np.ndarray, frame: np.ndarray) -> None:
        """The episode under way started a decision holding ``action`` on ``frame``."""
        self.now.starts.append(self.step)
        self.now.actions.append(np.array(action, np.float32))
        self.now.pictures.append(thumbnail(frame))
        self.now.gathered.append(self.gathered)

    def stepped(self, novelty: float) -> None:
        """One step of the episode under way, and the novelty it scored."""
        self.step += 1
        self.gathered += float(novelty)

    def end(self) -> int:
        """The episode under way ended: it becomes the best if it gathered more novelty than the best. Returns the
        decisions it returned along."""
        back, self.now.total = self.back, self.gathered
        if self.recording:
            self.returned.append(back)
            if self.now.starts and (self.best is None or self.now.total > self.best.total):
                self.best = self.now
        self.recording = False
        return back
