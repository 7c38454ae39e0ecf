"""The environments the suite measures, and the factory every contender gets (parent).

One :class:`EnvSpec` per environment (its gymnasium id, envpool's closest
match and what still differs), the factory :func:`make_env`, and the
pre-sampled actions. The factory travels to every contender's workers (vecenv,
gymnasium, SB3, Ray actors) by value: this module is registered with
cloudpickle, so a worker needs neither ``benchmarks/`` on its ``sys.path`` nor
this package.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
import warnings
from typing import Any, Callable, Dict, Optional, Tuple

import cloudpickle
import numpy as np

ACTION_POOL = 64  # pre-sampled action batches per session, used in turn

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def make_env(env_id: str, kwargs: Dict[str, Any]):
    """Build one env; a module-level function so every engine can pickle the
    factory (cloudpickle copies it by value, see the module docstring)."""
    import gymnasium

    # The envs' own warnings (MuJoCo deprecations...) would bury the progress
    # lines; this runs in every contender's workers too.
    warnings.filterwarnings("ignore")
    if env_id.startswith("ALE/"):
        import ale_py

        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner per env
        gymnasium.register_envs(ale_py)
    elif env_id.startswith("vecenv/"):
        import vecenv.envs  # noqa: F401  (registers the vecenv/ ids)
    elif "mujoco" in str(gymnasium.spec(env_id).entry_point):
        # MuJoCo's C library prints its warnings itself (mujoco 4: a deprecation
        # and a blank line per env built): give it a handler that drops them.
        import mujoco

        mujoco.set_mju_user_warning(_drop)
    return gymnasium.make(env_id, **kwargs)


def _drop(message: str) -> None:
    """A MuJoCo warning handler that shows nothing (see :func:`make_env`)."""


@dataclasses.dataclass
class EnvSpec:
    key: str  # the name on the command line
    label: str  # the name in tables
    gym_id: str
    gym_kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
    envpool_id: Optional[str] = None
    envpool_kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
    envpool_note: str = ""
    install_hint: str = ""
    # The default suite's sizes above this are left out for this env (the
    # large sizes cost a minute per cell with costly envs); --num-envs runs
    # whatever it names.
    max_default_num_envs: int = 16

    def factory(self) -> Callable[[], Any]:
        return functools.partial(make_env, self.gym_id, dict(self.gym_kwargs))


# Gymnasium's ALE/Pong-v5: frameskip 4, sticky actions p=0.25, RGB 210x160x3,
# no noop starts, no fire reset, last frame only, 108000 frames (27000 steps) per
# episode. EnvPool's Pong-v5 is set as close to that as it allows; what differs
# is listed in ENVPOOL_PONG_NOTE and in benchmarks/README.md.
ENVPOOL_PONG_KWARGS = {
    "frame_skip": 4,
    "repeat_action_probability": 0.25,
    "stack_num": 1,
    "gray_scale": False,
    "img_height": 210,
    "img_width": 160,
    "noop_max": 1,  # envpool's minimum (0 crashes it); it then takes exactly 1 no-op at reset
    "use_fire_reset": False,
    "episodic_life": False,
    "reward_clip": False,
    "max_episode_steps": 27000,
}
ENVPOOL_PONG_NOTE = (
    "envpool Pong-v5 set close to ALE/Pong-v5 (frame_skip 4, sticky actions 0.25, RGB 210x160, "
    "no stacking, no fire reset, no reward clip, 27000 steps per episode); still different: "
    "it max-pools the last two frames of each skip, passes the frame through its resize at the "
    "same size, returns channels-first (3, 210, 160), and takes 1 no-op step at reset"
)

ENVS: Dict[str, EnvSpec] = {
    "noop": EnvSpec("noop", "noop", "vecenv/Noop-v0", max_default_num_envs=256),
    "cartpole": EnvSpec(
        "cartpole",
        "CartPole-v1",
        "CartPole-v1",
        envpool_id="CartPole-v1",
        envpool_note="envpool CartPole-v1: same dynamics, its own C++ implementation",
        max_default_num_envs=256,
    ),
    "bigobs": EnvSpec("bigobs", "bigobs", "vecenv/BigObs-v0"),
    "pong": EnvSpec(
        "pong",
        "ALE/Pong-v5",
        "ALE/Pong-v5",
        envpool_id="Pong-v5",
        envpool_kwargs=ENVPOOL_PONG_KWARGS,
        envpool_note=ENVPOOL_PONG_NOTE,
        install_hint='pip install ".[atari]"',
    ),
    # Heavy-tailed step time (issue 5): 50 us of work, one step in twenty 2 ms.
    # Lockstep waits for the slowest env of every batch; partial batches
    # (vecenv_async, envpool_async) do not.
    "heavytail": EnvSpec("heavytail", "heavytail", "vecenv/Sleep-v0"),
    "halfcheetah": EnvSpec(
        "halfcheetah",
        "HalfCheetah-v5",
        "HalfCheetah-v5",
        install_hint='pip install ".[mujoco]"',
    ),
}
ENV_ALIASES = {spec.gym_id.lower(): key for key, spec in ENVS.items()}
ENV_ALIASES.update({spec.label.lower(): key for key, spec in ENVS.items()})


def probe_env(spec: EnvSpec):
    """Make one env in this process: its spaces, or the reason it cannot run."""
    try:
        env = spec.factory()()
    except Exception as exc:
        hint = f" ({spec.install_hint})" if spec.install_hint else ""
        return None, f"cannot make {spec.gym_id}: {type(exc).__name__}: {exc}{hint}"
    spaces = (env.observation_space, env.action_space)
    env.close()
    return spaces, None


def time_one_env(spec: EnvSpec) -> float:
    """Seconds to build, reset and close one env (imports already done)."""
    t0 = time.perf_counter()
    env = spec.factory()()
    env.reset(seed=0)
    env.close()
    return time.perf_counter() - t0


def sample_actions(space, shape_prefix: Tuple[int, ...], seed: int) -> np.ndarray:
    """Pre-sample actions: an array of shape ``shape_prefix + space.shape``."""
    space.seed(seed)
    n = int(np.prod(shape_prefix))
    flat = [space.sample() for _ in range(n)]
    return np.asarray(flat).reshape(*shape_prefix, *space.shape)


def env_entry(spec: EnvSpec, spaces) -> Dict[str, Any]:
    """What a benchmark JSON says of an env: its ids, spaces and envpool's settings."""
    return {
        "gym_id": spec.gym_id,
        "observation_space": str(spaces[0]),
        "action_space": str(spaces[1]),
        "envpool": spec.envpool_id,
        "envpool_kwargs": spec.envpool_kwargs,
        "envpool_note": spec.envpool_note,
    }
