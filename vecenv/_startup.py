"""Starting a WorkerPool's workers: waiting for every worker's spaces (parent side).

:meth:`vecenv._pool.WorkerPool.start` spawns the workers and hands the wait to
:class:`Startup`: every worker's progress reports are kept in the pool's
``progress`` (what :meth:`~vecenv._pool.WorkerPool.inside` names), progress is
logged (logger ``"vecenv"``, WARNING) every ``_START_REPORT_S`` seconds, the
lowest env's factory error is raised as the env's own type too, and a
timeout names every worker that did not start, the factory it is inside and
the likely fix.
"""

from __future__ import annotations

import logging
import math
import time
from multiprocessing import connection as mp_connection
from typing import TYPE_CHECKING, Any, Dict, List

from vecenv import _protocol as msgs
from vecenv._protocol import Activity, ErrorReport
from vecenv.errors import VecEnvTimeoutError, WatchdogTimeoutError, as_env_exception

if TYPE_CHECKING:
    from vecenv._pool import WorkerPool

# While workers start, log how many are ready every this many seconds.
_START_REPORT_S = 10.0
# After a factory error, how long to wait for the other workers' reports.
_START_ERRORS_S = 1.0

_log = logging.getLogger("vecenv")


class Startup:
    """Waiting for every starting worker's spaces at once (part of
    :meth:`WorkerPool.start`): their progress reports are kept in the
    pool's ``progress`` (what :meth:`WorkerPool.inside` names), progress is
    logged every ``_START_REPORT_S`` seconds, and a timeout names every
    worker that did not start and the factory it is inside."""

    def __init__(self, pool: WorkerPool):
        self.pool = pool

    def run(self, deadline: float) -> Dict[int, Any]:
        """The ``Spaces`` message of every worker, by worker.

        Raises
        ------
        WorkerError
            A factory raised (the lowest env index among the reports read).
        WorkerDiedError
            A worker died while starting (names the factory it was inside).
        VecEnvTimeoutError
            ``deadline`` passed: names every worker that did not start.
        """
        pool = self.pool
        res = pool.resources
        n = pool.num_workers
        replies: Dict[int, Any] = {}
        pending = set(range(pool.first_process, n))  # worker 0 may be this process (inline)
        start = time.monotonic()
        report_at = start + _START_REPORT_S
        # Factory errors of all workers are gathered for a short while after
        # the first one, so the error raised is the lowest env's, whichever
        # worker's report arrives first.
        errors: List[ErrorReport] = []
        errors_until = math.inf
        while pending:
            now = time.monotonic()
            if now >= errors_until:
                break
            if now >= deadline:
                if errors:
                    break
                raise self.timed_out(sorted(pending))
            if now >= report_at:
                report_at += _START_REPORT_S
                _log.warning(
                    "ShmemVecEnv: %d of %d workers ready after %.0f s (start method %r); "
                    "still starting: %s; start_timeout=%s s",
                    n - pool.first_process - len(pending),  # processes (inline: not the caller)
                    n - pool.first_process,
                    now - start,
                    pool.ctx.get_start_method(),
                    "; ".join(f"worker {w} {self.starting(w)}" for w in sorted(pending)),
                    pool.start_timeout,
                )
            waitables: Dict[Any, int] = {res.chans[w]: w for w in pending}
            waitables.update({res.procs[w].sentinel: w for w in pending})
            ready = mp_connection.wait(
                list(waitables), timeout=max(0.0, min(deadline, report_at, errors_until) - now)
            )
            died = []
            for obj in ready:
                w = waitables[obj]
                if w not in pending:
                    continue
                chan = res.chans[w]
                alive = chan.pump(0)
                if alive and res.procs[w].exitcode is not None:
                    # It exited after that read: what it wrote last (the env it
                    # was building, an error) is in the pipe now, and names it.
                    alive = chan.pump(0)
                # Unsolicited start-up messages carry ref 0; a later one
                # replaces an earlier one, and only the last matters.
                msg = chan.replies.pop(0, None)
                if msg is not None:
                    if isinstance(msg, msgs.Progress):
                        pool.progress[w] = (msg.env, msg.activity)
                    elif isinstance(msg, msgs.Error):
                        errors.append(msg.report)
                        pending.discard(w)
                        errors_until = min(errors_until, time.monotonic() + _START_ERRORS_S)
                    else:
                        pool.progress.pop(w, None)
                        replies[w] = msg
                        pending.discard(w)
                if w in pending and (not alive or res.procs[w].exitcode is not None):
                    died.append(w)
            if died:
                if not errors:
                    raise pool.died(min(died), "starting the workers")
                pending.difference_update(died)  # a factory error is what we report
        if errors:
            # As the env's own type too: `except NameNotFound` works.
            first = min(errors, key=lambda p: p.env_index or 0)
            raise as_env_exception(pool.worker_error(first))
        return replies

    def starting(self, w: int) -> str:
        """Where worker ``w`` is in its start-up, for messages."""
        progress = self.pool.progress
        if w not in progress:
            return "has not reached its env factories yet (the process is still booting)"
        env, code = progress[w]
        return f"is {Activity(code).describe(env)}"

    def timed_out(self, workers: List[int]) -> VecEnvTimeoutError:
        """The error for workers ``workers`` that did not start in time."""
        pool = self.pool
        method = pool.ctx.get_start_method()
        start_timeout = pool.start_timeout
        where = "; ".join(
            f"worker {w} (envs {list(range(*pool.ranges[w]))}) {self.starting(w)}" for w in workers
        )
        if method == "fork":
            cause = (
                "A forked worker that never starts usually inherited a lock that another "
                "thread of this process held at the fork (logging, an import, a thread pool, "
                "a BLAS, OpenMP or CUDA runtime): only the forking thread is copied, so the lock "
                "is never released in the worker. Pass context='spawn' or context='forkserver' "
                "(fresh processes), or start the vec env before other threads; if the "
                "factories are only slow, raise start_timeout."
            )
        else:
            cause = (
                "The factories are stuck or slow (an import, a download, a model compile, a "
                "server that does not answer): raise start_timeout if they are only slow."
            )
        first = next((pool.progress[w][0] for w in workers if w in pool.progress), None)
        envs = [i for w in workers for i in range(*pool.ranges[w])]
        return WatchdogTimeoutError(
            f"ShmemVecEnv(): {len(workers)} of {pool.num_workers - pool.first_process} workers "
            "did not start within "
            f"start_timeout={start_timeout} s (start method {method!r}): {where}. {cause}",
            env_indices=envs,
            env_index=first,
        )
