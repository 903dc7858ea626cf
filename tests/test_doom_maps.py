"""Built-in game maps: engine arguments, Freedoom by name, map and scenario checks, the USE button, outcomes."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from explorer.config import load
from explorer.envs import make_game
from explorer.envs.doom import game as doom
from explorer.envs.doom.game import BUTTONS, DoomPad, GameError
from explorer.envs.doom.wad import WadError, read_wad
from explorer.taps import Taps

vzd = pytest.importorskip("vizdoom")
PACKAGE = Path(vzd.__file__).parent

#: Doom's monster classes, as ViZDoom names map objects
MONSTERS = {"Zombieman", "ShotgunGuy", "ChaingunGuy", "DoomImp", "Demon", "Spectre", "LostSoul", "Cacodemon",
            "HellKnight", "BaronOfHell", "Arachnotron", "PainElemental", "Revenant", "Fatso", "Archvile",
            "SpiderMastermind", "Cyberdemon", "WolfensteinSS"}

FREEDOOM = ["game.scenario=freedoom", "game.wad=freedoom1"]


def _with_objects(monkeypatch) -> None:
    """Games made from now on report their map objects (ViZDoom's objects API) in ``get_state().objects``."""

    class WithObjects(vzd.DoomGame):
        def init(self):
            self.set_objects_info_enabled(True)
            return super().init()

    monkeypatch.setattr(vzd, "DoomGame", WithObjects)


def _objects(monkeypatch, sets: list[str]) -> Counter:
    """Names of the map objects at the start of the map, counted."""
    _with_objects(monkeypatch)
    game = make_game(load(None, sets))
    try:
        return Counter(o.name for o in game.game.get_state().objects)
    finally:
        game.close()


def test_nomonsters_argument_starts_the_map_without_monsters(monkeypatch):
    plain = _objects(monkeypatch, [*FREEDOOM, "game.map=E1M1"])
    bare = _objects(monkeypatch, [*FREEDOOM, "game.map=E1M1", "game.args=['-nomonsters']"])
    assert sum(n for name, n in plain.items() if name in MONSTERS) >= 20  # E1M1 has imps, sergeants, demons
    assert sum(n for name, n in bare.items() if name in MONSTERS) == 0
    assert {k: v for k, v in bare.items() if k != "DoomPlayer"} == {
        k: v for k, v in plain.items() if k not in MONSTERS and k != "DoomPlayer"}  # the same map otherwise


def test_freedoom_wads_by_name_and_by_path():
    game = make_game(load(None, FREEDOOM))  # no map given: the WAD's first
    try:
        assert Path(game.game.get_doom_game_path()) == PACKAGE / "freedoom1.wad"
        assert game.game.get_doom_map().upper() == "E1M1"
        assert (game.position().x, game.position().y) == (-416.0, 256.0)  # E1M1's player 1 start
    finally:
        game.close()
    game = make_game(load(None, ["game.scenario=freedoom", f"game.wad='{PACKAGE / 'freedoom2.wad'}'", "game.map=MAP01"]))
    try:
        assert game.game.get_doom_map().upper() == "MAP01"
    finally:
        game.close()
    with pytest.raises(GameError, match=r"game.wad = 'freedom1' is neither .*freedoom1, freedoom2") as err:
        make_game(load(None, ["game.wad=freedom1"]))
    assert "\n" not in str(err.value)


def test_a_file_that_is_not_a_wad_is_an_error(tmp_path):
    junk = tmp_path / "maps.wad"
    junk.write_text("not a wad at all")
    with pytest.raises(GameError, match=r"game.wad = '.*maps.wad': .* is not a WAD file \(it does not start with IWAD or PWAD\)"):
        make_game(load(None, [f"game.wad='{junk}'"]))


@pytest.mark.parametrize("sets, missing", [([*FREEDOOM, "game.map=map99"], "map99"), (["game.map=E9M9"], "E9M9")])
def test_a_map_the_wad_does_not_have_is_an_error_listing_its_maps(sets, missing):
    with pytest.raises(GameError) as err:
        make_game(load(None, sets))
    text = str(err.value)
    assert f"game.map = {missing!r} is not in" in text and "\n" not in text
    assert ("E1M1, E1M2" in text) if "game.wad=freedoom1" in sets else ("MAP01, MAP02" in text)


def test_junk_scenario_file_is_an_error_naming_it(tmp_path):
    junk = tmp_path / "junk.cfg"
    junk.write_bytes(b"this is { not ] a config ===\n\x00\x01\x02\n")
    with pytest.raises(GameError, match=rf"game.scenario = '{junk}' is not a valid ViZDoom scenario file: .*line #1"):
        make_game(load(None, [f"game.scenario='{junk}'"]))


def test_own_freedoom_scenario_has_no_rewards():
    game = make_game(load(None, FREEDOOM))
    try:
        g = game.game
        assert (g.get_living_reward(), g.get_death_penalty(), g.get_map_exit_reward()) == (0, 0, 0)
    finally:
        game.close()


def test_read_wad_lists_maps_and_refuses_other_files(tmp_path):
    assert read_wad(PACKAGE / "freedoom2.wad").kind == "IWAD"
    assert read_wad(PACKAGE / "scenarios" / "my_way_home.wad").maps == ("MAP01",)
    # a hand-made PWAD: marker E2M4 followed by THINGS, then an unrelated lump
    lumps = [b"E2M4", b"THINGS", b"PLAYPAL"]
    wad = tmp_path / "tiny.wad"
    wad.write_bytes(struct.pack("<4sii", b"PWAD", len(lumps), 12)
                    + b"".join(struct.pack("<ii8s", 0, 0, name) for name in lumps))
    assert read_wad(wad).maps == ("E2M4",) and read_wad(wad).kind == "PWAD"
    (tmp_path / "not.wad").write_bytes(b"PK\x03\x04 a zip")
    with pytest.raises(WadError, match="not a WAD"):
        read_wad(tmp_path / "not.wad")
    wad.write_bytes(struct.pack("<4sii", b"PWAD", 99, 12))
    with pytest.raises(WadError, match="cut short"):
        read_wad(wad)


def _walk_to_door(press_at: int | None, in_action: bool = False, hold: bool = False, tap_gap: int = 0) -> list[float]:
    """Freedoom 1 E1M3: walk straight on from the start into the door ahead; press A at step ``press_at``
    (by name, or ``in_action``: as the policy does, a fifth action value above 0; with ``hold`` that
    value stays above 0 from then on, sent through :class:`~explorer.taps.Taps` with ``tap_gap``).

    Returns the player's y (map units; the door is at y = -40..-24, the player faces +y) after each step.
    """
    game = make_game(load(None, [*FREEDOOM, "game.map=E1M3", "game.args=['-nomonsters']"]))
    pad = DoomPad(game, ("a",) if in_action else ())
    taps = Taps(("a",), tap_gap)
    ys = []
    try:
        start = game.position()
        assert (start.x, start.y) == (-788.0, -216.0) and start.angle == pytest.approx(90.0)
        pad.send(np.array([0, 0, 0, 1.0, -1.0] if in_action else [0, 0, 0, 1.0]))
        for step in range(30):
            if in_action:
                pressed = step == press_at or (hold and press_at is not None and step >= press_at)
                pad.send(taps(np.array([0, 0, 0, 1.0, 1.0 if pressed else -1.0])))
            elif step == press_at:
                pad.press("a")
            elif step == (press_at or 0) + 1:
                pad.release("a")
            game.advance()
            ys.append(game.position().y)
    finally:
        pad.close()
        game.close()
    return ys


def test_pressing_a_opens_the_door_and_not_pressing_it_does_not():
    shut = _walk_to_door(None)
    opened = _walk_to_door(12)
    assert max(shut) < -40  # stopped by the closed door, all the way
    assert shut[11] == opened[11] == pytest.approx(-56, abs=2)  # both stood at the door (player radius 16)
    assert opened[-1] > 150  # through the door and on into the room behind it


def test_the_policys_a_output_opens_the_door():
    shut = _walk_to_door(None, in_action=True)
    opened = _walk_to_door(12, in_action=True)
    assert max(shut) < -40 and opened[11] == pytest.approx(-56, abs=2)
    assert opened[-1] > 150


def test_a_held_a_opens_the_door_only_when_sent_as_taps():
    """Doom's USE acts on a fresh press and a second press shuts an opening door: A held from the start
    presses once, far from the door; sent as taps (pad.tap_gap 8) it presses again at the door."""
    held = _walk_to_door(0, in_action=True, hold=True)
    tapped = _walk_to_door(0, in_action=True, hold=True, tap_gap=8)
    assert max(held) < -40 and held[11] == pytest.approx(-56, abs=2)  # stopped by the closed door
    assert tapped[-1] > 150  # through it
    assert _walk_to_door(0, in_action=True, hold=True, tap_gap=1)[-1] < -40  # pressed too often: shut again


def test_pad_buttons_the_engine_does_not_take_are_unbound():
    game = make_game(load(None, ["game.episode_steps=20"]))
    pad = DoomPad(game, ("rt", "a", "b"))
    try:
        pad.send(np.array([0, 0, 0, 1.0, 1.0, -1.0, 1.0]))  # RT and B pressed: nothing in the engine
        assert game.buttons.tolist() == [0.0]
        pad.send(np.array([0, 0, 0, 1.0, -1.0, 1.0, -1.0]))
        assert game.buttons.tolist() == [1.0] and game._buttons()[4:] == [1.0]
        pad.send(np.array([0, 0, 0, 1.0]))  # the sticks alone release A
        assert game.buttons.tolist() == [0.0]
        pad.send(np.array([0, 0, 0, 1.0, -1.0, 1.0, -1.0]))
        pad.neutral()
        assert game.buttons.tolist() == [0.0] and not game.action.any()
    finally:
        game.close()


def test_buttons_leave_the_four_stick_game_bit_identical(monkeypatch):
    def run() -> tuple[list[np.ndarray], list[tuple[float, float, float]]]:
        game = make_game(load(None, ["game.episode_steps=60"]))
        pad = DoomPad(game)
        rng = np.random.default_rng(3)
        frames, places = [], []
        try:
            for _ in range(40):
                pad.send(rng.uniform(-1, 1, 4))
                game.advance()
                frames.append(game.grab().copy())
                p = game.position()
                places.append((p.x, p.y, p.angle))
        finally:
            game.close()
        return frames, places

    with_buttons = run()
    monkeypatch.setattr(doom, "BUTTONS", ())  # the engine gets the four delta axes only
    monkeypatch.setattr(doom, "RELEASED", np.zeros(0, np.float32))
    sticks_only = run()
    assert with_buttons[1] == sticks_only[1]
    assert all(np.array_equal(a, b) for a, b in zip(with_buttons[0], sticks_only[0], strict=True))
    assert len(set(with_buttons[1])) > 10  # the sticks did move the player


def test_pad_buttons_by_name_by_array_and_neutral():
    game = make_game(load(None, ["game.episode_steps=20"]))
    pad = DoomPad(game)
    try:
        assert BUTTONS == ("a",) and doom.ENGINE_BUTTONS["a"] == "USE"
        pad.press("a")
        assert game.buttons.tolist() == [1.0] and game._buttons()[4:] == [1.0]
        pad.release("a")
        assert game.buttons.tolist() == [0.0]
        pad.send_buttons({"a": True})
        assert game.buttons.tolist() == [1.0]
        pad.send_buttons(np.array([np.nan], np.float32))  # NaN never presses
        assert game.buttons.tolist() == [0.0]
        pad.send_buttons(np.array([0.9]))
        pad.send(np.array([0.5, 0, 0, 1]))
        pad.neutral()
        assert game.buttons.tolist() == [0.0] and not game.action.any()
        with pytest.raises(ValueError, match="unknown pad button 'rt'; the game takes a"):
            pad.press("rt")
        with pytest.raises(ValueError, match="unknown pad button"):
            pad.send_buttons({"b": True})
        with pytest.raises(ValueError, match="1 entries"):
            pad.send_buttons(np.zeros(3))
    finally:
        game.close()


def test_reaching_my_way_homes_vest_ends_the_episode_as_a_goal(monkeypatch):
    _with_objects(monkeypatch)
    game = make_game(load(None, ["game.args=['+sv_cheats 1']"]))
    pad = DoomPad(game)
    try:
        (vest,) = [o for o in game.game.get_state().objects if o.name == "GreenArmor"]
        game.advance()
        assert not game.episode_ended and game.outcome is None
        game.game.send_game_command(f"warp {vest.position_x} {vest.position_y}")
        pad.send(np.array([0, 0, 1.0, 0]))  # an item is picked up by moving onto it
        game.advance()
        assert game.episode_ended and game.outcome == "goal" and game.episode_step == 2
        game.new_episode()
        assert game.outcome is None
    finally:
        game.close()
    short = make_game(load(None, ["game.episode_steps=3"]))
    try:
        for _ in range(3):
            short.advance()
        assert short.episode_ended and short.outcome == "timeout"
    finally:
        short.close()
