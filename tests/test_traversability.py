"""tools/traversability.py: its samples (an 8-step distance inside one episode, the mean action over it)."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def trav(load_tool):
    return load_tool("traversability")


def fake_maps(tmp_path, n: int) -> dict:
    """Two maps' worth of random play (frames, actions, positions, one episode each), as ``collect`` writes."""
    from explorer.agent.reach import FRAME

    rng = np.random.default_rng(0)
    data = {}
    for name in ("a", "b"):
        path = tmp_path / f"{name}.npz"
        np.savez_compressed(path, frames=rng.integers(0, 256, (n, *FRAME), dtype=np.uint8),
                            actions=rng.uniform(-1, 1, (n, 5)).astype(np.float32),
                            positions=np.cumsum(rng.uniform(0, 20, (n, 2)), axis=0), episodes=np.zeros(n, int))
        data[name] = path
    return data


def test_samples_are_the_distance_and_mean_action_of_the_next_steps_inside_one_episode(trav, tmp_path):
    n = 30
    frames = np.arange(n, dtype=np.uint8)[:, None, None, None] * np.ones((1, 64, 64, 3), np.uint8)
    actions = np.zeros((n, 5), np.float32)
    actions[:, 0] = np.arange(n) % 2  # camera x alternates 0, 1: its mean over 8 steps is 0.5
    actions[:, 3] = 1.0
    positions = np.stack([np.arange(n) * 10.0, np.zeros(n)], axis=1)  # 10 map units a step, east
    episodes = np.where(np.arange(n) < 20, 0, 1)
    path = tmp_path / "data.npz"
    np.savez_compressed(path, frames=frames, actions=actions, positions=positions, episodes=episodes)
    f, a, y = trav.samples(path, horizon=8, inputs=3)
    assert len(f) == 12 + 2  # steps 0..11 stay in episode 0 for 8 more steps; 20, 21 in episode 1
    assert [int(x[0, 0, 0]) for x in f] == [*range(12), 20, 21]
    np.testing.assert_allclose(y, 80.0 / trav.SCALE)
    np.testing.assert_allclose(a, np.tile([0.5, 0.0, 1.0], (14, 1)))
    actions[::2, 4] = 1.0  # A pressed every other step: its mean over a draw's 8 steps is 0.5
    np.savez_compressed(path, frames=frames, actions=actions, positions=positions, episodes=episodes)
    f, a, y = trav.samples(path, horizon=16, inputs=4)
    assert [int(x[0, 0, 0]) for x in f] == [0, 1, 2, 3]  # 16 more steps inside episode 0; episode 1 is too short
    np.testing.assert_allclose(y, 160.0 / trav.SCALE)  # the distance over 16 steps
    np.testing.assert_allclose(a, np.tile([0.5, 0.0, 1.0, 0.5], (4, 1)))  # the action over the draw's 8


