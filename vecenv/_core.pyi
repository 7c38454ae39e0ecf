"""Type stub for vecenv._core, the compiled hot path built from csrc/_core.pyx.

Private module: vecenv's own code imports it, users do not. Kept in step with
csrc/_core.pyx by tests/test_packaging.py (names, members and parameters).
"""

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: True when built with ``VECENV_DEBUG=1`` (bounds checks on, ``-O0 -g``).
DEBUG_BUILD: bool

# Op codes the parent writes into op[env].
OP_STEP: int
OP_RESET: int
# Status codes a worker writes into status[env] before publishing.
STATUS_OK: int
STATUS_INFO: int
STATUS_ERROR: int
STATUS_SHARED_INFO: int
# What Control.wait_ready and WorkerControl.worker_wait return instead of a
# count or a sequence number (vecenv._protocol.WaitCode).
WAIT_TIMED_OUT: int
WAIT_TX_BLOCKED: int
#: The C side's tables (csrc/_protocol.pxd), ``{table: {name: value}}``: equal to
#: ``vecenv._protocol.mirrored_tables()`` ("InfoKey" maps names to strings).
PROTOCOL: dict[str, dict[str, int | str]]

def control_nbytes(num_envs: int, num_workers: int) -> int:
    """Size in bytes of the control region (a multiple of 64).

    Raises ValueError when ``num_envs`` or ``num_workers`` is < 1.
    """

class SharedBlock:
    """A read-write MAP_SHARED mapping of ``size`` bytes of file descriptor ``fd``.

    Exposes one writable byte buffer (``np.frombuffer(block, ...)`` is a
    zero-copy view). Raises ValueError for ``size <= 0`` and OSError when
    mmap fails.
    """

    def __init__(self, fd: int, size: int) -> None: ...
    @property
    def nbytes(self) -> int:
        """Length of the mapping in bytes."""
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Unmap now; safe twice. Raises BufferError while views are alive."""
    def touch(self, start: int = 0, stop: int = -1, write: bool = False) -> int:
        """Fault in the pages of ``[start, stop)``; zero them with ``write=True``."""
    if sys.version_info >= (3, 12):  # buffer protocol visible to typing from 3.12
        def __buffer__(self, flags: int, /) -> memoryview: ...
        def __release_buffer__(self, buffer: memoryview, /) -> None: ...

class ControlRegion:
    """The control region at byte 0 of a SharedBlock, as both sides map it:
    counts, layout pointers and what both sides read. Not constructed directly
    (TypeError): the parent holds a Control, each worker a WorkerControl."""

    @property
    def num_envs(self) -> int: ...
    @property
    def num_workers(self) -> int: ...
    def arrays(
        self,
    ) -> tuple[
        npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.uint32]
    ]:
        """Views ``(op, status, ready, ticket)``, each of length num_envs."""
    def command_seq(self, worker: int) -> int:
        """The worker's current cmd_seq (where a restarted worker starts)."""
    # Slot bytes +32..+47: the env a worker is inside, and what it does there.
    def leave(self, worker: int) -> None:
        """Worker: it left its env call (the parent also clears a slot before a start)."""
    def activity(self, worker: int) -> tuple[int, int]:
        """Parent: ``(env, activity)`` last entered and not left, or ``(-1, 0)``."""

class Control(ControlRegion):
    """The parent's view: dispatch, wait, collect, forget.

    Raises ValueError when the block is too small, ``env_worker`` has the
    wrong length or an entry outside ``[0, num_workers)``, or (``init=False``)
    the block holds no control region of this shape.
    """

    def __init__(
        self,
        block: SharedBlock,
        num_envs: int,
        num_workers: int,
        env_worker: Sequence[int],
        init: bool = False,
    ) -> None: ...
    def dispatch_all(self, op: int) -> None: ...
    def dispatch(self, env_ids: npt.NDArray[np.int64], op: int) -> None:
        """``env_ids``: int64, shape (k,), C-contiguous, each in [0, num_envs)."""
    def post_message(self, worker: int) -> None: ...
    def wait_ready(self, target: int, spin_s: float, timeout_s: float) -> int:
        """Number of published envs (>= target), WAIT_TIMED_OUT (-1) when
        ``timeout_s`` ran out, WAIT_TX_BLOCKED (-2) when a worker waits for
        room on its pipe."""
    def published(self) -> int: ...
    def tx_blocked_workers(self) -> list[int]:
        """Workers waiting for room to write a frame to their pipe."""
    def collect_all(self) -> int:
        """Take all envs; returns how many have a nonzero status."""
    def collect(self, k: int, out_ids: npt.NDArray[np.int64]) -> int:
        """Take the ``k`` oldest published envs into ``out_ids[:k]`` (int64, writable)."""
    def track_in_flight(self, flags: npt.NDArray[np.bool_] | npt.NDArray[np.uint8]) -> None:
        """Keep ``flags`` (num_envs,) equal to "dispatched, not collected" in
        dispatch/collect/forget."""
    def forget(self, lo: int, hi: int) -> int:
        """After the worker of envs ``[lo, hi)`` died: clear their bytes; returns
        how many were published and not collected."""

