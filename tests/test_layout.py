"""Spaces to leaves, the block layout and action validation (vecenv._layout)."""

import copy

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import assert_tree_equal, stack

import vecenv
from vecenv import _layout

BOX_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64]
BOX_DTYPES += [np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


def leaf_spaces():
    shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)

    def box(args):
        dtype, shape = args
        if dtype is np.bool_:
            return spaces.Box(0, 1, shape, np.bool_)
        return spaces.Box(0, 9, shape, dtype)

    return st.one_of(
        st.tuples(st.sampled_from(BOX_DTYPES), shapes).map(box),
        st.integers(1, 9).map(spaces.Discrete),
        st.lists(st.integers(2, 5), min_size=1, max_size=3).map(spaces.MultiDiscrete),
        st.integers(1, 4).map(spaces.MultiBinary),
    )


nested_spaces = st.recursive(
    leaf_spaces(),
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3).map(lambda c: spaces.Tuple(tuple(c))),
        st.dictionaries(st.sampled_from("abcde"), children, min_size=1, max_size=3).map(
            spaces.Dict
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=80, deadline=None)
@given(space=nested_spaces, seed=st.integers(0, 2**16))
def test_flatten_unflatten_round_trip(space, seed):
    space.seed(seed)
    value = space.sample()
    leaves = _layout.flatten_space(space)
    flat = _layout.make_flattener(space)(value)
    assert len(flat) == len(leaves)
    for leaf, v in zip(leaves, flat):
        assert np.asarray(v).shape == leaf.shape
    back = _layout.make_unflattener(space)([np.asarray(v) for v in flat])
    assert_tree_equal(back, _as_arrays(value))