def test_a_move_followed_by_damage_or_death_is_learned_as_going_nowhere(trav, tmp_path):
    n = 40
    frames = np.arange(n, dtype=np.uint8)[:, None, None, None] * np.ones((1, 64, 64, 3), np.uint8)
    positions = np.stack([np.arange(n) * 10.0, np.zeros(n)], axis=1)  # 10 map units a step, east
    episodes = np.where(np.arange(n) < 20, 0, 1)
    hurt = np.zeros(n, bool)
    hurt[19] = True  # episode 0 ends in death
    hurt[30] = True  # a blow in episode 1
    path = tmp_path / "data.npz"
    np.savez_compressed(path, frames=frames, actions=np.zeros((n, 5), np.float32), positions=positions,
                        episodes=episodes, hurt=hurt)
    f, _, y = trav.samples(path, horizon=8, inputs=3, hurt=True)
    steps = [int(x[0, 0, 0]) for x in f]
    assert steps == [*range(12), *range(20, 32)]  # the same moves as without damage: each draw inside its episode
    nowhere = {t for t, d in zip(steps, y, strict=True) if d == 0.0}
    assert nowhere == {*range(19 - trav.HURT + 1, 12), *range(20, 31)}  # within HURT steps before a blow, same episode
    np.testing.assert_allclose([d for t, d in zip(steps, y, strict=True) if t not in nowhere], 80.0 / trav.SCALE)
    f, _, y = trav.samples(path, horizon=16, inputs=3, hurt=True)  # a death within the horizon keeps the move
    assert [int(x[0, 0, 0]) for x in f] == [*range(12), 20, 21, 22, 23]  # 4..11 end in death within 16 steps
    np.testing.assert_allclose(y, [160.0 / trav.SCALE] * 4 + [0.0] * 12)
    _, _, plain = trav.samples(path, horizon=16, inputs=3)
    assert len(plain) == 4 + 4 and plain[:4].all()  # without hurt: steps 0..3 and 20..23, their distances
    np.savez_compressed(path, frames=frames, actions=np.zeros((n, 5), np.float32), positions=positions,
                        episodes=episodes)
    with pytest.raises(trav.ExplorerError, match="without the damage"):
        trav.samples(path, hurt=True)


def test_train_fits_the_held_out_prior_and_writes_arrays_the_package_loads(trav, tmp_path):
    from explorer.agent.reach import load_reach

    data = fake_maps(tmp_path, 40)
    rho = trav.train(data, "b", 1, tmp_path / "without_b.npz")  # trained on a, its rank correlation on b
    assert -1.0 <= rho <= 1.0
    (model,) = load_reach(tmp_path / "without_b.npz")  # the checks the shipped weights pass
    assert model.count_params() == trav.build_reach().count_params()


def test_colours_change_each_frames_light_and_tint_within_their_bounds(trav):
    frames = np.full((64, 8, 8, 3), 100, np.uint8)
    out = trav.colours(frames, np.random.default_rng(0))
    assert out.dtype == np.uint8 and out.shape == frames.shape
    assert out.min() >= 100 * 0.6 * 0.8 - 1 and out.max() <= 100 * 1.4 * 1.2 + 1
    assert len(np.unique(out[:, 0, 0, 0])) > 32  # every frame its own light
    assert np.all(out == out[:, :1, :1])  # one gain per frame and channel: the picture's shapes are kept
    assert np.any(out[..., 0] != out[..., 1])  # a tint, not only a brightness
    assert trav.colours(np.full((2, 1, 1, 3), 250, np.uint8), np.random.default_rng(1)).max() <= 255


def test_augmented_training_writes_a_prior_the_package_loads(trav, tmp_path):
    from explorer.agent.reach import load_reach

    data = fake_maps(tmp_path, 300)
    rho = trav.train(data, "b", 1, tmp_path / "without_b.npz", augment=True, seed=3)
    assert -1.0 <= rho <= 1.0
    first = load_reach(tmp_path / "without_b.npz")[0].get_weights()
    trav.train(data, "b", 1, tmp_path / "again.npz", augment=True, seed=4)
    assert any(not np.allclose(x, y) for x, y in zip(first, load_reach(tmp_path / "again.npz")[0].get_weights(),
                                                      strict=True))  # the seed is the training's


def test_a_folder_of_models_trained_with_another_recipe_is_refused_before_anything_runs(trav, tmp_path, capsys):
    out = tmp_path / "runs"
    out.mkdir()
    (out / "model_without_E1M1.keras").write_bytes(b"a model of some recipe")  # no recipe.json: not known
    assert trav.main(["--out", str(out), "--augment"]) == 2
    assert "another --out" in capsys.readouterr().err
    (out / "recipe.json").write_text('{"horizon": 8, "inputs": 3, "epochs": 3, "augment": false, "train_seed": 0, '
                                     '"data_seed": 100}\n')
    assert trav.main(["--out", str(out), "--augment"]) == 2  # trained without --augment
    assert "'augment': False" in capsys.readouterr().err
    assert not any(out.glob("data_*"))  # refused before any play was collected