class WorkerControl(ControlRegion):
    """A worker's view: wait for work, take ops, publish, record its env call.

    Raises ValueError when the block is too small or holds no control region
    of this shape (the parent's Control writes the header).
    """

    def __init__(self, block: SharedBlock, num_envs: int, num_workers: int) -> None: ...
    def worker_wait(
        self, worker: int, last_seq: int, spin_s: float, timeout_s: float, follow_s: float = ...
    ) -> int:
        """The new cmd_seq, or WAIT_TIMED_OUT (-1) when ``timeout_s`` ran out."""
    def message_seq(self, worker: int) -> int: ...
    def take_ops(self, lo: int, hi: int, worker: int) -> list[tuple[int, int]]:
        """``[(env, op), ...]`` for envs in ``[lo, hi)`` (``worker``'s) with a
        pending op, a dispatch's ops whole."""
    def publish(self, envs: Sequence[int], statuses: Sequence[int] | None, worker: int) -> int:
        """The ticket of this publish (0 when ``envs`` is empty)."""
    def set_tx_blocked(self, worker: int, blocked: bool) -> None: ...
    def enter(self, worker: int, env: int, activity: int) -> None:
        """Worker: record that it is inside env ``env`` doing ``activity``."""

class LeafWriter:
    """Worker side: copy one env's observation leaves into rows of the batch buffers.

    ``buffers``: one C-contiguous, writable ndarray of shape
    ``(num_envs, *leaf_shape)`` per leaf. Raises ValueError otherwise.
    ``cast``: a leaf of another dtype is cast where NumPy's ``same_kind``
    rule allows (integers only when every value fits); False: an ndarray
    must have exactly the row's dtype.
    """

    def __init__(self, buffers: list[npt.NDArray[np.generic]], cast: bool = True) -> None: ...
    def write(self, env: int, leaves: Sequence[object]) -> None:
        """Copy ``leaves`` (one value per leaf) into row ``env``; ValueError on a
        wrong shape, dtype, unrepresentable scalar or ``env`` out of range."""

def gather_rows(
    src: npt.NDArray[np.uint8], ids: npt.NDArray[np.int64], out: npt.NDArray[np.uint8]
) -> None:
    """``out[i] = src[ids[i]]``; uint8 (rows, row_bytes) C-contiguous; ids int64 (k,)."""

def scatter_rows(
    src: npt.NDArray[np.uint8], ids: npt.NDArray[np.int64], out: npt.NDArray[np.uint8]
) -> None:
    """``out[ids[i]] = src[i]``; the inverse of :func:`gather_rows`."""

def check_int_range(values: npt.NDArray[np.int64], lo: int, hi: int) -> int:
    """Index of the first value outside ``[lo, hi)``, or -1 if all are inside."""

