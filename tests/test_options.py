"""EngineOptions (vecenv._options): one set of engine options, checked the
same way by every front end (ShmemVecEnv, make, the gymnasium and SB3 drop-ins)."""

import dataclasses
import inspect

import gymnasium as gym
import numpy as np
import pytest

import vecenv
from vecenv._options import ENGINE_OPTIONS, UnknownOptionError
from vecenv.gymnasium_vector import AsyncVectorEnv

EngineOptions = vecenv.EngineOptions


class CountEnv(gym.Env):
    observation_space = gym.spaces.Box(0, 1e6, (1,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0]), {}

    def step(self, action):
        self.t += 1
        return np.array([float(self.t)]), 0.0, False, False, {}


FNS = [CountEnv, CountEnv]

BAD = [
    (dict(timeout=0), "timeout must be a number of seconds > 0"),
    (dict(start_timeout=-1.0), "start_timeout must be a number of seconds > 0"),
    (dict(spin=float("nan")), "spin must be a number of seconds >= 0"),
    (dict(on_worker_death="ignore"), "on_worker_death must be 'raise' or 'restart'"),
    (dict(max_restarts=-1), "max_restarts must be an int >= 0"),
    (dict(max_restarts=True), "max_restarts must be an int >= 0"),
]


def SubprocVecEnv(*args, **kwargs):
    """vecenv.sb3.SubprocVecEnv; skips the test where stable-baselines3 is
    not installed (the wheel's smoke venv)."""
    pytest.importorskip("stable_baselines3")
    from vecenv.sb3 import SubprocVecEnv as cls

    return cls(*args, **kwargs)


FRONT_ENDS = {
    "EngineOptions": lambda kw: EngineOptions(**kw),
    "ShmemVecEnv": lambda kw: vecenv.ShmemVecEnv(FNS, **kw),
    "make": lambda kw: vecenv.make(CountEnv, 2, **kw),
    "make(vec_kwargs)": lambda kw: vecenv.make(CountEnv, 2, vec_kwargs=kw),
    "AsyncVectorEnv": lambda kw: AsyncVectorEnv(FNS, **kw),
    "SubprocVecEnv": lambda kw: SubprocVecEnv(FNS, **kw),
}


def test_the_options_are_shmem_vec_envs_keywords_in_order():
    params = inspect.signature(vecenv.ShmemVecEnv.__init__).parameters
    keywords = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY]
    public = [n for n in keywords if not n.startswith("_")]  # a private test switch may follow
    assert public == [*ENGINE_OPTIONS, "engine_options"]
    defaults = EngineOptions()
    for name in ENGINE_OPTIONS:
        assert getattr(defaults, name) == params[name].default, name


@pytest.mark.parametrize("front_end", sorted(FRONT_ENDS))
@pytest.mark.parametrize("kwargs,message", BAD, ids=[str(kw) for kw, _ in BAD])
def test_every_front_end_refuses_the_same_values_with_the_same_message(front_end, kwargs, message):
    with pytest.raises(vecenv.InvalidArgumentError, match=message):
        FRONT_ENDS[front_end](kwargs)


@pytest.mark.parametrize("front_end", sorted(FRONT_ENDS))
def test_every_front_end_refuses_a_bad_context(front_end):
    kwargs = {"context": "thread"}
    if front_end == "SubprocVecEnv":  # SB3's own name for it, with SB3's message
        with pytest.raises(vecenv.InvalidArgumentError, match="start_method"):
            FRONT_ENDS[front_end](kwargs)
        return
    with pytest.raises(vecenv.InvalidArgumentError, match="context must be one of"):
        FRONT_ENDS[front_end](kwargs)


def test_options_are_frozen_checked_and_normalized():
    opts = EngineOptions(autoreset_mode="NextStep", timeout=2)
    assert opts.autoreset_mode == "next_step"
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.timeout = 3  # type: ignore[misc]
    assert opts.replace(timeout=3).timeout == 3 and opts.timeout == 2
    with pytest.raises(vecenv.InvalidArgumentError, match="timeout"):
        opts.replace(timeout=-1)
    assert opts.changed() == {"autoreset_mode": "next_step", "timeout": 2}
    assert EngineOptions(cpu_affinity=np.array([0])).changed().keys() == {"cpu_affinity"}
    assert EngineOptions(**opts.as_kwargs()) == opts


def test_unknown_keywords_are_type_errors_naming_the_caller():
    for build in (FRONT_ENDS["AsyncVectorEnv"], FRONT_ENDS["SubprocVecEnv"], FRONT_ENDS["make"]):
        kwargs = {"no_such_option": 1}
        if build is FRONT_ENDS["make"]:
            with pytest.raises(UnknownOptionError, match="no_such_option"):
                vecenv.make(CountEnv, 2, vec_kwargs=kwargs)
            continue
        with pytest.raises(TypeError, match="unexpected keyword"):
            build(kwargs)
    assert issubclass(UnknownOptionError, vecenv.InvalidArgumentError)


@pytest.mark.timeout(60)
def test_every_front_end_accepts_engine_options():
    opts = EngineOptions(num_workers=1, timeout=30.0, check_actions=True)
    with vecenv.ShmemVecEnv(FNS, engine_options=opts) as venv:
        assert venv.engine_options == opts
        assert venv.num_workers == 1 and venv.timeout == 30.0 and venv.check_actions
    with vecenv.make(CountEnv, 2, vec_kwargs=opts) as venv:
        assert venv.engine_options == opts
    envs = AsyncVectorEnv(FNS, engine_options=opts)
    try:
        assert envs.engine.timeout == 30.0 and envs.engine.num_workers == 1
        assert envs.engine.autoreset_mode == "next_step"  # the drop-in's own
    finally:
        envs.close()
    venv = SubprocVecEnv(FNS, engine_options=opts)
    try:
        assert venv.engine.timeout == 30.0 and venv.num_workers == 1
    finally:
        venv.close()


def test_engine_options_and_keywords_do_not_mix():
    opts = EngineOptions(num_workers=1)
    with pytest.raises(vecenv.InvalidArgumentError, match="not both"):
        vecenv.ShmemVecEnv(FNS, engine_options=opts, timeout=1.0)
    with pytest.raises(vecenv.InvalidArgumentError, match="not both"):
        AsyncVectorEnv(FNS, engine_options=opts, timeout=1.0)
    with pytest.raises(vecenv.InvalidArgumentError, match="sets itself"):
        AsyncVectorEnv(FNS, engine_options=EngineOptions(copy=False))
    with pytest.raises(vecenv.InvalidArgumentError, match=r"vecenv\.EngineOptions"):
        vecenv.ShmemVecEnv(FNS, engine_options={"num_workers": 1})
