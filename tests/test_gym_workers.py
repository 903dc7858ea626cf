"""A Gymnasium game behind ``explore --workers N``, the parts that need no Ray: a worker builds the game
with its own seed, its reports carry what single-process coverage counts (positions with their room,
or frame cells, labelled), an episode the env cuts short bootstraps, and the run's coverage and picture
of all workers are laid out as one run's."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.config import load
from explorer.run.coverage import MAP_CELLS, Coverage
from explorer.run.workers import Worker

gym = pytest.importorskip("gymnasium")

from test_gym_env import Corridor  # noqa: E402  (the corridor of the env tests, registered with a time limit)

from explorer.envs.gym.positions import FRAME_CELL_LABEL, FrameCell, Position  # noqa: E402

TINY = ["game.name=gym", "observation.height=16", "observation.width=16", "learner.schedule.batch_size=8",
        "learner.networks.filters=[4]", "learner.networks.hidden=16", "learner.networks.feature=16", "learner.schedule.replay_mb=4",
        "novelty.signal=pixel", "learner.schedule.warmup_steps=1000"]
CORRIDOR = "explorer-tests/Corridor-v0"


if CORRIDOR not in gym.envs.registration.registry:
    # the env cuts an episode after 3 steps (TimeLimit): fewer than the 5 that reach the end
    gym.register(CORRIDOR, entry_point=Corridor, max_episode_steps=3)


def corridor(*sets: str):
    return load(None, [*TINY, f"game.id={CORRIDOR}", 'game.actions={"0" = {}, "1" = {walk_x = 1}}', *sets])


def collect(worker: Worker, steps: int):
    worker.collect(steps, 0, -1, None)
    return worker.collect(0, steps, -1, None)


def test_an_episode_the_env_cuts_short_bootstraps_and_explorers_budget_does_not():
    cut = Worker(corridor("game.episode_steps=100"), 0)
    try:
        batch, report = collect(cut, 12)
    finally:
        cut.stop()
    assert report.outcomes == ["truncated"] * 4 and report.ends == [3, 7, 11, 15]
    assert report.end_steps == [3, 6, 9, 12]  # each episode's last step, counted in the batch's steps
    assert report.budget == 3  # the game's own time limit, shorter than game.episode_steps
    assert len(batch) > 0 and (batch.discount > 0).all()  # the game goes on after a cut: every transition bootstraps
    budget = Worker(corridor("game.episode_steps=2"), 0)  # ends each episode before the env would cut it
    try:
        batch, report = collect(budget, 12)
    finally:
        budget.stop()
    assert report.outcomes == ["timeout"] * 6 and report.end_steps == [2, 4, 6, 8, 10, 12]
    assert report.budget == 2  # explorer's own, shorter than the game's
    assert (batch.discount == 0).sum() >= 6  # each episode's last transition: nothing follows


def test_a_workers_report_carries_positions_with_the_games_cell_or_labelled_frame_cells():
    seen = Worker(corridor("game.episode_steps=100", "game.cell=20"), 0)
    try:
        _, report = collect(seen, 6)
    finally:
        seen.stop()
    assert report.cell == 20.0 and len(report.places) == 8  # 2 episodes: each one's first place, then one per step
    assert all(isinstance(p, Position) and p.y == 5.0 and p.x in (0, 10, 20, 30) for p in report.places)
    blind = Worker(load(None, [*TINY, f"game.id={CORRIDOR}", 'game.actions={"0" = {}, "1" = {walk_x = 1}}',
                               'game.kwargs={report = false}']), 1)
    try:
        _, report = collect(blind, 6)
    finally:
        blind.stop()
    assert all(isinstance(p, FrameCell) and len(p.key) == 88 for p in report.places)
    cov = Coverage(report.cell)
    for p in report.places:
        cov.add_place(p)
    assert cov.label == FRAME_CELL_LABEL and 1 <= len(cov.all_cells) <= 4 and cov.map_cells() == []


def test_each_worker_plays_its_own_seed_of_the_game():
    pytest.importorskip("minigrid")
    # MiniGrid's MultiRoom draws its rooms from the reset's seed: the workers' first positions tell them apart
    sets = ["game.id=MiniGrid-MultiRoom-N2-S4-v0", "game.episode_steps=50"]
    starts = set()
    for index in range(3):
        worker = Worker(load(None, [*TINY, *sets]), index)
        try:
            _, report = collect(worker, 2)
        finally:
            worker.stop()
        assert report.cell == 1.0 and all(isinstance(p, Position) and p.room is None for p in report.places)
        starts.add(report.places[0])
    assert len(starts) > 1, starts


def test_all_workers_coverage_is_one_runs_rooms_laid_side_by_side_alike(tmp_path):
    from explorer.run.plots import plot_workers

    zero, one = Coverage(16.0), Coverage(16.0)
    zero.add_place(Position(20.0, 200.0, room=1))
    one.add_place(Position(20.0, 200.0, room=2))
    one.add_place(Position(40.0, 200.0, room=2))
    both = Coverage.union([zero, one])
    assert len(both.all_cells) == 3 and both.rooms() == {1, 2} and both.label == MAP_CELLS
    # worker 1 never saw room 1: its room 2 is still drawn one stride right of room 1, as in one run's picture
    assert both.room_stride() == 4
    np.testing.assert_allclose(one.plot_xy(both)[:, 0], [20.0 + 4 * 16, 40.0 + 4 * 16])
    np.testing.assert_allclose(one.plot_xy()[:, 0], [20.0, 40.0])  # alone, it is its own first room
    assert plot_workers([zero, one], tmp_path / "rooms.png").stat().st_size > 1000
    frames = Coverage()
    frames.add_place(FrameCell(b"\x00" * 88))
    assert Coverage.union([Coverage(), frames]).label == FRAME_CELL_LABEL
    assert plot_workers([frames], tmp_path / "frames.png").stat().st_size > 1000
