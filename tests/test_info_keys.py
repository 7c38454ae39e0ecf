"""``info_keys``: the envs' infos cut in the worker, in every layout and
front end; and the InfoError for an info that is not a dict with str keys.

The reference is the same vec env without ``info_keys``, whose infos are cut
here by hand: the env's own keys outside ``info_keys`` go, what vecenv adds
(terminal observations, ``TimeLimit.truncated``, ``final_obs``, the episode
statistics) stays.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import vecenv
from vecenv.errors import InfoError, InvalidArgumentError

pytestmark = pytest.mark.timeout(120)

VECENV_KEYS = {"terminal_observation", "TimeLimit.truncated", "final_obs", "episode"}


class KeyedInfoEnv(gym.Env):
    """Infos whose keys differ per env and per step, and change type: ``a``
    every step (an int, then a float from step 3), ``b`` on even steps (an
    array), ``s`` for odd envs (a str); the reset info holds ``a`` and ``r``.
    Episodes of ``3 + env_id`` steps."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, env_id: int):
        self.env_id, self.t = env_id, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.env_id, 0], np.float32), {"a": -1, "r": self.env_id}

    def step(self, action):
        self.t += 1
        info = {"a": self.t if self.t < 3 else float(self.t)}
        if self.t % 2 == 0:
            info["b"] = np.arange(3) * self.t
        if self.env_id % 2:
            info["s"] = f"env{self.env_id}"
        obs = np.array([self.env_id, self.t], np.float32)
        return obs, 1.0, False, self.t >= 3 + self.env_id, info


def _fns(n=4):
    return [lambda e=e: KeyedInfoEnv(e) for e in range(n)]


def _cut(info, keys):
    """``info`` (one env's, SB3 layout) as info_keys=keys would leave it."""
    out = {k: v for k, v in info.items() if k in VECENV_KEYS or k in keys}
    if "final_info" in info:
        out["final_info"] = {k: v for k, v in info["final_info"].items() if k in keys}
    return out


def _canon(x):
    if isinstance(x, dict) and set(x) == {"r", "l", "t"}:  # episode statistics: t is a duration
        return {"r": x["r"], "l": x["l"], "t": x["t"] >= 0}
    if isinstance(x, dict):
        return {k: _canon(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple)):
        return [_canon(v) for v in x]
    if isinstance(x, np.ndarray):
        return ("array", x.dtype.str, x.tolist())
    return x


LAYOUTS = {
    "in process": {"num_workers": 0},
    "one worker": {"num_workers": 1},
    "two workers": {"num_workers": 2},
    "the caller's share": {"num_workers": 1, "inline": True},
}


@pytest.mark.parametrize("mode", ["sb3", "next_step", "same_step"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("keys", [(), ("a",), ("b", "s", "absent")])
def test_info_keys_keep_only_the_named_keys_in_every_layout(layout, mode, keys):
    kwargs = {**LAYOUTS[layout], "autoreset_mode": mode, "episode_statistics": True}
    actions = np.zeros(4, np.int64)
    with (
        vecenv.ShmemVecEnv(_fns(), **kwargs) as full,
        vecenv.ShmemVecEnv(_fns(), info_keys=keys, **kwargs) as cut,
    ):
        full.reset(), cut.reset()
        assert _canon(cut.reset_infos) == _canon([_cut(i, keys) for i in full.reset_infos])
        for _ in range(9):
            want, got = full.step(actions), cut.step(actions)
            for w, g in zip(want[:3], got[:3]):
                np.testing.assert_array_equal(w, g)
            assert _canon(got[3]) == _canon([_cut(i, keys) for i in want[3]])
            assert _canon(cut.reset_infos) == _canon([_cut(i, keys) for i in full.reset_infos])
        assert cut.engine_options.info_keys == tuple(keys)


def test_info_keys_with_partial_batches():
    with vecenv.ShmemVecEnv(_fns(), num_workers=2, batch_size=2, info_keys=("a",)) as venv:
        venv.reset()
        seen = 0
        for _ in range(12):
            obs, rew, done, infos, env_ids = venv.recv()
            for info in infos:
                assert set(info) <= {"a"} | VECENV_KEYS
                seen += "a" in info
            venv.send(np.zeros(len(env_ids), np.int64), env_ids)
        assert seen > 0


def test_the_gymnasium_drop_in_takes_info_keys():
    from vecenv.gymnasium_vector import AsyncVectorEnv

    gym_venv = AsyncVectorEnv(_fns(), info_keys=("a",))
    try:
        _, infos = gym_venv.reset(seed=0)
        assert set(infos) == {"a", "_a"}
        _, _, _, _, infos = gym_venv.step(np.zeros(4, np.int64))
        assert set(infos) == {"a", "_a"}
    finally:
        gym_venv.close()


def test_the_sb3_drop_in_takes_info_keys():
    pytest.importorskip("stable_baselines3")  # the wheel matrix's fast suite runs without it
    from vecenv.sb3 import SubprocVecEnv

    venv = SubprocVecEnv(_fns(), info_keys=())
    try:
        venv.reset()
        _, _, _, infos = venv.step(np.zeros(4, np.int64))
        # SB3's own key, on every step as SB3's workers add it; the env's are gone.
        assert infos == [{"TimeLimit.truncated": False}] * 4
    finally:
        venv.close()


@pytest.mark.parametrize("bad", ["lives", b"lives", 3, [1], ("a", None)])
def test_bad_info_keys_are_refused_naming_the_option(bad):
    with pytest.raises(InvalidArgumentError, match="info_keys"):
        vecenv.ShmemVecEnv(_fns(1), info_keys=bad)


class BadInfoEnv(KeyedInfoEnv):
    """Env 2 (not its worker's first) returns ``bad`` at its second step, or
    from its reset when ``at_reset``."""

    bad = None
    at_reset = False

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed)
        return obs, (self.bad if self.env_id == 2 and self.at_reset else info)

    def step(self, action):
        obs, r, term, trunc, info = super().step(action)
        return obs, r, term, trunc, (self.bad if self.env_id == 2 and self.t == 2 else info)


@pytest.mark.parametrize("at_reset", [False, True])
@pytest.mark.parametrize("bad", [None, ["a", 1], {1: "x"}])
@pytest.mark.parametrize("layout", ["in process", "two workers"])
def test_an_info_that_is_not_a_dict_of_str_keys_names_its_env(layout, bad, at_reset):
    cls = type("Bad", (BadInfoEnv,), {"bad": bad, "at_reset": at_reset})
    with vecenv.ShmemVecEnv([lambda e=e: cls(e) for e in range(4)], **LAYOUTS[layout]) as venv:
        with pytest.raises(InfoError) as err:
            venv.reset()
            for _ in range(3):
                venv.step(np.zeros(4, np.int64))
        assert err.value.env_index == 2
        what = "reset()" if at_reset else "step()"
        if isinstance(bad, dict):
            what = "step() or reset()"  # str keys are checked where the round's infos leave
        assert f"env 2 returned an info of type {type(bad).__name__} from {what};" in str(
            err.value
        ) or f"env 2 returned an info from {what} with keys that are not str" in str(err.value)
