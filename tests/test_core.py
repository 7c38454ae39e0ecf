"""The Cython kernels of vecenv._core against NumPy references."""

import os
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vecenv import _core, _protocol

DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
]


def _block(nbytes):
    fd = os.memfd_create("vecenv-test")
    try:
        os.ftruncate(fd, nbytes)
        return _core.SharedBlock(fd, nbytes)
    finally:
        os.close(fd)


def _bytes2d(a):
    return a.reshape(a.shape[0], -1).view(np.uint8)


# ------------------------------------------------------------------ SharedBlock


def test_shared_block_views_and_close():
    block = _block(8192)
    view = np.frombuffer(block, dtype=np.uint8)
    assert view.shape == (8192,) and not view.any()
    view[:5] = 7
    again = np.frombuffer(block, dtype=np.uint8)
    assert again[:5].tolist() == [7] * 5
    with pytest.raises(BufferError):
        block.close()  # views still alive
    del view, again
    block.close()
    block.close()  # twice is fine
    assert block.closed
    with pytest.raises(ValueError, match="closed"):
        np.frombuffer(block, dtype=np.uint8)


def test_shared_block_rejects_bad_size():
    with pytest.raises(ValueError, match="size"):
        _core.SharedBlock(0, 0)


def test_shared_block_is_shared_between_mappings():
    fd = os.memfd_create("vecenv-test")
    os.ftruncate(fd, 4096)
    a, b = _core.SharedBlock(fd, 4096), _core.SharedBlock(fd, 4096)
    os.close(fd)
    np.frombuffer(a, dtype=np.int64)[3] = 42
    assert np.frombuffer(b, dtype=np.int64)[3] == 42


# ------------------------------------------------------------------ LeafWriter


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (3,), (2, 5), (4, 3, 2)])
@pytest.mark.parametrize("num_envs", [1, 3])
def test_leaf_writer_matches_numpy(dtype, shape, num_envs):
    rng = np.random.default_rng(0)
    buf = np.zeros((num_envs, *shape), dtype)
    writer = _core.LeafWriter([buf])
    expected = np.zeros_like(buf)
    for env in range(num_envs):
        value = (rng.random(shape) * 100).astype(dtype)
        writer.write(env, [value])
        expected[env] = value
    np.testing.assert_array_equal(buf, expected)


def test_leaf_writer_several_leaves_and_noncontiguous_source():
    a = np.zeros((2, 3, 4), np.float32)
    b = np.zeros((2,), np.int64)
    writer = _core.LeafWriter([a, b])
    src = np.arange(24, dtype=np.float32).reshape(3, 8)[:, ::2]  # strided (3, 4)
    assert not src.flags.c_contiguous
    writer.write(1, [src, np.int64(9)])
    np.testing.assert_array_equal(a[1], src)
    assert b.tolist() == [0, 9]
    writer.write(0, [src[::-1], 5])  # negative strides, python int
    np.testing.assert_array_equal(a[0], src[::-1])
    assert b.tolist() == [5, 9]


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.zeros((3,), np.complex64), "dtype complex64, expected float32"),
        (np.zeros((4,), np.float64), r"shape \(4,\), expected \(3,\)"),
        (np.zeros((4,), np.float32), r"shape \(4,\), expected \(3,\)"),
        (np.zeros((3, 1), np.float32), r"shape \(3, 1\), expected \(3,\)"),
        ("abc", "leaf 0"),
    ],
)
def test_leaf_writer_refuses_mismatch(value, match):
    writer = _core.LeafWriter([np.zeros((2, 3), np.float32)])
    with pytest.raises(ValueError, match=match):
        writer.write(0, [value])


@pytest.mark.parametrize(
    ("src", "dst", "value"),
    [
        (np.float64, np.float32, [0.5, -1.25, 3.0]),  # np.array of Python floats
        (np.float32, np.float64, [0.5, -1.25, 3.0]),
        (np.int64, np.int32, [1, -2, 2**31 - 1]),
        (np.int64, np.uint8, [0, 7, 255]),
        (np.bool_, np.int8, [True, False, True]),
    ],
)
def test_leaf_writer_casts_same_kind_arrays_as_gymnasium_batches_them(src, dst, value):
    buf = np.zeros((2, 3), dst)
    _core.LeafWriter([buf]).write(1, [np.asarray(value, src)])
    np.testing.assert_array_equal(buf[1], np.asarray(value, src).astype(dst))
    assert buf.dtype == dst and not buf[0].any()


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.array([1, 2, 2**31], np.int64), "not representable as int32"),  # would wrap
        (np.array([0.5, 1.0, 2.0]), "dtype float64, expected int32"),  # float to int
    ],
)
def test_leaf_writer_refuses_casts_that_lose_values(value, match):
    with pytest.raises(ValueError, match=match):
        _core.LeafWriter([np.zeros((2, 3), np.int32)]).write(0, [value])


