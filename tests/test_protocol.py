"""The protocol's tables (vecenv._protocol) against the compiled core's
(csrc/_protocol.pxd, exposed as vecenv._core.PROTOCOL)."""

import enum
import os
import pickle

import numpy as np
import pytest

from vecenv import _core, _protocol


def test_python_and_compiled_tables_agree_name_by_name():
    # Every table, every name, every value: renumbering or renaming a constant
    # on one side only, or adding one to one side only, fails here.
    assert _protocol.mirrored_tables() == _core.PROTOCOL


def test_every_table_but_the_pipe_messages_is_mirrored():
    tables = {
        name
        for name, obj in vars(_protocol).items()
        if isinstance(obj, type)
        and issubclass(obj, enum.IntEnum)
        and obj.__module__ == _protocol.__name__
    }
    assert tables - {"Msg"} == {cls.__name__ for cls in _protocol.MIRRORED}
    assert set(_core.PROTOCOL) == tables - {"Msg"} | {"InfoKey"}


def test_core_constants_are_the_table_values():
    assert (_core.OP_STEP, _core.OP_RESET) == (_protocol.Op.STEP, _protocol.Op.RESET)
    assert (
        _core.STATUS_OK,
        _core.STATUS_INFO,
        _core.STATUS_ERROR,
        _core.STATUS_SHARED_INFO,
    ) == tuple(_protocol.Status)
    codes = _protocol.ParentCode
    assert (
        _core.PARENT_NOT_EXACT,
        _core.PARENT_WAITING,
        _core.PARENT_TOO_FEW,
        _core.PARENT_CHECK_DUE,
    ) == (codes.NOT_EXACT, codes.WAITING, codes.TOO_FEW, codes.CHECK_DUE)
    assert (_core.WAIT_TIMED_OUT, _core.WAIT_TX_BLOCKED) == tuple(_protocol.WaitCode)


def test_the_header_and_slots_fit_the_region():
    region, header = _protocol.Region, _protocol.Header
    assert all(h % 4 == 0 and h + 4 <= region.HEADER_BYTES for h in header)
    assert all(0 <= w < region.SLOT_BYTES // 4 for w in _protocol.SlotWord)
    assert len(set(header)) == len(header) and len(set(_protocol.SlotWord)) == len(
        _protocol.SlotWord
    )
    assert _core.control_nbytes(1, 1) == region.HEADER_BYTES + region.SLOT_BYTES + 4 * region.ALIGN
    # BUSY_NS is a u64 over two words: 8-byte aligned in every slot, the next
    # word free, both inside the slot.
    busy = _protocol.SlotWord.BUSY_NS
    assert (region.HEADER_BYTES + 4 * busy) % 8 == 0 and region.SLOT_BYTES % 8 == 0
    assert busy + 1 not in set(_protocol.SlotWord) and 4 * (busy + 2) <= region.SLOT_BYTES


@pytest.mark.timeout(10)
def test_a_worker_slot_holds_the_activity_where_the_table_says():
    fd = os.memfd_create("vecenv-test-protocol")
    try:
        size = _core.control_nbytes(3, 2)
        os.ftruncate(fd, size)
        block = _core.SharedBlock(fd, size)
    finally:
        os.close(fd)
    try:
        parent = _core.Control(block, 3, 2, [0, 0, 1], init=True)
        worker = _core.WorkerControl(block, 3, 2)
        worker.enter(1, 2, int(_protocol.Activity.AUTORESET))
        words = np.frombuffer(block, dtype=np.uint32)
        slot = (_protocol.Region.HEADER_BYTES + _protocol.Region.SLOT_BYTES) // 4
        assert words[slot + _protocol.SlotWord.ENV] == 3  # env + 1
        assert words[slot + _protocol.SlotWord.ACTIVITY] == _protocol.Activity.AUTORESET
        assert words[_protocol.Header.MAGIC // 4] == _protocol.Region.MAGIC
        assert words[_protocol.Header.NUM_ENVS // 4] == 3
        assert parent.activity(1) == (2, _protocol.Activity.AUTORESET)
        bell = words[_protocol.Header.DOORBELL // 4]
        worker.publish([2], None, 1)
        assert words[_protocol.Header.DOORBELL // 4] != bell  # rung, whatever its value
        del words
        del parent, worker
    finally:
        block.close()


def test_message_kinds_are_distinct_and_pickle():
    values = [int(m) for m in _protocol.Msg]
    assert len(values) == len(set(values))
    for m in _protocol.Msg:
        assert pickle.loads(pickle.dumps(m)) is m


def test_autoreset_modes_by_name_and_by_code():
    assert _protocol.AUTORESET_MODES == ("sb3", "next_step", "same_step", "disabled")
    for name in _protocol.AUTORESET_MODES:
        mode = _protocol.Autoreset(name)
        assert mode.mode_name == name and _protocol.Autoreset(int(mode)) is mode
    with pytest.raises(ValueError):
        _protocol.Autoreset("next-step")


def test_activity_describes_what_the_env_does():
    assert _protocol.Activity.STEP.describe(2) == "inside env 2's step()"
    assert _protocol.Activity.CREATE.describe(0) == "inside the factory of env 0"
    assert _protocol.Activity.UNPICKLE.describe(None) == "unpickling its env factories"
