"""The learning agent's parts: networks, actor, adder, replay, learner, novelty, gradient guard, checkpoints."""
