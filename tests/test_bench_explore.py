"""tools/bench_explore.py: the per-budget coverage rule, goal counting and a short --suite run."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from explorer.config import load

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench(load_tool):
    return load_tool("bench_explore")


def test_reaching_the_goal_early_is_not_punished_by_the_coverage_figure(bench):
    # three episodes of a 525-step budget; the second reached the goal after 100 steps with 6 cells
    f = bench.episode_figures(ends=[525, 625, 1150], cells=[20, 6, 22], budget=525)
    assert f["episode_lengths"] == [525, 100, 525]
    assert f["cells_per_budget"] == pytest.approx(48 / 1150 * 525)  # 21.9: above the full episodes' 21
    assert f["cells_mean"] == pytest.approx(16.0)  # what a plain mean would have said
    assert (f["early"], f["early_share"], f["early_total"], f["episodes"]) == (1, pytest.approx(1 / 3), 1, 3)


def test_dying_early_is_not_rewarded_by_the_coverage_figure(bench):
    # a 1050-step budget: a full episode of 100 cells, then one that died after 210 steps with 40 cells
    f = bench.episode_figures(ends=[1050, 1260], cells=[100, 40], budget=1050, outcomes=["timeout", "death"])
    assert f["cells_per_budget"] == pytest.approx(70.0)  # the death counts as a whole episode of 40 cells
    rate = bench.episode_figures(ends=[1050, 1260], cells=[100, 40], budget=1050, outcomes=["timeout", "goal"])
    assert rate["cells_per_budget"] == pytest.approx(140 / 1260 * 1050)  # a goal counts with its own steps
    assert bench.episode_figures([1050, 1260], [100, 40], budget=1050)["cells_per_budget"] == rate["cells_per_budget"]


def test_the_coverage_figure_reads_each_episodes_outcome():
    from explorer.run.coverage import Coverage, cells_per_budget
    cov = Coverage(64.0)
    for steps, outcome in ((10, "timeout"), (2, "death"), (4, "goal")):
        cov.add(steps * 64.0, 0.0)
        cov.episode_steps = steps
        cov.end_episode(outcome)
    assert cov.outcomes == ["timeout", "death", "goal"]
    assert cov.figure(10) == pytest.approx(3 / (10 + 10 + 4) * 10)  # the death counts 10 steps, the goal 4
    with pytest.raises(ValueError, match="outcomes"):
        cells_per_budget([1, 2], [3, 4], 10, outcomes=["death"])


def test_full_episodes_give_the_plain_mean_and_only_the_last_20_count(bench):
    ends = [50 * (i + 1) for i in range(25)]
    cells = list(range(25))
    f = bench.episode_figures(ends, cells, budget=50)
    assert f["cells_per_budget"] == pytest.approx(sum(range(5, 25)) / 20)  # the last 20, all full
    assert f["early"] == 0 and f["early_total"] == 0
    resumed = bench.episode_figures([1050, 2100], [7, 9], budget=1050, start=0)
    assert resumed["cells_per_budget"] == pytest.approx(8.0)
    assert math.isnan(bench.episode_figures([], [], budget=525)["cells_per_budget"])


def test_suite_table_reports_maps_goal_share_and_the_average(bench):
    def r(agent, m, cells, total, early_share):
        return {"agent": agent, "map": m, "cells_per_budget": cells, "total_cells": total,
                "early_share": early_share, "steps_per_s": 100.0}

    results = [r("sticky", "my_way_home", 20.0, 100, 0.25), r("sticky", "my_way_home", 30.0, 120, 0.75),
               r("sticky", "E1M1", 40.0, 300, 0.0)]
    table, rows = bench.suite_table(results, ["sticky"], ["my_way_home", "E1M1"])
    lines = table.splitlines()
    assert lines[2] == "| my_way_home | sticky | 2 | 25.0 ± 5.0 | 110.0 ± 10.0 | 50.0 ± 25.0 % | 100 |"
    assert lines[3] == "| E1M1 | sticky | 1 | 40.0 | 300.0 | – | 100 |"
    assert lines[4] == "| average | sticky | 3 | 32.5 ± 7.5 over maps | 205.0 ± 95.0 | – | 100 |"
    assert rows[-1]["cells_per_budget"] == [25.0, 40.0]


@pytest.mark.slow
def test_suite_runs_every_map_and_writes_table_and_json(bench, tmp_path):
    rc = bench.main(["--suite", "--steps", "130", "--seeds", "0", "--agents", "sticky", "--out", str(tmp_path),
                     "--set", "game.episode_steps=60"])
    assert rc == 0
    suite = json.loads((tmp_path / "suite.json").read_text())
    assert [r["map"] for r in suite["runs"]] == ["my_way_home", "E1M1", "E1M2", "E1M3"]
    for run in suite["runs"]:
        assert run["steps"] == 130 and run["episode_steps"] == 60
        assert sum(run["episode_lengths"]) <= 130 and run["episodes"] == len(run["per_episode"]) >= 2
        assert run["cells_per_budget"] >= 1 and run["total_cells"] >= 1
        config = load(Path(run["run_dir"]) / "config.toml")
        if run["map"] != "my_way_home":
            assert (config.game.wad, config.game.map, config.game.args) == ("freedoom1", run["map"], ("-nomonsters",))
    table = (tmp_path / "suite.md").read_text().splitlines()
    assert [line.split(" | ")[0] for line in table[2:]] == ["| my_way_home", "| E1M1", "| E1M2", "| E1M3", "| average"]
    assert (tmp_path / "coverage.png").stat().st_size > 1000


@pytest.mark.slow
def test_jobs_run_in_processes_of_their_own_with_the_same_figures_in_the_same_order(bench, tmp_path):
    common = ["--steps", "130", "--seeds", "0", "1", "--agents", "sticky", "uniform", "--set", "game.episode_steps=60"]
    assert bench.main([*common, "--jobs", "2", "--out", str(tmp_path / "two")]) == 0
    assert bench.main([*common, "--out", str(tmp_path / "one")]) == 0
    two, one = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("two", "one"))
    assert [(r["agent"], r["seed"]) for r in two] == [("sticky", 0), ("sticky", 1), ("uniform", 0), ("uniform", 1)]
    assert [(r["agent"], r["seed"], r["per_episode"], r["total_cells"]) for r in two] == \
        [(r["agent"], r["seed"], r["per_episode"], r["total_cells"]) for r in one]
    assert len({r["run_dir"] for r in two + one}) == 8
    assert "run.threads=[1,1]" in json.loads((tmp_path / "two" / "suite.json").read_text())["overrides"]


@pytest.mark.slow
def test_resume_runs_only_what_results_json_lacks_and_keeps_the_rest(bench, tmp_path, capsys):
    common = ["--steps", "130", "--agents", "sticky", "--set", "game.episode_steps=60", "--out", str(tmp_path)]
    assert bench.main([*common, "--seeds", "0", "1"]) == 0
    first = json.loads((tmp_path / "results.json").read_text())
    assert bench.main([*common, "--seeds", "1", "2", "--resume"]) == 0
    assert "resuming: 1 of 2 runs" in capsys.readouterr().out
    after = json.loads((tmp_path / "results.json").read_text())
    assert [r["seed"] for r in after] == [1, 2, 0]  # the runs asked for in order, then the one kept aside
    assert after[0] == first[1] and after[2] == first[0]  # seed 1 was not run again; seed 0 is not lost
    table = (tmp_path / "suite.md").read_text()
    assert "| my_way_home | sticky | 2 |" in table
    (tmp_path / "results.json").write_text('[{"agent": "sti')  # a file cut short
    with pytest.raises(SystemExit, match="not readable JSON.*without --resume"):
        bench.main([*common, "--seeds", "0", "--resume"])


@pytest.mark.slow
def test_a_run_stopped_by_ctrl_c_is_not_kept_as_a_result_and_resume_runs_it_again(bench, tmp_path, monkeypatch, capsys):
    import signal

    import explorer.run.builder as builder

    real = builder.build_baseline
    built = []

    class CtrlCAtStep40:  # the second run's actor: Ctrl-C arrives while it plays
        def __init__(self, actor):
            self.actor, self.steps = actor, 0

        def act(self, step):
            self.steps += 1
            if self.steps == 40:
                signal.raise_signal(signal.SIGINT)
            return self.actor.act(step)

        def observe(self, step, action, next_step):
            return self.actor.observe(step, action, next_step)

    def baseline(config):
        built.append(config.run.seed)
        actor = real(config)
        return CtrlCAtStep40(actor) if len(built) == 2 else actor

    monkeypatch.setattr(builder, "build_baseline", baseline)
    common = ["--steps", "130", "--seeds", "0", "1", "2", "--agents", "sticky", "--set", "game.episode_steps=60",
              "--out", str(tmp_path)]
    assert bench.main(common) == 130
    assert built == [0, 1]  # the bench stopped: seed 2 never started
    err = capsys.readouterr().err
    assert "my_way_home sticky s1 stopped by SIGINT at step 40 of 130" in err and "--resume" in err
    assert [r["seed"] for r in json.loads((tmp_path / "results.json").read_text())] == [0]
    assert bench.main([*common, "--resume"]) == 0
    assert "resuming: 1 of 3 runs" in capsys.readouterr().out
    assert built == [0, 1, 1, 2]
    assert [(r["seed"], sum(r["episode_lengths"])) for r in json.loads((tmp_path / "results.json").read_text())] == \
        [(0, 120), (1, 120), (2, 120)]  # two whole 60-step episodes each: seed 1 ran all its steps again

def _result(agent, m, seed, cells, total, overrides=(), steps=100, early=0):
    from explorer.run.coverage import FIGURE_RULE
    return {"agent": agent, "map": m, "seed": seed, "steps": steps, "cells_per_budget": cells, "total_cells": total,
            "early": early, "early_share": early / 20, "episodes": 20, "steps_per_s": 10.0, "overrides": list(overrides),
            "coverage_rule": FIGURE_RULE}


def test_report_merges_folders_into_one_table_per_seed_with_ratios(bench, tmp_path):
    base, learned = tmp_path / "base", tmp_path / "learned"
    for d in (base, learned):
        d.mkdir()
    (base / "results.json").write_text(json.dumps(
        [_result(a, m, s, c + s, 100 * c) for a, c in (("sticky", 10.0), ("sticky_prior", 20.0))
         for m in ("my_way_home", "E1M1") for s in (0, 1)]))
    learned_runs = [_result("episodic", m, s, 30.0 + s, 5000, ["learner.networks.augment=4", f"run.threads=[{s},{s}]"], early=3)
                    for m in ("my_way_home", "E1M1") for s in (0, 1, 2)]
    (learned / "results.json").write_text(json.dumps(learned_runs))
    assert bench.main(["--report", str(base), str(learned), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "suite.md").read_text()
    assert "| episodic | my_way_home | 30.0 (5000, goal 3/20) | 31.0 (5000, goal 3/20) | 32.0 (5000, goal 3/20) |" in text
    assert "| sticky_prior | **average** | **20.0** (2000) | **21.0** (2000) | – |" in text
    # against each baseline over the seeds both ran (0 and 1): (30 + 31) / (20 + 21), distinct 5000 / 2000
    assert "- episodic against sticky_prior (seeds 0, 1): 1.49x the cells per episode (30.5 / 20.5), 2.50x" in text
    assert "- episodic against sticky (seeds 0, 1): 2.90x" in text
    lines = text.splitlines()
    assert [line.split(" | ")[1] for line in lines if line.startswith("| ") and "average |" in line][:3] == \
        ["sticky", "sticky_prior", "episodic"]  # baselines first

    other = tmp_path / "other"
    other.mkdir()
    (other / "results.json").write_text(json.dumps([_result("episodic", "E1M2", 0, 1.0, 1)]))
    with pytest.raises(SystemExit, match="episodic ran with \\[\\] in .*other.* but with \\['learner.networks.augment=4'\\]"):
        bench.main(["--report", str(learned), str(other), "--out", str(tmp_path / "out")])
    (other / "results.json").write_text(json.dumps([_result("sticky", "E1M1", 5, 1.0, 1, steps=50)]))
    with pytest.raises(SystemExit, match="mix step budgets"):
        bench.main(["--report", str(base), str(other), "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit, match="cannot read .*missing"):
        bench.main(["--report", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])


@pytest.mark.parametrize("args, says", [
    (["--steps", "0"], "argument --steps: must be 1 or more, got 0"),
    (["--steps", "-5"], "argument --steps: must be 1 or more, got -5"),
    (["--steps", "many"], "argument --steps: 'many' is not an integer"),
    (["--seeds", "0", "-1"], "argument --seeds: must be 0 or more and at most 4294967295, got -1"),
    (["--seeds", "2.5"], "argument --seeds: '2.5' is not an integer"),
    (["--agents", "sticky", "curious"], "argument --agents: 'curious' is not an agent; choose from uniform, sticky, "
                                        "sticky_prior, original, frozen, episodic, rnd, forward, pixel"),
    (["--jobs", "0"], "argument --jobs: must be 1 or more, got 0"),
])
def test_bad_arguments_are_one_line(bench, tmp_path, capsys, args, says):
    with pytest.raises(SystemExit) as stop:
        bench.main([*args, "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"bench_explore: error: {says}"
    assert list(tmp_path.iterdir()) == []


def test_a_wrong_setting_is_one_line_before_any_run(bench, tmp_path, capsys):
    common = ["--steps", "10", "--seeds", "0", "--agents", "sticky", "--out", str(tmp_path)]
    assert bench.main([*common, "--set", "game.episode_steps=-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bench_explore: ") and "game.episode_steps" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("content, says", [
    (None, r"cannot read .*results.json \(it is a folder\)"),
    ('{"runs": []}', r".*results.json holds a JSON dict, not the list of runs bench_explore writes"),
    ('[{"agent": "sticky", "seed": "0"}]', r"run 0 of .*results.json is not a result of bench_explore \(missing or "
                                           r"wrong: map, seed, steps"),
    ("[7]", r"run 0 of .*results.json is not a result of bench_explore"),
])
def test_a_damaged_results_json_is_one_line(bench, tmp_path, content, says):
    if content is None:
        (tmp_path / "results.json").mkdir()
    else:
        (tmp_path / "results.json").write_text(content)
    with pytest.raises(SystemExit, match=f"^bench_explore: {says}.*run without --resume$"):
        bench.main(["--steps", "10", "--resume", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match=f"^bench_explore: {says}.*leave that folder out of --report$"):
        bench.main(["--report", str(tmp_path), "--out", str(tmp_path / "report")])


def test_out_naming_a_file_is_one_line(bench, tmp_path):
    (tmp_path / "taken").write_text("mine")
    with pytest.raises(SystemExit, match="^bench_explore: --out .*taken is a file, not a folder; give a folder"):
        bench.main(["--steps", "10", "--out", str(tmp_path / "taken")])
    assert (tmp_path / "taken").read_text() == "mine"


def strict_json(text):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.slow
def test_a_full_disk_while_results_json_is_written_leaves_the_one_before_and_resume_goes_on(bench, tmp_path,
                                                                                          monkeypatch, capsys):
    import builtins
    import errno
    import io

    real_open, writes = builtins.open, []

    class FillsUp:  # a file on a disk that fills after half of what is written to it
        def __init__(self, f):
            self.f = f

        def write(self, data):
            self.f.write(data[:len(data) // 2])
            self.f.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def full_disk_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        if "results" in os.path.basename(str(file)) and any(m in mode for m in "wa"):
            writes.append(file)
            if len(writes) > 1:  # the first run's results fit; the disk is full when the second's are written
                return FillsUp(f)
        return f

    monkeypatch.setattr(builtins, "open", full_disk_open)
    monkeypatch.setattr(io, "open", full_disk_open)
    # 50 steps of 60-step episodes: no episode ends, so the coverage figures are not numbers
    common = ["--steps", "50", "--seeds", "0", "1", "--agents", "sticky", "--set", "game.episode_steps=60",
              "--out", str(tmp_path)]
    with pytest.raises(SystemExit, match=r"^bench_explore: cannot write .*results.json: No space left on device; the "
                                         r"results.json there is as it was; free space there, or choose another "
                                         r"folder \(--out\), then continue with the same command and --resume$"):
        bench.main(common)
    monkeypatch.setattr(builtins, "open", real_open)
    monkeypatch.setattr(io, "open", real_open)
    kept = strict_json((tmp_path / "results.json").read_text())  # whole, and JSON every reader takes
    assert [r["seed"] for r in kept] == [0] and kept[0]["cells_per_budget"] is None
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []
    assert bench.main([*common, "--resume"]) == 0
    assert "resuming: 1 of 2 runs" in capsys.readouterr().out
    after = strict_json((tmp_path / "results.json").read_text())
    assert [r["seed"] for r in after] == [0, 1] and after[0] == kept[0]


@pytest.mark.slow
def test_sigterm_stops_the_jobs_processes_and_their_engines_and_says_how_to_go_on(tmp_path):
    import signal
    import subprocess

    import psutil
    from test_safety import child_env, wait_for

    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "bench_explore.py"), "--jobs", "2", "--steps", "1000000",
                             "--seeds", "0", "1", "2", "--agents", "sticky", "--set", "game.episode_steps=60",
                             "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env())
    family: dict[int, psutil.Process] = {}  # every process the bench started, and what they started

    def both_runs_play() -> bool:
        for p in psutil.Process(proc.pid).children(recursive=True):
            family.setdefault(p.pid, p)
        engines = [p for p in family.values() if p.is_running() and p.name() == "vizdoom"]
        return len(engines) == 2 and len(list(tmp_path.glob("runs/*/config.toml"))) == 2

    try:
        wait_for(both_runs_play, proc, "two runs with their engines", timeout_s=600)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("bench_explore: ")]
    assert lines == [f"bench_explore: stopped by SIGTERM; the 0 finished runs are in {tmp_path / 'results.json'}; "
                     "continue with the same command and --resume"], err[-3000:]
    assert "Traceback" not in err
    _, alive = psutil.wait_procs(list(family.values()), timeout=60)  # the engines die with their processes
    assert [(p.pid, p.name()) for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    assert len(list(tmp_path.glob("runs/*"))) <= 2  # the third run never started


@pytest.mark.slow
def test_the_gymnasium_suite_runs_the_same_agents_on_montezuma_and_a_minigrid_maze(bench, tmp_path):
    pytest.importorskip("ale_py")
    pytest.importorskip("minigrid")
    rc = bench.main(["--gym", "--steps", "130", "--seeds", "0", "--agents", "sticky", "--out", str(tmp_path)])
    assert rc == 0
    suite = json.loads((tmp_path / "suite.json").read_text())
    assert [r["map"] for r in suite["runs"]] == ["montezuma", "multiroom"]
    montezuma, multiroom = suite["runs"]
    assert montezuma["rooms"] >= 1 and montezuma["total_cells"] >= 2 and multiroom["rooms"] is None
    assert multiroom["episode_steps"] == 120 and multiroom["episodes"] >= 1 and multiroom["total_cells"] >= 1
    assert load(Path(multiroom["run_dir"]) / "config.toml").game.id == "MiniGrid-MultiRoom-N6-v0"
    table = (tmp_path / "suite.md").read_text().splitlines()
    assert [line.split(" | ")[0] for line in table[2:]] == ["| montezuma", "| multiroom", "| average"]


#: a corridor of 6 squares (tests/test_gym_env.py) without a time limit of its own: an episode ends at its
#: far end (the goal) or after game.episode_steps
OPEN_CORRIDOR = "explorer-tests/OpenCorridor-v0"


def test_explore_prints_and_writes_the_benchmarks_figure_of_the_same_episodes(bench, tmp_path, capsys):
    gym = pytest.importorskip("gymnasium")
    from test_gym_env import Corridor

    from explorer import cli

    if OPEN_CORRIDOR not in gym.envs.registration.registry:
        gym.register(OPEN_CORRIDOR, entry_point=Corridor)
    out = tmp_path / "runs"
    assert cli.main(["explore", "--agent", "random", "--steps", "400", "--out", str(out), "--no-progress",
                     "--set", "game.name=gym", "--set", f"game.id={OPEN_CORRIDOR}", "--set", "game.cell=10",
                     "--set", 'game.actions={"0" = {}, "1" = {walk_x = 1}}', "--set", "game.episode_steps=8",
                     "--set", "observation.height=16", "--set", "observation.width=16", "--set", "run.log_every=100"]) == 0
    (run,) = out.iterdir()
    summary = json.loads((run / "summary.json").read_text())
    episodes = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "episode" in r]
    # what the bench makes of the run's own metrics.jsonl: each episode's last step and cells
    f = bench.episode_figures([r["step"] for r in episodes], [r["cells"] for r in episodes], budget=8)
    assert f["episodes"] == summary["episodes"] >= 20 and f["early"] > 0  # some reached the goal before the budget
    assert f["cells_per_budget"] != pytest.approx(f["cells_mean"])  # so the plain mean would say another figure
    assert summary["episode_budget"] == 8 and summary["episode_lengths"] == f["episode_lengths"]
    assert summary["cells_per_budget"] == f["cells_per_budget"]
    assert "cells_per_episode_last20" not in summary
    line = capsys.readouterr().out.splitlines()[-1]
    assert f"episodes {summary['episodes']}, cells per episode budget (last 20) {f['cells_per_budget']:.1f} " \
           f"(budget 8 steps), distinct cells 6" in line


def test_report_reads_results_written_before_the_figure_had_one_name(bench, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    runs = [{**_result("sticky", "my_way_home", s, 20.0 + s, 80), "coverage_last20": None if s else 18.5}
            for s in (0, 1)]
    (old / "results.json").write_text(json.dumps(runs))
    assert bench.main(["--report", str(old), "--out", str(tmp_path / "out")]) == 0
    assert "| sticky | my_way_home | 20.0 (80, goal 0/20) | 21.0 (80, goal 0/20) |" in (tmp_path / "out" / "suite.md").read_text()


RULE_SAYS = ("coverage rule 3 (an episode that ended in death counts as a whole episode budget, and a Gymnasium "
             "game's own end that pays nothing is a death)")


def test_a_result_carries_its_coverage_rule_and_resume_runs_one_counted_before_it_again(bench, tmp_path, capsys):
    from explorer.run.coverage import FIGURE_RULE
    assert FIGURE_RULE == 3 and bench.RULE_SAYS == RULE_SAYS
    common = ["--steps", "130", "--seeds", "0", "1", "--agents", "sticky", "--set", "game.episode_steps=60",
              "--out", str(tmp_path)]
    assert bench.main(common) == 0
    first = json.loads((tmp_path / "results.json").read_text())
    assert [r["coverage_rule"] for r in first] == [3, 3]
    older = [r if r["seed"] == 0 else {k: v for k, v in r.items() if k != "coverage_rule"} for r in first]
    (tmp_path / "results.json").write_text(json.dumps(older))  # seed 1 as a bench before the rule wrote it
    capsys.readouterr()
    assert bench.main([*common, "--resume"]) == 0
    assert (f"resuming: 1 of 2 runs are in {tmp_path / 'results.json'}; running the other 1; 1 run stored there was "
            f"counted before {RULE_SAYS} and is not kept: it runs again\n") in capsys.readouterr().out
    after = json.loads((tmp_path / "results.json").read_text())
    assert [(r["seed"], r["coverage_rule"]) for r in after] == [(0, 3), (1, 3)]  # the old one is not kept aside
    assert after[0] == first[0] and after[1]["run_dir"] != first[1]["run_dir"]  # seed 1 ran again


def _run_dir(path, outcomes, cells, lengths, budget):
    """A run directory's metrics.jsonl (episode lines, each with its outcome) and summary.json."""
    path.mkdir(parents=True)
    ends = np.cumsum(lengths).tolist()
    lines = [{"step": 5, "novelty": 0.1}] + [
        {"step": e, "episode": i + 1, "cells": c, **({} if o is ... else {"outcome": o})}
        for i, (e, c, o) in enumerate(zip(ends, cells, outcomes, strict=True))]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (path / "summary.json").write_text(json.dumps({"episode_budget": budget, "resumed_at": 0}))


