"""The message channel between the parent and one worker (runs in both).

Everything that is not on the shared-memory step path travels here: a worker's
spaces at start, the attach handshake, reset seeds and options, method calls
and their replies, a step's errors and its infos that are not numbers only
(those go into the block's info rows, vecenv._infos), close. This module owns the
framing, the reads and writes, and the rules below; ``shmem_vec_env`` (parent)
and ``_worker`` (worker) only call it.

Transport and framing
---------------------
One ``multiprocessing.Pipe(duplex=True)`` per worker (a Unix socket pair), set
non-blocking on both sides. A frame is a 16-byte header, ``<QQ``: the body's
length in bytes and a ``ref``, followed by the body, the message pickled
(highest protocol; :func:`encode`, which sends NumPy's number scalars as
Python numbers). Bodies have any size (a 100 MB call argument, return
value or info): writes take what the socket accepts and wait with ``poll``
for room, reads take what is there and wait with ``poll`` for more. No read
or write ever blocks without a deadline and a liveness check: the parent
polls the worker's process sentinel with the socket and gives up at the
caller's deadline; the worker checks every ``PARENT_CHECK_S`` that its
parent lives.

Refs: what makes a reply exact
------------------------------
The parent numbers its requests on each channel (1, 2, ...; a restarted worker
gets a new channel). A worker's reply carries the ref of the request it
answers; the parent keeps replies by ref and a caller takes only the ref it
asked for, so a reply of an abandoned call (Ctrl-C, a timeout of a single
wait) is never taken for another call's. A step's infos and errors (a
``round`` message) carry the ticket under which the worker published those
envs (:meth:`vecenv._core.WorkerControl.publish`); the parent keeps them per env
with their ticket and takes them only for the ticket it collected, so an unread
message of an abandoned step is never taken for a later step's. No message
needs to be drained or resynchronised: stale ones are overwritten or dropped.

Message kinds
-------------
Each kind is a member of :class:`vecenv._protocol.Msg` and a frozen dataclass
of :mod:`vecenv._protocol` (written below as a tuple of its kind's lowercased
name and its fields: ``("attach", handle, layout, reset_ids)`` is
``Attach(handle, layout, reset_ids)``), except the step's ``round`` message,
which is the tuple itself (the worker's step path builds it).

Parent -> worker (``ref`` = the request's number; the worker handles them in
order and answers with the same ``ref``):

* ``("attach", handle, layout, reset_ids)``: right after ``spaces`` (the
  worker is reading: no wake). The worker maps the block, resets
  ``reset_ids`` and replies ``("attached", pid, infos)`` or ``("error", report)``.
* ``("reset_kwargs", {env: {"seed", "options"}})``: posted before the reset
  op that uses them; the worker keeps them for that env's next reset. No reply.
* ``("actions", {env: action})``: posted before the step op that uses them,
  for actions that do not fit the shared action rows (another dtype, a list,
  spaces without a fixed layout); the worker gives each env its entry at its
  next step instead of the shared row (a reset drops a leftover). No reply.
* ``("call", what, name, args, kwargs, env_ids)``: the worker runs it on each
  env and replies ``("result", [(status, value), ...])``, one per env.
* ``("sync", token)``: reply ``("synced", token)`` (a barrier; vecenv itself
  no longer needs one).
* ``("close",)``: the worker closes its envs, replies ``("closed",)`` and exits.

Worker -> parent (the parent decodes each frame as it arrives; a ``report``
is a :class:`vecenv._protocol.ErrorReport`, turned into an exception by its
``to_exception``):

* ``("spaces", obs_space, act_space, metadata)`` or ``("error", report)``
  at start (``ref`` 0, unsolicited): kept as the reply to ref 0.
* replies as above (``ref`` = the request's): kept by ref until the caller
  that asked takes it; a reply nobody asks for any more is dropped at reset.
* ``("round", {env: info}, {env: report})`` right after publishing
  envs whose status is INFO or ERROR (``ref`` = the publish's ticket): each
  entry is kept for its env with the ticket, replacing an older one; the
  parent takes it when it collects that env under that ticket.

Wake-ups: after attach a worker reads its pipe only when woken. The parent
adds 1 to the worker's ``msg_seq`` (and wakes it) *before* the first byte of a
frame, then writes the frame while also reading the worker's pipe, so a big
frame never waits for a worker that is asleep or that is itself writing. The
worker takes its ops, then reads exactly ``msg_seq - handled`` frames before it
runs them (messages the ops depend on are posted before the ops). A worker
that finds no room for a frame sets its ``tx_blocked`` word and rings the
parent's doorbell; a parent waiting for envs then reads that pipe.

Interrupts (parent)
-------------------
A KeyboardInterrupt can land between any two bytecodes of the parent, also
between a read and its bookkeeping. Every operation on a channel therefore
sets ``busy`` before its first side effect and clears it after the last one:
an interrupt in between leaves ``busy`` set, the channel counts as
``broken`` (bytes may be lost or half a frame written), every later use
raises :class:`ChannelBroken`, and the vec env's ``reset()`` restarts that
worker (a new pipe, a new channel: exact). An interrupt between operations
leaves a whole channel; a pending reply or round message is then just stale.
"""