class StepClock:
    @property
    def caller_ns(self) -> int: ...
    @property
    def in_call_ns(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def env_steps(self) -> int: ...
    def enter(self) -> None: ...
    def leave(self, env_steps: int) -> None: ...
    def pause(self) -> None: ...

class WorkerRound:
    """Worker side: one round of the worker's ops (step, reset) in compiled code.

    Built by ``vecenv._worker._Loop`` from itself; gives the same rows,
    statuses, infos and errors as the loop's Python round and hands every case
    it cannot prove identical to the loop's Python methods. Raises ValueError
    when the loop's shared views are not writable C-contiguous arrays of
    num_envs rows.
    """

    def __init__(
        self,
        loop: object,
        error_payload: Callable[[BaseException, int | None, str], object],
        unpack_reset: Callable[[object], tuple[object, object]],
    ) -> None: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Drop the views of the shared block and the loop; safe twice."""
    def run(self, ops: list[tuple[int, int]]) -> None:
        """Run ``[(env, op), ...]`` (from ``WorkerControl.take_ops``), then publish the envs.

        Raises ValueError after :meth:`close` or for an env outside the worker's.
        """

# The parent's step path in one compiled call (csrc/_parent.pxi).
PARENT_NOT_EXACT: int  # the actions are not an exact array: nothing was done
PARENT_WAITING: int  # not all published within the first slice: nothing collected
PARENT_TOO_FEW: int  # recv: fewer than k envs in flight: nothing was done
PARENT_CHECK_DUE: int  # a liveness check is due: dispatched (step) but not waited

#: ParentStep's batch: ``(obs, rewards, dones, infos, flagged, ended)``.
_StepBatch = tuple[
    object, npt.NDArray[np.float64], npt.NDArray[np.bool_], list[dict[str, Any]], int, int
]

class ParentStep:
    """Parent side: write actions, dispatch, wait one slice, collect and build
    the batch in one call; returns a code where the Python path takes over.

    Raises ValueError for buffers of the wrong shape, dtype or contiguity.
    """

    @property
    def exact_actions(self) -> bool:
        """Whether an action array can be written here (one action leaf)."""
    def __init__(
        self,
        ctrl: Control,
        act_buf: npt.NDArray[np.generic] | None,
        obs_bufs: list[npt.NDArray[np.generic]],
        gather_out: list[npt.NDArray[np.generic]],
        rew: npt.NDArray[np.float64],
        term: npt.NDArray[np.bool_],
        trunc: npt.NDArray[np.bool_],
        ids_out: npt.NDArray[np.int64],
        final_bufs: list[npt.NDArray[np.generic]] | None,
        unflatten: Callable[[list[npt.NDArray[np.generic]]], object] | None,
        copy: bool,
        cores: int = 0,
        ends_in_python: bool = False,
    ) -> None: ...
    def use_info_rows(self, rows: Any, row_bytes: int, forms: dict[int, tuple[Any, ...]]) -> None:
        """Read the infos of flagged envs from the block's info rows where
        every one is in a layout of ``forms`` (vecenv._infos.InfoRows)."""
    def start(self, actions: object) -> bool:
        """Lockstep: write ``actions`` (None: already written) and dispatch."""
    def send(self, actions: object, env_ids: object) -> bool:
        """Write the rows of ``env_ids`` and dispatch them; False: nothing done."""
    def step(
        self,
        actions: object,
        spin_s: float,
        first_s: float,
        reset_infos: list[dict[str, Any]] | None = None,
        next_check: float = ...,
    ) -> int | _StepBatch:
        """:meth:`start` then :meth:`finish`; PARENT_NOT_EXACT when nothing was done."""
    def finish(
        self,
        spin_s: float,
        first_s: float,
        reset_infos: list[dict[str, Any]] | None = None,
        next_check: float = ...,
    ) -> int | _StepBatch:
        """PARENT_CHECK_DUE, PARENT_WAITING, or ``(obs, rewards, dones, infos, flagged, ended)``."""
    def recv(
        self,
        k: int,
        spin_s: float,
        first_s: float,
        reset_infos: list[dict[str, Any]] | None = None,
        next_check: float = ...,
    ) -> (
        int
        | tuple[
            object,
            npt.NDArray[np.float64],
            npt.NDArray[np.bool_],
            list[dict[str, Any]],
            npt.NDArray[np.int64],
            int,
            int,
            int,
        ]
    ):
        """PARENT_TOO_FEW, PARENT_CHECK_DUE, PARENT_WAITING, or ``(obs, rewards, dones, infos,
        env_ids, flagged, ended, in_flight)``."""

def read_info_row(rows: Any, base: int, form: tuple[Any, ...]) -> dict[str, Any]: ...
def read_info_rows(
    rows: Any,
    row_bytes: int,
    lo: int,
    envs: list[int],
    forms: dict[int, tuple[Any, ...]],
    read_one: Callable[[int], dict[str, Any]],
) -> dict[int, dict[str, Any]]: ...
