"""What would a perfect memory of place, or a perfect sense of walls, be worth? Scripted ceilings in minutes.

Issue-sized questions about a memory ("is it the memory, the perception, or the
budget?") need a ceiling that no learner has to reach first. This tool plays the
built-in game with scripted agents that are given what the learning agent can
never see, read from the engine for this measurement only (``DoomGame(...,
diagnostics=True)``), and prints each one's coverage against ``sticky_prior`` in
the same run:

``sticky_prior``
  the baseline, drawn by the project's own ``RandomActor`` exactly as
  ``tools/bench_explore.py`` draws it: the prior's sticks on the learner's stick
  range, each draw held 8 steps, A pressed on half the draws.
``walls``
  the same draws with a perfect wall sense and no memory: when the engine's depth
  buffer says a wall is close ahead, stop turning and press A once (a door opens),
  wait a few steps, then turn toward the more open side.
``reach``
  a perfect map of walls and no memory: each draw is the best of ``--draws`` draws of
  the prior, scored by the map cells its 8 steps would cross before the first wall it
  would hit (the engine's blocking lines, the player's true position and heading),
  new or not: the longest free path.
``place``
  a perfect memory of place and no wall sense: each draw is the best of ``--draws``
  draws of the prior, scored by the map cells the episode has not stood in that the
  draw would cross in its 8 steps (the player's true position and heading, walls
  unknown).
``map``
  a perfect memory of place and a perfect map of walls: the same choice, with each
  draw's path stopped at the first wall it would hit (the engine's blocking lines).
``runmap``
  ``map`` with a memory of the whole run instead of the episode: each draw is scored
  first by the cells no episode of the run has stood in that it would cross before
  the first wall, then by those new to this episode. The ceiling of distinct cells
  over the run (how much of the map the run sees) for this action family.
``route``
  another action family: routes, not draws. With a perfect map (the engine's walls and
  sectors' floors) and a perfect memory of place it walks the shortest way, through a
  grid of 32-unit squares, to the nearest cell the episode has not stood in (frontier
  exploration): no step up higher than Doom's 24 units, drops allowed. It steers the
  sticks toward the farthest of its next squares it can walk straight to, inside the
  prior's stick range, and taps A on the way, once every 16 steps (a door reverses at each
  press and takes about 9 steps to open). The lines in the way of a step it could
  not make (a door that stays shut, a window) are walls for the rest of the run; a cell
  it walks toward for 64 steps without reaching new ground is given up. A scripted
  router, not a perfect one: its figures are a floor under what routes are worth.
``runroute``
  ``route`` toward the nearest cell no episode of the run has stood in (the episode's
  own new cells once none is left within reach).
``tour``
  ``runroute`` that forgets at each episode's start what it found shut and what it gave
  up (a door it failed to pass is tried again) and breaks ties between equally near
  cells in an order drawn anew for each episode: a router that varies its routes, for a
  ceiling of distinct cells over the run.

``reach``, ``place``, ``map`` and ``runmap`` choose among the prior's own draws and
``walls`` adds a reflex to them: their ceilings are of that action family, held 8
steps on the prior's stick range, not of exploration in general. ``route`` and
``runroute`` bound what plans longer than a draw could add. The coverage figure is the project's
(``explorer.run.coverage``): cells per episode budget over the last 20 episodes, a
death counting as a whole episode.

    python tools/oracle_ceilings.py --suite --steps 10000 --seeds 0 1 2 --jobs 2
    python tools/oracle_ceilings.py --maps my_way_home --agents sticky_prior map --draws 8 32
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_explore import MAPS  # noqa: E402

from explorer.agent.actor import RandomActor  # noqa: E402
from explorer.core import Step  # noqa: E402
from explorer.run.coverage import FIGURE, Coverage  # noqa: E402
from explorer.taps import Taps  # noqa: E402

AGENTS = ("sticky_prior", "walls", "reach", "place", "map", "runmap", "route", "runroute", "tour")
#: the agents that choose among draws of the prior
CHOOSERS = ("reach", "place", "map", "runmap")
#: the agents that walk routes to the nearest new cell
ROUTERS = ("route", "runroute", "tour")
#: the routers that walk toward cells new to the run
RUN_ROUTERS = ("runroute", "tour")
#: agent steps a draw is held (``run.sticky_steps`` of the bench's ``sticky_prior``)
HOLD = 8
#: map units a step at full walk y covers on the built-in game's defaults (``game.move_scale`` 25,
#: ``game.frame_skip`` 4; the best single scale measured, docs/experiments.md "Two routes to a memory")
STRIDE = 12.2
#: a wall is close ahead when the middle third of the view's middle rows is nearer than this (depth-buffer units)
NEAR = 8.0
#: steps the ``walls`` agent waits at a close wall, after pressing A once, before it turns
WAIT = 4
#: map units beyond a step's end a path must be free of walls (about the player's radius)
RADIUS = 20.0
#: map units a player steps up (Doom's own): the highest step up a router plans
CLIMB = 24.0
#: map units of a side of the squares a router plans its routes on
NAV = 32.0
#: map units a router keeps the centres of its squares from walls (the player's radius is 16; a 64-unit door's
#: squares are 16 from its sides)
CLEARANCE = 12.0
#: squares of its route ahead a router looks for one it can walk straight to
LOOKAHEAD = 6
#: steps a router stays in one square, on its way to the next, before it strikes that step off
STUCK = 16
#: steps a router leaves A released after each press: Doom reverses a moving door at each use, and a door opens
#: about 8 units a step (at frame skip 4), so a press every 4 steps (``pad.tap_gap`` 3) keeps it bouncing half open
DOOR_GAP = 15
#: steps a router walks toward one new cell without standing in any new cell before it gives that cell up
GIVE_UP = 64


def crosses(walls: np.ndarray, x0: float, y0: float, x1: float, y1: float) -> bool:
    """Whether the segment from ``(x0, y0)`` to ``(x1, y1)`` crosses any of ``walls`` (rows ``x1, y1, x2, y2``)."""
    if len(walls) == 0:
        return False
    ax, ay, bx, by = walls.T
    dx, dy, ex, ey = x1 - x0, y1 - y0, bx - ax, by - ay
    den = dx * ey - dy * ex
    with np.errstate(divide="ignore", invalid="ignore"):
        t = ((ax - x0) * ey - (ay - y0) * ex) / den
        u = ((ax - x0) * dy - (ay - y0) * dx) / den
    return bool(np.any((den != 0) & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1)))


def new_cells(action: np.ndarray, x: float, y: float, heading: float, visited: set, cell: float, turn: float,
              stride: float, walls: np.ndarray | None, hold: int = HOLD) -> int:
    """Map cells outside ``visited`` that ``hold`` steps of ``action`` (camera x, camera y, walk x, walk y, ...)
    would cross from ``(x, y)`` facing ``heading`` degrees, turning ``turn`` degrees per step at full camera
    x; with ``walls``, the path stops before the first one it would hit."""
    cam, wx, wy = float(action[0]), float(action[2]), float(action[3])
    found: set = set()
    for _ in range(hold):
        heading -= turn * cam  # positive camera x turns right: the engine's angle falls
        r = math.radians(heading)
        dx = stride * (wy * math.cos(r) + wx * math.sin(r))
        dy = stride * (wy * math.sin(r) - wx * math.cos(r))
        if walls is not None:
            reach = 1.0 + RADIUS / max(math.hypot(dx, dy), 1e-6)
            if crosses(walls, x, y, x + dx * reach, y + dy * reach):
                break
        x, y = x + dx, y + dy
        c = (int(math.floor(x / cell)), int(math.floor(y / cell)))
        if c not in visited:
            found.add(c)
    return len(found)


class Router:
    """Frontier exploration for the ``route`` ceilings: the shortest way (breadth first, 8 neighbours) through a
    grid of ``NAV``-unit squares from the player to the nearest square whose coverage cell (``cell`` units) is
    outside a memory, and the sticks that walk it. A step between neighbouring squares is open when the player
    fits at the next centre, no wall line lies between the centres, and the next floor is at most ``CLIMB``
    units higher (a ledge may be dropped from, not climbed).

    ``walls`` are the map's blocking lines (rows ``x1, y1, x2, y2``); ``sectors`` its sectors as
    ``DoomGame.sectors`` gives them (floor, ceiling, lines), whose lines :meth:`strike` may find shut (a door
    that does not open); ``low`` and ``high`` bound the sticks as sent (camera x, camera y, walk x, walk y);
    ``turn`` is degrees per step at full camera x."""

    def __init__(self, walls: np.ndarray, sectors: list, cell: float, low: np.ndarray, high: np.ndarray,
                 turn: float):
        self.walls, self.cell, self.turn = walls, float(cell), float(turn)
        self._map = walls  # the walls as the map has them, before any strike
        self.order = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1)]  # neighbours, as searched
        self.lines = np.concatenate([np.zeros((0, 4))] + [lines for _, _, lines in sectors])
        self._of = np.concatenate([np.zeros(0, np.int64)] + [np.full(len(lines), i) for i, (_, _, lines)
                                                              in enumerate(sectors)])
        self._floors = np.array([f for f, _, _ in sectors], np.float64)
        self._sides: dict[tuple, list[int]] = {}  # the sectors that list each line
        for i, (_, _, lines) in enumerate(sectors):
            for ln in lines:
                self._sides.setdefault(tuple(sorted(((ln[0], ln[1]), (ln[2], ln[3])))), []).append(i)
        self.low, self.high = np.asarray(low, np.float32)[:4], np.asarray(high, np.float32)[:4]
        self._clear: dict[tuple, bool] = {}
        self._room: dict[tuple, bool] = {}
        self._floor: dict[tuple, float | None] = {}
        self.struck: set = set()  # steps between squares the player tried and could not make
        self.dropped: set = set()  # coverage cells the player set out for and did not reach
        self.path: list[tuple[int, int]] = []

    @staticmethod
    def centre(c: tuple[int, int]) -> tuple[float, float]:
        return (c[0] + 0.5) * NAV, (c[1] + 0.5) * NAV

    @staticmethod
    def at(x: float, y: float) -> tuple[int, int]:
        return int(math.floor(x / NAV)), int(math.floor(y / NAV))

    def covers(self, c: tuple[int, int]) -> tuple[int, int]:
        """The coverage cell that holds the centre of square ``c``."""
        x, y = self.centre(c)
        return int(math.floor(x / self.cell)), int(math.floor(y / self.cell))

    def floor(self, c: tuple[int, int]) -> float | None:
        """The floor height at the centre of square ``c`` (None outside the map): of the sectors that share the
        first line a ray from the centre crosses, the one whose lines that ray crosses an odd number of times
        (the sector around the centre), or, with none such, the first of them."""
        if c not in self._floor:
            x, y = self.centre(c)
            x1, y1, x2, y2 = self.lines.T
            with np.errstate(divide="ignore", invalid="ignore"):
                at = x1 + (y - y1) * (x2 - x1) / (y2 - y1)
                hit = ((y1 > y) != (y2 > y)) & (x < at)
            if not hit.any():
                self._floor[c] = None
                return None
            first = self.lines[np.argmin(np.where(hit, at - x, np.inf))]
            sides = self._sides[tuple(sorted(((first[0], first[1]), (first[2], first[3]))))]
            odd = np.bincount(self._of[hit], minlength=len(self._floors)) % 2
            around = [k for k in sides if odd[k]] or sides
            self._floor[c] = float(self._floors[around[0]])
        return self._floor[c]

    def standable(self, c: tuple[int, int]) -> bool:
        """Whether the centre of square ``c`` is inside the map and at least ``CLEARANCE`` units from every
        wall line (the player's body, nearly, fits there)."""
        if c not in self._room:
            x, y = self.centre(c)
            ax, ay, bx, by = self.walls.T
            ex, ey = bx - ax, by - ay
            t = np.clip(((x - ax) * ex + (y - ay) * ey) / np.maximum(ex * ex + ey * ey, 1e-9), 0.0, 1.0)
            fits = len(self.walls) == 0 or np.min(np.hypot(ax + t * ex - x, ay + t * ey - y)) >= CLEARANCE
            self._room[c] = bool(fits) and self.floor(c) is not None
        return self._room[c]

    def passable(self, a: tuple[int, int], b: tuple[int, int]) -> bool:
        """Whether the player can step from square ``a`` to its neighbour ``b`` (see the class)."""
        if (a, b) in self.struck or not self.standable(b):
            return False
        fa, fb = self.floor(a), self.floor(b)
        if fa is not None and fb is not None and fb - fa > CLIMB:
            return False
        key = (a, b) if a <= b else (b, a)
        if key not in self._clear:
            self._clear[key] = not crosses(self.walls, *self.centre(key[0]), *self.centre(key[1]))
        return self._clear[key]

    def steps(self, c: tuple[int, int]) -> list[tuple[int, int]]:
        """The neighbours of square ``c`` the player can step to, in :attr:`order`."""
        return [n for n in ((c[0] + dx, c[1] + dy) for dx, dy in self.order) if self.passable(c, n)]

    def plan(self, x: float, y: float, memory: set, fallback: set | None = None, limit: int = 40_000) -> bool:
        """The shortest way from ``(x, y)`` to the nearest square whose coverage cell is outside ``memory``
        (outside ``fallback`` when none outside ``memory`` is within reach), kept as :attr:`path` (its squares,
        from the first the player can walk straight to); whether one was found within ``limit`` squares."""
        here = self.at(x, y)
        starts = [(here[0] + dx, here[1] + dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]
        starts = [c for c in starts if (here, c) not in self.struck and not crosses(self.walls, x, y, *self.centre(c))]
        for avoid in (memory, fallback):
            if avoid is None:
                continue
            came: dict[tuple[int, int], tuple[int, int] | None] = {c: None for c in starts}
            frontier = list(starts)
            while frontier and len(came) < limit:
                nxt = []
                for c in frontier:
                    if self.covers(c) not in avoid and self.covers(c) not in self.dropped:
                        path = [c]
                        while came[path[-1]] is not None:
                            path.append(came[path[-1]])  # type: ignore[arg-type]
                        self.path = path[::-1]
                        return True
                    for n in self.steps(c):
                        if n not in came:
                            came[n] = c
                            nxt.append(n)
                frontier = nxt
        self.path = []
        return False

    def strike(self, x: float, y: float, square: tuple[int, int], toward: tuple[int, int]) -> None:
        """The player at ``(x, y)`` in ``square`` could not step to the next square ``toward``: the lines
        between it and that square's centre (a door that stays shut, a ledge, a window) are walls for the
        rest of the run; with none, that one step is struck off."""
        x1, y1 = self.centre(toward)
        shut = [ln for ln in self.lines if crosses(ln[None], x, y, x1, y1)]
        if shut:  # a line between two sectors is listed by both: once is enough
            self.walls = np.concatenate([self.walls, np.unique(np.array(shut), axis=0)])
            self._clear.clear()
            self._room.clear()
        else:
            self.struck.add((square, toward))

    def forget(self, rng: np.random.Generator | None = None) -> None:
        """Forget what was found shut and what was given up (the map's own walls again), and with ``rng`` draw a
        new order to search neighbours in: among squares equally near, another is found first."""
        self.walls = self._map
        self.struck.clear()
        self.dropped.clear()
        self._clear.clear()
        self._room.clear()
        self.path = []
        if rng is not None:
            self.order = [self.order[i] for i in rng.permutation(len(self.order))]

    @property
    def target(self) -> tuple[int, int] | None:
        """The coverage cell the route leads to (None without a route)."""
        return self.covers(self.path[-1]) if self.path else None

    def goal(self, x: float, y: float) -> tuple[int, int]:
        """The farthest of the path's next few squares the player can walk straight to (the first if none)."""
        for c in reversed(self.path[:LOOKAHEAD]):
            if not crosses(self.walls, x, y, *self.centre(c)):
                return c
        return self.path[0]

    def sticks(self, x: float, y: float, angle: float, goal: tuple[int, int]) -> np.ndarray:
        """Camera x, camera y, walk x and walk y, inside the stick range, that turn toward and walk to the
        centre of square ``goal`` from ``(x, y)`` facing ``angle`` degrees."""
        gx, gy = self.centre(goal)
        err = (math.degrees(math.atan2(gy - y, gx - x)) - angle + 180.0) % 360.0 - 180.0
        e = math.radians(err)
        # positive camera x turns right (the engine's angle falls); walk y forward, walk x to the right
        want = np.array([-err / self.turn, 0.0, -math.sin(e), math.cos(e) if abs(err) < 60 else 0.0], np.float32)
        return np.clip(want, self.low, self.high)


class ChoosingActor(RandomActor):
    """``sticky_prior``'s actor whose every draw is the best of ``draws`` of the prior by ``score``: a function
    of the step acted on and the candidates as sent (``float32[draws, dim]``) that returns one score each. Each
    draw is held ``hold`` steps (``sticky_prior``'s 8 by default)."""

    def __init__(self, seed: int, sticks, draws: int, score: Callable[[Step, np.ndarray], np.ndarray],
                 tap_gap: int = 0, hold: int = HOLD):
        super().__init__(seed, sticky_steps=hold, sticks=sticks, tap_gap=tap_gap)
        self.draws, self.score = int(draws), score
        self._step: Step | None = None

    def act(self, step: Step) -> np.ndarray:
        self._step = step
        return super().act(step)

    def _draw(self) -> np.ndarray:
        candidates = [RandomActor._draw(self) for _ in range(self.draws)]
        sent = np.stack([self.sticks(np.clip(c + self.sticks.prior, -1.0, 1.0)) for c in candidates])
        return candidates[int(np.argmax(self.score(self._step, sent)))]  # the first best: draws=1 is sticky_prior


def run(agent: str, map_name: str, seed: int, steps: int, draws: int = 32, overrides: tuple[str, ...] = (),
        scorer: Callable[[Step, np.ndarray], np.ndarray] | None = None, hold: int = HOLD) -> dict:
    """One run of ``agent`` on ``map_name`` (settings ``overrides`` after the map's): its coverage figure,
    distinct cells and episodes. With ``scorer`` the agent, whatever its name, chooses each draw by it
    (:class:`ChoosingActor`): how another tool compares a scorer of its own with these ceilings. A chooser
    holds each draw ``hold`` steps and scores it over as many; ``sticky_prior`` and ``walls`` hold 8."""
    from explorer.agent.networks import StickRange
    from explorer.config import load
    from explorer.envs.doom.env import DoomEnv
    from explorer.envs.doom.game import DoomGame

    config = load(None, [f"run.seed={seed}", *MAPS[map_name], "run.agent=sticky_prior", f"run.sticky_steps={HOLD}",
                           *overrides])
    game = DoomGame(config.game, config.observation, diagnostics=True)
    env = DoomEnv(game, config.observation.stack, config.ring.capacity, config.pad.buttons)
    sticks = StickRange(config.learner, config.pad.buttons)
    gc = config.game
    turn = gc.turn_scale * gc.frame_skip
    stride = STRIDE * gc.move_scale / 25.0 * gc.frame_skip / 4.0
    coverage = Coverage(env.cell)
    state = {"walls": np.zeros((0, 4))}

    def score(step: Step, actions: np.ndarray) -> np.ndarray:
        p = game.position()
        walls = state["walls"] if agent in ("map", "reach", "runmap") else None
        scores = np.array([new_cells(a, p.x, p.y, p.angle, set() if agent == "reach" else coverage.episode_cells,
                                     coverage.cell, turn, stride, walls, hold) for a in actions], np.float64)
        if agent == "runmap":  # cells new to the run first, then those new to the episode (at most hold of them)
            scores += (hold + 1) * np.array([new_cells(a, p.x, p.y, p.angle, coverage.all_cells, coverage.cell,
                                                       turn, stride, walls, hold) for a in actions], np.float64)
        return scores

    chooses = scorer is not None or agent in CHOOSERS
    routes = scorer is None and agent in ROUTERS
    gap = config.pad.tap_gap  # buttons sent as taps, as the bench's agents send them (0: held)
    actor = ChoosingActor(seed, sticks, draws, scorer or score, gap, hold) if chooses else \
        RandomActor(seed, sticky_steps=HOLD, sticks=sticks, tap_gap=gap)
    taps = Taps(sticks.buttons, DOOR_GAP)  # a router's A: one press a door can open fully on
    router: Router | None = None
    order_rng = np.random.default_rng(seed)
    near = turning = 0
    side = 0.0
    step = env.reset()
    try:
        for _ in range(steps):
            if step.first:
                state["walls"] = game.walls() if agent in ("map", "reach", "runmap") else state["walls"]
                near = turning = 0
                taps.reset()
                if routes and router is None:  # the map once: the router keeps what it finds shut for the run
                    router = Router(game.walls(), game.sectors(), coverage.cell,
                                    sticks(-np.ones(sticks.dim, np.float32)), sticks(np.ones(sticks.dim, np.float32)),
                                    turn)
                if router is not None:
                    if agent == "tour":  # try again what was shut, and break ties another way
                        router.forget(order_rng)
                    router.path, here, tries, seen, since = [], None, 0, 0, 0
            p = step.info["position"]
            coverage.add(p.x, p.y)
            if router is not None:
                square = router.at(p.x, p.y)
                tries = tries + 1 if square == here else 0
                known = len(coverage.episode_cells)
                since = since + 1 if known == seen else 0
                seen = known
                if router.path and since > GIVE_UP:  # walking to and fro without reaching it: give it up
                    router.dropped.add(router.target)
                    router.path, since = [], 0
                if router.path and tries > STUCK:  # the next step could not be made: strike it off, plan again
                    router.strike(p.x, p.y, square, router.path[0])
                    router.path, tries = [], 0
                if router.path and square in router.path:
                    router.path = router.path[router.path.index(square) + 1:]
                if square != here or not router.path:
                    here = square
                    fallback = coverage.episode_cells if agent in RUN_ROUTERS else None
                    router.plan(p.x, p.y, coverage.all_cells if agent in RUN_ROUTERS else coverage.episode_cells,
                                fallback)
                if router.path:
                    action = np.ones(sticks.dim, np.float32)  # every button pressed, sent as taps
                    action[:4] = router.sticks(p.x, p.y, p.angle, router.goal(p.x, p.y))
                    action = taps(action)
                else:  # no new cell within reach: the prior's draws
                    action = np.array(actor.act(step), np.float32)
            else:
                action = np.array(actor.act(step), np.float32)
            if agent == "walls" and scorer is None:
                depth = game.depth()
                h = depth.shape[0]
                band = np.median(depth[h // 3: 2 * h // 3].astype(np.float32), axis=0)
                third = len(band) // 3
                left, ahead, right = band[:third].mean(), band[third:-third].mean(), band[-third:].mean()
                if turning:
                    action[0], turning = side, turning - 1
                elif ahead < NEAR:
                    near += 1
                    if near <= WAIT:
                        action[0] = 0.0
                        action[4:] = 1.0 if near == 1 else -1.0
                    else:
                        side, turning = (0.5 if right > left else -0.5), 1
                        action[0] = side
                else:
                    near = 0
            step = env.step(action)
            coverage.episode_steps += 1
            if step.last:
                coverage.end_episode(env.outcome)
                step = env.reset()
    finally:
        env.close()
    return {"agent": agent, "map": map_name, "seed": seed, "steps": steps, "draws": draws if chooses else None,
            "hold": hold if chooses else HOLD,
            "figure": round(coverage.figure(env.episode_budget), 2), "distinct": len(coverage.all_cells),
            "episodes": len(coverage.per_episode),
            "deaths": sum(o == "death" for o in coverage.outcomes[-20:])}


def reachable(map_name: str) -> dict:
    """The coverage cells of ``map_name`` a router could stand in from the start: squares reached breadth first
    through the router's grid (walls, floors, no climb over ``CLIMB``), every door open, no key or switch
    needed. An upper bound on any run's distinct cells there."""
    from explorer.config import load
    from explorer.envs.doom.env import DoomEnv
    from explorer.envs.doom.game import DoomGame

    config = load(None, ["run.seed=0", *MAPS[map_name]])
    game = DoomGame(config.game, config.observation, diagnostics=True)
    env = DoomEnv(game, config.observation.stack, config.ring.capacity, config.pad.buttons)
    try:
        env.reset()
        p = game.position()
        router = Router(game.walls(), game.sectors(), env.cell, -np.ones(4), np.ones(4), 1.0)
        seen = {router.at(p.x, p.y)}
        frontier = list(seen)
        while frontier:
            nxt = []
            for c in frontier:
                for n in router.steps(c):
                    if n not in seen:
                        seen.add(n)
                        nxt.append(n)
            frontier = nxt
        return {"map": map_name, "reachable": len({router.covers(c) for c in seen})}
    finally:
        env.close()


def _run(task: tuple) -> dict:
    return run(*task)


def table(results: list[dict], maps: list[str], key: str = "figure") -> str:
    """Mean figure (or, with ``key = "distinct"``, distinct cells over the run) per agent and map over seeds, with
    the ratio to ``sticky_prior``'s, and the suite average (the mean over the maps) with its ratio to
    ``sticky_prior``'s suite average, as docs/experiments.md defines it."""
    rows: dict[tuple, dict[str, list[float]]] = {}
    for r in results:
        rows.setdefault((r["agent"], r["draws"], r.get("hold", HOLD)), {}).setdefault(r["map"], []).append(r[key])
    base = {m: float(np.mean(v)) for m, v in rows.get(("sticky_prior", None, HOLD), {}).items()}
    title = FIGURE if key == "figure" else "distinct cells over the run"
    lines = [f"{title}, mean over seeds (ratio to sticky_prior)", "",
             "| agent | " + " | ".join(maps) + " | average |", "|---" * (len(maps) + 2) + "|"]
    for (agent, draws, hold), per_map in rows.items():
        cells, means = [], []
        for m in maps:
            if m not in per_map:
                cells.append("–")
                continue
            mean = float(np.mean(per_map[m]))
            means.append(mean)
            cells.append(f"{mean:.1f} ({mean / base[m]:.2f})" if base.get(m) else f"{mean:.1f}")
        average = "–"
        if len(means) == len(maps):
            average = f"{np.mean(means):.1f}"
            if all(base.get(m) for m in maps):
                average += f" ({np.mean(means) / np.mean([base[m] for m in maps]):.2f})"
        name = agent if draws is None else f"{agent}, best of {draws}" + (f", held {hold}" if hold != HOLD else "")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {average} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", action="store_true", help=f"every map of the suite ({', '.join(MAPS)})")
    ap.add_argument("--maps", nargs="+", choices=list(MAPS), help="these suite maps (default: my_way_home)")
    ap.add_argument("--agents", nargs="+", choices=AGENTS, default=list(AGENTS))
    ap.add_argument("--steps", type=int, default=10_000, help="agent steps per run")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--draws", type=int, nargs="+", default=[32], help="draws of the prior that reach, place and map choose among")
    ap.add_argument("--hold", type=int, nargs="+", default=[HOLD],
                    help=f"steps the choosers hold each draw and score it over (sticky_prior and walls: {HOLD})")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time, each in its own process")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting after the map's, for every run (e.g. pad.tap_gap=3); repeatable")
    ap.add_argument("--out", help="write every run's figures to this JSON file")
    ap.add_argument("--reachable", action="store_true",
                    help="run nothing: print the cells of each map a router could reach from the start, doors open")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.jobs < 1 or min(args.draws) < 1 or min(args.hold) < 1:
        ap.error("--steps, --jobs, --draws and --hold take whole numbers of 1 or more")
    maps = list(MAPS) if args.suite else args.maps or ["my_way_home"]
    if args.reachable:
        for m in maps:
            print(json.dumps(reachable(m)), flush=True)
        return 0
    tasks = [(a, m, s, args.steps, d, tuple(args.overrides), None, h) for m in maps for s in args.seeds
             for a in args.agents for d in (args.draws if a in CHOOSERS else [0])
             for h in (args.hold if a in CHOOSERS else [HOLD])]
    results = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for r in pool.map(_run, tasks):
            print(json.dumps(r), flush=True)
            results.append(r)
    print("\n" + table(results, maps) + "\n\n" + table(results, maps, "distinct"))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