def test_join_writes_several_weights_files_as_one_ensemble_and_refuses_a_bad_one(trav, tmp_path, capsys):
    from explorer.agent.reach import load_reach

    a, b, bad = tmp_path / "a.npz", tmp_path / "b.npz", tmp_path / "bad.npz"
    trav.save_reach(trav.build_reach(), a)
    trav.save_reach([trav.build_reach(), trav.build_reach()], b)
    assert trav.main(["--join", str(tmp_path / "ab.npz"), str(a), str(b)]) == 0
    joined = load_reach(tmp_path / "ab.npz")
    assert len(joined) == 3
    np.testing.assert_array_equal(joined[0].get_weights()[0], load_reach(a)[0].get_weights()[0])
    np.testing.assert_array_equal(joined[2].get_weights()[0], load_reach(b)[1].get_weights()[0])
    bad.write_bytes(b"not an archive")
    assert trav.main(["--join", str(tmp_path / "out.npz"), str(a), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.npz are not the model's" in err and err.count("\n") == 1 and not (tmp_path / "out.npz").exists()
    before = a.read_bytes()
    assert trav.main(["--join", str(a), str(a), str(bad)]) == 2  # into one of its own inputs: a is kept whole
    assert a.read_bytes() == before and sorted(p.name for p in tmp_path.glob(".*")) == []
    assert trav.main(["--join", str(a), str(a), str(b)]) == 0 and len(load_reach(a)) == 3
    for folder in ("x", "y"):
        for m in trav.MAPS:
            (tmp_path / folder).mkdir(exist_ok=True)
            trav.save_reach(trav.build_reach(), tmp_path / folder / f"reach_without_{m}.npz")
    assert trav.main(["--join-held-out", str(tmp_path / "xy"), str(tmp_path / "x"), str(tmp_path / "y")]) == 0
    assert all(len(load_reach(tmp_path / "xy" / f"reach_without_{m}.npz")) == 2 for m in trav.MAPS)


def test_the_choosers_play_holds_the_draw_its_prior_scores_highest(trav, tmp_path, monkeypatch):
    """``collect`` with a prior: every 8 steps the best of the draws by that prior, as the planner scores."""
    prior = tmp_path / "prior.npz"
    trav.save_reach(trav.build_reach(), prior)
    scored = []
    real = trav.reach_scorer

    def spy(path, buttons=("a",)):
        score = real(path, buttons)

        def recorded(step, sent):
            scores = score(step, sent)
            scored.append(sent[int(np.argmax(scores))].copy())
            return scores
        return recorded

    monkeypatch.setattr(trav, "reach_scorer", spy)
    path = trav.collect("my_way_home", 0, 24, tmp_path / "chosen.npz", prior=prior, draws=4)
    d = np.load(path)
    assert len(d["frames"]) == len(d["actions"]) == len(d["hurt"]) == 24 and len(scored) == 3  # a choice per 8 steps
    assert not d["hurt"].any()  # my_way_home has no damaging floor
    for i, best in enumerate(scored):
        np.testing.assert_allclose(d["actions"][8 * i:8 * i + 8, :4], np.tile(best[:4], (8, 1)), atol=1e-6)


def test_a_model_trains_on_several_play_files_per_map_and_is_judged_on_the_held_out_maps_first(trav, tmp_path,
                                                                                               monkeypatch):
    data = fake_maps(tmp_path, 40)
    (tmp_path / "more").mkdir()
    more = fake_maps(tmp_path / "more", 40)
    read = []
    samples = trav.samples
    monkeypatch.setattr(trav, "samples", lambda path, *a: read.append(path) or samples(path, *a))
    rho = trav.train({"a": [data["a"], more["a"]], "b": [data["b"], more["b"]]}, "b", 1, tmp_path / "w.npz")
    assert read == [data["a"], more["a"], data["b"]]  # trained on both of a's files; judged on b's first
    assert -1.0 <= rho <= 1.0 and (tmp_path / "w.npz").exists()


def test_chooser_data_needs_a_prior_for_every_map_left_out(trav, tmp_path, capsys):
    priors = tmp_path / "priors"
    priors.mkdir()
    trav.save_reach(trav.build_reach(), priors / "reach_without_E1M1.npz")
    assert trav.main(["--out", str(tmp_path / "out"), "--chooser-data", str(priors)]) == 2
    err = capsys.readouterr().err
    assert "reach_without_my_way_home.npz is missing" in err and err.count("\n") == 1
    assert not any((tmp_path / "out").glob("data_*"))  # refused before any play was collected
    assert trav.main(["--out", str(tmp_path / "out"), "--ship", str(tmp_path / "w.npz"),
                      "--chooser-data", str(priors)]) == 2  # --ship takes a weights file
    assert "a weights file" in capsys.readouterr().err


def test_the_choosers_play_is_named_by_its_priors_content(trav, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    trav.save_reach(trav.build_reach(), one / "reach_without_E1M1.npz")
    (two / "reach_without_E1M1.npz").write_bytes((one / "reach_without_E1M1.npz").read_bytes())
    same = [trav.chooser_play(tmp_path, "E1M2", 100, d / "reach_without_E1M1.npz") for d in (one, two)]
    assert same[0] == same[1]  # the same prior in another folder: the same play
    trav.save_reach(trav.build_reach(), two / "reach_without_E1M1.npz")  # retrained in place
    assert trav.chooser_play(tmp_path, "E1M2", 100, two / "reach_without_E1M1.npz") != same[0]
    assert same[0].parent == tmp_path and same[0].name.startswith("data_E1M2_100_chosen_by_")


def test_the_view_change_of_a_turning_camera_ignores_a_turn_and_sees_the_view_move():
    from explorer.agent.reach import view_change

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
    turned = np.roll(frames, 17, axis=2)  # the camera turned: every row slid sideways
    moved = np.roll(frames, 9, axis=1)  # the view moved: what was in a row is in another
    np.testing.assert_allclose(view_change(frames, turned, turns=True), 0.0)
    assert (view_change(frames, moved, turns=True) > 1.0).all()
    assert (view_change(frames, turned) > 1.0).all()  # a camera that stays put: every pixel slid is a change
    np.testing.assert_allclose(view_change(frames, frames), 0.0)
    np.testing.assert_allclose(view_change(frames, moved, True, chunk=2), view_change(frames, moved, True))


def test_pixel_labels_are_the_view_change_over_the_horizon_and_need_no_positions(trav, tmp_path):
    from explorer.agent.reach import view_change

    n = 30
    rng = np.random.default_rng(1)
    frames = rng.integers(0, 256, (n, 64, 64, 3), dtype=np.uint8)
    path = tmp_path / "data.npz"
    np.savez_compressed(path, frames=frames, actions=np.zeros((n, 5), np.float32),
                        positions=np.full((n, 2), np.nan), episodes=np.zeros(n, int))
    f, _, y = trav.samples(path, horizon=8, inputs=3, labels="pixels", turns=False)
    assert len(f) == n - 8
    np.testing.assert_allclose(y, view_change(frames[:n - 8], frames[8:]), rtol=1e-5)
    _, _, turning = trav.samples(path, horizon=8, inputs=3, labels="pixels")  # Doom's camera turns
    np.testing.assert_allclose(turning, view_change(frames[:n - 8], frames[8:], turns=True), rtol=1e-5)
    with pytest.raises(trav.ExplorerError, match="--labels pixels"):
        trav.samples(path, horizon=8, inputs=3)  # the engine's distance of play that has no positions


def test_a_pixel_prior_trains_from_recorded_sessions_and_skips_the_steps_whose_action_is_unknown(trav, tmp_path,
                                                                                                 capsys):
    from explorer.agent.reach import load_reach
    from explorer.envs.sessions.writer import Recorder

    rng = np.random.default_rng(2)
    for name, unknown in (("played", False), ("person", True)):
        with Recorder(tmp_path / "sessions" / name, {"test": True}, chunk_frames=16, buttons=("a",)) as rec:
            for i in range(40):
                action = None if unknown and i < 20 else rng.uniform(-1, 1, 5).astype(np.float32)
                rec.add(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), action, 0.0, first=i in (0, 25),
                        last=i in (24, 39))
    data = trav.from_sessions([str(tmp_path / "sessions")], tmp_path / "data.npz", most=70)
    d = np.load(data)
    assert len(d["frames"]) == 70  # the first session's 40 steps, then the second's first 30
    np.testing.assert_array_equal(d["episodes"], [0] * 25 + [1] * 15 + [2] * 25 + [3] * 5)
    f, _, _ = trav.samples(data, labels="pixels")
    # steps whose 8 next steps stay in one episode and whose draw's actions are all known
    assert len(f) == (25 - 8) + (15 - 8)  # the second session's episodes: too few known steps, too short
    out = tmp_path / "pixels.npz"
    assert trav.main(["--sessions", str(tmp_path / "sessions"), "--labels", "pixels", "--ship", str(out),
                      "--epochs", "1", "--out", str(tmp_path / "work")]) == 0
    assert len(load_reach(out)) == 1
    assert trav.main(["--sessions", str(tmp_path / "sessions"), "--ship", str(out), "--out", str(tmp_path)]) == 2
    assert "--labels pixels" in capsys.readouterr().err


def test_sessions_of_other_frames_are_refused_in_one_line(trav, tmp_path):
    from explorer.envs.sessions.writer import Recorder

    with Recorder(tmp_path / "s", {"test": True}, chunk_frames=4, buttons=()) as rec:
        for i in range(5):
            rec.add(np.zeros((32, 32, 3), np.uint8), np.zeros(4, np.float32), 0.0, first=i == 0, last=i == 4)
    with pytest.raises(trav.ExplorerError, match="reads \\(64, 64, 3\\)"):
        trav.from_sessions([str(tmp_path / "s")], tmp_path / "data.npz", most=100)
    (tmp_path / "empty").mkdir()
    with pytest.raises(trav.ExplorerError, match="no recorded session"):
        trav.from_sessions([str(tmp_path / "empty")], tmp_path / "data.npz", most=100)


def test_a_model_of_a_maps_own_play_trains_on_its_first_three_quarters_and_is_judged_on_the_rest(trav, tmp_path,
                                                                                                 monkeypatch):
    data = fake_maps(tmp_path, 80)
    seen = []
    real = trav.samples

    def counted(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append((args[0].name, kwargs.get("labels", args[4] if len(args) > 4 else "positions"), len(out[0])))
        return out

    monkeypatch.setattr(trav, "samples", counted)
    rho = trav.train({"a": data["a"]}, "a", 1, tmp_path / "own_a.npz", labels="pixels", own=True)
    assert -1.0 <= rho <= 1.0
    assert seen == [("a.npz", "pixels", 72), ("a.npz", "positions", 72)]  # map b is never read
    k = int(trav.OWN_SHARE * 72)
    trained, judged = trav._cut(tuple(np.arange(72)[None].repeat(3, 0)), True), trav._cut(
        tuple(np.arange(72)[None].repeat(3, 0)), False)
    assert list(trained[0]) == list(range(k)) and list(judged[0]) == list(range(k + 2 * trav.HOLD, 72))


def test_settings_that_cannot_go_together_are_refused_before_anything_runs(trav, tmp_path, capsys):
    out = ["--out", str(tmp_path / "x")]
    assert trav.main([*out, "--gym", "--labels", "pixels"]) == 2
    assert "--models-only" in capsys.readouterr().err
    assert trav.main([*out, "--gym", "--models-only", "--hurt"]) == 2
    assert "Doom's health" in capsys.readouterr().err
    assert trav.main([*out, "--labels", "pixels", "--hurt"]) == 2
    assert "leave it out" in capsys.readouterr().err
    assert trav.main([*out, "--labels", "reachability", "--gaps", "25", "5"]) == 2
    assert "1 <= NEAR < FAR" in capsys.readouterr().err
    assert not list((tmp_path / "x").glob("data_*"))  # nothing collected


def test_reachability_pairs_are_near_or_far_inside_one_episode_and_on_usable_steps_only(trav):
    episodes = np.repeat(np.arange(4), 300)
    usable = np.ones(len(episodes), bool)
    usable[1000:] = False
    a, b, near = trav.pairs(episodes, 5000, np.random.default_rng(0), usable)
    assert len(a) == len(b) == len(near) == 5000
    gap = np.abs(b - a)
    assert ((gap >= 1) & (gap <= trav.NEAR))[near == 1].all()
    assert ((gap >= trav.FAR) & (gap <= trav.FAR_MOST))[near == 0].all()
    assert 0.4 < near.mean() < 0.6 and (b < a).any() and (b > a).any()  # both kinds, either frame first
    assert (episodes[a] == episodes[b]).all() and usable[a].all() and usable[b].all()
    with pytest.raises(trav.ExplorerError, match="longer episodes"):
        trav.pairs(np.arange(100), 10, np.random.default_rng(0))  # every step its own episode


def test_a_reachability_network_learns_that_frames_of_a_player_standing_still_are_near(trav, tmp_path,
                                                                                         monkeypatch):
    """Play that walks for 40 steps, then stands for 40: a window of the walk must be judged farther apart than
    one of the stand, from the frames alone (a scene that scrolls as the player walks)."""
    n = 480
    place = np.cumsum(np.arange(n) // 40 % 2 == 0)  # the player's place: +1 a step while walking
    scene = np.random.default_rng(3).integers(0, 256, (64, 64 + n + 64, 3), dtype=np.uint8)
    frames = np.stack([scene[:, p:p + 64] for p in place])
    path = tmp_path / "walk.npz"
    np.savez_compressed(path, frames=frames, actions=np.zeros((n, 5), np.float32),
                        positions=np.stack([place, np.zeros(n)], 1).astype(np.float64), episodes=np.arange(n) // 240)
    monkeypatch.setattr(trav, "PAIRS_PER_FRAME", 8)
    net = trav.train_reachability([path], epochs=2)
    t = np.arange(n - 8)
    inside = (t // 240 == (t + 8) // 240)
    moved = (place[t + 8] - place[t] == 8) & inside
    stood = (place[t + 8] == place[t]) & inside
    apart = trav.far(net, frames[t], frames[t + 8])
    assert apart[moved].mean() > apart[stood].mean() + 0.2, (apart[moved].mean(), apart[stood].mean())
    report: dict = {}
    rho = trav.train({"walk": path}, "walk", 1, tmp_path / "own.npz", labels="reachability", own=True, report=report)
    assert -1.0 <= rho <= 1.0 and -1.0 <= report["label"] <= 1.0  # the label judged on the held-back quarter


def test_a_reachability_prior_trains_from_recorded_sessions(trav, tmp_path, monkeypatch):
    from explorer.agent.reach import load_reach
    from explorer.envs.sessions.writer import Recorder

    rng = np.random.default_rng(4)
    with Recorder(tmp_path / "sessions" / "played", {"test": True}, chunk_frames=16, buttons=("a",)) as rec:
        for i in range(80):
            rec.add(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), rng.uniform(-1, 1, 5).astype(np.float32),
                    0.0, first=i == 0, last=i == 79)
    out = tmp_path / "reachability.npz"
    assert trav.main(["--sessions", str(tmp_path / "sessions"), "--labels", "reachability", "--ship", str(out),
                      "--epochs", "1", "--out", str(tmp_path / "work")]) == 0
    assert len(load_reach(out)) == 1
