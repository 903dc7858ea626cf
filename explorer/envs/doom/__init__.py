"""Doom through ViZDoom: the game and its pad (:mod:`.game`), the engine's process (:mod:`.process`), WAD
reading (:mod:`.wad`) and the synchronous env (:mod:`.env`). ``freedoom.cfg`` is explorer's own scenario."""