from __future__ import annotations

import copyreg
import io
import os
import pickle
import select
import struct
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, Optional, Tuple

import numpy as np

from vecenv._protocol import Msg

_HEADER = struct.Struct("<QQ")  # body length in bytes, ref
_SCRATCH = 1 << 16  # bytes read per syscall for small frames
_SMALL = 1 << 16  # frames up to this size are written as one buffer
_IN = select.POLLIN | select.POLLHUP | select.POLLERR
_OUT = select.POLLOUT


class ChannelDead(Exception):
    """The peer closed its end or its process ended."""


class ChannelTimeout(Exception):
    """The deadline passed first (the channel is still whole)."""


class ChannelBroken(Exception):
    """An operation on this channel was interrupted: bytes may be lost."""


def _number(x) -> Tuple[Any, Tuple[Any, ...]]:
    """Reduce a NumPy number scalar to its type called on the Python number,
    which gives the same type and bits back; a NaN keeps NumPy's own reduce
    (a float32 signalling NaN would come back quiet through a double)."""
    if x != x:
        return x.__reduce__()
    return type(x), (x.item(),)


# Every integer, bool, float and complex scalar type but long double, whose
# item() is a double (it would lose digits).
_NUMBERS: Dict[Any, Any] = {
    np.dtype(c).type: _number for c in np.typecodes["AllInteger"] + "?efdFD"
}
_local = threading.local()  # per thread: a reusable pickler, and the reducers it has
_KEEP = 1 << 20  # a buffer that grew past this many bytes is not kept


def _reducers() -> Dict[Any, Any]:
    """The pickler's reducers: :data:`_NUMBERS`, and copyreg's over them (a
    user's reducer for a NumPy type wins, as it does in ``pickle.dumps``)."""
    table = getattr(_local, "table", None)
    if table is None or table[0] != copyreg.dispatch_table:  # registered since
        table = _local.table = (
            dict(copyreg.dispatch_table),
            {**_NUMBERS, **copyreg.dispatch_table},
        )
    return table[1]


def encode(msg: Any) -> bytes:
    """``msg`` pickled as a frame body (highest protocol). Raises what pickle
    raises.

    NumPy's number scalars (the ``np.float64`` values in a MuJoCo env's info,
    say) pickle as their type called on the Python number instead of NumPy's
    own reduce, which writes the dtype and raw bytes of every one: a round of
    8 HalfCheetah-v5 infos (4 scalars each) took 50-65 us to pickle with
    ``pickle.dumps`` and 29-37 us here (2-core VM, 2026-12-06), and comes back
    with the same types and bits. The pickler and its buffer are reused per
    thread (not after a body over 1 MiB, nor after a dump that raised; a
    nested call gets its own), and forget the message once it is pickled.
    """
    table = _reducers()
    state = getattr(_local, "pickler", None)
    _local.pickler = None  # until the dump completes: one that raises is not reused
    if state is None or state[1].dispatch_table is not table:
        buf = io.BytesIO()
        pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.dispatch_table = table
        state = (buf, pickler)
    buf, pickler = state
    buf.seek(0)
    buf.truncate()
    try:
        pickler.dump(msg)
    finally:
        pickler.clear_memo()  # the memo holds every object of msg
    body = buf.getvalue()
    if len(body) <= _KEEP:
        _local.pickler = state
    return body