def test_report_counts_a_result_of_an_older_rule_again_from_its_run_or_refuses_it(bench, tmp_path, capsys):
    folder = tmp_path / "e1m3"
    # two 1050-step episodes, the second ended by death after 210 steps: the old rule counted it with its own steps
    outcomes, cells, lengths = ["timeout", "death"], [100, 40], [1050, 210]
    _run_dir(folder / "runs" / "explore-7", outcomes, cells, lengths, 1050)
    old = {**_result("sticky", "E1M3", 0, 140 / 1260 * 1050, 120), "episodes": 2, "episode_lengths": lengths,
           "per_episode": cells, "run_dir": "elsewhere/runs/explore-7"}  # relative to where the bench ran: found under the folder's runs/
    del old["coverage_rule"]
    (folder / "results.json").write_text(json.dumps([old]))
    capsys.readouterr()
    assert bench.main(["--report", str(folder), "--out", str(tmp_path / "out")]) == 0
    said = capsys.readouterr().out.splitlines()[0]
    assert said == (f"bench_explore --report: 1 stored result was counted before {RULE_SAYS}; counted again from its "
                    f"run's metrics.jsonl: 1 in {folder}")
    assert "| E1M3 | sticky | 1 | 70.0 |" in (tmp_path / "out" / "suite.md").read_text()  # (100 + 40) / 2100 x 1050
    assert "coverage_rule" not in json.loads((folder / "results.json").read_text())[0]  # the report changes no result

    def refused(why):
        with pytest.raises(SystemExit) as stop:
            bench.main(["--report", str(folder), "--out", str(tmp_path / "out")])
        assert str(stop.value) == (f"bench_explore --report: {folder}: E1M3 sticky s0 was counted before {RULE_SAYS} "
                                   f"and cannot be counted again: {why}; run that folder's command again with --resume "
                                   f"(it runs such results again), or leave the folder out of --report")

    metrics = folder / "runs" / "explore-7" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    metrics.write_text("\n".join(line.replace('"outcome": "death"', '"outcome": "end"') for line in lines) + "\n")
    refused(f"{metrics} does not say whether the game's ends were goals or deaths")  # a Gymnasium end of rule 2
    metrics.write_text("\n".join(line.replace(', "outcome": "death"', "") for line in lines) + "\n")
    refused(f"{metrics} does not say how each episode ended")  # a run older than the outcomes: deaths unknown
    metrics.write_text("\n".join(lines[:-1]) + "\n")  # the run lost its last episode line: not the result's
    refused(f"the episodes of {metrics.parent} are not the result's")
    metrics.unlink()
    refused(f"its run's metrics.jsonl is not at elsewhere/runs/explore-7 (nor under {folder / 'runs'})")
    (folder / "results.json").write_text(json.dumps([{**old, "coverage_rule": "2"}]))
    with pytest.raises(SystemExit, match=r"run 0 of .*results.json is not a result of bench_explore \(missing or "
                                         r"wrong: coverage_rule\)"):
        bench.main(["--report", str(folder), "--out", str(tmp_path / "out")])


