"""Infos in the shared block (``vecenv._infos.InfoRows``): an info of numbers
(bools, ints, floats, NumPy number scalars, numeric arrays, nested dicts of
those) is written into its env's row by the worker and read by the parent
without a pickle or a pipe message; anything else goes pickled, for that env
and step only.

The row codec is checked against random info layouts (hypothesis); the
engine is checked step by step against its in-process layout (whose infos
never leave the process) and against gymnasium's ``SyncVectorEnv``.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vecenv
from vecenv._infos import INFO_ROW_BYTES, InfoRows

pytestmark = pytest.mark.timeout(180)

_NUMPY_SCALARS = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
]
_ARRAY_DTYPES = ["bool", "int8", "int64", "uint16", "float32", "float64", "complex128"]


def _same(a, b, ordered=True) -> bool:
    """Equal values of the same type (dtype and shape for arrays; NaN equals
    NaN); dict keys in the same order unless not ``ordered``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        same_keys = list(a) == list(b) if ordered else set(a) == set(b)
        return same_keys and all(_same(a[k], b[k], ordered) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, (float, np.floating)) and math.isnan(a):
        return bool(math.isnan(b))
    return bool(a == b)


def _numpy_scalar(t):
    dtype = np.dtype(t)
    return hnp.from_dtype(dtype).map(t)


numbers = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(_NUMPY_SCALARS).flatmap(_numpy_scalar),
    st.sampled_from(_ARRAY_DTYPES).flatmap(
        lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    ),
)
unfit = st.one_of(
    st.text(max_size=5),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.integers(2**63, 2**70),
    st.integers(-(2**70), -(2**63) - 1),
)
keys = st.text(min_size=1, max_size=12)
fit_infos = st.recursive(
    st.dictionaries(keys, numbers, max_size=6),
    lambda children: st.dictionaries(keys, st.one_of(numbers, children), max_size=4),
    max_leaves=12,
)


def _rows(num_envs=3, lo=0, hi=3):
    block = bytearray(64 + INFO_ROW_BYTES * num_envs)
    return block, InfoRows(block, 64, lo, hi)


def _fits(info) -> bool:
    """What the rows promise to hold (before the size check)."""
    for v in info.values():
        if isinstance(v, dict):
            if not _fits(v):
                return False
        elif type(v) is int and not -(2**63) <= v < 2**63:
            return False
        elif type(v) not in (bool, int, float, np.ndarray, *_NUMPY_SCALARS):
            return False
    return True


@settings(max_examples=300, deadline=None)
@given(st.lists(fit_infos, min_size=1, max_size=4))
def test_an_info_of_numbers_comes_back_exactly_from_its_row(infos):
    """Several layouts written to one row in turn: each read gives the last
    one back, with its types, dtypes, shapes, nesting and key order."""
    block, worker = _rows()
    _, parent = _rows()
    parent.rows = np.frombuffer(block, np.uint8, worker.rows.size, 64)  # the same block
    for info in infos:
        if worker.write(1, info):
            assert _same(parent.read(1), info)
        else:  # it fits no row: only for its size
            assert _fits(info)
            assert len(repr(info)) > 100


@settings(max_examples=200, deadline=None)
@given(fit_infos, st.dictionaries(keys, unfit, min_size=1, max_size=2))
def test_an_info_with_a_value_a_row_cannot_hold_is_refused_whole(info, extra):
    block, rows = _rows()
    before = bytes(block)
    assert not rows.write(0, {**info, **extra})
    assert (
        bytes(block[64 + INFO_ROW_BYTES : 64 + 2 * INFO_ROW_BYTES])
        == before[64 + INFO_ROW_BYTES : 64 + 2 * INFO_ROW_BYTES]
    )  # env 1's row untouched


def test_rows_of_a_worker_start_at_its_first_env():
    block = bytearray(64 + INFO_ROW_BYTES * 4)
    worker = InfoRows(block, 64, 2, 4)  # envs 2 and 3
    parent = InfoRows(block, 64, 0, 4)
    assert worker.write(3, {"x": 1.5}) and worker.write(2, {"y": np.int32(7)})
    assert _same(parent.read(3), {"x": 1.5})
    assert _same(parent.read(2), {"y": np.int32(7)})


