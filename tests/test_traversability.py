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