def test_reach_held_out_plays_each_map_with_the_prior_never_trained_on_it(bench, tmp_path, capsys):
    from explorer.agent import reach

    shipped = reach.WEIGHTS
    priors = tmp_path / "priors"
    priors.mkdir()
    common = ["--maps", "my_way_home", "--steps", "60", "--seeds", "0", "--agents", "frozen",
              "--set", "game.episode_steps=30", "--reach-held-out", str(priors)]
    assert bench.main([*common, "--out", str(tmp_path / "a")]) == 2
    assert "reach_without_my_way_home.npz is missing" in capsys.readouterr().err
    (priors / "reach_without_my_way_home.npz").write_bytes(b"not an archive")  # read by the run: refused
    assert bench.main([*common, "--out", str(tmp_path / "b")]) == 1
    assert "reach_without_my_way_home.npz are not the model's" in capsys.readouterr().err
    reach.save_reach(reach.build_reach(), priors / "reach_without_my_way_home.npz")
    assert bench.main([*common, "--out", str(tmp_path / "c")]) == 0
    (result,) = json.loads((tmp_path / "c" / "results.json").read_text())
    assert result["reach_weights"] == str((priors / "reach_without_my_way_home.npz").resolve())
    assert reach.WEIGHTS is shipped and bench.HELD_OUT not in os.environ  # nothing left behind
    # the same run with the shipped prior is another run: --resume does not take one for the other
    assert bench.main([*common[:-2], "--out", str(tmp_path / "c"), "--resume"]) == 0
    assert "resuming: 0 of 1 runs" in capsys.readouterr().out