def test_leaf_writer_without_cast_refuses_another_dtype():
    writer = _core.LeafWriter([np.zeros((2, 3), np.float32)], cast=False)
    with pytest.raises(ValueError, match="dtype float64, expected float32"):
        writer.write(0, [np.zeros(3)])
    writer.write(0, [np.ones(3, np.float32)])  # the exact dtype still goes through


def test_leaf_writer_scalars_must_be_representable():
    buf = np.zeros((1,), np.uint8)
    writer = _core.LeafWriter([buf])
    writer.write(0, [200])
    assert buf[0] == 200
    with pytest.raises(ValueError, match="not representable"):
        writer.write(0, [300])
    with pytest.raises(ValueError, match="dtype"):
        writer.write(0, [1.5])


def test_leaf_writer_checks_arguments():
    with pytest.raises(ValueError, match="C-contiguous"):
        _core.LeafWriter([np.zeros((4, 4))[:, ::2]])
    ro = np.zeros((2, 2))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        _core.LeafWriter([ro])
    writer = _core.LeafWriter([np.zeros((2, 2))])
    with pytest.raises(ValueError, match="outside"):
        writer.write(2, [np.zeros(2)])
    with pytest.raises(ValueError, match="expected 1 observation leaves"):
        writer.write(0, [np.zeros(2), np.zeros(2)])


@settings(max_examples=60, deadline=None)
@given(
    arrays=st.lists(
        hnp.arrays(
            dtype=st.sampled_from([np.dtype(d) for d in DTYPES]),
            shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
        ),
        min_size=1,
        max_size=4,
    ),
    num_envs=st.integers(1, 4),
    env=st.integers(0, 3),
)
def test_leaf_writer_random_nested_layouts(arrays, num_envs, env):
    env = env % num_envs
    bufs = [np.zeros((num_envs, *a.shape), a.dtype) for a in arrays]
    _core.LeafWriter(bufs).write(env, arrays)
    for buf, a in zip(bufs, arrays):
        np.testing.assert_array_equal(buf[env], a)
        others = np.delete(buf, env, axis=0)
        assert not others.astype(bool).any()


# ------------------------------------------------------------------ row copies


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [0, 1, 3, 7])
def test_gather_and_scatter_match_numpy(dtype, k):
    rng = np.random.default_rng(k)
    src = (rng.random((7, 3, 2)) * 50).astype(dtype)
    ids = rng.permutation(7)[:k].astype(np.int64)
    out = np.zeros((7, 3, 2), dtype)
    _core.gather_rows(_bytes2d(src), ids, _bytes2d(out))
    np.testing.assert_array_equal(out[:k], src[ids])
    dst = np.zeros_like(src)
    _core.scatter_rows(_bytes2d(src), ids, _bytes2d(dst))
    expected = np.zeros_like(src)
    expected[ids] = src[:k]
    np.testing.assert_array_equal(dst, expected)


def test_gather_accepts_read_only_source_and_refuses_bad_input():
    src = np.arange(12, dtype=np.float64).reshape(4, 3)
    src.flags.writeable = False
    out = np.zeros((2, 3))
    _core.gather_rows(_bytes2d(src), np.array([3, 0]), _bytes2d(out))
    np.testing.assert_array_equal(out, src[[3, 0]])
    with pytest.raises(ValueError, match="outside"):
        _core.gather_rows(_bytes2d(src), np.array([4]), _bytes2d(out))
    with pytest.raises(ValueError, match="need 3"):
        _core.gather_rows(_bytes2d(src), np.array([0, 1, 2]), _bytes2d(out))
    with pytest.raises(ValueError):  # non-contiguous rows
        _core.gather_rows(
            np.zeros((4, 8), np.uint8)[:, ::2], np.array([0]), np.zeros((1, 4), np.uint8)
        )
    with pytest.raises(ValueError, match="rows are"):
        _core.gather_rows(_bytes2d(src), np.array([0]), np.zeros((1, 4), np.uint8))


def test_check_int_range():
    v = np.array([0, 3, 1, -1, 5], np.int64)
    assert _core.check_int_range(v, -1, 6) == -1
    assert _core.check_int_range(v, 0, 6) == 3
    assert _core.check_int_range(v, 0, 5) == 3
    assert _core.check_int_range(v[:3], 0, 3) == 1
    assert _core.check_int_range(np.zeros(0, np.int64), 0, 1) == -1


