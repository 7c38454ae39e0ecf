"""The action leaves' validators (vecenv._layout.leaf_check): one type per
kind of leaf, in place of ("discrete", lo, hi) tuples."""

import numpy as np
import pytest
from gymnasium import spaces

import vecenv
from vecenv import _layout


def _check(space):
    (leaf,) = _layout.flatten_space(space, "action_space")
    return _layout.leaf_check(leaf)


def test_each_space_gets_its_check():
    d = _check(spaces.Discrete(5, start=-2))
    assert isinstance(d, _layout.DiscreteCheck) and (d.lo, d.hi) == (-2, 3) and d.integral
    md = _check(spaces.MultiDiscrete([2, 3], start=[1, 0]))
    assert isinstance(md, _layout.ElementRangeCheck)
    assert md.lo.tolist() == [1, 0] and md.hi.tolist() == [3, 3]
    mb = _check(spaces.MultiBinary(3))
    assert isinstance(mb, _layout.ElementRangeCheck) and (mb.lo, mb.hi) == (0, 2)
    ib = _check(spaces.Box(0, 9, (2,), np.int32))
    assert type(ib) is _layout.LeafCheck and ib.integral
    fb = _check(spaces.Box(0, 1, (2,), np.float32))
    assert isinstance(fb, _layout.FloatBoxCheck) and not fb.integral


@pytest.mark.parametrize(
    "space,good,bad,message",
    [
        (spaces.Discrete(3), [0, 2], [0, 3], r"actions\[1\]=3 is outside Discrete\(3\)"),
        (spaces.MultiBinary(2), [[0, 1], [1, 1]], [[0, 2], [1, 1]], r"actions\[0, 1\]=2"),
        (spaces.Box(0, 9, (1,), np.int64), [[1], [2]], [[1.5], [2]], "whole numbers|integ"),
    ],
)
def test_the_writer_uses_them(space, good, bad, message):
    leaves = _layout.flatten_space(space, "action_space")
    write = _layout.make_action_writer(leaves, space)
    bufs = [np.zeros((2, *leaf.shape), leaf.dtype) for leaf in leaves]
    write(np.asarray(good), bufs)
    np.testing.assert_array_equal(bufs[0], np.asarray(good))
    with pytest.raises(vecenv.InvalidArgumentError, match=message):
        write(np.asarray(bad), bufs)