def _as_arrays(value):
    if isinstance(value, dict):
        return {k: _as_arrays(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_as_arrays(v) for v in value)
    return np.asarray(value)


@settings(max_examples=40, deadline=None)
@given(space=nested_spaces, num_envs=st.integers(1, 5))
def test_block_layout_is_aligned_and_disjoint(space, num_envs):
    layout = _layout.BlockLayout.build(space, spaces.Discrete(2), num_envs, num_workers=2)
    regions = [
        (o, leaf.nbytes * num_envs) for o, leaf in zip(layout.obs_offsets, layout.obs_leaves)
    ]
    regions += [
        (o, leaf.nbytes * num_envs) for o, leaf in zip(layout.action_offsets, layout.action_leaves)
    ]
    regions += [(layout.reward_offset, 8 * num_envs)]
    regions += [(layout.terminated_offset, num_envs), (layout.truncated_offset, num_envs)]
    regions.sort()
    assert regions[0][0] >= vecenv._core.control_nbytes(num_envs, 2)
    for (a, n), (b, _) in zip(regions, regions[1:]):
        assert a + n <= b, "buffers overlap"
    assert all(o % 64 == 0 for o, _ in regions)
    assert layout.nbytes % 4096 == 0 and layout.nbytes >= regions[-1][0] + regions[-1][1]


class SampleEnv(gym.Env):
    """Returns seeded samples of any observation space."""

    def __init__(self, space, seed):
        self.observation_space = copy.deepcopy(space)
        self.action_space = spaces.Discrete(2)
        self.observation_space.seed(seed)

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(space=nested_spaces, seed=st.integers(0, 1000))
@pytest.mark.timeout(300)
def test_random_nested_spaces_through_the_engine(space, seed):
    n = 3
    refs = [SampleEnv(space, seed + i) for i in range(n)]
    expected = [stack([env.reset()[0] for env in refs])]
    expected += [stack([env.step(0)[0] for env in refs]) for _ in range(2)]
    fns = [lambda i=i: SampleEnv(space, seed + i) for i in range(n)]
    with vecenv.ShmemVecEnv(fns, envs_per_worker=2, context="fork") as venv:
        got = [venv.reset()] + [venv.step(np.zeros(n, np.int64))[0] for _ in range(2)]
    for g, e in zip(got, expected):
        assert_tree_equal(g, e)


@pytest.mark.parametrize(
    "space",
    [
        spaces.Text(4),
        spaces.Sequence(spaces.Discrete(2)),
        spaces.Graph(node_space=spaces.Discrete(2), edge_space=None),
        spaces.Tuple((spaces.Discrete(2), spaces.Text(3))),
    ],
)
def test_spaces_without_fixed_size_are_refused(space):
    with pytest.raises(vecenv.SpaceError, match="cannot live in shared memory"):
        _layout.flatten_space(space)


def test_not_a_space_is_refused():
    with pytest.raises(vecenv.SpaceError, match=r"gymnasium\.spaces\.Space"):
        _layout.flatten_space("Box(2,)")


# ------------------------------------------------------------------ actions


def _writer(space, n=3):
    leaves = _layout.flatten_space(space, "action_space")
    bufs = [np.zeros((n, *leaf.shape), leaf.dtype) for leaf in leaves]
    return _layout.make_action_writer(leaves, space), bufs


def test_discrete_actions_accept_ints_and_integral_floats():
    write, bufs = _writer(spaces.Discrete(3, start=-1))
    write(np.array([-1, 0, 1], np.int32), bufs)
    assert bufs[0].tolist() == [-1, 0, 1]
    write([1.0, 0.0, -1.0], bufs)
    assert bufs[0].tolist() == [1, 0, -1]
    for bad, match in [
        (np.array([0, 2, 0]), r"actions\[1\]=2 is outside Discrete\(3, start=-1\)"),
        ([0.5, 0, 0], "non-integral"),
        ([np.inf, 0, 0], "non-finite"),
        (np.array(["a", "b", "c"]), "dtype <U1 cannot hold"),
        (np.zeros((3, 1), np.int64), r"shape \(3, 1\), expected \(3,\)"),
        (np.zeros(2, np.int64), "got 2 actions, expected 3"),
        (np.array([2**40, 0, 0], np.uint64), "outside"),
    ]:
        with pytest.raises(vecenv.InvalidArgumentError, match=match):
            write(bad, bufs)


def test_multidiscrete_multibinary_and_box_actions():
    write, bufs = _writer(spaces.MultiDiscrete([2, 3]))
    write(np.array([[1, 2], [0, 0], [1, 1]]), bufs)
    with pytest.raises(vecenv.InvalidArgumentError, match=r"actions\[0, 1\]=3"):
        write(np.array([[1, 3], [0, 0], [1, 1]]), bufs)
    write, bufs = _writer(spaces.MultiBinary(2))
    with pytest.raises(vecenv.InvalidArgumentError, match="outside MultiBinary"):
        write(np.array([[1, 2], [0, 0], [1, 1]]), bufs)
    write, bufs = _writer(spaces.Box(-1, 1, (2,), np.float32))
    write(np.ones((3, 2), np.float64), bufs)
    assert bufs[0].dtype == np.float32 and bufs[0].sum() == 6
    write(np.full((3, 2), np.nan), bufs)  # NaN is a float: passed through, as gymnasium does
    with pytest.raises(vecenv.InvalidArgumentError, match="numeric"):
        write(np.full((3, 2), "x"), bufs)


def test_structured_actions_name_the_leaf():
    space = spaces.Dict({"move": spaces.Discrete(4), "aim": spaces.Box(-1, 1, (2,), np.float32)})
    write, bufs = _writer(space)
    write({"move": [0, 1, 3], "aim": np.zeros((3, 2))}, bufs)
    with pytest.raises(vecenv.InvalidArgumentError, match=r"actions\['move'\]\[2\]=4"):
        write({"move": [0, 1, 4], "aim": np.zeros((3, 2))}, bufs)
    with pytest.raises(vecenv.InvalidArgumentError, match="without 'aim'"):
        write({"move": [0, 1, 3]}, bufs)
    write, bufs = _writer(spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2))))
    with pytest.raises(vecenv.InvalidArgumentError, match="tuple of 2"):
        write([np.zeros(3, np.int64)], bufs)


def test_rows_write_only_the_given_envs():
    write, bufs = _writer(spaces.Box(-9, 9, (2,), np.float32), n=4)
    write(np.array([[1, 1], [2, 2]]), bufs, np.array([3, 1], np.int64))
    assert bufs[0][:, 0].tolist() == [0, 2, 0, 1]