# ------------------------------------------------------------------ Control


def _control(num_envs=6, num_workers=2):
    block = _block(_core.control_nbytes(num_envs, num_workers))
    env_worker = [i * num_workers // num_envs for i in range(num_envs)]
    ctl = _core.Control(block, num_envs, num_workers, env_worker, init=True)
    return block, ctl, _core.WorkerControl(block, num_envs, num_workers)


def test_control_dispatch_take_publish_collect_in_fifo_order():
    block, ctl, wk = _control()
    ctl.dispatch(np.array([4, 1], np.int64), _core.OP_STEP)
    assert wk.take_ops(0, 3, 0) == [(1, _core.OP_STEP)]
    assert wk.take_ops(3, 6, 1) == [(4, _core.OP_STEP)]
    assert wk.take_ops(0, 3, 0) == wk.take_ops(3, 6, 1) == []  # ops are cleared once taken
    wk.publish([4], [_core.STATUS_INFO], 1)
    wk.publish([1], None, 0)
    assert ctl.wait_ready(2, 0.0, 1.0) == 2
    out = np.zeros(6, np.int64)
    assert ctl.collect(1, out) == 1  # env 4 first (published first), flagged
    assert out[0] == 4
    assert ctl.published() == 1
    assert ctl.collect(1, out) == 0
    assert out[0] == 1
    assert ctl.wait_ready(1, 0.0, 0.01) == -1  # nothing left: times out
    with pytest.raises(ValueError, match="only 0"):
        ctl.collect(1, out)


def test_take_ops_takes_a_dispatch_whole_never_while_it_is_written():
    import threading

    block, ctl, wk = _control()
    words = np.frombuffer(block, dtype=np.uint32)
    slot = _protocol.Region.HEADER_BYTES // 4
    writing = slot + _protocol.SlotWord.OPS_WRITING  # worker 0's
    ctl.dispatch(np.array([0, 1], np.int64), _core.OP_RESET)
    assert words[writing] == 2  # a dispatch leaves it even
    # As if the parent were still writing a second dispatch's op bytes for
    # worker 0 (env 2 written, more to come).
    words[writing] += 1
    ctl.dispatch(np.array([2], np.int64), _core.OP_RESET)
    got = []
    worker = threading.Thread(target=lambda: got.append(wk.take_ops(0, 3, 0)))
    worker.start()
    worker.join(0.05)
    assert worker.is_alive() and not got  # it waits: it would take a part of that dispatch
    words[writing] += 1  # the dispatch is written
    worker.join(5.0)
    assert got == [[(0, _core.OP_RESET), (1, _core.OP_RESET), (2, _core.OP_RESET)]]
    # Another worker's dispatch does not hold this one up.
    other = slot + _protocol.Region.SLOT_BYTES // 4 + _protocol.SlotWord.OPS_WRITING
    words[other] += 1
    ctl.dispatch(np.array([0], np.int64), _core.OP_STEP)
    assert wk.take_ops(0, 3, 0) == [(0, _core.OP_STEP)]
    # A parent stopped or killed inside a dispatch: the worker waits 0.1 s,
    # then takes what is there (its own checks then find the parent gone).
    ctl.dispatch(np.array([4], np.int64), _core.OP_STEP)
    t = time.monotonic()
    assert wk.take_ops(3, 6, 1) == [(4, _core.OP_STEP)]
    assert 0.09 <= time.monotonic() - t < 2.0


def test_control_worker_wait_sees_dispatch_and_messages():
    block, ctl, wk = _control()
    assert wk.worker_wait(0, 0, 0.0, 0.01) == -1
    ctl.dispatch_all(_core.OP_RESET)
    seq = wk.worker_wait(0, 0, 0.0, 1.0)
    assert seq == 1
    ctl.post_message(0)
    assert wk.worker_wait(0, seq, 0.0, 1.0) == 2
    assert wk.message_seq(0) == 1
    assert wk.message_seq(1) == 0
    op, status, ready, ticket = ctl.arrays()
    assert op.tolist() == [_core.OP_RESET] * 6


def _first_sleep_after(follow_s, gap_s=0.02, gaps=12):
    """Seconds from the moment a worker thread (``worker_wait(spin_s=0,
    follow_s)``) came back from the last of ``gaps`` commands, each sent
    ``gap_s`` after it came back from the one before, until it marks its slot
    SLEEPING in the next wait; None if it did not within 5 s."""
    block, ctl, wk = _control()
    words = np.frombuffer(block, dtype=np.uint32)
    flag = (_protocol.Region.HEADER_BYTES // 4) + _protocol.SlotWord.SLEEPING
    seen = []  # cmd_seq returned by each wait, appended by the worker thread

    def worker():
        seq = 0
        for _ in range(gaps + 1):
            seq = wk.worker_wait(0, seq, 0.0, 10.0, follow_s)
            seen.append(seq)

    def back_from(n):  # one command in flight at a time: none is missed
        deadline = time.monotonic() + 10.0
        while len(seen) < n and time.monotonic() < deadline:
            time.sleep(0.0002)
        assert len(seen) >= n, (n, seen)

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    for k in range(gaps):
        time.sleep(gap_s)
        ctl.dispatch_all(_core.OP_STEP)
        back_from(k + 1)
    last = time.monotonic()
    while not words[flag] and time.monotonic() - last < 5.0:
        time.sleep(0.0005)
    slept = time.monotonic() - last if words[flag] else None
    ctl.dispatch_all(_core.OP_STEP)
    t.join(10.0)
    assert not t.is_alive()
    assert len(seen) == gaps + 1 and min(seen) >= 0 and seen == sorted(seen), seen
    del words
    return slept


@pytest.mark.timeout(60)
def test_worker_wait_polls_through_the_callers_time_when_following():
    # Commands every 20 ms: a following worker (follow_s 0.2) polls about
    # 1.5 x its mean wait (16 ms after 12 waits from 0: about 24 ms) before it
    # sleeps; without following (spin 0) it sleeps at once.
    followed = _first_sleep_after(0.2)
    assert followed is not None and followed >= 0.010, followed
    assert _first_sleep_after(0.0) is not None
    # A caller slower than follow_s (100 ms apart, follow_s 60 ms) is not
    # followed: it sleeps at once, not after the 60 ms poll it would get.
    slow = _first_sleep_after(0.06, gap_s=0.1)
    assert slow is not None and slow < 0.030, slow


def test_control_collect_all_counts_flagged():
    block, ctl, wk = _control(4, 1)
    ctl.dispatch_all(_core.OP_STEP)
    wk.take_ops(0, 4, 0)
    wk.publish([0, 1, 2, 3], [0, _core.STATUS_ERROR, 0, _core.STATUS_INFO], 0)
    assert ctl.wait_ready(4, 0.0, 1.0) == 4
    assert ctl.collect_all() == 2
    assert ctl.published() == 0


def test_control_validates_arguments():
    block, ctl, wk = _control()
    with pytest.raises(ValueError, match="outside"):
        ctl.dispatch(np.array([6], np.int64), _core.OP_STEP)
    with pytest.raises(ValueError, match="worker"):
        wk.worker_wait(2, 0, 0.0, 0.0)
    with pytest.raises(ValueError, match="env_worker"):
        _core.Control(block, 6, 2, [0, 0, 0, 1, 1, 2])
    with pytest.raises(ValueError, match="smaller"):
        _core.Control(_block(64), 6, 2, [0] * 6)
    with pytest.raises(ValueError, match="does not hold"):
        _core.Control(block, 5, 2, [0] * 5)


# ------------------------------------------- parent and worker views: each side gets only its verbs

PARENT_ONLY = {
    "dispatch",
    "dispatch_all",
    "post_message",
    "wait_ready",
    "published",
    "tx_blocked_workers",
    "collect",
    "collect_all",
    "forget",
    "track_in_flight",
}
WORKER_ONLY = {"worker_wait", "take_ops", "message_seq", "publish", "set_tx_blocked", "enter"}
BOTH = {"arrays", "command_seq", "leave", "activity", "num_envs", "num_workers"}


def _two_mappings(num_envs, num_workers, env_worker):
    """The parent's Control and a WorkerControl over two mappings of one memfd,
    as the parent and a worker process map the block."""
    nbytes = _core.control_nbytes(num_envs, num_workers)
    fd = os.memfd_create("vecenv-test-views")
    try:
        os.ftruncate(fd, nbytes)
        pblock, wblock = _core.SharedBlock(fd, nbytes), _core.SharedBlock(fd, nbytes)
    finally:
        os.close(fd)
    parent = _core.Control(pblock, num_envs, num_workers, env_worker, init=True)
    return parent, _core.WorkerControl(wblock, num_envs, num_workers)


def _public(cls):
    return {n for n in dir(cls) if not n.startswith("_")}


def test_parent_and_worker_views_split_the_methods():
    assert issubclass(_core.Control, _core.ControlRegion)
    assert issubclass(_core.WorkerControl, _core.ControlRegion)
    assert not issubclass(_core.WorkerControl, _core.Control)
    assert not issubclass(_core.Control, _core.WorkerControl)
    assert _public(_core.ControlRegion) == BOTH
    assert _public(_core.Control) == BOTH | PARENT_ONLY
    assert _public(_core.WorkerControl) == BOTH | WORKER_ONLY


def test_worker_view_needs_no_env_worker_and_checks_the_region():
    block = _block(_core.control_nbytes(6, 2))
    with pytest.raises(ValueError, match="does not hold"):  # no header written yet
        _core.WorkerControl(block, 6, 2)
    _core.Control(block, 6, 2, [0, 0, 0, 1, 1, 1], init=True)
    wk = _core.WorkerControl(block, 6, 2)
    assert (wk.num_envs, wk.num_workers) == (6, 2)
    with pytest.raises(TypeError):
        _core.WorkerControl(block, 6, 2, [0] * 6)  # no env-to-worker table to pass
    with pytest.raises(ValueError, match="does not hold"):
        _core.WorkerControl(block, 5, 2)
    with pytest.raises(ValueError, match="smaller"):
        _core.WorkerControl(_block(64), 6, 2)
    with pytest.raises(TypeError, match="ControlRegion"):
        _core.ControlRegion(block, 6, 2)
    with pytest.raises(ValueError, match="worker=-1"):
        wk.publish([0], None, -1)  # a worker names itself: no default from a table
    with pytest.raises(ValueError, match="worker=2"):
        wk.publish([3], None, 2)
    assert wk.arrays()[2].tolist() == [0] * 6  # nothing published by the refused calls
    del wk
    block.close()


@pytest.mark.timeout(30)
def test_worker_view_does_its_whole_round_and_the_parent_sees_it():
    # Worker 1 (envs 3..5) over its own mapping: everything a worker does
    # goes through the WorkerControl, and the parent's Control agrees.
    parent, wk = _two_mappings(6, 2, [0, 0, 0, 1, 1, 1])
    seq = wk.command_seq(1)
    assert wk.worker_wait(1, seq, 0.0, 0.01) == -1  # nothing dispatched yet
    parent.post_message(1)
    parent.dispatch(np.array([5, 3], np.int64), _core.OP_STEP)
    assert parent.command_seq(1) == wk.command_seq(1) == seq + 2
    assert parent.command_seq(0) == 0  # worker 0 hosts neither env: not woken
    seq = wk.worker_wait(1, seq, 0.0, 1.0)
    assert seq == parent.command_seq(1)
    assert wk.take_ops(0, 3, 0) == []
    assert wk.take_ops(3, 6, 1) == [(3, _core.OP_STEP), (5, _core.OP_STEP)]
    assert parent.arrays()[0].tolist() == [0] * 6  # the worker cleared the ops
    assert wk.message_seq(1) == 1 and wk.message_seq(0) == 0
    wk.enter(1, 5, 7)
    assert parent.activity(1) == (5, 7) and parent.activity(0) == (-1, 0)
    wk.set_tx_blocked(1, True)
    assert parent.tx_blocked_workers() == [1]
    assert parent.wait_ready(2, 0.0, 1.0) == -2
    wk.set_tx_blocked(1, False)
    wk.leave(1)
    assert parent.activity(1) == (-1, 0)
    t1 = wk.publish([5], [_core.STATUS_INFO], 1)
    t2 = wk.publish([3], None, 1)
    assert t2 == t1 + 1
    assert parent.wait_ready(2, 0.0, 1.0) == 2
    assert parent.arrays()[3].tolist() == [0, 0, 0, t2, 0, t1]
    out = np.zeros(6, np.int64)
    assert parent.collect(2, out) == 1  # env 5's INFO status
    assert out[:2].tolist() == [5, 3]  # in publish order
    assert parent.published() == 0
    parent.dispatch_all(_core.OP_RESET)
    assert wk.worker_wait(1, seq, 0.0, 1.0) == seq + 1
    assert wk.take_ops(3, 6, 1) == [(3, _core.OP_RESET), (4, _core.OP_RESET), (5, _core.OP_RESET)]


@pytest.mark.timeout(30)
def test_worker_view_wakes_a_parent_asleep_on_its_own_mapping():
    import threading

    parent, wk = _two_mappings(4, 1, [0] * 4)
    parent.dispatch_all(_core.OP_STEP)

    def worker():
        seq = wk.worker_wait(0, 0, 0.0, 5.0)
        assert seq == 1
        wk.publish([env for env, _ in wk.take_ops(0, 4, 0)], None, 0)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert parent.wait_ready(4, 0.0, 5.0) == 4  # futex sleep, woken by the publish
    finally:
        thread.join()
    assert parent.collect_all() == 0 and parent.published() == 0
