"""Benchmark exploration on the built-in game: coverage of map cells per episode.

Compares, on ViZDoom my_way_home (525-step episodes) with the same seeds and step
budget: uniform random sticks, sticky random sticks (each held 8 steps; with
``sticky_prior``, moved by ``learner.actions.action_prior`` and put on ``learner.actions.action_low``/
``action_high`` as the learner's warm-up sticks are), the
original question's agent (pixel novelty used directly as the loss: it fails
with "No gradients", and the guard says why), explorer's learning agent
with each novelty signal, and ``frozen``: the default learning agent with
learning switched off (``learner.schedule.update_every`` beyond the run: its warm-up
sticks, then its untrained actor on the prior and stick range). Coverage is the
number of distinct 64x64-map-unit cells the player stands in during an episode
(positions are read for measurement only, never shown to the agent).

``--suite`` runs every agent and seed on four maps: my_way_home (525-step
episodes) and Freedoom 1's E1M1, E1M2 and E1M3 without monsters (explorer's
``freedoom`` scenario, ``-nomonsters``, 1050-step episodes: start, doors and
switches as the maps made them). It reports per map and averaged over the maps:

- cells per episode budget over the last 20 finished episodes, the figure
  ``explorer explore`` prints and writes (``cells_per_budget``, defined once in
  :func:`explorer.run.coverage.cells_per_budget`): (cells of those episodes
  summed) / (their steps summed) x the episode budget (``game.episode_steps``).
  When every episode runs its whole budget this is the plain mean of cells per
  episode; an episode the map ends early (my_way_home ends when the player
  picks up the vest) counts with the steps it had, so reaching the goal neither
  lowers the figure (a plain mean would: the episode was cut short) nor
  inflates it (a short episode weighs by its length, not as one whole episode);
  an episode that ends in death (E1M3's nukage) counts as a whole episode, so
  dying sooner does not score higher;
- distinct cells over the whole run;
- on my_way_home, the share of the last 20 episodes that reached the vest. An
  episode there ends before its budget only when the vest is picked up (no
  monsters, no damaging floors), so an episode shorter than
  ``game.episode_steps`` is a goal (the run's metrics.jsonl gives each episode's
  last step).

It writes the table as ``suite.md`` and all figures as ``suite.json`` in ``--out``.

``--gym`` runs the same agents on Gymnasium games instead (``GYM_MAPS``: Montezuma's Revenge, its cells
16 x 16 pixels of a room and its rooms counted; a MiniGrid maze of six rooms), with the same figures.

``--jobs N`` runs N runs at a time, each in a fresh process of its own (and,
unless ``--threads`` says otherwise, with one TensorFlow thread per pool, so N
runs share N cores): the figures are those of the same runs one after another
(each run is seeded whole), and ``steps/s`` is that of a run sharing the machine.
``--resume`` keeps the runs of ``--out``'s results.json that the command asks
for (same agent, map, seed, steps and settings) and runs only the others: a
suite of hours that was stopped goes on where it was; a run whose figure was
counted by an older coverage rule (each result's ``coverage_rule``,
:data:`explorer.run.coverage.FIGURE_RULE`; before rule 2 an episode that ended in
death counted with its own steps, before rule 3 a Gymnasium game's end that pays nothing
did) is not kept but run again. results.json is rewritten
whole after each run (a full disk leaves the one before). Ctrl-C or SIGTERM stops
the bench and its ``--jobs`` processes (exit code 130 or 143): a run cut short is not kept as a result. Every run keeps
its folder under ``--out``/runs; a learning agent's holds its two newest checkpoints, each with
the replay (up to ``learner.schedule.replay_mb`` MiB): a 30k-step run takes about 0.6 GB of disk, a
3-seed suite of three learning agents about 22 GB. The tables and ``--resume`` read results.json
and the runs' metrics.jsonl, never a checkpoint: delete the runs' ``checkpoints`` folders when
their policies are not wanted. ``--report DIR ...`` runs
nothing: it merges the results.json of several ``--out`` folders (the baselines
from one, the learning agent from another) into one table, seed by seed, with
the learning agents' averages against ``sticky_prior``'s and sticky's. A result counted by an older
coverage rule is counted again from its run's metrics.jsonl, which says how each episode ended (one
line says so), or refused in one line when its run's files cannot give it exactly.

    python tools/bench_explore.py --steps 50000 --seeds 0 1 2 --agents uniform sticky original episodic
    python tools/bench_explore.py --agents episodic --set learner.algo=td3 --set novelty.embedding=random
    python tools/bench_explore.py --suite --steps 50000 --seeds 0 1 --agents sticky_prior frozen episodic
    python tools/bench_explore.py --suite --steps 30000 --seeds 0 1 2 --agents sticky_prior episodic --jobs 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from explorer.config import MAX_SEED, ConfigError  # noqa: E402
from explorer.core import ExplorerError, Terminated, stack_frames  # noqa: E402
from explorer.files import atomic_write, json_text, remedy  # noqa: E402
from explorer.run.coverage import FIGURE, FIGURE_RULE, LAST, cells_per_budget  # noqa: E402

SIGNALS = ("episodic", "rnd", "forward", "pixel")
#: every agent ``--agents`` takes
AGENTS = ("uniform", "sticky", "sticky_prior", "original", "frozen", *SIGNALS)

#: the maps of ``--suite``: settings of each (my_way_home alone without ``--suite``)
MAPS: dict[str, list[str]] = {
    "my_way_home": ["game.scenario=my_way_home", "game.episode_steps=525"],
    **{name: ["game.scenario=freedoom", "game.wad=freedoom1", f"game.map={name}", 'game.args=["-nomonsters"]',
              "game.episode_steps=1050"] for name in ("E1M1", "E1M2", "E1M3")},
}
#: the Gymnasium games of ``--gym`` (pip install -e '.[gym]'): Montezuma's Revenge in 16-pixel cells of its rooms,
#: a MiniGrid maze of six rooms in grid squares (docs/gym.md)
GYM_MAPS: dict[str, list[str]] = {
    "montezuma": ["game.name=gym", "game.id=ALE/MontezumaRevenge-v5", "game.episode_steps=1000"],
    "multiroom": ["game.name=gym", "game.id=MiniGrid-MultiRoom-N6-v0", 'pad.buttons=["a", "b"]',
                  "game.episode_steps=120"],
}
#: every map a run can name
ALL_MAPS = {**MAPS, **GYM_MAPS}
#: maps where an episode that ends before its budget has reached the goal
GOAL_MAPS = ("my_way_home",)
#: ``learner.schedule.update_every`` of the ``frozen`` agent: no update ever happens
NEVER = 10**12


class OriginalAgent:
    """The original question: a CNN policy trained with the pixel novelty of frames as its loss.

    The first update fails (no gradient reaches the policy); the agent then acts
    with its untrained policy, which is what such a script effectively does.
    """

    def __init__(self, seed: int, obs_shape):
        import keras
        import tensorflow as tf

        from explorer.agent.guard import check_gradients
        from explorer.agent.novelty import pixel_difference
        keras.utils.set_random_seed(seed)
        k, h, w, c = obs_shape
        self.tf = tf
        self.model = keras.Sequential([keras.Input([h, w, k * c]), keras.layers.Rescaling(1 / 255),
                                       keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
                                       keras.layers.Flatten(), keras.layers.Dense(4, activation="tanh")])
        self.opt = keras.optimizers.Adam(1e-3)
        self.pixel_difference = pixel_difference
        self.check_gradients = check_gradients
        self.failure: str | None = None
        self.report: str | None = None

    def close(self) -> None:
        pass

    def act(self, step) -> np.ndarray:
        return self.model(stack_frames(np.asarray(step.obs))[None], training=False).numpy()[0]

    def observe(self, step, action, next_step) -> dict[str, float]:
        if self.failure is not None:
            return {}
        tf = self.tf
        obs, next_obs = np.asarray(step.obs), np.asarray(next_step.obs)

        def loss_fn():
            _ = self.model(stack_frames(obs)[None])
            return -self.pixel_difference(tf.constant(next_obs[-1]), tf.constant(obs))

        try:
            with tf.GradientTape() as tape:
                loss = loss_fn()
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.opt.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))
            self.failure = "no error (unexpected)"
        except Exception as err:  # Keras: "No gradients provided for any variable"
            self.failure = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
            self.report = str(self.check_gradients(loss_fn, self.model.trainable_variables))
        return {}


def episode_figures(ends: list[int], cells: list[int], budget: int, start: int = 0, last: int = LAST,
                    outcomes: list[str | None] | None = None) -> dict:
    """Per-budget coverage and goal share of a run's finished episodes.

    Args:
      ends: the agent step each episode ended at, in order (``metrics.jsonl``).
      cells: distinct cells of each of those episodes.
      budget: the run's episode budget (``summary.json``'s ``episode_budget``: ``game.episode_steps``).
      start: the step the run started at (0 unless resumed).
      last: how many of the newest episodes the figures cover.
      outcomes: how each of those episodes ended (``metrics.jsonl``'s ``outcome``): a death counts as a
        whole episode in ``cells_per_budget``.

    Returns:
      ``cells_per_budget``: :func:`~explorer.run.coverage.cells_per_budget` of the last ``last``
      episodes, sum of cells / sum of steps x ``budget`` (NaN before any); ``cells_mean``: their plain mean;
      ``early``: how many of them ended before ``budget``, and ``early_share``;
      ``early_total``, ``episodes``: the same over the whole run.
    """
    lengths = np.diff(np.asarray([start, *ends], np.int64))
    recent_len, recent_cells = lengths[-last:], np.asarray(cells[-last:], np.float64)
    early = recent_len < budget
    n = len(recent_len)
    return {"cells_per_budget": cells_per_budget(cells, lengths.tolist(), budget, last, outcomes or ()),
            "cells_mean": float(recent_cells.mean()) if n else float("nan"),
            "early": int(early.sum()), "early_share": float(early.mean()) if n else float("nan"),
            "early_total": int((lengths < budget).sum()), "episodes": len(lengths),
            "episode_lengths": lengths.tolist()}


class Stopped(Exception):
    """A run ended before its steps (Ctrl-C, SIGTERM): the bench stops and keeps the runs that finished.

    Attributes:
      signum: the signal that stopped it (the bench exits with ``128 + signum``).
    """

    def __init__(self, message: str, signum: int = signal.SIGINT):
        super().__init__(message, int(signum))  # both, so that it crosses from a --jobs process whole
        self.message, self.signum = message, int(signum)

    def __str__(self) -> str:
        return self.message


#: the fields of a result that the bench reads back (--resume, --report), with their JSON types
RESULT_FIELDS: dict[str, tuple[type, ...]] = {
    "agent": (str,), "map": (str,), "seed": (int,), "steps": (int,), "overrides": (list,),
    "cells_per_budget": (int, float, type(None)), "total_cells": (int, float), "early": (int,),
    "early_share": (int, float, type(None)), "episodes": (int,), "steps_per_s": (int, float, type(None)),
}
#: the fields a result may lack (results.json files written before them), with their JSON types when present
OPTIONAL_FIELDS: dict[str, tuple[type, ...]] = {"coverage_rule": (int,)}
#: the figures written as ``null`` when they are not numbers (JSON has no NaN), read back as NaN
NAN_FIELDS = ("cells_per_budget", "cells_mean", "early_share", "steps_per_s")
#: what :data:`~explorer.run.coverage.FIGURE_RULE` counts, for the messages about results counted otherwise
RULE_SAYS = (f"coverage rule {FIGURE_RULE} (an episode that ended in death counts as a whole episode budget, and a "
             f"Gymnasium game's own end that pays nothing is a death)")


def read_results(path: Path, what: str) -> list[dict]:
    """The runs of a results.json that bench_explore wrote (``null`` figures back as NaN).

    Args:
      path: the file.
      what: what to do instead, ending the message (e.g. "run without --resume").

    Raises:
      SystemExit: one line saying what is wrong with the file (unreadable, not JSON, not a list of results).
    """
    try:
        runs = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        why = "it is a folder" if path.is_dir() else getattr(err, "strerror", None) or str(err)
        raise SystemExit(f"bench_explore: cannot read {path} ({why}); give a results.json written by bench_explore, "
                         f"or {what}") from None
    except ValueError as err:
        raise SystemExit(f"bench_explore: {path} is not readable JSON ({err}); move it away and run again, or "
                         f"{what}") from None
    if not isinstance(runs, list):
        raise SystemExit(f"bench_explore: {path} holds a JSON {type(runs).__name__}, not the list of runs bench_explore "
                         f"writes; move it away and run again, or {what}")
    for i, r in enumerate(runs):
        bad = [k for k, kinds in RESULT_FIELDS.items()
               if not isinstance(r, dict) or not isinstance(r.get(k, ...), kinds) or isinstance(r.get(k), bool)]
        bad += [k for k, kinds in OPTIONAL_FIELDS.items() if isinstance(r, dict) and k in r
                and (not isinstance(r[k], kinds) or isinstance(r[k], bool))]
        if bad:
            raise SystemExit(f"bench_explore: run {i} of {path} is not a result of bench_explore (missing or wrong: "
                             f"{', '.join(bad)}); move the file away and run again, or {what}")
        for k in NAN_FIELDS:
            if k in r and r[k] is None:
                r[k] = math.nan
    return runs


def write_results(path: Path, runs: list[dict]) -> None:
    """``runs`` as strict JSON at ``path``, whole or not at all (a full disk leaves the file there as it was).

    Raises:
      SystemExit: it cannot be written; one line saying why and what to do.
    """
    try:
        atomic_write(path, json_text(runs))
    except OSError as err:
        raise SystemExit(f"bench_explore: cannot write {path}: {err.strerror or err}; the {path.name} there is as it "
                         f"was; {remedy(err, 'choose another folder (--out)')}, then continue with the same command "
                         f"and --resume") from None


def _game_sets(overrides: list[str]) -> list[str]:
    """The overrides every agent takes: the game's, the pad's (how buttons are sent) and ``run.threads``."""
    return [o for o in overrides if o.strip().startswith(("game.", "pad.", "run.threads"))]


def _recorded_overrides(agent_name: str, overrides: list[str]) -> list[str]:
    """The overrides a run of ``agent_name`` took, as its result records them."""
    return _game_sets(overrides) if agent_name in ("uniform", "sticky", "original") else list(overrides)


#: the environment variable by which ``--reach-held-out`` (a folder), ``--reach-own`` (``own:`` and a folder) or
#: ``--reach`` (a weights file) reaches the ``--jobs`` processes
HELD_OUT = "EXPLORER_BENCH_REACH_HELD_OUT"
#: how ``--reach-own``'s folder is told from ``--reach-held-out``'s in :data:`HELD_OUT`
OWN = "own:"


def reach_weights(map_name: str) -> str | None:
    """The reach prior's weights a run on ``map_name`` plays with under ``--reach-held-out``, ``--reach-own``
    or ``--reach`` (None: the shipped)."""
    given = os.environ.get(HELD_OUT)
    if not given or map_name not in ALL_MAPS:
        return None
    if given.startswith(OWN):
        return str(Path(given.removeprefix(OWN)) / f"reach_own_{map_name}.npz")
    return given if given.endswith(".npz") else str(Path(given) / f"reach_without_{map_name}.npz")


def _done(result: dict, task: tuple) -> bool:
    """Whether ``result`` (from results.json) is the run ``task`` asks for."""
    name, seed, steps, overrides, _, map_name = task
    return ((result.get("agent"), result.get("map"), result.get("seed"), result.get("steps"), result.get("overrides"),
             result.get("reach_weights"))
            == (name, map_name, seed, steps, _recorded_overrides(name, overrides), reach_weights(map_name)))


def run(agent_name: str, seed: int, steps: int, overrides: list[str], out: Path, map_name: str = "my_way_home") -> dict:
    """One run through ``explorer explore``'s own path (ring, loop, agent, coverage); returns its figures.

    ``overrides`` reach the learning agents; those of the ``game`` section and ``run.threads`` reach every agent.
    """
    from explorer.config import load, quote
    from explorer.run.explore import explore

    game_sets = _game_sets(overrides)
    sets = [f"run.seed={seed}", f"run.steps={steps}",  # seeds the game, the learner and the novelty networks
            *ALL_MAPS[map_name], *game_sets, f"run.dir={quote(str(out / 'runs'))}",
            f"run.log_every={max(steps // 20, 1)}"]
    agent = None
    if agent_name == "uniform":
        sets.append("run.agent=random")
    elif agent_name == "sticky":
        sets += ["run.agent=sticky", "run.sticky_steps=8"]
    elif agent_name == "sticky_prior":  # the learner's stick range and prior, without learning
        sets += ["run.agent=sticky_prior", "run.sticky_steps=8", *overrides]
    elif agent_name == "original":
        sets.append("run.agent=random")  # replaced by the agent below
        config = load(None, sets)
        agent = OriginalAgent(seed, (config.observation.stack, config.observation.height, config.observation.width,
                                     1 if config.observation.grayscale else 3))
    elif agent_name == "frozen":
        sets += ["run.agent=explorer", *overrides, f"learner.schedule.update_every={NEVER}"]
    else:
        sets += ["run.agent=explorer", f"novelty.signal={agent_name}", *overrides]
    config = load(None, sets, game=True)  # the settings the game brings, as explorer explore takes them
    weights = reach_weights(map_name)
    from explorer.agent import reach
    shipped = reach.WEIGHTS
    if weights:  # --reach-held-out (the prior this run's agent reads never saw this map) or --reach
        reach.WEIGHTS = Path(weights)
    try:
        summary = explore(config, progress=False, actor=agent)
    finally:
        reach.WEIGHTS = shipped
    if summary["steps"] < steps:  # a stopped run is not a result: --resume runs it again
        from explorer.run.safety import signal_number
        raise Stopped(f"{map_name} {agent_name} s{seed} stopped by {summary['stopped_by']} at step "
                      f"{summary['steps']} of {steps}", signal_number(str(summary["stopped_by"])) or signal.SIGINT)
    lines = (Path(summary["run_dir"]) / "metrics.jsonl").read_text().splitlines()
    episodes = [r for r in map(json.loads, lines) if "episode" in r]
    curve = [(r["step"], r["cells"]) for r in episodes]
    per_episode = summary["cells_per_episode"]
    seconds = summary["seconds"]
    figures = episode_figures([r["step"] for r in episodes], [r["cells"] for r in episodes],
                              summary["episode_budget"], start=summary["resumed_at"],
                              outcomes=[r.get("outcome") for r in episodes])
    result = {"agent": agent_name, "map": map_name, "seed": seed, "steps": steps, "run_dir": summary["run_dir"],
              "overrides": _recorded_overrides(agent_name, overrides), "coverage_rule": FIGURE_RULE,
              "reach_weights": weights,
              "episode_steps": config.game.episode_steps, "episode_budget": summary["episode_budget"],
              "per_episode": per_episode, "curve": curve,
              "total_cells": summary["distinct_cells"], "rooms": summary.get("distinct_rooms"),
              "steps_per_s": summary["steps_per_s"],
              "updates_per_s": summary["updates"] / seconds if seconds else 0.0, "wall_s": seconds,
              "failure": getattr(agent, "failure", None), "guard": getattr(agent, "report", None), **figures}
    goal = f", goal in {figures['early']} of the last {min(figures['episodes'], 20)}" if map_name in GOAL_MAPS else ""
    print(f"[{map_name} {agent_name} s{seed}] {figures['cells_per_budget']:.1f} {FIGURE}{goal}, "
          f"{result['total_cells']} cells, {result['steps_per_s']:.1f} steps/s, {result['updates_per_s']:.1f} updates/s",
          flush=True)
    return result


def _runs(tasks: list[tuple], jobs: int):
    """The results of :func:`run` for each task, in the order they finish: one after another in this
    process, or ``jobs`` at a time, each in a fresh process (TensorFlow and the engine start anew)."""
    if jobs == 1:
        for task in tasks:
            yield run(*task)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), max_tasks_per_child=1) as pool:
        futures = [pool.submit(run, *task) for task in tasks]
        try:
            for future in as_completed(futures):
                yield future.result()
        except BaseException:  # a run failed or stopped, or a signal reached this process: stop the others
            _stop_workers(pool)
            raise


#: how long the runs of ``--jobs`` processes have to stop at a step once told (a checkpoint, the engine closed)
STOP_S = 120.0


def _stop_workers(pool) -> None:
    """Stop every process of ``pool`` and wait for them.

    SIGTERM stops the runs under way at a step, as it stops ``explorer explore``, and closes their engines;
    one that has not ended after :data:`STOP_S` is killed (its engine dies with it). The pool starts a new
    process in place of each that ends, for the runs queued: those are killed as they appear, before
    they start a run.
    """
    import threading
    import time

    import psutil

    def workers() -> list[psutil.Process]:
        found = []
        for child in psutil.Process().children():
            try:
                if any("spawn_main" in part for part in child.cmdline()):
                    found.append(child)
            except psutil.Error:
                continue
        return found

    running = {p.pid for p in workers()}
    done = threading.Event()

    def stop() -> None:
        told, deadline = set(), time.monotonic() + STOP_S
        while not done.is_set():
            for child in workers():
                try:
                    if child.pid not in running or time.monotonic() > deadline:
                        child.kill()
                    elif child.pid not in told:
                        child.terminate()
                        told.add(child.pid)
                except psutil.Error:
                    pass
            done.wait(0.1)

    stopper = threading.Thread(target=stop, name="stop --jobs processes", daemon=True)
    stopper.start()
    try:
        pool.shutdown(wait=True, cancel_futures=True)
    finally:
        done.set()
        stopper.join()


def _mean_std(values: list[float]) -> str:
    v = np.asarray(values, np.float64)
    if v.size == 0 or np.all(np.isnan(v)):
        return "–"
    return f"{np.nanmean(v):.1f} ± {np.nanstd(v):.1f}" if v.size > 1 else f"{v[0]:.1f}"


def suite_table(results: list[dict], agents: list[str], maps: list[str]) -> tuple[str, list[dict]]:
    """The markdown table of a suite and its rows as dicts: per map and agent (mean ± std over seeds),
    then per agent averaged over the maps (the mean of the per-map means)."""
    rows: list[dict] = []
    for name in agents:
        per_map = []
        for m in maps:
            rs = [r for r in results if r["agent"] == name and r["map"] == m]
            if not rs:
                continue
            row = {"map": m, "agent": name, "runs": len(rs),
                   "cells_per_budget": [r["cells_per_budget"] for r in rs],
                   "total_cells": [r["total_cells"] for r in rs],
                   "goal_share": [r["early_share"] for r in rs] if m in GOAL_MAPS else None,
                   "steps_per_s": [r["steps_per_s"] for r in rs]}
            per_map.append(row)
            rows.append(row)
        if len(per_map) > 1:
            rows.append({"map": "average", "agent": name, "runs": sum(r["runs"] for r in per_map),
                         "cells_per_budget": [float(np.nanmean(r["cells_per_budget"])) for r in per_map],
                         "total_cells": [float(np.mean(r["total_cells"])) for r in per_map],
                         "goal_share": None, "steps_per_s": [float(np.mean(r["steps_per_s"])) for r in per_map]})
    lines = ["| map | agent | runs | cells per episode budget (last 20) | distinct cells (run) | goal reached (last 20) | steps/s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        goal = "–" if r["goal_share"] is None else _mean_std([100 * g for g in r["goal_share"]]) + " %"
        spread = "over maps" if r["map"] == "average" else ""
        lines.append(f"| {r['map']} | {r['agent']} | {r['runs']} | {_mean_std(r['cells_per_budget'])} {spread} | "
                     f"{_mean_std(r['total_cells'])} | {goal} | {np.mean(r['steps_per_s']):.0f} |".replace("  |", " |"))
    return "\n".join(lines) + "\n", rows


#: the baselines, in the order a report lists them (learning agents follow)
BASELINES = ("uniform", "sticky", "sticky_prior", "original", "frozen")


def per_seed_table(results: list[dict], agents: list[str], maps: list[str]) -> str:
    """Markdown: each agent's cells per episode budget and distinct cells per map and seed, and the
    average over maps per seed; then, for each learning agent, its averages against sticky_prior's and sticky's."""
    seeds = sorted({r["seed"] for r in results})
    head = " | ".join(f"seed {s}" for s in seeds)
    lines = [f"| agent | map | {head} |", "|---|---|" + "---|" * len(seeds)]
    averages: dict[str, dict[int, tuple[float, float]]] = {}  # agent -> seed -> (cells, distinct), seeds on every map
    for name in agents:
        per_seed: dict[int, list[tuple[float, float]]] = {s: [] for s in seeds}
        for m in maps:
            cells = []
            for seed in seeds:
                rs = [r for r in results if (r["agent"], r["map"], r["seed"]) == (name, m, seed)]
                if rs:
                    per_seed[seed].append((rs[0]["cells_per_budget"], rs[0]["total_cells"]))
                    goal = f", goal {rs[0]['early']}/{min(rs[0]['episodes'], 20)}" if m in GOAL_MAPS else ""
                    cells.append(f"{rs[0]['cells_per_budget']:.1f} ({rs[0]['total_cells']}{goal})")
                else:
                    cells.append("–")
            lines.append(f"| {name} | {m} | " + " | ".join(cells) + " |")
        complete = [s for s in seeds if len(per_seed[s]) == len(maps)]
        lines.append(f"| {name} | **average** | " + " | ".join(
            f"**{np.mean([c for c, _ in per_seed[s]]):.1f}** ({np.mean([d for _, d in per_seed[s]]):.0f})"
            if s in complete else "–" for s in seeds) + " |")
        averages[name] = {s: (float(np.mean([c for c, _ in per_seed[s]])), float(np.mean([d for _, d in per_seed[s]])))
                          for s in complete}
    lines.append("")
    for name in (a for a in agents if a not in BASELINES):
        for base in ("sticky_prior", "sticky"):
            common = sorted(set(averages[name]) & set(averages.get(base, {})))
            if common:  # over the seeds both ran on every map
                c = np.mean([averages[name][s] for s in common], axis=0)
                d = np.mean([averages[base][s] for s in common], axis=0)
                lines.append(f"- {name} against {base} (seeds {', '.join(map(str, common))}): {c[0] / d[0]:.2f}x the "
                             f"cells per episode ({c[0]:.1f} / {d[0]:.1f}), {c[1] / d[1]:.2f}x the distinct cells "
                             f"({c[1]:.0f} / {d[1]:.0f})")
    return "\n".join(lines) + "\n"


def recount(result: dict, folder: Path) -> tuple[dict | None, str]:
    """``result`` with its episode figures counted again by today's rule (:data:`FIGURE_RULE`) from its run's
    ``metrics.jsonl`` and ``summary.json``, and ``""``; or None and why that cannot be done exactly.

    The run directory is the one the result names, else the folder of that name under ``folder / "runs"``
    (where the bench puts its runs; a relative name was relative to the bench's working directory). Every
    episode line must say how the episode ended (``outcome``), and the episodes must be the result's own.
    """
    named = Path(str(result.get("run_dir") or ""))
    if not named.name:
        return None, "it names no run directory"
    run_dir = next((d for d in (named, folder / "runs" / named.name) if (d / "metrics.jsonl").is_file()), None)
    if run_dir is None:
        return None, f"its run's metrics.jsonl is not at {named} (nor under {folder / 'runs'})"
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        episodes = [r for r in map(json.loads, lines) if isinstance(r, dict) and "episode" in r]
        if not all("outcome" in r for r in episodes):
            return None, f"{run_dir / 'metrics.jsonl'} does not say how each episode ended"
        if any(r["outcome"] == "end" for r in episodes):  # a Gymnasium game's end, before it said goal or death
            return None, f"{run_dir / 'metrics.jsonl'} does not say whether the game's ends were goals or deaths"
        cells = [r["cells"] for r in episodes]
        figures = episode_figures([r["step"] for r in episodes], cells, summary["episode_budget"],
                                  start=summary["resumed_at"], outcomes=[r["outcome"] for r in episodes])
    except (OSError, ValueError, KeyError, TypeError) as err:
        return None, f"{run_dir}'s summary.json and metrics.jsonl do not read whole ({type(err).__name__}: {err})"
    if (figures["episodes"] != result["episodes"] or cells != result.get("per_episode", cells)
            or figures["episode_lengths"] != result.get("episode_lengths", figures["episode_lengths"])):
        return None, f"the episodes of {run_dir} are not the result's"
    return {**result, **figures, "coverage_rule": FIGURE_RULE}, ""


def report(dirs: list[str], out: Path) -> int:
    """Merge the results.json of several ``--out`` folders into one suite table (suite.md in ``out``).

    A result counted by an older coverage rule than :data:`FIGURE_RULE` is counted again from its run's files
    (:func:`recount`, said in one line), or refused in one line when they cannot give it exactly.
    """
    results: dict[tuple, dict] = {}
    found_in: dict[tuple, Path] = {}  # the folder each result is taken from
    settings: dict[str, tuple[list[str], Path]] = {}  # agent -> its settings (run.threads aside), where first seen
    for d in dirs:
        path = Path(d) / "results.json"
        for r in read_results(path, "leave that folder out of --report"):
            mine = [o for o in r["overrides"] if not o.startswith("run.threads")]
            first, where = settings.setdefault(r["agent"], (mine, path))
            if mine != first:
                raise SystemExit(f"bench_explore --report: {r['agent']} ran with {mine} in {path} but with {first} in "
                                 f"{where}; report one configuration of an agent at a time")
            key = (r["agent"], r["map"], r["seed"])
            if key not in results:  # the same run twice: the first folder given wins
                results[key], found_in[key] = r, Path(d)
    recounted: dict[Path, int] = {}
    for key, r in results.items():
        if r.get("coverage_rule") == FIGURE_RULE:
            continue
        folder = found_in[key]
        fresh, why = recount(r, folder)
        if fresh is None:
            raise SystemExit(f"bench_explore --report: {folder}: {r['map']} {r['agent']} s{r['seed']} was counted "
                             f"before {RULE_SAYS} and cannot be counted again: {why}; run that folder's command "
                             f"again with --resume (it runs such results again), or leave the folder out of --report")
        results[key] = fresh
        recounted[folder] = recounted.get(folder, 0) + 1
    if recounted:
        n = sum(recounted.values())
        whose = "their runs'" if n > 1 else "its run's"
        print(f"bench_explore --report: {n} stored result{'s were' if n > 1 else ' was'} counted before {RULE_SAYS}; "
              f"counted again from {whose} metrics.jsonl: "
              + ", ".join(f"{k} in {folder}" for folder, k in recounted.items()), flush=True)
    budgets = {(r["map"], r["steps"]) for r in results.values()}
    if len({m for m, _ in budgets}) != len(budgets):
        raise SystemExit(f"bench_explore --report: the folders mix step budgets on a map ({sorted(budgets)}); "
                         f"report one budget at a time")
    found = {r["agent"] for r in results.values()}
    agents = [a for a in BASELINES if a in found] + sorted(found - set(BASELINES))
    maps = [m for m in ALL_MAPS if any(r["map"] == m for r in results.values())]
    runs = list(results.values())
    table, _ = suite_table(runs, agents, maps)
    text = table + "\nPer seed: cells per episode budget (distinct cells; on my_way_home, the goal in the last 20)\n\n" \
        + per_seed_table(runs, agents, maps)
    _make_out(out)
    atomic_write(out / "suite.md", text)
    print(text + f"\nwrote {out / 'suite.md'}")
    return 0


def _make_out(out: Path) -> None:
    """Create the ``--out`` folder, or say in one line why it cannot be."""
    if out.exists() and not out.is_dir():
        raise SystemExit(f"bench_explore: --out {out} is a file, not a folder; give a folder for the results")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SystemExit(f"bench_explore: cannot create --out {out}: {err.strerror or err}; "
                         f"{remedy(err, 'choose another folder (--out)')}") from None


def _number(kind: type, low: int, high: int | None = None):
    """An argparse type: an integer from ``low`` to ``high`` (no bound: None)."""
    def parse(text: str) -> int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {low} or more" + (f" and at most {high}" if high is not None
                                                                         else "") + f", got {text}")
        return value
    parse.__name__ = "integer"
    return parse


def _agent(text: str) -> str:
    if text not in AGENTS:
        raise argparse.ArgumentTypeError(f"{text!r} is not an agent; choose from {', '.join(AGENTS)}")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench_explore", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=_number(int, 1), default=50_000, help="agent steps per run (per map with --suite)")
    ap.add_argument("--seeds", type=_number(int, 0, MAX_SEED), nargs="+", default=[0, 1, 2])
    ap.add_argument("--agents", type=_agent, nargs="+", default=["uniform", "sticky", "original", *SIGNALS],
                    help=f"uniform, sticky, sticky_prior (sticky moved by learner.actions.action_prior, on the learner's stick range), original, "
                         f"frozen (the default learning agent, learning off), or a novelty signal ({', '.join(SIGNALS)})")
    ap.add_argument("--suite", action="store_true", help=f"run on every map of the suite ({', '.join(MAPS)})")
    ap.add_argument("--gym", action="store_true", help=f"run on the Gymnasium suite ({', '.join(GYM_MAPS)}) instead")
    ap.add_argument("--maps", nargs="+", choices=list(ALL_MAPS), help="run on these maps of the suites only")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="learner.KEY=VALUE or novelty.KEY=VALUE for the learning agents; game.KEY=VALUE for all agents "
                         "and run.threads for all agents (after each map's own settings)")
    ap.add_argument("--threads", type=_number(int, 0), default=0,
                    help="TensorFlow inter- and intra-op threads, every agent (0: run.threads)")
    ap.add_argument("--jobs", type=_number(int, 1), default=1, help="runs at a time, each in a process of its own "
                    "(with one TensorFlow thread per pool unless --threads is given)")
    ap.add_argument("--resume", action="store_true", help="keep the runs of --out's results.json that this command "
                    "asks for (same agent, map, seed, steps and settings) and run only the others")
    ap.add_argument("--report", nargs="+", metavar="DIR", help="run nothing: merge the results.json of these --out "
                    "folders (one step budget per map) into one table with every seed, written as suite.md in --out")
    ap.add_argument("--reach-held-out", metavar="DIR", help="each Doom map's reach prior is DIR/reach_without_<map>.npz "
                    "(tools/traversability.py --models-only): one never trained on that map's pictures")
    ap.add_argument("--reach-own", metavar="DIR", help="each map's reach prior is DIR/reach_own_<map>.npz "
                    "(tools/traversability.py --models-only --protocol own --labels reachability, or pixels, the "
                    "better of the two on the Gymnasium games): one trained on that map's own play at another seed, "
                    "from its frames and actions alone")
    ap.add_argument("--reach", metavar="NPZ", help="every Doom map's reach prior is this weights file (a candidate "
                    "to ship: tools/traversability.py --ship or --join), not the shipped one")
    ap.add_argument("--out", default="runs/bench_explore", help="folder for results.json, coverage.png, suite.md, suite.json and the runs")
    args = ap.parse_args(argv)
    try:
        if args.report:
            return report(args.report, Path(args.out))
        return _bench(args)
    except (ExplorerError, ConfigError) as err:  # a setting of --set, a game that cannot start: one line
        print(f"bench_explore: {err}", file=sys.stderr)
        return 2 if isinstance(err, ConfigError) else 1
    finally:
        os.environ.pop(HELD_OUT, None)  # --reach-held-out is this command's only


def _bench(args: argparse.Namespace) -> int:
    from explorer.config import load
    from explorer.run.safety import terminate_raises

    here = Path(__file__).resolve().parent
    for path in (str(here.parent), str(here)):  # explorer, and this script by name for the --jobs processes
        if path not in sys.path:
            sys.path.insert(0, path)
    threads = args.threads or (1 if args.jobs > 1 else 0)
    if threads:
        args.overrides.append(f"run.threads=[{threads},{threads}]")
    maps = args.maps or (list(GYM_MAPS) if args.gym else list(MAPS) if args.suite else ["my_way_home"])
    load(None, args.overrides, game=True)  # a wrong --set is said now, not by each run
    os.environ.pop(HELD_OUT, None)
    if sum(map(bool, (args.reach_held_out, args.reach_own, args.reach))) > 1:
        print("bench_explore: --reach-held-out, --reach-own and --reach each choose the reach prior: give one",
              file=sys.stderr)
        return 2
    if args.reach and not args.reach.endswith(".npz"):
        print(f"bench_explore: --reach {args.reach}: give a weights file ending in .npz", file=sys.stderr)
        return 2
    if args.reach_held_out or args.reach_own or args.reach:  # for this command and its --jobs processes (main
        os.environ[HELD_OUT] = (OWN + str(Path(args.reach_own).resolve()) if args.reach_own  # clears it)
                                else str(Path(args.reach_held_out or args.reach).resolve()))
        missing = [(m, w) for m in maps if (w := reach_weights(m)) and not Path(w).is_file()]
        if missing:
            os.environ.pop(HELD_OUT)
            gym = " --gym" if missing[0][0] in GYM_MAPS else ""
            how = ("--models-only --out " + args.reach_held_out if args.reach_held_out
                   else f"--models-only{gym} --protocol own --labels {'pixels' if gym else 'reachability'} "
                   f"--out {args.reach_own}" if args.reach_own
                   else "--ship " + args.reach)
            print(f"bench_explore: {missing[0][1]} is missing: make it with python tools/traversability.py {how}",
                  file=sys.stderr)
            return 2
    out = Path(args.out)
    _make_out(out)
    tasks = [(name, seed, args.steps, args.overrides, out, map_name)
             for map_name in maps for name in args.agents for seed in args.seeds]
    results = []
    if args.resume and (out / "results.json").exists():
        previous = read_results(out / "results.json", "run without --resume")
        # a run asked for whose figure was counted by an older rule is not kept: it runs again
        stale = [r for r in previous if r.get("coverage_rule") != FIGURE_RULE and any(_done(r, t) for t in tasks)]
        previous = [r for r in previous if not any(r is k for k in stale)]
        for t in tasks:  # the first earlier run of each task asked for
            results += [r for r in previous if _done(r, t)][:1]
        others = [r for r in previous if not any(r is k for k in results)]  # kept in results.json, not in the table
        tasks_run = [t for t in tasks if not any(_done(r, t) for r in results)]
        one = len(stale) == 1
        dropped = (f"; {len(stale)} {'run' if one else 'runs'} stored there {'was' if one else 'were'} counted before "
                   f"{RULE_SAYS} and {'is' if one else 'are'} not kept: {'it runs' if one else 'they run'} again"
                   if stale else "")
        print(f"resuming: {len(tasks) - len(tasks_run)} of {len(tasks)} runs are in {out / 'results.json'}; "
              f"running the other {len(tasks_run)}{dropped}", flush=True)
    else:
        others, tasks_run = [], tasks
    try:
        with terminate_raises():  # SIGTERM between runs, or in this process while --jobs processes run them
            for r in _runs(tasks_run, args.jobs):
                results.append(r)
                write_results(out / "results.json", results + others)
                if r["failure"]:
                    print(f"[{r['agent']} s{r['seed']}] update failed: {r['failure']}\n{r['guard']}", flush=True)
    except (Stopped, KeyboardInterrupt, Terminated) as err:
        why = (str(err) if isinstance(err, Stopped) else f"stopped by {err}" if isinstance(err, Terminated)
               else "Ctrl-C")
        print(f"bench_explore: {why}; the {len(results)} finished runs are in {out / 'results.json'}; "
              f"continue with the same command and --resume", file=sys.stderr, flush=True)
        return 128 + (err.signum if isinstance(err, (Stopped, Terminated)) else signal.SIGINT)
    order = {(t[5], t[0], t[1]): i for i, t in enumerate(tasks)}
    results.sort(key=lambda r: order[(r["map"], r["agent"], r["seed"])])
    write_results(out / "results.json", results + others)
    table, rows = suite_table(results, args.agents, maps)
    atomic_write(out / "suite.md", table)
    atomic_write(out / "suite.json", json_text({"maps": {m: ALL_MAPS[m] for m in maps}, "steps": args.steps,
                                                 "seeds": args.seeds, "overrides": args.overrides,
                                                 "table": rows, "runs": results}, indent=1))
    print("\n" + table)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(maps), figsize=(8 * len(maps), 5), squeeze=False)
    for ax, map_name in zip(axes[0], maps, strict=True):
        for r in (r for r in results if r["map"] == map_name):
            if r.get("curve"):
                xs, ys = zip(*r["curve"], strict=True)
                smooth = np.convolve(ys, np.ones(5) / 5, mode="valid") if len(ys) >= 5 else ys
                ax.plot(xs[len(xs) - len(smooth):], smooth, label=f"{r['agent']} s{r['seed']}")
        ax.set_xlabel("agent steps")
        ax.set_ylabel("cells visited per episode (5-episode mean)")
        ax.set_title(f"{map_name} exploration coverage")
        ax.legend(fontsize=7)
    fig.savefig(out / "coverage.png", dpi=100)
    print(f"wrote {out / 'results.json'}, {out / 'suite.md'}, {out / 'suite.json'} and {out / 'coverage.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