def test_a_subclass_of_a_number_goes_pickled():
    class Meters(float):
        pass

    _, rows = _rows()
    assert not rows.write(0, {"d": Meters(1.0)})
    assert not rows.write(0, {"big": np.zeros(INFO_ROW_BYTES, np.uint8)})  # too large
    assert not rows.write(0, {"o": np.array([object()])})


class MixedInfoEnv(gym.Env):
    """Infos of every kind, different per env and per step: numbers from the
    start (``x`` a float, ``n`` an int then a float from step 3, ``f`` a
    float32), an array of a shape that grows, a nested dict on odd steps, a
    str for env 1, an int beyond int64 at step 4, a key that appears late
    (step 5), an empty info at step 2 of env 2. Episodes of ``4 + env_id`` steps.
    ``for_gymnasium``: no int beyond int64 and one shape of ``a`` (gymnasium's
    info merge takes neither)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, env_id: int, for_gymnasium: bool = False):
        self.env_id, self.t, self.for_gymnasium = env_id, 0, for_gymnasium

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.env_id, 0], np.float32), {"x": -1.0, "r": np.int16(self.env_id)}

    def step(self, action):
        self.t, e, t = self.t + 1, self.env_id, self.t + 1
        if e == 2 and t == 2:
            info = {}
        else:
            info = {"x": t / 2, "n": t if t < 3 else float(t), "f": np.float32(t * e)}
            info["a"] = np.arange(3 if self.for_gymnasium else t % 3 + 1, dtype=np.int64) * e
            if t % 2:
                info["sub"] = {"ok": bool(e % 2), "v": np.array([[t, e]], np.float32), "e": {}}
            if e == 1:
                info["s"] = f"env{e}"
            if t == 4 and not self.for_gymnasium:
                info["big"] = 2**64 + e
            if t >= 5:
                info["late"] = np.uint8(t)
        obs = np.array([e, t], np.float32)
        return obs, float(t), False, t >= 4 + e, info


def _fns(n=4, for_gymnasium=False):
    return [lambda e=e: MixedInfoEnv(e, for_gymnasium) for e in range(n)]


LAYOUTS = {
    "one worker": {"num_workers": 1},
    "two workers": {"num_workers": 2},
    "the caller's share": {"num_workers": 1, "inline": True},
}


@pytest.mark.parametrize("mode", ["sb3", "next_step", "same_step"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_infos_equal_the_in_process_layout_step_by_step(layout, mode):
    kwargs = {"autoreset_mode": mode, "episode_statistics": True}
    actions = np.zeros(4, np.int64)
    with (
        vecenv.ShmemVecEnv(_fns(), **LAYOUTS[layout], **kwargs) as venv,
        vecenv.ShmemVecEnv(_fns(), num_workers=0, **kwargs) as ref,
    ):
        venv.reset()
        ref.reset()
        assert _same(venv.reset_infos, ref.reset_infos)
        for _ in range(14):
            got, want = venv.step(actions), ref.step(actions)
            np.testing.assert_array_equal(got[0], want[0])
            assert all(_same(_strip(a), _strip(b)) for a, b in zip(got[3], want[3]))


@pytest.mark.parametrize("batch_size", [1, 3])
def test_infos_of_partial_batches_equal_each_envs_own_sequence(batch_size):
    """Each env's infos, in the order its steps come back, equal what the
    in-process layout gives that env (whatever the batches' order)."""

    def per_env(venv):
        assert venv.reset() is None
        seen = {e: [] for e in range(4)}
        for _ in range(4000):  # until every env has had 12 steps (the fast ones get more)
            if min(map(len, seen.values())) >= 12:
                break
            _, _, _, infos, ids = venv.recv()
            for e, info in zip(ids.tolist(), infos):
                seen[e].append(_strip(info))
            venv.send(np.zeros(len(ids), np.int64), ids)
        return seen

    with (
        vecenv.ShmemVecEnv(_fns(), num_workers=2, batch_size=batch_size) as venv,
        vecenv.ShmemVecEnv(_fns(), num_workers=0, batch_size=batch_size) as ref,
    ):
        got, want = per_env(venv), per_env(ref)
    for e in range(4):
        n = min(len(got[e]), len(want[e]))
        assert n >= 12, (e, len(got[e]), len(want[e]))
        assert all(_same(a, b) for a, b in zip(got[e][:n], want[e][:n]))


def _strip(info):
    """An SB3-layout info without what depends on time (episode durations)."""
    out = dict(info)
    if "episode" in out:
        out["episode"] = {k: v for k, v in out["episode"].items() if k != "t"}
    return out


class NumberInfoEnv(gym.Env):
    """ALE-like infos: an int64 and a float each step (with ``text``, a str too)."""

    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, text=False):
        self.text = text

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        info = {"lives": np.int64(3), "x": 0.5}
        if self.text:
            info["name"] = "pong"
        return np.zeros(1, np.float32), 0.0, False, False, info