class _Stream:
    """Frames over one non-blocking socket: a reader that assembles frames
    from whatever arrives and a writer queue. Subclasses decide what a
    complete frame becomes (:meth:`_on_frame`)."""

    def __init__(self, conn):
        self._conn = conn  # keeps the descriptor open; closed by close()
        self._fd = conn.fileno()
        os.set_blocking(self._fd, False)
        self._header = bytearray(_HEADER.size)
        self._header_got = 0
        self._body: Optional[bytearray] = None
        self._body_got = 0
        self._ref = 0
        self._scratch = bytearray(_SCRATCH)
        self._out: Deque[memoryview] = deque()
        self.eof = False
        self.moved = 0  # frames completed plus buffers written (progress marks)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        """Close the descriptor; later reads and writes see end of file (the
        number may be reused by another descriptor: never touch it again)."""
        self._fd = -1
        self.eof = True
        self._out.clear()
        try:
            self._conn.close()
        except OSError:
            pass

    # ------------------------------------------------------------ reading
    def _on_frame(self, ref: int, body: bytearray) -> None:
        raise NotImplementedError

    def _read_available(self) -> None:
        """Read what the socket holds now and hand over complete frames.
        Sets ``eof`` when the peer closed its end."""
        fd = self._fd
        while fd >= 0:
            body = self._body
            if body is not None and len(body) - self._body_got > _SCRATCH:
                view = memoryview(body)[self._body_got :]  # straight into a big body
            else:
                view = self._scratch
            try:
                n = os.readv(fd, [view])
            except BlockingIOError:
                return
            except (ConnectionResetError, OSError):
                self.eof = True
                return
            if n == 0:
                self.eof = True
                return
            if view is self._scratch:
                self._feed(memoryview(view)[:n])
            else:
                self._body_got += n
                if body is not None and self._body_got == len(body):
                    self._finish()
            if n < len(view):
                return  # the socket is (very likely) empty: skip an EAGAIN read

    def _feed(self, data: memoryview) -> None:
        size = _HEADER.size
        while data:
            if self._body is None:
                take = min(size - self._header_got, len(data))
                self._header[self._header_got : self._header_got + take] = data[:take]
                self._header_got += take
                data = data[take:]
                if self._header_got < size:
                    return
                length, self._ref = _HEADER.unpack(self._header)
                self._header_got = 0
                self._body = bytearray(length)
                self._body_got = 0
                if length == 0:
                    self._finish()
                continue
            body = self._body
            take = min(len(body) - self._body_got, len(data))
            body[self._body_got : self._body_got + take] = data[:take]
            self._body_got += take
            data = data[take:]
            if self._body_got == len(body):
                self._finish()

    def _finish(self) -> None:
        ref, body = self._ref, self._body or bytearray()  # None only if empty
        self._body = None
        self._body_got = 0
        self.moved += 1
        self._on_frame(ref, body)

    # ------------------------------------------------------------ writing
    def _queue(self, body: bytes, ref: int) -> None:
        header = _HEADER.pack(len(body), ref)
        if len(body) <= _SMALL:
            self._out.append(memoryview(header + body))
        else:
            self._out.append(memoryview(header))
            self._out.append(memoryview(body))

    def _write_available(self) -> None:
        """Write what the socket takes now. Raises ChannelDead on a broken pipe."""
        out = self._out
        if self._fd < 0:
            raise ChannelDead()
        while out:
            view = out[0]
            try:
                n = os.write(self._fd, view)
            except BlockingIOError:
                return
            except (BrokenPipeError, ConnectionResetError):
                self.eof = True
                raise ChannelDead() from None
            self.moved += 1
            if n == len(view):
                out.popleft()
            else:
                out[0] = view[n:]


class ParentChannel(_Stream):
    """The parent's end of worker ``w``'s pipe.

    Incoming frames are decoded as they arrive: replies go to ``replies``
    (by ref), a ``round`` message's entries to ``rounds`` (env ->
    ``(ticket, "info" | "error", value)``), the latest entry of an env wins.

    Parameters
    ----------
    conn : multiprocessing.connection.Connection
        The parent's end of the pipe.
    sentinel : int
        The worker process's sentinel (readable once it has ended).
    """

    def __init__(self, conn, sentinel: int):
        super().__init__(conn)
        self._sentinel = sentinel
        self.replies: Dict[int, Any] = {}
        self.rounds: Dict[int, Tuple[int, str, Any]] = {}
        self._next_ref = 1
        self.last_ref = 0  # the ref of the last request (0: none yet)
        self.busy = False  # set while an operation runs: see "Interrupts"
        self._poller = select.poll()
        self._poller.register(self._fd, _IN)
        self._poller.register(sentinel, _IN)
        self._polling_out = False

    @property
    def broken(self) -> bool:
        """True when an operation was interrupted (see the module doc)."""
        return self.busy

    def _on_frame(self, ref: int, body: bytearray) -> None:
        msg = pickle.loads(body)
        if type(msg) is tuple and msg[0] == Msg.ROUND:  # the step's round: a tuple
            _, infos, errors = msg
            for env, info in infos.items():
                self.rounds[env] = (ref, "info", info)
            for env, err in errors.items():
                self.rounds[env] = (ref, "error", err)
        else:
            self.replies[ref] = msg

    def _step(self, deadline: Optional[float]) -> bool:
        """One read/write turn, waiting at most until ``deadline`` (and at
        most 0.1 s) for the socket. Returns False when the worker is gone
        (everything it sent is read first)."""
        moved = self.moved
        self._read_available()
        if self._out:
            self._write_available()
        if self.eof:
            return False
        if self.moved != moved:
            return True  # progress: let the caller look before waiting
        want_out = bool(self._out)
        if want_out != self._polling_out:
            self._poller.modify(self._fd, _IN | _OUT if want_out else _IN)
            self._polling_out = want_out
        left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
        events = self._poller.poll(max(0, int(left * 1000) + (left > 0)))
        dead = False
        for fd, ev in events:
            if fd == self._fd:
                if ev & _IN:
                    self._read_available()
                if ev & _OUT:
                    self._write_available()
            elif fd == self._sentinel:
                dead = True
        if dead:
            self._read_available()  # what it sent before it ended
            return False
        return not self.eof

    def _check(self) -> None:
        if self.busy:
            raise ChannelBroken()

    # ------------------------------------------------------------ operations
    def request(self, msg: Any, deadline: Optional[float], post: Optional[Callable] = None) -> int:
        """Send ``msg`` and return its ref.

        ``post`` (the worker's ``Control.post_message``) is called before the
        first byte, so the worker reads while the frame is written; incoming
        frames are read meanwhile.

        Raises
        ------
        ChannelBroken
            An earlier operation was interrupted.
        ChannelDead, ChannelTimeout
            The worker went away or ``deadline`` passed before the whole
            frame was written: the channel stays broken (the worker must go).
        Exception
            What pickling ``msg`` raised (nothing was sent).
        """
        self._check()
        body = encode(msg)
        self.busy = True
        ref = self._next_ref
        self._next_ref = ref + 1
        self.last_ref = ref
        self._queue(body, ref)
        if post is not None:
            post()
        while self._out:
            self._write_available()
            if not self._out:
                break
            if not self._step(deadline):
                raise ChannelDead()
            if deadline is not None and time.monotonic() >= deadline and self._out:
                raise ChannelTimeout()
        self.busy = False
        return ref

    def reply(self, ref: int, deadline: Optional[float]) -> Any:
        """The reply to request ``ref`` (0: the worker's first message).

        Raises
        ------
        ChannelBroken, ChannelDead
        ChannelTimeout
            ``deadline`` passed; the channel is whole (wait again or give up).
        """
        self._check()
        while True:
            msg = self.replies.pop(ref, None)
            if msg is not None:
                return msg
            if deadline is not None and time.monotonic() >= deadline:
                raise ChannelTimeout()
            self.busy = True
            alive = self._step(deadline)
            self.busy = False
            if not alive and ref not in self.replies:
                raise ChannelDead()

    def round_entry(self, env: int, ticket: int, deadline: Optional[float]) -> Tuple[str, Any]:
        """``("info", info)`` or ``("error", payload)`` of env ``env`` from the
        round message of publish ``ticket``.

        Raises
        ------
        ChannelBroken, ChannelDead, ChannelTimeout
            As :meth:`reply`.
        """
        self._check()
        while True:
            entry = self.rounds.get(env)
            if entry is not None and entry[0] == ticket:
                del self.rounds[env]
                return entry[1], entry[2]
            if deadline is not None and time.monotonic() >= deadline:
                raise ChannelTimeout()
            self.busy = True
            alive = self._step(deadline)
            self.busy = False
            entry = self.rounds.get(env)
            if not alive and (entry is None or entry[0] != ticket):
                raise ChannelDead()

    def pump(self, timeout: float) -> bool:
        """Read (and write) what can move within ``timeout`` seconds (0: what
        is there now). Returns False when the worker is gone. A broken
        channel is left alone (True)."""
        if self.busy:
            return True
        self.busy = True
        if timeout <= 0:
            self._read_available()
            if self._out:
                self._write_available()
            alive = not self.eof
        else:
            alive = self._step(time.monotonic() + timeout)
        self.busy = False
        return alive

    def forget_stale(self) -> None:
        """Drop kept replies and round entries (all are stale at a reset)."""
        self.replies.clear()
        self.rounds.clear()


class WorkerChannel(_Stream):
    """The worker's end of its pipe. Not interruptible (workers ignore
    SIGINT), so its reads and writes are plain loops with parent checks.

    ``send`` answers the request read last (its ref) unless told otherwise.

    Parameters
    ----------
    conn : multiprocessing.connection.Connection
    alive : callable () -> bool
        Whether the parent still lives (checked every ``check_s`` seconds).
    check_s : float
        Seconds between liveness checks while waiting.
    """

    def __init__(self, conn, alive: Callable[[], bool], check_s: float):
        super().__init__(conn)
        self._alive = alive
        self._check_s = check_s
        self._frames: Deque[Tuple[int, bytearray]] = deque()
        self.reply_ref = 0
        self._ctrl = None
        self._index = -1
        self._poll_in = select.poll()
        self._poll_in.register(self._fd, _IN)
        self._poll_out = select.poll()
        self._poll_out.register(self._fd, _OUT)

    def bind(self, ctrl, index: int) -> None:
        """After attach: report blocked writes in ``ctrl``'s slot ``index``."""
        self._ctrl = ctrl
        self._index = index

    def _on_frame(self, ref: int, body: bytearray) -> None:
        self._frames.append((ref, body))

    def recv(self) -> Optional[Any]:
        """The next message (its ref becomes ``reply_ref``), or None when the
        parent is gone."""
        while not self._frames:
            self._read_available()
            if self._frames:
                break
            if self.eof:
                return None
            ready = self._poll_in.poll(int(self._check_s * 1000))
            if not ready and not self._alive():
                return None
        ref, body = self._frames.popleft()
        self.reply_ref = ref
        return pickle.loads(body)

    def send(self, msg: Any, ref: Optional[int] = None) -> bool:
        """Send ``msg`` (pickled here; pickling errors propagate). False when
        the parent is gone."""
        return self.send_body(encode(msg), self.reply_ref if ref is None else ref)

    def send_body(self, body: bytes, ref: int) -> bool:
        """Send an already pickled ``body`` with ``ref``; False when the parent is gone."""
        self._queue(body, ref)
        try:
            self._write_available()
            if not self._out:
                return True
            ctrl = self._ctrl
            if ctrl is not None:
                ctrl.set_tx_blocked(self._index, True)
            try:
                last = time.monotonic()
                while self._out:
                    # Short polls: a parent that missed the doorbell is rung again.
                    if not self._poll_out.poll(5):
                        now = time.monotonic()
                        if now - last > self._check_s:
                            if not self._alive():
                                return False
                            last = now
                        if ctrl is not None:
                            ctrl.set_tx_blocked(self._index, True)
                        continue
                    self._write_available()
            finally:
                if ctrl is not None:
                    ctrl.set_tx_blocked(self._index, False)
            return True
        except ChannelDead:
            return False
        except OSError:
            return False
