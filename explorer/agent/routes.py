"""A map of the episode's places from pixels, and routes through it to the least-visited (``learner.actions.route_after``).

Choosing among 8-step draws cannot plan further than a draw: an agent that has walked into a dead end or
circles in a room it has seen keeps choosing the farthest draw from there. This map remembers the places of
the episode and the moves that led between them, and when the place the agent stands in has been visited
``route_after`` times it takes the moves again that lead, over the fewest decisions, to a place visited less.

- **A place** is a picture: the newest frame made grey, cut to block means of ``SIDE`` x ``SIDE`` and
  normalised (zero mean, unit length), so a change of light does not make a new place. A frame whose picture
  is within ``SAME`` (cosine) of a kept one stands in that place; otherwise it is a new place. Two places
  are one view of the game, not one position: the same room seen facing the other way is another place,
  which is what a route of moves needs (a move repeats from where it was made, facing the way it was made).
- **A way** from place A to place B is the decision held on A after which the next decision stood in B; the
  latest such decision is kept. A way taken on a route that leads elsewhere counts a miss; a way missed
  ``MISSES`` times is dropped, so a door that closed or a move that no longer repeats stops being routed by.
- **A route** is the shortest chain of ways (breadth first, at most ``HORIZON`` decisions) from the place the
  agent stands in to the nearest place visited fewer than ``route_after`` times. The agent takes its first
  way's decision, looks again at the next decision, and routes again from wherever it stands; with no route
  (nothing visited less in reach) it decides as without the map.

Nothing here reads the game: the map is built from the frames and the decisions alone, so it works on every
game family, a live window included. It is reset at every episode's start and holds nothing a checkpoint or
a resumed run would need. Its cost is one picture and one product with the kept pictures per decision.
"""

from __future__ import annotations

from collections import deque

import numpy as np

#: side of a place's picture (block means of the grey frame)
SIDE = 16
#: cosine of two pictures at and above which they are one place
SAME = 0.9
#: places kept per episode; when full, a frame stands in the nearest kept place
MOST = 4096
#: decisions a route may take at most
HORIZON = 32
#: misses after which a way is dropped
MISSES = 2


def picture(frame: np.ndarray, side: int = SIDE) -> np.ndarray:
    """``float32[side * side]``: the place picture of ``frame`` (``uint8[H, W, C]``), grey, block means, zero mean
    and unit length (all zeros for a frame of one colour)."""
    f = np.asarray(frame, np.float32)
    grey = f.mean(axis=-1) if f.ndim == 3 else f
    h, w = grey.shape
    if h < side or w < side:
        raise ValueError(f"learner.actions.route_after reads frames of at least {side} x {side} pixels, not {h} x {w}")
    h, w = h // side * side, w // side * side
    p = grey[:h, :w].reshape(side, h // side, side, w // side).mean(axis=(1, 3)).ravel()
    p -= p.mean()
    norm = float(np.linalg.norm(p))
    return (p / norm if norm > 1e-6 else np.zeros_like(p)).astype(np.float32)


class PlaceMap:
    """The places of one episode, the ways between them, and routes to the least-visited.

    Args:
      route_after: ``learner.actions.route_after``: visits of the place the agent stands in from which it
        routes to a place visited fewer times (at least 1).
      side: side of a place's picture.
      same: cosine at and above which two pictures are one place.
    """

    def __init__(self, route_after: int, side: int = SIDE, same: float = SAME):
        if route_after < 1:
            raise ValueError(f"learner.actions.route_after = {route_after} must be at least 1 (0 is off)")
        if not 0.0 < same < 1.0:
            raise ValueError(f"a place map's cosine of one place must lie between 0 and 1, not {same}")
        self.route_after, self.side, self.same = int(route_after), int(side), float(same)
        self.pictures = np.zeros((MOST, self.side * self.side), np.float32)
        self.reset()

    def reset(self) -> None:
        """A new episode: no places, no ways."""
        self.count = 0
        self.visits: list[int] = []
        self.ways: list[dict[int, np.ndarray]] = []  # per place: the next place -> the decision held to go there
        self.misses: dict[tuple[int, int], int] = {}
        self.here: int | None = None  # the place the last decision was made in
        self.held: np.ndarray | None = None  # and the decision held from it
        self.expected: int | None = None  # the place a routed decision should lead to
        self.routes = 0  # decisions taken on a route this episode

    def locate(self, frame: np.ndarray) -> int:
        """The place ``frame`` stands in: the kept place whose picture is nearest, when within ``same``; else a new
        place (the nearest, once ``MOST`` are kept)."""
        p = picture(frame, self.side)
        if self.count:
            sims = self.pictures[:self.count] @ p
            best = int(np.argmax(sims))
            if sims[best] >= self.same or self.count >= MOST:
                return best
        self.pictures[self.count] = p
        self.visits.append(0)
        self.ways.append({})
        self.count += 1
        return self.count - 1

    def route(self, frame: np.ndarray) -> np.ndarray | None:
        """At a decision on ``frame`` (the newest, ``uint8[H, W, C]``): the decision to hold on a route to a place
        visited less, or None to decide as without the map. Call :meth:`decided` with what was held either way."""
        now = self.locate(frame)
        if self.here is not None and self.held is not None and now != self.here:
            self.ways[self.here][now] = self.held  # the latest decision that led from there to here
            self.misses.pop((self.here, now), None)
        if self.expected is not None and self.here is not None and now != self.expected:
            key = (self.here, self.expected)
            self.misses[key] = self.misses.get(key, 0) + 1
            if self.misses[key] >= MISSES:
                self.ways[self.here].pop(self.expected, None)
                del self.misses[key]
        self.visits[now] += 1
        self.here, self.expected = now, None
        if self.visits[now] < self.route_after:
            return None
        step = self._first_step(now)
        if step is None:
            return None
        self.expected = step
        self.routes += 1
        return self.ways[now][step]

    def _first_step(self, start: int) -> int | None:
        """The first place on the shortest chain of ways from ``start`` to a place visited fewer than
        ``route_after`` times, at most ``HORIZON`` ways long; None when there is none."""
        first: dict[int, int] = {}
        queue: deque[tuple[int, int]] = deque([(start, 0)])
        seen = {start}
        while queue:
            node, depth = queue.popleft()
            if depth >= HORIZON:
                continue
            for nxt in self.ways[node]:
                if nxt in seen:
                    continue
                seen.add(nxt)
                first[nxt] = nxt if node == start else first[node]
                if self.visits[nxt] < self.route_after:
                    return first[nxt]
                queue.append((nxt, depth + 1))
        return None

    def decided(self, action: np.ndarray) -> None:
        """The decision made at the last :meth:`route` holds ``action`` (as the actor holds it, before taps)."""
        self.held = np.array(action, np.float32)