def test_an_info_of_numbers_sends_no_message_and_a_str_does(monkeypatch):
    Numbers = NumberInfoEnv
    for text, reads in ((False, 0), (True, 5 * 2)):
        with vecenv.ShmemVecEnv([lambda t=text: Numbers(t)] * 2, num_workers=2) as venv:
            calls = []

            def counted(*args, real=venv._pool.round_entry, calls=calls):
                calls.append(args)
                return real(*args)

            monkeypatch.setattr(venv._pool, "round_entry", counted)
            venv.reset()
            for _ in range(5):
                infos = venv.step(np.zeros(2, np.int64))[3]
                want = {"lives": np.int64(3), "x": 0.5, **({"name": "pong"} if text else {})}
                assert all(_same(i, want) for i in infos)
            assert len(calls) == reads


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_the_gymnasium_drop_in_equals_sync_vector_env_with_shared_infos(mode):
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    am = AutoresetMode.NEXT_STEP if mode == "next_step" else AutoresetMode.SAME_STEP
    ref = SyncVectorEnv(_fns(for_gymnasium=True), autoreset_mode=am)
    venv = vecenv.AsyncVectorEnv(_fns(for_gymnasium=True), autoreset_mode=am)
    try:
        _, want = ref.reset(seed=3)
        _, got = venv.reset(seed=3)
        assert _same(_gym(got), _gym(want), ordered=False)
        for _ in range(14):
            out, ref_out = venv.step(np.zeros(4, np.int64)), ref.step(np.zeros(4, np.int64))
            np.testing.assert_array_equal(out[0], ref_out[0])
            assert _same(_gym(out[4]), _gym(ref_out[4]), ordered=False)
    finally:
        venv.close()
        ref.close()


def _gym(infos):
    """gymnasium's dict of arrays, its object arrays as lists (compared by _same)."""
    out = {}
    for k, v in infos.items():
        if isinstance(v, dict):
            out[k] = _gym(v)
        elif isinstance(v, np.ndarray) and v.dtype == object:
            out[k] = [_gym(x) if isinstance(x, dict) else x for x in v.tolist()]
            out[k] = {"object": repr(out[k])}
        else:
            out[k] = v
    return out


def test_the_sb3_drop_in_equals_dummy_vec_env_with_shared_infos():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv

    import vecenv.sb3

    ref = DummyVecEnv(_fns())
    venv = vecenv.sb3.SubprocVecEnv(_fns())
    try:
        np.testing.assert_array_equal(venv.reset(), ref.reset())
        assert all(_same(a, b) for a, b in zip(venv.reset_infos, ref.reset_infos))
        for _ in range(14):
            got, want = venv.step(np.zeros(4, np.int64)), ref.step(np.zeros(4, np.int64))
            np.testing.assert_array_equal(got[0], want[0])
            assert all(_same(a, b, ordered=False) for a, b in zip(got[3], want[3]))
    finally:
        venv.close()
        ref.close()


def test_the_compiled_round_writes_a_known_layout_without_python(tmp_path, monkeypatch):
    """Only the first round of each worker with a new info layout goes to
    _Loop._publish_round (which writes the schema); the compiled round writes
    the values of the later ones itself (the patch reaches the workers through fork)."""
    from vecenv import _worker

    log = tmp_path / "calls"
    original = _worker._Loop._publish_round

    def publish_round(self, *args):
        with open(log, "a") as f:
            f.write("x")
        return original(self, *args)

    monkeypatch.setattr(_worker._Loop, "_publish_round", publish_round)
    with vecenv.ShmemVecEnv([NumberInfoEnv] * 4, num_workers=2) as venv:
        venv.reset()
        for _ in range(20):
            infos = venv.step(np.zeros(4, np.int64))[3]
            assert all(_same(i, {"lives": np.int64(3), "x": 0.5}) for i in infos)
    assert len(log.read_text()) == 2


