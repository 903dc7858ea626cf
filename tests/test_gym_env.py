"""Gymnasium games as explorer envs: frames, the end of an episode (terminated or truncated), positions
for coverage, and one-line errors for a game that cannot be made."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from explorer.config import ConfigError, dump, load
from explorer.core import Env, ExplorerError, stack_frames
from explorer.run.coverage import MAP_CELLS, Coverage

gym = pytest.importorskip("gymnasium")

from explorer.envs.gym.env import GymEnv  # noqa: E402
from explorer.envs.gym.positions import FRAME_CELL_LABEL, FrameCell, Position, frame_cell  # noqa: E402


class Corridor(gym.Env):
    """Walk right along a corridor of 6 squares: the last one ends the game (terminated). The picture is
    the corridor with the player lit; ``info["position"]`` is where it stands (when ``report``)."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, report: bool = True, render_mode: str | None = None, pay: float = 1.0):
        self.render_mode = render_mode
        self.pay = pay
        self.observation_space = gym.spaces.Box(0, 255, (24, 36, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.report = report
        self.x = 0

    def _obs(self):
        frame = np.zeros((24, 36, 3), np.uint8)
        frame[:, self.x * 6:(self.x + 1) * 6] = 255
        return frame

    def _info(self):
        return {"position": (self.x * 10.0, 5.0)} if self.report else {}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x = 0
        return self._obs(), self._info()

    def step(self, action):
        self.x = min(self.x + int(action), 5)
        return self._obs(), self.pay, self.x == 5, False, self._info()


def corridor_env(*sets: str, report: bool = True, limit: int = 0, pay: float = 1.0) -> GymEnv:
    """The corridor as an explorer env; with ``limit``, cut by Gymnasium's own TimeLimit after that many steps."""
    config = load(None, ["game.name=gym", "game.id=Corridor-v0", 'game.actions={"0" = {}, "1" = {walk_x = 1}}',
                         "observation.width=24", "observation.height=16", *sets])
    env = Corridor(report, pay=pay)
    return GymEnv(config.game, config.observation, 2, 8, config.pad.buttons,
                  env=gym.wrappers.TimeLimit(env, max_episode_steps=limit) if limit else env)


RIGHT = np.array([0, 0, 1, 0, 0], np.float32)


def test_a_game_end_is_terminated_the_envs_own_limit_truncated_and_explorers_budget_an_end():
    env = corridor_env("game.episode_steps=100")
    assert isinstance(env, Env)
    first = env.reset()
    assert first.first and tuple(first.obs.shape) == (2, 16, 24, 3)
    steps = [env.step(RIGHT) for _ in range(5)]
    assert [s.last for s in steps] == [False] * 4 + [True]
    assert not steps[-1].truncated and env.outcome == "goal"  # the game ended it, paying: nothing to bootstrap
    assert steps[-1].info["reward"] == 1.0
    env.reset()
    budget = corridor_env("game.episode_steps=2")
    budget.reset()
    s1, s2 = budget.step(RIGHT), budget.step(RIGHT)
    # game.episode_steps ran out: the budget the context's step fraction counts down ends it, as a game end does
    assert not s1.last and s2.last and not s2.truncated and budget.outcome == "timeout"
    limited = corridor_env("game.episode_steps=100", limit=2)
    limited.reset()
    s1, s2 = limited.step(RIGHT), limited.step(RIGHT)
    assert not s1.last and s2.last and s2.truncated and limited.outcome == "truncated"  # the game would go on


def test_a_game_end_that_pays_nothing_is_a_death_and_counts_as_a_whole_episode():
    from explorer.run.coverage import DEATH, cells_per_budget
    env = corridor_env("game.episode_steps=100", pay=0.0)  # ALE's last life lost: the game ends, paying nothing
    env.reset()
    steps = [env.step(RIGHT) for _ in range(5)]
    assert steps[-1].last and not steps[-1].truncated and env.outcome == DEATH
    # 6 squares in 5 of 100 steps: a death counts with the whole budget, not scaled up from its 5 steps
    assert cells_per_budget([6], [5], 100, outcomes=[env.outcome]) == 6.0


def test_frames_are_the_pixel_observations_resized_and_stacked():
    env = corridor_env()
    env.reset()
    step = env.step(RIGHT)
    obs = step.obs.numpy()
    # the player stood in square 0, then square 1: columns 0-3 of the 24-wide frame, then 4-7
    assert obs[0, :, :4].min() == 255 and obs[0, :, 4:].max() == 0
    assert obs[1, :, 4:8].min() == 255 and obs[1, :, :4].max() == 0
    assert stack_frames(obs).shape == (16, 24, 6)


def test_a_position_in_info_is_read_and_a_game_without_one_gets_frame_cells():
    env = corridor_env()
    assert env.reset().info["position"] == Position(0.0, 5.0)
    assert env.step(RIGHT).info["position"] == Position(10.0, 5.0)
    blind = corridor_env(report=False)
    first = blind.reset().info["position"]
    moved = blind.step(RIGHT).info["position"]
    assert isinstance(first, FrameCell) and isinstance(moved, FrameCell) and first != moved
    assert blind.step(np.zeros(5, np.float32)).info["position"] == moved  # the same picture, the same cell


def test_frame_cells_are_go_explores_11_by_8_with_8_grey_levels():
    frame = np.zeros((80, 110, 3), np.uint8)
    frame[:, 10:20] = 255  # one column of the 11 (area-downscaled) is white
    frame[:40, 50:60] = 100  # top half of column 5 is grey 100: level 100 // 32 = 3
    cell = np.frombuffer(frame_cell(frame).key, np.uint8).reshape(8, 11)
    expected = np.zeros((8, 11), np.uint8)
    expected[:, 1] = 7
    expected[:4, 5] = 3
    np.testing.assert_array_equal(cell, expected)


def test_coverage_counts_cells_per_room_and_labels_frame_cells():
    cov = Coverage(16.0)
    cov.add(20.0, 200.0, room=1)
    cov.add(20.0, 200.0, room=2)  # the same square of another room is another cell
    cov.add(24.0, 205.0, room=2)
    assert len(cov.all_cells) == 2 and cov.label == MAP_CELLS
    assert cov.room_stride() == 3 and cov.map_cells() == [(1, 12), (4, 12)]
    np.testing.assert_allclose(cov.plot_xy()[:, 0], [20.0, 68.0, 72.0])  # room 2 drawn 3 cells to the right
    frames = Coverage()
    frames.add_frame_cell(b"\x00" * 88, FRAME_CELL_LABEL)
    frames.add_frame_cell(b"\x01" * 88, FRAME_CELL_LABEL)
    assert len(frames.all_cells) == 2 and frames.label == FRAME_CELL_LABEL and frames.map_cells() == []


def test_ale_montezuma_position_is_room_and_x_y_from_ram():
    pytest.importorskip("ale_py")
    config = load(None, ["game.name=gym", "game.id=ALE/MontezumaRevenge-v5", "game.episode_steps=20"])
    env = GymEnv(config.game, config.observation, 3, 8, config.pad.buttons)
    try:
        first = env.reset()
        ram = env.env.unwrapped.ale.getRAM()
        assert first.info["position"] == Position(float(ram[42]), float(ram[43]), room=int(ram[3]))
        assert first.info["position"].room == 1  # the game starts in room 1
        assert env.cell == 16.0 and tuple(first.obs.shape) == (3, 64, 64, 3)
        assert env.actions.kind == "Discrete" and len(env.actions.described) == 18
        steps = [env.step(np.array([0, 0, 0, 0, 1], np.float32)) for _ in range(20)]
        assert steps[-1].last and not steps[-1].truncated and not any(s.last for s in steps[:-1])
    finally:
        env.close()


def test_minigrid_is_rendered_and_read_from_agent_pos():
    pytest.importorskip("minigrid")
    config = load(None, ["game.name=gym", "game.id=MiniGrid-Empty-5x5-v0", "pad.buttons=[\"a\", \"b\"]"])
    env = GymEnv(config.game, config.observation, 3, 8, config.pad.buttons)
    try:
        first = env.reset()
        assert not env.pixels  # symbolic observations: the frames are its rgb_array renders
        x, y = env.env.unwrapped.agent_pos
        assert first.info["position"] == Position(float(x), float(y)) and env.cell == 1.0
        before = first.obs.numpy()[-1]
        turned = env.step(np.array([1, 0, 0, 0, 0, 0], np.float32))  # camera right: MiniGrid's "right"
        assert turned.info["position"] == first.info["position"]
        assert not np.array_equal(turned.obs.numpy()[-1], before)  # the agent's triangle turned
    finally:
        env.close()


def test_game_name_gym_needs_an_id():
    with pytest.raises(ConfigError, match="game.name = gym needs game.id, a registered Gymnasium id"):
        load(None, ["game.name=gym"])


@pytest.mark.parametrize(("sets", "message"), [
    (["game.id=NoSuchGame-v0"], "game.id = NoSuchGame-v0 is not a registered Gymnasium id (Environment `NoSuchGame` "
     "doesn't exist.): set game.module to the package that registers it (pip install -e '.[gym]' brings ale_py and "
     "minigrid)"),
    (["game.id=Foo/Bar-v0", "game.module=no_such_module"], "game.module = no_such_module cannot be imported (No module "
     "named 'no_such_module'), so game.id = Foo/Bar-v0 is not registered: pip install -e '.[gym]' (ale-py, "
     "minigrid), or install the package that registers it"),
    (["game.id=CartPole-v1", "game.kwargs={no_such_argument = 1}"], "game.kwargs = {'no_such_argument': 1} is not "
     "taken by CartPole-v1: CartPoleEnv.__init__() got an unexpected keyword argument 'no_such_argument'"),
])
def test_a_game_that_cannot_be_made_is_one_line(sets, message):
    config = load(None, ["game.name=gym", *sets])
    with pytest.raises(ExplorerError) as err:
        GymEnv(config.game, config.observation, 3, 8)
    assert str(err.value) == message


def test_import_explorer_works_without_gymnasium():
    code = ("import sys; sys.modules['gymnasium'] = None; sys.modules['ale_py'] = None; sys.modules['minigrid'] = None\n"
            "import explorer, explorer.cli, explorer.envs, explorer.envs.gym, explorer.run.explore, explorer.run.observers\n"
            "from explorer.config import load; from explorer.envs import make_env\n"
            "try:\n    make_env(load(None, ['game.name=gym', 'game.id=ALE/Pong-v5']))\n"
            "except Exception as err:\n    print(type(err).__name__, err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("GymError game.name = gym needs Gymnasium, which is not installed: "
                                  "pip install -e '.[gym]'")


def test_table_settings_survive_a_config_file_and_a_run_directory_whole(tmp_path):
    path = tmp_path / "montezuma.toml"
    path.write_text('[game]\nname = "gym"\nid = "ALE/MontezumaRevenge-v5"\n'
                    '[game.kwargs]\nrepeat_action_probability = 0.0\n'
                    '[game.actions]\nNOOP = {}\nUP = {walk_y = 1}\n', encoding="utf-8")
    config = load(path)
    assert config.game.actions == {"NOOP": {}, "UP": {"walk_y": 1.0}}  # the empty NOOP state is kept
    assert config.game.kwargs == {"repeat_action_probability": 0.0}
    again = tmp_path / "again.toml"
    dump(config, again)  # as a run directory keeps it
    assert load(again).game == config.game


@pytest.mark.parametrize(("sets", "message"), [
    (["game.id=os:Pong-v5"], "game.id = 'os:Pong-v5' names a module before ':'; give the id alone and the module as "
     "game.module (from --set: game.id; defaults: game.module)"),
    (["game.id=Pong-v5", "game.module=../evil"], "game.module = '../evil' is not a module name (dotted Python names, "
     "such as ale_py or minigrid) (from --set)"),
    (["game.id=ALE/Pong-v5", "game.actions={UP = {walk_y = nan}}"], "game.actions.UP.walk_y (from --set): Input "
     "should be a finite number, got nan"),
])
def test_gym_settings_that_cannot_be_right_are_refused_at_load(sets, message):
    with pytest.raises(ConfigError) as err:
        load(None, ["game.name=gym", *sets])
    assert str(err.value) == f"invalid configuration: {message}"
