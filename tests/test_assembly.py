"""The run assembly: the exits every mode relies on (checkpoints kept once, not of diverged weights, the
loop's parts closed before the run directory), the resume check and the coverage figures, said once."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import pytest

from explorer.config import load
from explorer.core import ExplorerError, Stopped
from explorer.run.assembly import Assembly, continue_run
from explorer.run.coverage import Coverage, coverage_summary, finish_episode
from explorer.run.driver import NonFiniteAction


class FakeCheckpointer:
    def __init__(self, directory: Path):
        self.directory = directory
        self.saved: list[int] = []
        self.failed = False

    def save(self, step: int) -> str:
        self.saved.append(step)
        return f"{self.directory}/learner-{step}"


def assembly(tmp_path: Path) -> Assembly:
    config = load(None, [f"run.dir={str(tmp_path)!r}"])
    return Assembly(config, "explore", setup=False)


@pytest.mark.parametrize(("err", "saved"), [(None, [7]), (RuntimeError("broken"), [7]), (NonFiniteAction("nan"), [])])
def test_the_last_checkpoint_is_written_on_every_way_out_but_not_of_diverged_weights(tmp_path, err, saved):
    steps = [0]
    a = assembly(tmp_path)
    a.checkpointer = FakeCheckpointer(tmp_path)
    settled: list[bool] = []
    with pytest.raises(type(err)) if err is not None else contextlib.nullcontext(), a:
        a.checkpoint_on_exit(lambda: steps[0], settle=lambda: settled.append(True))
        steps[0] = 7
        if err is not None:
            raise err
    assert a.checkpointer.saved == saved
    assert settled == ([True] if saved else [])  # the weights are settled before they are kept


def test_keep_before_the_summary_is_not_repeated_on_the_way_out_and_a_failed_save_is_not_tried_again(tmp_path):
    a = assembly(tmp_path)
    a.checkpointer = FakeCheckpointer(tmp_path)
    with a:
        keep = a.checkpoint_on_exit(lambda: 5)
        assert keep() == f"{tmp_path}/learner-5"
    assert a.checkpointer.saved == [5]
    b = assembly(tmp_path)
    b.checkpointer = FakeCheckpointer(tmp_path)
    b.checkpointer.failed = True
    with b:
        b.checkpoint_on_exit(lambda: 5)
    assert b.checkpointer.saved == []
    c = assembly(tmp_path)
    c.checkpointer = FakeCheckpointer(tmp_path)
    with c:
        c.checkpoint_on_exit(lambda: 3, since=3)  # a resumed run that did no step writes nothing
    assert c.checkpointer.saved == []


def test_the_loop_closes_its_parts_in_reverse_before_the_run_directory(tmp_path):
    closed: list[str] = []
    with assembly(tmp_path) as a:
        run = a.open_run()
        a.stack.callback(closed.append, "run stack")
        with a.loop() as stack:
            stack.callback(closed.append, "env")
            a.stack.callback(closed.append, "recorder")
        assert closed == ["recorder", "env"]
        run.write_summary({"steps": 1})  # the run directory is still open for the summary
    assert closed == ["recorder", "env", "run stack"]
    assert (run.path / "summary.json").is_file()


def test_a_run_stopped_at_once_says_what_it_kept(tmp_path):
    with pytest.raises(Stopped, match=r"^stopped at once by SIGINT; the pad is neutral; kept run directory "), \
            assembly(tmp_path) as a:
        run = a.open_run()
        run.write_summary({"steps": 1})
        raise KeyboardInterrupt  # a second Ctrl-C


def test_a_resume_asks_for_more_steps_than_the_run_has_done(tmp_path, capsys):
    config = load(None, ["run.steps=100", f"run.dir={str(tmp_path)!r}"])
    with assembly(tmp_path) as a:
        run = a.open_run()
        with pytest.raises(ExplorerError, match=r"^--resume r: the run has done 100 steps already and run.steps = 100; "
                                                r"ask for more with --steps \(more than 100\). Nothing was changed$"):
            continue_run(run, "r", 100, config)
        continue_run(run, "r", 40, config)
    assert capsys.readouterr().err == f"resumed {run.path} at step 40\n"


def test_the_coverage_figures_leave_the_unfinished_episode_out_of_the_means():
    cov = Coverage(64.0)
    for x in (0, 70, 140):
        cov.add(x, 0)
    cov.episode_steps = 5
    cov.end_episode()
    cov.add(0, 0)
    cov.episode_steps = 2
    assert finish_episode(cov) == 1 and finish_episode(cov) == 0
    figures = coverage_summary(cov, ("cells_in_unfinished_episode", 1), budget=10)
    assert figures == {"cells_per_episode": [3], "episode_lengths": [5], "episode_outcomes": [None],
                       "cells_in_unfinished_episode": 1,
                       "episode_budget": 10, "cells_per_budget": 6.0,  # 3 cells in 5 steps of a 10-step budget
                       "distinct_cells": 3, "cells": cov.label, "distinct_rooms": None}
    assert math.isnan(coverage_summary(cov, ("cells_in_unfinished_episodes", 0), 10, episodes=([], [], []))["cells_per_budget"])
