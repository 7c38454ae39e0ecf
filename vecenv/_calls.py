"""Calls: a ShmemVecEnv's remote calls to its envs (parent side).

A part that :class:`~vecenv.ShmemVecEnv` holds (``venv._calls``) over its pool
and collector: ``env_method``, ``get_attr``, ``set_attr``, ``env_is_wrapped``,
``render`` and gymnasium's ``call`` go to the workers of the envs named, one
``Call`` message per worker, and come back as one ``Result`` each, matched by
its ref (:mod:`vecenv._channel`): a reply of an abandoned call is never taken
for a later one. The vec env keeps the state: NEEDS_RESET while frames are
written or replies read, the state it had once they are.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from vecenv import _protocol as msgs
from vecenv._channel import encode
from vecenv.errors import ArgumentNotPicklableError, StateError, VecEnvError, WorkerDiedError


def unpicklable_error(
    what: str, values: Dict[int, Any], exc: BaseException, by_reference: bool = False
) -> Optional[ArgumentNotPicklableError]:
    """After posting ``values`` (env index -> the value meant for it) raised
    ``exc``: the ArgumentNotPicklableError that names the envs whose value
    does not pickle, or None when every value pickles (``exc`` was something
    else: the caller re-raises it). ``what`` names the value ("set_attr('x')
    value", "reset options"); ``by_reference``: ``num_workers=0`` would pass
    it by reference (calls' arguments; reset options and actions are copied
    through pickle there too, as a worker gets them)."""
    if isinstance(exc, VecEnvError) or not isinstance(exc, Exception):
        return None
    bad: List[int] = []
    first: Optional[BaseException] = None
    for i, value in values.items():
        try:
            encode(value)
        except Exception as e:
            bad.append(i)
            first = first or e
    if first is None:
        return None
    kind = f"{type(first).__module__}.{type(first).__qualname__}"
    alternative = (
        ", or use num_workers=0, where calls pass them by reference" if by_reference else ""
    )
    return ArgumentNotPicklableError(
        f"the {what} for env(s) {bad} cannot be sent to the envs: pickling it raised {kind}: "
        f"{first}. Pass picklable values (module-level functions and classes; no lambdas, "
        f"locks or open files){alternative}; nothing was sent to env(s) {bad}",
        env_indices=bad,
    )


def check_picklable(what: str, values: Dict[int, Any], ids: Any = None) -> None:
    """Raise ArgumentNotPicklableError (naming the envs) unless every value
    of ``values`` (env index -> the value meant for it) of the envs ``ids``
    (None: all) pickles."""
    if not values:
        return
    if ids is not None:
        values = {int(i): values[int(i)] for i in ids if int(i) in values}
    try:
        encode(values)
    except Exception as exc:
        err = unpicklable_error(what, values, exc)
        if err is None:
            raise
        raise err from exc


class Calls:
    """Remote calls over ``pool`` (WorkerPool or InprocPool) and ``collector``."""

    def __init__(self, pool: Any, collector: Any, *, timeout: Optional[float]):
        self.pool = pool
        self.collector = collector
        self.timeout = timeout
        self.routed: List[int] = []  # workers of the call being started (see intact)

    def start(self, what: str, name: str, args, kwargs, ids: List[int], drain: bool) -> Dict:
        """Post the call ``what`` of ``name`` to the workers of the envs ``ids``;
        the pending handle for :meth:`finish`. ``drain``: the vec env needed a
        reset, so envs may still be running after a death, a timeout or
        Ctrl-C; the worker reads the call only after its round, so they are
        let finish first.

        Raises
        ------
        StateError
            An env's worker is dead (reset first), or its pipe was cut by an
            interrupt.
        WorkerDiedError
            A worker died while the call was posted (it is buried).
        ArgumentNotPicklableError
            ``args`` or ``kwargs`` do not pickle (names the envs; nothing sent).
        """
        pool = self.pool
        self.routed = []
        by_worker: Dict[int, List[int]] = {}
        for i in ids:
            by_worker.setdefault(int(pool.env_worker[i]), []).append(i)
        dead = sorted(w for w in by_worker if w in pool.dead)
        if dead:
            raise StateError(
                f"{what}() cannot reach envs of dead worker(s) {dead}: call reset() first, "
                "which starts them again"
            )
        self.routed = list(by_worker)
        broken = [w for w in pool.broken_workers() if w in by_worker]
        if broken:
            raise pool.broken_error(broken[0], f"starting {what}()")
        if drain and self.collector.in_flight.any():
            self.collector.drain(what)
        refs: Dict[int, int] = {}
        # The worker processes first: a call to the caller's own share
        # (inline) runs at once, so it goes last, after every argument
        # pickled for the others (and while they run theirs).
        inline = getattr(pool, "first_process", 0)
        try:
            for w in sorted(by_worker, key=lambda w: w < inline):
                refs[w] = pool.post(w, msgs.Call(what, name, args, kwargs, by_worker[w]))
        except WorkerDiedError as exc:
            pool.bury(int(pool.env_worker[exc.env_indices[0]]))
            raise
        except Exception as exc:  # the arguments do not pickle (nothing was sent)
            call = "env_is_wrapped()" if what == "is_wrapped" else f"{what}({name!r})"
            label = "value" if what == "set_attr" else "arguments"
            err = unpicklable_error(
                f"{call} {label}",
                dict.fromkeys(ids, (args, kwargs)) if not refs else {},
                exc,
                by_reference=True,
            )
            if err is None:
                raise
            raise err from exc
        return {"what": what, "name": name, "ids": ids, "by_worker": by_worker, "refs": refs}

    def intact(self) -> bool:
        """After :meth:`start` raised: True when the channels of its workers
        are whole and none of them died (an argument that does not pickle, a
        Ctrl-C between two frames, a dead worker found before anything was
        posted): replies already asked for are only stale."""
        pool = self.pool
        return not pool.broken_workers() and not pool.dead.intersection(self.routed)

    def check(self, pending: Dict) -> None:
        """Raise StateError when a worker of ``pending`` was killed since."""
        lost = sorted(w for w in pending["by_worker"] if w in self.pool.dead)
        if lost:
            raise StateError(
                f"{pending['what']}({pending['name']!r}) was abandoned: worker(s) {lost} were "
                "killed; call reset()"
            )

    def finish(self, pending: Dict, wait_timeout: Optional[float]) -> List[Any]:
        """Collect the replies of :meth:`start`, in the order of its ``ids``.

        After the timeout of a single wait (``wait_timeout`` not None: a
        PendingTimeoutError), calling it again with the same ``pending``
        waits for the workers not yet heard. After a death (the worker is
        buried) or the ``timeout`` watchdog (the late worker is killed) the
        vec env needs a reset().

        Raises
        ------
        WorkerError
            An env's call raised (the lowest env's error).
        PendingTimeoutError, WatchdogTimeoutError, WorkerDiedError, StateError
        """
        pool = self.pool
        what, name, ids = pending["what"], pending["name"], pending["ids"]
        by_worker, refs = pending["by_worker"], pending["refs"]
        results = pending.setdefault("results", {})
        keep = wait_timeout is not None
        limit = wait_timeout if keep else self.timeout
        deadline = None if limit is None else time.monotonic() + limit
        where = f"{what}({name!r})"
        try:
            for w, wids in list(by_worker.items()):
                values = pool.recv(w, deadline, where, keep=keep, ref=refs[w]).values
                del by_worker[w]  # answered: a retry after a timeout skips it
                for i, value in zip(wids, values):
                    results[i] = value
        except WorkerDiedError as exc:
            pool.bury(int(pool.env_worker[exc.env_indices[0]]))
            raise
        return [results[i] for i in ids]