def test_reach_plays_every_map_with_one_candidate_prior(bench, tmp_path, capsys):
    from explorer.agent import reach

    shipped = reach.WEIGHTS
    common = ["--maps", "my_way_home", "--steps", "60", "--seeds", "0", "--agents", "frozen",
              "--set", "game.episode_steps=30"]
    candidate = tmp_path / "candidate.npz"
    assert bench.main([*common, "--reach", str(candidate), "--out", str(tmp_path / "a")]) == 2
    assert "candidate.npz is missing" in capsys.readouterr().err  # refused before any run
    assert not (tmp_path / "a").exists()
    assert bench.main([*common, "--reach", str(tmp_path), "--out", str(tmp_path / "a")]) == 2
    assert "give a weights file ending in .npz" in capsys.readouterr().err
    assert bench.main([*common, "--reach", str(candidate), "--reach-held-out", str(tmp_path),
                       "--out", str(tmp_path / "a")]) == 2
    assert "give one" in capsys.readouterr().err
    reach.save_reach([reach.build_reach(), reach.build_reach()], candidate)
    assert bench.main([*common, "--reach", str(candidate), "--out", str(tmp_path / "b")]) == 0
    (result,) = json.loads((tmp_path / "b" / "results.json").read_text())
    assert result["reach_weights"] == str(candidate.resolve())
    assert reach.WEIGHTS is shipped and bench.HELD_OUT not in os.environ  # nothing left behind


