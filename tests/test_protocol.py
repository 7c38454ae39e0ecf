"""The protocol's codes (vecenv._protocol) against the compiled core's
(csrc/_protocol.pxd, exposed as vecenv._core.PROTOCOL)."""

import pickle

import pytest

from vecenv import _core, _protocol


@pytest.mark.parametrize("name", ["Op", "Status"])
def test_python_and_c_tables_agree(name):
    py = {m.name: int(m) for m in getattr(_protocol, name)}
    assert py == _core.PROTOCOL[name]


def test_core_constants_are_the_enum_values():
    assert _core.OP_STEP == _protocol.Op.STEP
    assert _core.OP_RESET == _protocol.Op.RESET
    assert (_core.STATUS_OK, _core.STATUS_INFO, _core.STATUS_ERROR) == tuple(_protocol.Status)


def test_message_kinds_are_distinct_and_pickle():
    values = [int(m) for m in _protocol.Msg]
    assert len(values) == len(set(values))
    for m in _protocol.Msg:
        assert pickle.loads(pickle.dumps(m)) is m


def test_autoreset_names():
    assert _protocol.AUTORESET_MODES == ("sb3", "next_step", "same_step", "disabled")
    assert all(_protocol.Autoreset(n).value == n for n in _protocol.AUTORESET_MODES)
