# cython: language_level=3
"""vecenv._core: the compiled hot path of vecenv (parent and worker sides).

Private module; users never import it. It holds

* :class:`SharedBlock`, a MAP_SHARED mapping of a file descriptor that exposes
  the buffer protocol, so NumPy views over it are zero-copy;
* the wait/wake protocol between the parent and its workers over the control
  region at the start of the block (futex on Linux), as two views of one
  :class:`ControlRegion` (the mapping and the layout's pointers, computed
  once): the parent's :class:`Control` (dispatch, wait, collect, forget) and
  a worker's :class:`WorkerControl` (wait for work, take ops, publish);
* :class:`LeafWriter`, the worker-side copy of one env's observation leaves into
  their rows of the shared batch buffers, with shape and dtype checks;
* :func:`gather_rows` and :func:`scatter_rows`, batched row copies for partial
  batches and ``copy=True``.

Every kernel validates with the GIL held and then runs one ``with nogil:``
block on raw pointers.

Control region layout (byte offsets from the start of the block; every
offset, index and size has a name in csrc/_protocol.pxd and vecenv._protocol,
which the code uses, never the number)::

    0     header (HDR_*, u32 words):
            +0   magic          REGION_MAGIC once the parent wrote the header
            +4   num_envs
            +8   num_workers
            +64  doorbell       workers ring it (add 1) on every publish and
                                when a pipe write blocks; the parent
                                futex-waits on it. Its value means nothing:
                                never a count, only a change to wake on
            +68  parent_waiting 1 while the parent sleeps on the doorbell
            +72  parent_target  published count at which a worker must wake the parent
            +128 ticket counter one ticket per published worker round: FIFO order
    256   one 128-byte slot per worker (REGION_HEADER_BYTES, REGION_SLOT_BYTES;
          SLOT_* are u32 word indices, the byte offsets are 4x):
            [0] cmd_seq    parent adds 1 to hand the worker new work
            [1] sleeping   1 while the worker sleeps on cmd_seq
            [2] msg_seq    parent adds 1 per frame it starts writing to the worker's
                           pipe, before the first byte (vecenv._channel)
            [3] published  worker adds the envs of each publish (u32, wraps)
            [4] collected  parent adds the worker's envs it collects; forget()
                           sets it to published (u32, wraps)
            [5] tx_blocked 1 while the worker waits for room to write a frame
                           to its pipe (the parent then reads that pipe)
            [6] ops_writing parent adds 1 before it writes op bytes of the
                           worker's envs and 1 after (odd while it writes): the
                           worker takes a dispatch's ops whole, never a part
                           (take_ops), so its rounds never depend on timing
            [7] spare
            [8] env + 1    the env the worker is inside (0: between env calls)
            [9] activity   what that env is doing (vecenv._protocol.Activity)
    then  op[num_envs]      u8  parent writes (STEP, RESET), worker clears
          status[num_envs]  u8  worker writes (0 ok, INFO, ERROR, SHARED_INFO) before publishing
          ready[num_envs]   u8  worker sets on publish, parent clears on collect
          ticket[num_envs]  u32 worker writes on publish
          (each array starts on a REGION_ALIGN boundary)

The number of envs published and not yet collected is the sum over workers of
``int32(published - collected)``, never a shared counter: each worker's share
is exact, so ``forget`` drops a dead worker's share by setting its collected
count to its published count, and nothing is ever subtracted (no wrap).

Who writes what, and when: the parent writes op bytes and actions only for envs
that are not in flight (collected and not yet dispatched again), clears their
status, fences, writes their op bytes, then adds to cmd_seq; a worker reads them
only after it saw cmd_seq change. A worker writes observations, rewards, flags,
status and ticket for an env, fences, sets its ready byte, fences, adds to its
published count and rings the doorbell; the parent reads an env only after its
ready byte and the published counts say so.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_FillInfo
from libc.errno cimport errno
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

import numpy as np

cimport numpy as cnp

# The protocol's tables (vecenv._protocol's, mirrored by name): P.OP_STEP ...
cimport _protocol as P

cnp.import_array()


cdef extern from "sys/mman.h" nogil:
    void* mmap(void* addr, size_t length, int prot, int flags, int fd, long offset)
    int munmap(void* addr, size_t length)
    int PROT_READ
    int PROT_WRITE
    int MAP_SHARED
    void* MAP_FAILED


cdef extern from "vecenv_sync.h" nogil:
    uint32_t ve_load(const uint32_t* p)
    void ve_store(uint32_t* p, uint32_t v)
    uint32_t ve_add(uint32_t* p, uint32_t v)
    uint32_t ve_sub(uint32_t* p, uint32_t v)
    void ve_fence()
    void ve_cpu_relax()
    void ve_spin_step(unsigned long iter)
    double ve_now()
    uint64_t ve_now_ns()
    int ve_futex_wait(uint32_t* addr, uint32_t expected, double timeout_s)
    void ve_futex_wake(uint32_t* addr)


cdef extern from *:
    """
    #ifdef VECENV_DEBUG
    #define VE_DEBUG_BUILD 1
    #else
    #define VE_DEBUG_BUILD 0
    #endif
    """
    int VE_DEBUG_BUILD

# True in a build made with VECENV_DEBUG=1 (setup.py): bounds checks, -O0 -g.
DEBUG_BUILD = bool(VE_DEBUG_BUILD)

# How long take_ops waits for a dispatch that is writing its ops (nanoseconds):
# it takes nanoseconds, so only a parent stopped or killed inside one lasts this.
cdef uint64_t TAKE_OPS_WAIT_NS = 100000000

# Op codes written by the parent into op[env], and status codes written by a
# worker into status[env] before publishing: the cdef enums of
# csrc/_protocol.pxd, the values of vecenv._protocol.Op and .Status.
OP_STEP = P.OP_STEP
OP_RESET = P.OP_RESET
STATUS_OK = P.STATUS_OK
STATUS_INFO = P.STATUS_INFO   # a message for this env (info dict) is on the worker's pipe
STATUS_ERROR = P.STATUS_ERROR  # an error report for this env is on the worker's pipe
STATUS_SHARED_INFO = P.STATUS_SHARED_INFO  # its info is in the block's info rows, no message
# What ParentStep's calls return instead of a result (vecenv._protocol.ParentCode).
PARENT_NOT_EXACT = P.PARENT_NOT_EXACT  # the actions are not an exact array: nothing was done
PARENT_WAITING = P.PARENT_WAITING  # dispatched (or in flight), not all published within the slice
PARENT_TOO_FEW = P.PARENT_TOO_FEW  # recv: fewer than k envs in flight: nothing was done
PARENT_CHECK_DUE = P.PARENT_CHECK_DUE  # a liveness check is due: dispatched (step), not waited
# What Control.wait_ready and WorkerControl.worker_wait return instead of a
# count or a sequence number (vecenv._protocol.WaitCode).
WAIT_TIMED_OUT = P.WAIT_TIMED_OUT
WAIT_TX_BLOCKED = P.WAIT_TX_BLOCKED  # wait_ready: a worker waits for room on its pipe

# The info keys as Python strings, made once.
_RESET_INFO_KEY = P.RESET_INFO_KEY.decode("ascii")
_PICKLED_OBS_KEY = P.PICKLED_OBS_KEY.decode("ascii")
_PICKLED_FINAL_KEY = P.PICKLED_FINAL_KEY.decode("ascii")
_TERMINAL_OBS_KEY = P.TERMINAL_OBS_KEY.decode("ascii")
_TIME_LIMIT_KEY = P.TIME_LIMIT_KEY.decode("ascii")

# The C side's tables, {table: {name: value}}, for the test that they equal
# vecenv._protocol.mirrored_tables(): one entry per constant of
# csrc/_protocol.pxd, under its Python name.
PROTOCOL = {
    "Op": {"NONE": P.OP_NONE, "STEP": P.OP_STEP, "RESET": P.OP_RESET},
    "Status": {
        "OK": P.STATUS_OK, "INFO": P.STATUS_INFO, "ERROR": P.STATUS_ERROR,
        "SHARED_INFO": P.STATUS_SHARED_INFO,
    },
    "Activity": {
        "NONE": P.ACTIVITY_NONE, "UNPICKLE": P.ACTIVITY_UNPICKLE, "CREATE": P.ACTIVITY_CREATE,
        "RESET": P.ACTIVITY_RESET, "STEP": P.ACTIVITY_STEP, "AUTORESET": P.ACTIVITY_AUTORESET,
        "RENDER": P.ACTIVITY_RENDER, "GET_ATTR": P.ACTIVITY_GET_ATTR,
        "SET_ATTR": P.ACTIVITY_SET_ATTR, "ENV_METHOD": P.ACTIVITY_ENV_METHOD,
        "CALL": P.ACTIVITY_CALL, "IS_WRAPPED": P.ACTIVITY_IS_WRAPPED,
    },
    "Autoreset": {
        "SB3": P.AUTORESET_SB3, "NEXT_STEP": P.AUTORESET_NEXT_STEP,
        "SAME_STEP": P.AUTORESET_SAME_STEP, "DISABLED": P.AUTORESET_DISABLED,
    },
    "Region": {
        "HEADER_BYTES": P.REGION_HEADER_BYTES, "SLOT_BYTES": P.REGION_SLOT_BYTES,
        "ALIGN": P.REGION_ALIGN, "MAGIC": P.REGION_MAGIC,
    },
    "Header": {
        "MAGIC": P.HDR_MAGIC, "NUM_ENVS": P.HDR_NUM_ENVS, "NUM_WORKERS": P.HDR_NUM_WORKERS,
        "DOORBELL": P.HDR_DOORBELL, "PARENT_WAITING": P.HDR_PARENT_WAITING,
        "PARENT_TARGET": P.HDR_PARENT_TARGET, "TICKET_COUNTER": P.HDR_TICKET_COUNTER,
    },
    "SlotWord": {
        "CMD_SEQ": P.SLOT_CMD_SEQ, "SLEEPING": P.SLOT_SLEEPING, "MSG_SEQ": P.SLOT_MSG_SEQ,
        "PUBLISHED": P.SLOT_PUBLISHED, "COLLECTED": P.SLOT_COLLECTED,
        "TX_BLOCKED": P.SLOT_TX_BLOCKED, "OPS_WRITING": P.SLOT_OPS_WRITING,
        "ENV": P.SLOT_ENV, "ACTIVITY": P.SLOT_ACTIVITY,
        "BUSY_NS": P.SLOT_BUSY_NS,
    },
    "ParentCode": {
        "NOT_EXACT": P.PARENT_NOT_EXACT, "WAITING": P.PARENT_WAITING,
        "TOO_FEW": P.PARENT_TOO_FEW, "CHECK_DUE": P.PARENT_CHECK_DUE,
    },
    "WaitCode": {"TIMED_OUT": P.WAIT_TIMED_OUT, "TX_BLOCKED": P.WAIT_TX_BLOCKED},
    "InfoKey": {
        "RESET_INFO_KEY": _RESET_INFO_KEY, "PICKLED_OBS_KEY": _PICKLED_OBS_KEY,
        "PICKLED_FINAL_KEY": _PICKLED_FINAL_KEY, "TERMINAL_OBS_KEY": _TERMINAL_OBS_KEY,
        "TIME_LIMIT_KEY": _TIME_LIMIT_KEY,
    },
}


cdef inline size_t _round_up(size_t n, size_t a) noexcept nogil:
    return (n + a - 1) // a * a


def control_nbytes(Py_ssize_t num_envs, Py_ssize_t num_workers):
    """Size in bytes of the control region for ``num_envs`` envs and
    ``num_workers`` workers (a multiple of 64)."""
    if num_envs < 1 or num_workers < 1:
        raise ValueError(f"num_envs and num_workers must be >= 1, got {num_envs}, {num_workers}")
    cdef size_t n = P.REGION_HEADER_BYTES + P.REGION_SLOT_BYTES * <size_t>num_workers
    n += 3 * _round_up(<size_t>num_envs, P.REGION_ALIGN)
    n += _round_up(4 * <size_t>num_envs, P.REGION_ALIGN)
    return <Py_ssize_t>n


cdef class SharedBlock:
    """A read-write MAP_SHARED mapping of ``size`` bytes of file descriptor ``fd``.

    Supports the buffer protocol (one writable byte buffer), so
    ``np.frombuffer(block, ...)`` is a zero-copy view. The mapping stays valid
    while any view exists: views hold a reference to the block, and
    :meth:`close` refuses to unmap while buffers are exported.

    Parameters
    ----------
    fd : int
        An open file descriptor at least ``size`` bytes long (memfd or shm).
    size : int
        Mapping length in bytes, > 0.
    """

    cdef char* ptr
    cdef Py_ssize_t size
    cdef Py_ssize_t exports

    def __cinit__(self, int fd, Py_ssize_t size):
        self.ptr = NULL
        self.exports = 0
        if size <= 0:
            raise ValueError(f"size must be > 0 bytes, got {size}")
        cdef void* p = mmap(NULL, <size_t>size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        if p == MAP_FAILED:
            import os
            raise OSError(f"mmap of {size} bytes failed on fd {fd}: {os.strerror(errno)}")
        self.ptr = <char*>p
        self.size = size

    def __dealloc__(self):
        if self.ptr != NULL:
            munmap(self.ptr, <size_t>self.size)
            self.ptr = NULL

    @property
    def nbytes(self):
        """Length of the mapping in bytes."""
        return self.size

    @property
    def closed(self):
        return self.ptr == NULL

    def close(self):
        """Unmap now. Safe to call twice. Raises BufferError while NumPy views
        of the block are alive (drop them first)."""
        if self.ptr == NULL:
            return
        if self.exports:
            raise BufferError(f"{self.exports} buffer views of the shared block are still alive")
        munmap(self.ptr, <size_t>self.size)
        self.ptr = NULL

    def touch(self, Py_ssize_t start=0, Py_ssize_t stop=-1, bint write=False):
        """Fault in the pages of ``[start, stop)`` so no page fault lands in a step.
        With ``write=True`` pages are written (zeroed), else only read."""
        self._check()
        if stop < 0 or stop > self.size:
            stop = self.size
        if start < 0 or start > stop:
            raise ValueError(f"start={start} must be in [0, stop={stop}]")
        cdef unsigned long sink = 0
        cdef Py_ssize_t i
        with nogil:
            if write:
                memset(self.ptr + start, 0, <size_t>(stop - start))
            else:
                i = start
                while i < stop:
                    sink += <unsigned char>self.ptr[i]
                    i += 4096
        return sink

    cdef inline void _check(self) except *:
        if self.ptr == NULL:
            raise ValueError("the shared block is closed")

    def __getbuffer__(self, Py_buffer* buffer, int flags):
        self._check()
        PyBuffer_FillInfo(buffer, self, self.ptr, self.size, 0, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer* buffer):
        self.exports -= 1


cdef class ControlRegion:
    """The control region at the start of a :class:`SharedBlock`, as both
    sides map it: the block, the counts and the pointers into the layout (see
    the module docstring; computed here, once, for both views), and what both
    sides read. Not constructed directly: the parent holds a :class:`Control`,
    each worker a :class:`WorkerControl`; the subclass checks (or, in the
    parent that created the block, writes) the header.

    Parameters
    ----------
    block, num_envs, num_workers
        As for :class:`Control` and :class:`WorkerControl`.
    *args, **kwargs
        The subclass's own constructor arguments (Cython hands a base
        ``__cinit__`` every argument of the call).

    Raises
    ------
    TypeError
        ``ControlRegion`` itself is constructed.
    ValueError
        The block is smaller than the control region.
    """

    cdef SharedBlock block
    cdef char* base
    cdef uint32_t* doorbell  # rung on every publish; never a count (see the layout above)
    cdef uint32_t* parent_waiting
    cdef uint32_t* parent_target
    cdef uint32_t* ticket_counter
    cdef char* slots
    cdef uint8_t* op
    cdef uint8_t* status
    cdef uint8_t* ready
    cdef uint32_t* ticket
    cdef readonly Py_ssize_t num_envs
    cdef readonly Py_ssize_t num_workers

    def __cinit__(self, SharedBlock block, Py_ssize_t num_envs, Py_ssize_t num_workers,
                  *args, **kwargs):
        if type(self) is ControlRegion:
            raise TypeError("ControlRegion is the shared base: construct Control or WorkerControl")
        need = control_nbytes(num_envs, num_workers)
        block._check()
        if block.size < need:
            raise ValueError(f"block of {block.size} bytes is smaller than the control region ({need})")
        self.block = block
        self.num_envs = num_envs
        self.num_workers = num_workers
        self.base = block.ptr
        self.doorbell = <uint32_t*>(self.base + P.HDR_DOORBELL)
        self.parent_waiting = <uint32_t*>(self.base + P.HDR_PARENT_WAITING)
        self.parent_target = <uint32_t*>(self.base + P.HDR_PARENT_TARGET)
        self.ticket_counter = <uint32_t*>(self.base + P.HDR_TICKET_COUNTER)
        self.slots = self.base + P.REGION_HEADER_BYTES
        cdef size_t off = P.REGION_HEADER_BYTES + P.REGION_SLOT_BYTES * <size_t>num_workers
        self.op = <uint8_t*>(self.base + off)
        off += _round_up(<size_t>num_envs, P.REGION_ALIGN)
        self.status = <uint8_t*>(self.base + off)
        off += _round_up(<size_t>num_envs, P.REGION_ALIGN)
        self.ready = <uint8_t*>(self.base + off)
        off += _round_up(<size_t>num_envs, P.REGION_ALIGN)
        self.ticket = <uint32_t*>(self.base + off)

    cdef _header(self, bint init):
        # The subclass's __cinit__ calls this once its own checks passed.
        cdef uint32_t* magic = <uint32_t*>(self.base + P.HDR_MAGIC)
        cdef uint32_t* envs = <uint32_t*>(self.base + P.HDR_NUM_ENVS)
        cdef uint32_t* workers = <uint32_t*>(self.base + P.HDR_NUM_WORKERS)
        if init:
            memset(self.base, 0, <size_t>control_nbytes(self.num_envs, self.num_workers))
            magic[0] = P.REGION_MAGIC
            envs[0] = <uint32_t>self.num_envs
            workers[0] = <uint32_t>self.num_workers
            ve_fence()
        elif (magic[0] != P.REGION_MAGIC or envs[0] != <uint32_t>self.num_envs
                or workers[0] != <uint32_t>self.num_workers):
            raise ValueError("the shared block does not hold a vecenv control region of this shape")

    cdef inline uint32_t* _slot(self, Py_ssize_t w) noexcept nogil:
        return <uint32_t*>(self.slots + P.REGION_SLOT_BYTES * w)

    cdef inline int64_t _published(self) noexcept nogil:
        # Sum of the workers' exact shares (see the layout in the module doc).
        cdef int64_t total = 0
        cdef Py_ssize_t w
        cdef uint32_t* s
        for w in range(self.num_workers):
            s = self._slot(w)
            total += <int32_t>(ve_load(&s[P.SLOT_PUBLISHED]) - ve_load(&s[P.SLOT_COLLECTED]))
        return total

    def arrays(self):
        """NumPy views ``(op, status, ready, ticket)`` over the env table, each
        of length num_envs (uint8, uint8, uint8, uint32). For inspection and the
        slow path; the hot path goes through the methods."""
        n = self.num_envs
        base = np.frombuffer(self.block, dtype=np.uint8)
        off = <Py_ssize_t>(self.op - <uint8_t*>self.base)
        a = _round_up(<size_t>n, P.REGION_ALIGN)
        op = base[off:off + n]
        st = base[off + a:off + a + n]
        rd = base[off + 2 * a:off + 2 * a + n]
        tk = base[off + 3 * a:off + 3 * a + 4 * n].view(np.uint32)
        return op, st, rd, tk

    def command_seq(self, Py_ssize_t worker):
        """Current cmd_seq of ``worker`` (both sides): a (re)started worker
        waits for it to change, so work dispatched to a dead predecessor is
        not replayed; the parent counts its wake-ups."""
        if worker < 0 or worker >= self.num_workers:
            raise ValueError(f"worker={worker} is outside [0, {self.num_workers})")
        return <Py_ssize_t>ve_load(&self._slot(worker)[P.SLOT_CMD_SEQ])

    # ------------------------------------------------------------ activity
    # Slot words SLOT_ENV (env + 1, 0: none) and SLOT_ACTIVITY (an Activity code): which env
    # the worker is inside. The worker writes them with plain stores before
    # and after each env call; the parent reads them once the worker is dead
    # or stopped (a crash, a kill, the timeout watchdog), so what it reads is
    # the last env call the worker entered and did not leave. A fresh worker
    # starts with both cleared (the parent clears them before starting it).
    # WorkerControl.enter writes them; leave and activity are here.

    def leave(self, Py_ssize_t worker):
        """Both sides: ``worker`` left its env call (the worker), or a worker
        is about to start in this slot (the parent)."""
        if worker < 0 or worker >= self.num_workers:
            raise ValueError(f"worker={worker} is outside [0, {self.num_workers})")
        cdef uint32_t* s = self._slot(worker)
        s[P.SLOT_ENV] = 0
        s[P.SLOT_ACTIVITY] = 0

    def activity(self, Py_ssize_t worker):
        """Parent: ``(env, activity)`` recorded by ``worker`` (``(-1, 0)``
        when it is between env calls)."""
        if worker < 0 or worker >= self.num_workers:
            raise ValueError(f"worker={worker} is outside [0, {self.num_workers})")
        cdef uint32_t* s = self._slot(worker)
        cdef uint32_t e = ve_load(&s[P.SLOT_ENV])
        cdef uint32_t a = ve_load(&s[P.SLOT_ACTIVITY])
        if e == 0 or e > <uint32_t>self.num_envs:
            return -1, 0
        return <Py_ssize_t>e - 1, <Py_ssize_t>a


cdef class Control(ControlRegion):
    """The parent's view of the control region: dispatches work, waits for
    envs to be published and collects them (each worker holds a
    :class:`WorkerControl` over the same region).

    Parameters
    ----------
    block : SharedBlock
        The mapping; its control region starts at byte 0.
    num_envs, num_workers : int
        Counts (>= 1).
    env_worker : sequence of int, length num_envs
        Index of the worker that hosts each env (whom a dispatch wakes, whose
        count a collect adds to).
    init : bool
        True in the parent that created the block: writes the header.

    Raises
    ------
    ValueError
        The block is too small, ``env_worker`` has the wrong length or an
        entry outside ``[0, num_workers)``, or (``init=False``) the block holds
        no control region of this shape.
    """

    cdef int64_t* wcount  # envs per worker
    cdef int* env_worker
    cdef uint8_t* touched
    cdef int64_t* order
    cdef uint8_t* inflight  # flags kept by track_in_flight (NULL: none)
    cdef object inflight_owner  # the array inflight points into

    def __cinit__(self, SharedBlock block, Py_ssize_t num_envs, Py_ssize_t num_workers,
                  env_worker, bint init=False):
        self.env_worker = NULL
        self.touched = NULL
        self.order = NULL
        self.inflight = NULL
        self.wcount = NULL
        if len(env_worker) != num_envs:
            raise ValueError(f"env_worker must have num_envs={num_envs} entries, got {len(env_worker)}")
        self.env_worker = <int*>malloc(sizeof(int) * num_envs)
        self.touched = <uint8_t*>malloc(num_workers)
        self.order = <int64_t*>malloc(sizeof(int64_t) * num_envs)
        self.wcount = <int64_t*>malloc(sizeof(int64_t) * num_workers)
        if (self.env_worker == NULL or self.touched == NULL or self.order == NULL
                or self.wcount == NULL):
            raise MemoryError()
        memset(self.wcount, 0, sizeof(int64_t) * num_workers)
        cdef Py_ssize_t i
        for i in range(num_envs):
            w = int(env_worker[i])
            if w < 0 or w >= num_workers:
                raise ValueError(f"env_worker[{i}]={w} is not a worker index in [0, {num_workers})")
            self.env_worker[i] = w
            self.wcount[w] += 1
        self._header(init)

    def __dealloc__(self):
        free(self.env_worker)
        free(self.touched)
        free(self.order)
        free(self.wcount)
        self.env_worker = NULL
        self.touched = NULL
        self.order = NULL
        self.wcount = NULL
        self.inflight = NULL

    def track_in_flight(self, cnp.ndarray flags):
        """Parent: keep ``flags`` (one byte per env: bool or uint8, shape
        (num_envs,), C-contiguous, writable) equal to "dispatched and not yet
        collected". dispatch, dispatch_all, collect, collect_all and forget
        update it inside the call, so an interrupt (Ctrl-C) between two Python
        statements cannot make it disagree with what the workers were given.
        The Control keeps a reference to ``flags``."""
        if (flags.ndim != 1 or flags.shape[0] != self.num_envs or flags.itemsize != 1
                or not flags.flags.c_contiguous or not flags.flags.writeable):
            raise ValueError(
                f"flags must be a writable C-contiguous 1-byte array of shape ({self.num_envs},)")
        self.inflight_owner = flags
        self.inflight = <uint8_t*>cnp.PyArray_DATA(flags)

    cdef inline bint _tx_blocked_any(self) noexcept nogil:
        cdef Py_ssize_t w
        for w in range(self.num_workers):
            if ve_load(&self._slot(w)[P.SLOT_TX_BLOCKED]):
                return True
        return False

    cdef inline void _kick(self, Py_ssize_t w) noexcept nogil:
        cdef uint32_t* s = self._slot(w)
        ve_add(&s[P.SLOT_CMD_SEQ], 1)
        if ve_load(&s[P.SLOT_SLEEPING]):
            ve_futex_wake(&s[P.SLOT_CMD_SEQ])

    def dispatch_all(self, int op):
        """Parent: give every env the op code ``op`` and wake every worker.
        All envs must be collected (not in flight)."""
        cdef Py_ssize_t w
        with nogil:
            ve_fence()  # actions written before this call are visible before the ops
            # Status first: a worker already awake may take an op as soon as it
            # is written and publish a status that a later clear would wipe.
            memset(self.status, P.STATUS_OK, <size_t>self.num_envs)
            if self.inflight != NULL:
                memset(self.inflight, 1, <size_t>self.num_envs)
            # Odd while the ops are written (take_ops); each add is a full
            # fence, so the statuses above are visible before any op.
            for w in range(self.num_workers):
                ve_add(&self._slot(w)[P.SLOT_OPS_WRITING], 1)
            memset(self.op, op, <size_t>self.num_envs)
            for w in range(self.num_workers):
                ve_add(&self._slot(w)[P.SLOT_OPS_WRITING], 1)
                self._kick(w)

    def dispatch(self, const int64_t[::1] env_ids, int op):
        """Parent: give the envs ``env_ids`` (int64, C-contiguous, each in
        [0, num_envs), not in flight) the op code ``op`` and wake their workers."""
        cdef Py_ssize_t i, n = env_ids.shape[0], w
        cdef int64_t e
        for i in range(n):
            e = env_ids[i]
            if e < 0 or e >= self.num_envs:
                raise ValueError(f"env_ids[{i}]={e} is outside [0, {self.num_envs})")
        cdef const int64_t* ids = &env_ids[0] if n > 0 else NULL
        with nogil:
            ve_fence()  # actions written before this call are visible before the ops
            memset(self.touched, 0, <size_t>self.num_workers)
            for i in range(n):  # status first, as in dispatch_all
                e = ids[i]
                self.status[e] = P.STATUS_OK
                self.touched[self.env_worker[e]] = 1
                if self.inflight != NULL:
                    self.inflight[e] = 1
            for w in range(self.num_workers):  # odd while writing, and a fence (as above)
                if self.touched[w]:
                    ve_add(&self._slot(w)[P.SLOT_OPS_WRITING], 1)
            for i in range(n):
                self.op[ids[i]] = <uint8_t>op
            for w in range(self.num_workers):
                if self.touched[w]:
                    ve_add(&self._slot(w)[P.SLOT_OPS_WRITING], 1)
                    self._kick(w)

    def post_message(self, Py_ssize_t worker):
        """Parent: tell ``worker`` that one more message waits on its pipe."""
        if worker < 0 or worker >= self.num_workers:
            raise ValueError(f"worker={worker} is outside [0, {self.num_workers})")
        cdef uint32_t* s = self._slot(worker)
        with nogil:
            ve_add(&s[P.SLOT_MSG_SEQ], 1)
            self._kick(worker)

    def wait_ready(self, Py_ssize_t target, double spin_s, double timeout_s):
        """Parent: wait until at least ``target`` envs are published.

        Spins for at most ``spin_s`` seconds, then sleeps on a futex, for at
        most ``timeout_s`` seconds in all. Returns the number of published envs
        (>= target), WAIT_TIMED_OUT (-1) if the time ran out first, or
        WAIT_TX_BLOCKED (-2) as soon as a worker waits for room on its pipe
        (:meth:`tx_blocked_workers`: read their pipes, then wait again). Callers wait in slices and check worker
        liveness and signals between them.
        """
        cdef int64_t v, t = target
        cdef uint32_t bell
        cdef double start, deadline, left
        cdef int timed_out = 0, blocked = 0
        cdef unsigned long spins = 0
        with nogil:
            v = self._published()
            if v < t:
                start = ve_now()
                deadline = start + timeout_s
                while v < t and ve_now() - start < spin_s:
                    ve_spin_step(spins)
                    spins += 1
                    v = self._published()
                    if self._tx_blocked_any():
                        blocked = 1
                        break
                while v < t and not blocked:
                    ve_store(self.parent_target, <uint32_t>t)
                    ve_store(self.parent_waiting, 1)
                    # Doorbell before the counts: a publish or a blocked write
                    # after this load changes it, so the futex wait returns.
                    bell = ve_load(self.doorbell)
                    v = self._published()
                    if v >= t:
                        break
                    if self._tx_blocked_any():
                        blocked = 1
                        break
                    left = deadline - ve_now()
                    if left <= 0:
                        timed_out = 1
                        break
                    ve_futex_wait(self.doorbell, bell, left)
                    v = self._published()
                ve_store(self.parent_waiting, 0)
        if blocked:
            return P.WAIT_TX_BLOCKED
        if timed_out:
            return P.WAIT_TIMED_OUT
        return <Py_ssize_t>v

    def published(self):
        """Number of envs published and not yet collected."""
        return <Py_ssize_t>self._published()

    def tx_blocked_workers(self):
        """Parent: the workers waiting for room to write a frame to their pipe."""
        return [w for w in range(self.num_workers) if ve_load(&self._slot(w)[P.SLOT_TX_BLOCKED])]

    def collect_all(self):
        """Parent: take all num_envs envs (all must be published). Returns how
        many of them have a nonzero status (messages to read)."""
        cdef Py_ssize_t i, w, flagged = 0
        if self._published() < self.num_envs:
            raise ValueError(f"collect_all() with only {self._published()} envs published")
        with nogil:
            memset(self.ready, 0, <size_t>self.num_envs)
            if self.inflight != NULL:
                memset(self.inflight, 0, <size_t>self.num_envs)
            for w in range(self.num_workers):
                ve_add(&self._slot(w)[P.SLOT_COLLECTED], <uint32_t>self.wcount[w])
            for i in range(self.num_envs):
                if self.status[i]:
                    flagged += 1
        return flagged

    def collect(self, Py_ssize_t k, int64_t[::1] out_ids):
        """Parent: take the ``k`` published envs that were published first
        (smallest tickets, ties by index) and write their indices into
        ``out_ids[:k]`` in that order. At least ``k`` envs must be published.
        Returns how many of them have a nonzero status.
        """
        if k < 0 or k > out_ids.shape[0] or k > self.num_envs:
            raise ValueError(f"k={k} must be in [0, min(len(out_ids)={out_ids.shape[0]}, num_envs={self.num_envs})]")
        cdef Py_ssize_t i, j, m = 0, flagged = 0
        cdef int64_t e
        cdef uint32_t base_ticket, ti
        cdef int64_t* order = self.order
        with nogil:
            for i in range(self.num_envs):
                if self.ready[i]:
                    order[m] = i
                    m += 1
            ve_fence()  # the rows of envs seen ready are read after this
            # Tickets wrap around: key = ticket - (newest + 1) modulo 2**32 puts
            # the oldest first. Read the counter after the scan so every ticket
            # seen is at most the newest.
            base_ticket = ve_load(self.ticket_counter) + 1
        if m < k or self._published() < k:
            raise ValueError(f"collect({k}) with only {min(m, self._published())} envs published")
        with nogil:
            # Insertion sort by ticket age: m is small and mostly sorted.
            for i in range(1, m):
                e = order[i]
                ti = self.ticket[e] - base_ticket
                j = i - 1
                while j >= 0 and self.ticket[order[j]] - base_ticket > ti:
                    order[j + 1] = order[j]
                    j -= 1
                order[j + 1] = e
            for i in range(k):
                e = order[i]
                out_ids[i] = e
                self.ready[e] = 0
                if self.inflight != NULL:
                    self.inflight[e] = 0
                if self.status[e]:
                    flagged += 1
                ve_add(&self._slot(self.env_worker[e])[P.SLOT_COLLECTED], 1)
        return flagged

    def forget(self, Py_ssize_t lo, Py_ssize_t hi):
        """Parent, once the worker hosting envs ``[lo, hi)`` is dead (joined):
        clear their op, status, ready and in-flight bytes and drop their
        worker's share of the published count (its collected count becomes its
        published count: exact even if the worker died inside a publish).
        Returns how many ready bytes were set (published, not collected).

        Only valid when no live process writes these envs, and ``[lo, hi)``
        must be all the envs of its workers."""
        if lo < 0 or hi > self.num_envs or lo > hi:
            raise ValueError(f"[{lo}, {hi}) is not a range of envs in [0, {self.num_envs})")
        cdef Py_ssize_t i
        cdef uint32_t n = 0
        cdef uint32_t* s
        with nogil:
            for i in range(lo, hi):
                self.op[i] = P.OP_NONE
                self.status[i] = P.STATUS_OK
                if self.inflight != NULL:
                    self.inflight[i] = 0
                if self.ready[i]:
                    self.ready[i] = 0
                    n += 1
                s = self._slot(self.env_worker[i])
                ve_store(&s[P.SLOT_COLLECTED], ve_load(&s[P.SLOT_PUBLISHED]))
                ve_store(&s[P.SLOT_TX_BLOCKED], 0)  # a dead writer waits for no room
        return <Py_ssize_t>n



cdef class WorkerControl(ControlRegion):
    """A worker's view of the control region: waits for work, takes its ops,
    publishes the envs it finished and records the env call it is inside.
    Needs no env-to-worker table: every call names its worker or env range.

    Parameters
    ----------
    block : SharedBlock
        The mapping; its control region starts at byte 0, its header written
        by the parent's :class:`Control` (``init=True``).
    num_envs, num_workers : int
        Counts (>= 1).

    Raises
    ------
    ValueError
        The block is too small or holds no control region of this shape.
    """

    cdef int64_t* scratch  # publish()'s envs as C ints (num_envs of them)
    # worker_wait's estimate of the caller's time between two commands
    # (seconds; an exponential mean of the recent waits, each counted at most
    # twice follow_s), used only when follow_s > 0.
    cdef double gap_est

    def __cinit__(self, SharedBlock block, Py_ssize_t num_envs, Py_ssize_t num_workers):
        self._header(False)
        self.scratch = <int64_t*>malloc(sizeof(int64_t) * <size_t>num_envs)
        if self.scratch == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.scratch)
        self.scratch = NULL

    def worker_wait(self, Py_ssize_t worker, uint32_t last_seq, double spin_s, double timeout_s,
                    double follow_s=0.0):
        """Worker: wait until the parent changes this worker's cmd_seq from
        ``last_seq``. Polls up to ``spin_s`` seconds, then sleeps on a futex.

        With ``follow_s`` > 0 the poll follows the caller: while the recent
        waits (an exponential mean, weight 1/8, of each wait counted at most
        ``2 * follow_s``) are under ``follow_s``, the poll lasts 1.5 times
        that mean plus 20 us, at least ``spin_s`` and at most ``follow_s``.
        A learner whose policy takes a few hundred microseconds between two
        steps then finds its workers awake: a fixed 200 us poll ended just
        before the actions came, and the futex wake of a halted core costs
        tens of microseconds in a VM (issue 23: CartPole x16 in CleanRL's
        rollout loop, one worker, 48k env-steps/s with 200 us, 58k with 1 ms).

        Returns the new cmd_seq, or WAIT_TIMED_OUT (-1) if ``timeout_s`` passed first."""
        if worker < 0 or worker >= self.num_workers:
            raise ValueError(f"worker={worker} is outside [0, {self.num_workers})")
        cdef uint32_t* s = self._slot(worker)
        cdef uint32_t v
        cdef double start = 0.0, now = 0.0, left
        cdef double window = spin_s
        cdef int timed_out = 0
        cdef unsigned long spins = 0
        if follow_s > 0.0 and self.gap_est < follow_s:
            window = min(follow_s, 1.5 * self.gap_est + 20e-6)
            if window < spin_s:
                window = spin_s
        with nogil:
            v = ve_load(&s[P.SLOT_CMD_SEQ])
            if v == last_seq:
                start = now = ve_now()
                # ``now`` is the last clock read: the wait's length when the
                # poll ends it (no extra read on the fast path).
                while v == last_seq and now - start < window:
                    ve_spin_step(spins)
                    spins += 1
                    v = ve_load(&s[P.SLOT_CMD_SEQ])
                    now = ve_now()
                while v == last_seq:
                    ve_store(&s[P.SLOT_SLEEPING], 1)
                    v = ve_load(&s[P.SLOT_CMD_SEQ])
                    if v != last_seq:
                        break
                    left = timeout_s - (ve_now() - start)
                    if left <= 0:
                        timed_out = 1
                        break
                    ve_futex_wait(&s[P.SLOT_CMD_SEQ], v, left)
                    v = ve_load(&s[P.SLOT_CMD_SEQ])
                    now = ve_now()
                ve_store(&s[P.SLOT_SLEEPING], 0)
        if follow_s > 0.0:
            self.gap_est += (min(now - start, 2.0 * follow_s) - self.gap_est) * 0.125
        if timed_out:
            return P.WAIT_TIMED_OUT
        return <Py_ssize_t>v

    def message_seq(self, Py_ssize_t worker):
        """Number of messages the parent has posted to ``worker`` so far."""
        if worker < 0 or worker >= self.num_workers:
            raise ValueError(f"worker={worker} is outside [0, {self.num_workers})")
        return <Py_ssize_t>ve_load(&self._slot(worker)[P.SLOT_MSG_SEQ])

    def take_ops(self, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t worker):
        """Worker: return ``[(env, op), ...]`` for envs in ``[lo, hi)`` (of
        ``worker``, in [0, num_workers)) with a pending op, and clear those op
        bytes.

        A dispatch's ops are taken whole: while the parent writes them (the
        worker slot's ``ops_writing`` is odd) this waits, and a read that a
        dispatch overlapped is read again. A worker woken by a message (whose ops
        follow it) used to take the envs whose bytes were already written, so
        how a reset's envs fell into rounds, and with it the global generators'
        reseed (vecenv._worker), depended on timing."""
        if lo < 0 or hi > self.num_envs or lo > hi:
            raise ValueError(f"[{lo}, {hi}) is not a range of envs in [0, {self.num_envs})")
        if worker < 0 or worker >= self.num_workers:
            raise ValueError(f"worker={worker} is outside [0, {self.num_workers})")
        cdef uint32_t* writing = &self._slot(worker)[P.SLOT_OPS_WRITING]
        cdef Py_ssize_t i, n
        cdef uint32_t seen
        cdef unsigned long it
        cdef uint64_t give_up = 0
        while True:
            seen = ve_load(writing)
            if seen & 1:  # a dispatch is writing: it takes nanoseconds
                it = 0
                with nogil:
                    while seen & 1:
                        ve_spin_step(it)
                        it += 1
                        if it == 64:
                            give_up = ve_now_ns() + TAKE_OPS_WAIT_NS
                        elif it > 64 and ve_now_ns() > give_up:
                            break  # a parent stopped or killed inside a dispatch
                        seen = ve_load(writing)
            n = 0
            for i in range(lo, hi):  # read only: the bytes are cleared once the read holds
                if self.op[i] != P.OP_NONE:
                    self.scratch[n] = i
                    n += 1
            ve_fence()
            if seen & 1 or ve_load(writing) == seen:
                break
        # The parent writes no op of an env in flight, so these stay ours.
        out = []
        for i in range(n):
            out.append((self.scratch[i], self.op[self.scratch[i]]))
            self.op[self.scratch[i]] = P.OP_NONE
        if n:
            # Order the op reads before the caller's next loads (message_seq,
            # actions): whatever the parent wrote before these ops is visible.
            ve_fence()
        return out

    def publish(self, envs, statuses, Py_ssize_t worker):
        """Worker: publish the finished envs ``envs`` (a sequence of env
        indices) with their status codes (None: all STATUS_OK), under one
        ticket, and wake the parent if it waits for them. Observations,
        rewards and flags of these envs must be written before this call.
        ``worker``: the publishing worker, in [0, num_workers), that hosts
        ``envs``. Returns the ticket (0 when ``envs`` is empty); a message
        about these envs carries it (vecenv._channel)."""
        cdef Py_ssize_t n = len(envs), i, e
        cdef uint32_t t
        if worker < 0 or worker >= self.num_workers:
            raise ValueError(f"worker={worker} is outside [0, {self.num_workers})")
        if statuses is not None and len(statuses) != n:
            raise ValueError(f"statuses has {len(statuses)} entries for {n} envs")
        if n > self.num_envs:
            raise ValueError(f"{n} envs to publish, the vec env has {self.num_envs}")
        for i in range(n):
            e = envs[i]
            if e < 0 or e >= self.num_envs:
                raise ValueError(f"env {e} is outside [0, {self.num_envs})")
            self.status[e] = <uint8_t>(statuses[i] if statuses is not None else 0)
            self.scratch[i] = e
        if n == 0:
            return 0
        with nogil:
            t = self._publish_envs(self._slot(worker), self.scratch, n)
        return t

    cdef uint32_t _publish_envs(self, uint32_t* slot, const int64_t* envs,
                                Py_ssize_t n) noexcept nogil:
        """Publish ``envs`` (n >= 1, their statuses written) of the worker
        whose slot is ``slot`` under one new ticket, which it returns: the
        tickets, fence, the ready bytes, fence, the worker's published count,
        then the doorbell (and the parent's wake if it waits for them)."""
        cdef Py_ssize_t i
        cdef uint32_t t = ve_add(self.ticket_counter, 1)
        for i in range(n):
            self.ticket[envs[i]] = t
        ve_fence()  # rows, status and tickets are visible before the ready bytes
        for i in range(n):
            self.ready[envs[i]] = 1
        ve_fence()
        ve_add(&slot[P.SLOT_PUBLISHED], <uint32_t>n)
        ve_add(self.doorbell, 1)  # ring, after the counts
        if ve_load(self.parent_waiting) and self._published() >= <int32_t>ve_load(self.parent_target):
            ve_futex_wake(self.doorbell)
        return t

    def set_tx_blocked(self, Py_ssize_t worker, bint blocked):
        """Worker: say that ``worker`` waits (or no longer waits) for room on
        its pipe; a parent waiting for envs is woken to read the pipe."""
        if worker < 0 or worker >= self.num_workers:
            raise ValueError(f"worker={worker} is outside [0, {self.num_workers})")
        cdef uint32_t* s = self._slot(worker)
        with nogil:
            ve_store(&s[P.SLOT_TX_BLOCKED], 1 if blocked else 0)
            if blocked:
                ve_add(self.doorbell, 1)
                if ve_load(self.parent_waiting):
                    ve_futex_wake(self.doorbell)

    def enter(self, Py_ssize_t worker, Py_ssize_t env, uint32_t activity):
        """Worker: record that ``worker`` is inside env ``env`` (in
        [0, num_envs)) doing ``activity`` (a nonzero code)."""
        if worker < 0 or worker >= self.num_workers or env < 0 or env >= self.num_envs:
            raise ValueError(f"worker={worker} or env={env} is out of range")
        cdef uint32_t* s = self._slot(worker)
        s[P.SLOT_ACTIVITY] = activity
        s[P.SLOT_ENV] = <uint32_t>(env + 1)


# ---------------------------------------------------------------------- leaves

cdef class LeafWriter:
    """Worker side: copy one env's observation leaves into their rows of the
    shared batch buffers.

    Parameters
    ----------
    buffers : list of numpy.ndarray
        One C-contiguous array of shape ``(num_envs, *leaf_shape)`` per leaf,
        a writable view into shared memory.
    cast : bool
        True (default): a leaf of another dtype is cast where NumPy's
        ``same_kind`` rule allows it (float64 to float32, as gymnasium's
        vector envs and SB3's DummyVecEnv batch observations), integers
        only when every value is representable. False: an ndarray must have
        exactly the row's dtype.

    A leaf of the wrong shape, or whose dtype cannot be cast (float to int,
    an object array), raises ValueError naming the leaf. Python and NumPy
    scalars and sequences are converted by the same rule.
    """

    cdef list buffers
    cdef list dtypes
    cdef list shapes
    cdef Py_ssize_t nleaves
    cdef char** bases
    cdef size_t* row_bytes
    cdef const char** srcs
    cdef Py_ssize_t num_envs
    cdef bint cast

    def __cinit__(self, list buffers, bint cast=True):
        self.cast = cast
        self.bases = NULL
        self.row_bytes = NULL
        self.srcs = NULL
        self.nleaves = len(buffers)
        n = max(self.nleaves, 1)
        self.bases = <char**>malloc(sizeof(char*) * n)
        self.row_bytes = <size_t*>malloc(sizeof(size_t) * n)
        self.srcs = <const char**>malloc(sizeof(char*) * n)
        if self.bases == NULL or self.row_bytes == NULL or self.srcs == NULL:
            raise MemoryError()
        self.buffers = []
        self.dtypes = []
        self.shapes = []
        self.num_envs = -1
        cdef cnp.ndarray b
        for j, buf in enumerate(buffers):
            if not isinstance(buf, np.ndarray) or buf.ndim < 1:
                raise ValueError(f"buffers[{j}] must be an ndarray with a leading num_envs axis")
            b = buf
            if not b.flags.c_contiguous or not b.flags.writeable:
                raise ValueError(f"buffers[{j}] must be C-contiguous and writable")
            if self.num_envs < 0:
                self.num_envs = b.shape[0]
            elif b.shape[0] != self.num_envs:
                raise ValueError(f"buffers[{j}] has {b.shape[0]} rows, expected {self.num_envs}")
            self.buffers.append(b)
            self.dtypes.append(b.dtype)
            self.shapes.append(tuple(buf.shape[1:]))
            self.bases[j] = <char*>cnp.PyArray_DATA(b)
            self.row_bytes[j] = <size_t>(b.nbytes // b.shape[0]) if b.shape[0] else 0

    def __dealloc__(self):
        free(self.bases)
        free(self.row_bytes)
        free(self.srcs)
        self.bases = NULL
        self.row_bytes = NULL
        self.srcs = NULL

    def write(self, Py_ssize_t env, leaves):
        """Copy ``leaves`` (a sequence, one value per leaf) into row ``env``.

        Raises
        ------
        ValueError
            A leaf has the wrong shape or dtype, is not representable in the
            leaf's dtype, or ``env`` is out of range.
        """
        if env < 0 or env >= self.num_envs:
            raise ValueError(f"env={env} is outside [0, {self.num_envs})")
        if len(leaves) != self.nleaves:
            raise ValueError(f"expected {self.nleaves} observation leaves, got {len(leaves)}")
        keep = []
        cdef Py_ssize_t j
        cdef cnp.ndarray a
        for j in range(self.nleaves):
            x = leaves[j]
            dt = self.dtypes[j]
            shape = self.shapes[j]
            if type(x) is np.ndarray:
                a = <cnp.ndarray>x
                if a.dtype is not dt and a.dtype != dt:
                    if not self.cast:
                        raise ValueError(f"leaf {j}: dtype {a.dtype}, expected {dt}")
                    a = _convert_scalar_like(x, dt, shape, j)
                    keep.append(a)
                elif (<object>a).shape != shape:
                    raise ValueError(f"leaf {j}: shape {(<object>a).shape}, expected {shape}")
                if not cnp.PyArray_IS_C_CONTIGUOUS(a):
                    a = np.ascontiguousarray(a)
                    keep.append(a)
            else:
                a = _convert_scalar_like(x, dt, shape, j)
                keep.append(a)
            self.srcs[j] = <const char*>cnp.PyArray_DATA(a)
        cdef size_t rb
        with nogil:
            for j in range(self.nleaves):
                rb = self.row_bytes[j]
                memcpy(self.bases[j] + rb * <size_t>env, self.srcs[j], rb)


cdef cnp.ndarray _convert_scalar_like(object x, object dt, tuple shape, Py_ssize_t j):
    if isinstance(x, np.ndarray):
        a = x
    else:
        try:
            a = np.asarray(x)
        except Exception as exc:
            raise ValueError(f"leaf {j}: cannot convert {type(x).__name__} to an array: {exc}")
    if a.shape != shape:
        raise ValueError(f"leaf {j}: shape {a.shape}, expected {shape}")
    if a.dtype == dt:
        return np.ascontiguousarray(a)
    both_int = a.dtype.kind in "iu" and dt.kind in "iu"
    if a.dtype.kind not in "biuf" or not (both_int or np.can_cast(a.dtype, dt, casting="same_kind")):
        raise ValueError(f"leaf {j}: dtype {a.dtype}, expected {dt}")
    b = a.astype(dt, order="C")
    if dt.kind in "biu" and not np.array_equal(b, a):
        raise ValueError(f"leaf {j}: value {a!r} is not representable as {dt}")
    return b


# ------------------------------------------------------------------ row copies

cdef inline void _gather_c(char* out, const char* src, const int64_t* ids, Py_ssize_t k,
                           size_t rb) noexcept nogil:
    """Rows ``src[ids[j]]`` to ``out[j]`` (``rb`` bytes each; ids already checked)."""
    cdef Py_ssize_t j
    for j in range(k):
        memcpy(out + rb * <size_t>j, src + rb * <size_t>ids[j], rb)


cdef inline void _scatter_c(char* out, const char* src, const int64_t* ids, Py_ssize_t k,
                            size_t rb) noexcept nogil:
    """Rows ``src[j]`` to ``out[ids[j]]`` (``rb`` bytes each; ids already checked)."""
    cdef Py_ssize_t j
    for j in range(k):
        memcpy(out + rb * <size_t>ids[j], src + rb * <size_t>j, rb)


def gather_rows(const uint8_t[:, ::1] src, const int64_t[::1] ids, uint8_t[:, ::1] out):
    """Copy rows ``src[ids[i]]`` to ``out[i]`` for i in range(len(ids)).

    Parameters
    ----------
    src : uint8 array, shape (num_rows, row_bytes), C-contiguous
        Byte view of a batch buffer (``buf.reshape(len(buf), -1).view(np.uint8)``).
    ids : int64 array, shape (k,), C-contiguous; each in [0, num_rows)
    out : uint8 array, shape (>= k, row_bytes), C-contiguous, writable

    Raises
    ------
    ValueError
        Row sizes differ, ``out`` is too short, or an id is out of range.
    """
    cdef Py_ssize_t k = ids.shape[0], i, rows = src.shape[0]
    cdef size_t rb = <size_t>src.shape[1]
    if out.shape[1] != src.shape[1]:
        raise ValueError(f"out rows are {out.shape[1]} bytes, src rows are {src.shape[1]}")
    if out.shape[0] < k:
        raise ValueError(f"out has {out.shape[0]} rows, need {k}")
    for i in range(k):
        if ids[i] < 0 or ids[i] >= rows:
            raise ValueError(f"ids[{i}]={ids[i]} is outside [0, {rows})")
    if k == 0 or rb == 0:
        return
    with nogil:
        _gather_c(<char*>&out[0, 0], <const char*>&src[0, 0], &ids[0], k, rb)


def scatter_rows(const uint8_t[:, ::1] src, const int64_t[::1] ids, uint8_t[:, ::1] out):
    """Copy rows ``src[i]`` to ``out[ids[i]]`` for i in range(len(ids)).

    The inverse of :func:`gather_rows`; same shapes and errors, with ``src``
    holding at least ``len(ids)`` rows.
    """
    cdef Py_ssize_t k = ids.shape[0], i, rows = out.shape[0]
    cdef size_t rb = <size_t>out.shape[1]
    if out.shape[1] != src.shape[1]:
        raise ValueError(f"out rows are {out.shape[1]} bytes, src rows are {src.shape[1]}")
    if src.shape[0] < k:
        raise ValueError(f"src has {src.shape[0]} rows, need {k}")
    for i in range(k):
        if ids[i] < 0 or ids[i] >= rows:
            raise ValueError(f"ids[{i}]={ids[i]} is outside [0, {rows})")
    if k == 0 or rb == 0:
        return
    with nogil:
        _scatter_c(<char*>&out[0, 0], <const char*>&src[0, 0], &ids[0], k, rb)


def check_int_range(const int64_t[::1] values, int64_t lo, int64_t hi):
    """Index of the first value outside ``[lo, hi)``, or -1 if all are inside.
    ``values`` is int64, C-contiguous, any length."""
    cdef Py_ssize_t i, n = values.shape[0], bad = -1
    if n == 0:
        return -1
    cdef const int64_t* p = &values[0]
    with nogil:
        for i in range(n):
            if p[i] < lo or p[i] >= hi:
                bad = i
                break
    return bad


cdef class StepClock:
    """Parent: the time inside a vec env's step verbs and the caller's time
    between them (``ShmemVecEnv.stats()``), on CLOCK_MONOTONIC in ns.

    :meth:`enter` at the start of a step verb, :meth:`leave` at its end (the
    verbs never nest: the vec env's state machine runs one at a time); the
    time from one ``leave`` to the next ``enter`` is the caller's, unless
    :meth:`pause` (a reset, a call) came between. Two ``clock_gettime`` calls
    per verb: the counters stay on.
    """

    cdef uint64_t left, t0
    cdef readonly uint64_t caller_ns, in_call_ns, batches, env_steps

    def enter(self):
        cdef uint64_t now = ve_now_ns()
        if self.left:
            self.caller_ns += now - self.left
        self.t0 = now

    def leave(self, Py_ssize_t env_steps):
        """The verb returns a batch of ``env_steps`` env-steps (0: none, as
        ``step_async``/``send`` or a verb that raised)."""
        cdef uint64_t now = ve_now_ns()
        self.in_call_ns += now - self.t0
        self.left = now
        if env_steps > 0:
            self.batches += 1
            self.env_steps += <uint64_t>env_steps

    def pause(self):
        """The time until the next :meth:`enter` is not the caller's."""
        self.left = 0


include "_round.pxi"


include "_parent.pxi"


include "_infos.pxi"
