"""Gymnasium in both directions: any Gymnasium game as an explorer env, explorer's games as Gymnasium envs.

- :class:`~explorer.envs.gym.env.GymEnv` (``game.name = "gym"``): a registered id's pixels (or its
  ``rgb_array`` renders) as frames, the pad mapped onto its action space
  (:mod:`explorer.envs.gym.actions`), its position for coverage (:mod:`explorer.envs.gym.positions`).

Gymnasium, ale-py and minigrid are the ``gym`` extra (``pip install -e '.[gym]'``); nothing here
imports them until a game is made.
"""