class FlatInfoEnv(gym.Env):
    """Flat infos of every scalar kind the compiled round writes, with the
    cases it must leave to Python: an int beyond int64 (step 3), the same
    keys in another order (step 5), a value changing type (int then bool,
    step 6), a key gone (step 7)."""

    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, env_id):
        self.env_id, self.t = env_id, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t, t, e = self.t + 1, self.t + 1, self.env_id
        info = {
            "b": t % 2 == 0,
            "i": -t * 10**12 if t != 3 else 2**63 + e,
            "f": t / 3,
            "f32": np.float32(t / 7),
            "u8": np.uint8(200 + t),
            "nb": np.bool_(t % 3 == 0),
            "i16": np.int16(-t),
            "f64": np.float64(t * e),
        }
        if t == 5:
            info = dict(reversed(list(info.items())))
        if t == 6:
            info["i"] = True
        if t == 7:
            del info["f"]
        return np.zeros(1, np.float32), 0.0, False, t >= 9, info


@pytest.mark.parametrize("mode", ["sb3", "next_step", "same_step"])
def test_flat_infos_the_compiled_round_writes_equal_the_in_process_layout(mode):
    fns = [lambda e=e: FlatInfoEnv(e) for e in range(4)]
    with (
        vecenv.ShmemVecEnv(fns, num_workers=2, autoreset_mode=mode) as venv,
        vecenv.ShmemVecEnv(fns, num_workers=0, autoreset_mode=mode) as ref,
    ):
        venv.reset()
        ref.reset()
        for _ in range(20):
            got, want = venv.step(np.zeros(4, np.int64))[3], ref.step(np.zeros(4, np.int64))[3]
            assert all(_same(a, b) for a, b in zip(got, want)), (got, want)


class _Reference(gym.vector.VectorEnv):
    """gymnasium's own info merge (VectorEnv._add_info), an env at a time."""

    def __init__(self, num_envs):
        self.num_envs = num_envs

    def batch(self, infos):
        out = {}
        for i, info in enumerate(infos):
            if info:
                out = self._add_info(out, info, i)
        return out


_flat_values = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.sampled_from(_NUMPY_SCALARS).flatmap(_numpy_scalar),
    st.just("text"),
    st.just({"nested": 1.0}),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["x", "lives", "_x", "final_obs", "r"]), _flat_values),
        min_size=1,
        max_size=6,
    )
)
def test_the_gymnasium_batch_a_key_at_a_time_equals_gymnasiums_own(infos):
    from vecenv._infos import gym_infos

    got = gym_infos(infos, len(infos))
    if got is None:  # not the common case: the drop-in merges them as gymnasium does
        return
    want = _Reference(len(infos)).batch(infos)
    assert list(got) == list(want)
    for key in want:
        assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape
        np.testing.assert_array_equal(got[key], want[key])


def test_the_gymnasium_batch_takes_the_common_case():
    from vecenv._infos import gym_infos

    infos = [{"x": 1.0, "lives": np.int64(3)}, {}, {"x": 2.5}]
    got = gym_infos(infos, 3)
    assert got is not None and list(got) == ["x", "_x", "lives", "_lives"]
    np.testing.assert_array_equal(got["x"], [1.0, 0.0, 2.5])
    assert got["lives"].dtype == np.int64 and got["_lives"].tolist() == [True, False, False]
    assert gym_infos([{"x": 1}, {"x": 1.5}], 2) is None  # int then float: gymnasium casts
    assert gym_infos([{"ok": np.bool_(True)}], 1) is None  # an object array in gymnasium


@pytest.mark.parametrize("mode", ["sb3", "next_step"])
def test_the_compiled_step_reads_a_known_layout_without_python(monkeypatch, mode):
    """Once the parent has read a layout, the compiled step builds those
    infos itself: the collector's Python read is no longer called."""
    with vecenv.ShmemVecEnv([NumberInfoEnv] * 4, num_workers=2, autoreset_mode=mode) as venv:
        col = venv._collector
        calls = []

        def counted(ids, real=col.read_flagged):
            calls.append(ids)
            return real(ids)

        monkeypatch.setattr(col, "read_flagged", counted)
        venv.reset()
        for step in range(20):
            infos = venv.step(np.zeros(4, np.int64))[3]
            assert all(_same(i, {"lives": np.int64(3), "x": 0.5}) for i in infos), step
        assert len(calls) == 1  # the first step, which learns the layout