def test_reach_own_plays_a_gymnasium_game_with_the_prior_trained_on_its_own_pixels(bench, tmp_path, capsys):
    from explorer.agent import reach

    shipped = reach.WEIGHTS
    priors = tmp_path / "priors"
    priors.mkdir()
    common = ["--maps", "multiroom", "--steps", "40", "--seeds", "0", "--agents", "frozen", "--set",
              "game.episode_steps=20", "--set", "learner.actions.plan_candidates=8", "--set",
              "learner.actions.plan_score=reach",
              "--reach-own", str(priors)]
    assert bench.main([*common, "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "reach_own_multiroom.npz is missing" in err and "--models-only --gym --protocol own --labels pixels" in err
    assert bench.main([*common, "--reach-held-out", str(priors), "--out", str(tmp_path / "a")]) == 2
    assert "give one" in capsys.readouterr().err
    reach.save_reach(reach.build_reach(), priors / "reach_own_multiroom.npz")
    assert bench.main([*common, "--out", str(tmp_path / "b")]) == 0
    (result,) = json.loads((tmp_path / "b" / "results.json").read_text())
    assert result["reach_weights"] == str((priors / "reach_own_multiroom.npz").resolve())
    assert reach.WEIGHTS is shipped and bench.HELD_OUT not in os.environ  # nothing left behind
