"""Config sections for novelty and learning (to be wired in as ``config.novelty``, ``config.learner``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from explorer.config import _Section


class NoveltyConfig(_Section):
    """The intrinsic reward: how new a frame is."""

    signal: Literal["episodic", "rnd", "forward", "pixel"] = Field(
        "episodic", description="episodic: kNN distance to this episode's embeddings (Never Give Up); "
        "rnd: error of a predictor against a fixed random net; forward: action-conditioned forward-model error; "
        "pixel: mean abs pixel difference to recent frames (naive baseline)")
    embedding: Literal["pooled", "random", "inverse", "temporal"] = Field(
        "temporal", description="episodic embedding. pooled: fixed random CNN averaged over image columns, so "
        "turning in place (a horizontal image shift) changes it little; random: fixed random CNN, flattened; "
        "inverse: CNN learned by inverse dynamics (predict the action from two frames); "
        "temporal: CNN learned so that frames a few steps apart are close (reachability, contrastive)")
    embed_dim: int = Field(64, gt=0, description="embedding width, features (random/inverse; pooled uses rows x filters)")
    knn: int = Field(3, gt=0, description="neighbours averaged by the episodic kNN distance")
    exclude_recent: int = Field(25, ge=0, description="newest episode embeddings ignored by the kNN, agent steps "
                                "(novelty then means far from what was seen before, not from a moment ago)")
    episode_capacity: int = Field(1024, gt=1, description="embeddings kept per episode, agent steps (older are overwritten)")
    pixel_window: int = Field(8, gt=0, description="recent frames the pixel signal compares against")
    norm_decay: float = Field(0.99, gt=0, lt=1, description="decay of the running mean/variance that normalises rewards, per agent step")
    learning_rate: float = Field(1e-3, gt=0, description="Adam step size of learned novelty models (rnd/forward/inverse/temporal)")
    seed: int = Field(1, description="seed of the fixed random networks")


class LearnerConfig(_Section):
    """The surrogate learner: twin critics fitted to novelty, an actor that climbs them."""

    algo: Literal["sac", "td3"] = Field("sac", description="sac: squashed Gaussian with learned entropy weight; td3: deterministic actor plus noise")
    gamma: float = Field(0.97, gt=0, lt=1, description="discount per agent step")
    n_step: int = Field(5, ge=1, description="steps of novelty summed before bootstrapping (n-step TD)")
    batch_size: int = Field(64, gt=0, description="transitions per update")
    update_every: int = Field(2, ge=1, description="agent steps between updates")
    warmup_steps: int = Field(1000, ge=0, description="agent steps of correlated random sticks before the actor acts and learning starts")
    replay_mb: float = Field(600.0, gt=0, description="memory cap of the replay, MiB of uint8 frames")
    actor_lr: float = Field(3e-4, gt=0, description="actor Adam step size")
    critic_lr: float = Field(3e-4, gt=0, description="critic Adam step size")
    alpha_lr: float = Field(3e-4, gt=0, description="SAC entropy-weight Adam step size")
    init_alpha: float = Field(0.1, gt=0, description="SAC initial entropy weight")
    target_entropy: float = Field(-2.0, description="SAC target entropy, nats summed over the 4 axes (each axis has its own weight aiming at a quarter)")
    tau: float = Field(0.01, gt=0, le=1, description="target network Polyak rate per update")
    clip_norm: float = Field(10.0, gt=0, description="global-norm gradient clip per optimiser")
    hidden: int = Field(256, gt=0, description="width of critic and actor heads")
    feature: int = Field(128, gt=0, description="encoder output width")
    filters: tuple[int, ...] = Field((16, 32, 32), description="conv filters per encoder layer (kernel 3, stride 2)")
    context: bool = Field(True, description="feed the previous action, the episode-step fraction and recent novelty averages to actor and critics")
    noise_rho: float = Field(0.9, ge=0, lt=1, description="AR(1) time correlation of exploration noise per agent step")
    td3_noise: float = Field(0.3, ge=0, description="TD3 exploration noise std (stick units)")
    td3_target_noise: float = Field(0.2, ge=0, description="TD3 target-policy smoothing std")
    td3_policy_delay: int = Field(2, ge=1, description="TD3 critic updates per actor update")
    preact_penalty: float = Field(1e-3, ge=0, description="penalty on squared pre-tanh actor means (keeps sticks off saturation)")
    seed: int = Field(0, description="seed of network init, noise and replay sampling")
    eager: bool = Field(False, description="run the train step eagerly (debugging)")
