"""The worker process loop: the only vecenv code that runs in workers.

A worker hosts the envs ``[lo, hi)``. It builds them from cloudpickled
factories, reports their spaces, attaches to the shared block and then loops:
wait on its control slot, handle messages from its pipe, run the ops the parent
wrote for its envs (step or reset), write observations, rewards, flags and
infos of numbers (vecenv._infos.InfoRows) into shared memory, and publish the
finished envs. Other infos and errors go over the pipe only when there are any.
Everything raised by an env is caught and reported with the env index, the
exception type, its message and the formatted traceback; the worker itself only
exits on ``close``, on a dead parent, or when it is killed.

What a worker inherits: it applies the parent's ``os.environ`` as it was when
the parent started it (WorkerSpec.environ) before it unpickles the factories;
it reseeds the global ``random``, ``np.random`` and (if imported) ``torch``
generators from fresh entropy, and again from the first seed its envs get in
a reset round (see :func:`reseed_globals`). It records in its control slot
which env it is inside and what that env is doing (:class:`Activity`), so the
parent can name the env that killed or stalled it; while it builds its envs
(no shared block yet) it reports each factory over the pipe instead.

Signals: SIGINT is ignored (the parent handles Ctrl-C and shuts the workers
down). On Linux, a worker started by the vec env's own process from its main
thread asks the kernel to SIGKILL it when that process dies
(``PR_SET_PDEATHSIG``), so a worker stuck inside an env still goes away; every
worker also checks its parent every ``PARENT_CHECK_S`` seconds while idle.
"""

from __future__ import annotations

import copy
import math
import os
import pickle
import random
import signal
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from vecenv import _core, _episodes, _layout, _shm
from vecenv import _protocol as msgs
from vecenv._channel import WorkerChannel, encode
from vecenv._infos import InfoKeeper, InfoMismatch, InfoRows, info_snapshot, with_pickled
from vecenv._protocol import (
    RESET_INFO_KEY,
    Activity,
    Autoreset,
    ErrorReport,
    Msg,
    Op,
    Status,
)

# How often an idle worker checks that its parent is still alive (seconds).
PARENT_CHECK_S = 0.25


@dataclass
class WorkerSpec:
    """Everything a worker needs; pickled to the worker at start."""

    index: int
    lo: int
    hi: int
    env_fns: bytes  # cloudpickle.dumps(list of factories for envs lo..hi-1)
    parent_pid: int
    spin_s: float
    # Poll up to this long to cover the caller's time between steps (0: off;
    # WorkerControl.worker_wait, Layout.follow).
    follow_s: float = 0.0
    autoreset_mode: str = "sb3"
    check_rewards: bool = False  # a non-finite reward is an error
    pdeathsig: bool = False  # ask the kernel to kill us when the parent dies
    check_spaces: bool = True  # all envs of the worker must have env lo's spaces
    check_observations: bool = False  # an observation of another dtype is refused, not cast
    info_keys: Optional[Tuple[str, ...]] = None  # the info keys kept (None: all; vecenv._infos)
    # The parent's os.environ when it started this worker (None: keep ours).
    # Under forkserver a worker would otherwise see the forkserver's, as it
    # was when that process started.
    environ: Optional[Dict[str, str]] = None


# Plain ints for the step path (an enum member costs a lookup of ~0.1 us).
_RESET, _AUTORESET = int(Activity.RESET), int(Activity.AUTORESET)
# The protocol's codes as plain ints, for the step path (vecenv._protocol).
_OP_RESET = int(Op.RESET)
_ST_ERROR = int(Status.ERROR)
_ROUND = int(Msg.ROUND)  # a round message goes out after every step with infos
_SB3, _SAME_STEP, _NEXT_STEP = Autoreset.SB3, Autoreset.SAME_STEP, Autoreset.NEXT_STEP

# The activity of each kind of call message ("call", what, ...).
_CALL_ACTIVITY = {
    "get_attr": Activity.GET_ATTR,
    "set_attr": Activity.SET_ATTR,
    "env_method": Activity.ENV_METHOD,
    "call": Activity.CALL,
    "render": Activity.RENDER,
    "is_wrapped": Activity.IS_WRAPPED,
}


def apply_environ(environ: Optional[Dict[str, str]]) -> None:
    """Make ``os.environ`` equal to ``environ`` (the parent's snapshot)."""
    if environ is None or os.environ == environ:
        return
    for key in [k for k in os.environ if k not in environ]:
        del os.environ[key]
    for key, value in environ.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def seed_sequence(seed: Optional[int]) -> np.random.SeedSequence:
    """Fresh entropy (``seed=None``) or a sequence derived from an env seed,
    kept apart from the one gymnasium derives the env's own generator from."""
    if seed is None:
        return np.random.SeedSequence()
    return np.random.SeedSequence([int(seed) % (1 << 128), 0x76656E76])  # "venv"


def reseed_globals(seq: np.random.SeedSequence, torch_only: bool = False) -> None:
    """Seed the global ``random`` and ``np.random`` generators, and torch's if
    torch is imported, from ``seq``: forked workers would otherwise share the
    parent's state and draw the same numbers (as PyTorch's DataLoader does
    for its workers)."""
    words = seq.generate_state(4, np.uint32)
    if not torch_only:
        random.seed(int.from_bytes(words.tobytes(), "little"))
        np.random.seed(words)  # noqa: NPY002 - the legacy global state is the point
    torch = sys.modules.get("torch")
    manual_seed = getattr(torch, "manual_seed", None)
    if manual_seed is not None:
        try:
            manual_seed(int(words[0]) | (int(words[1]) << 32))
        except Exception:  # a torch that cannot seed (a stub, a broken install)
            pass


# What returned an info that does not pickle (for unpicklable_report).
INFO_WHAT = "step() or reset() info dict"


def unpicklable_report(exc: BaseException, env_index: int, what: str) -> ErrorReport:
    """The report of env ``env_index``'s value that could not be sent back to
    the parent: ``what`` returned it (``"get_attr('fn')"``, ``"render()"``,
    ``"step()'s info"``) and pickling it raised ``exc``. The env raised
    nothing; the parent raises ResultNotPicklableError, not the pickling
    error's type (a local lambda raises AttributeError, which would read as a
    missing attribute)."""
    kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
    return ErrorReport(
        kind="ResultNotPicklableError",
        message=(
            f"env {env_index}'s {what} returned a value that could not be sent back to the "
            f"parent process: pickling it raised {kind}: {exc}. Return a picklable value "
            "(no lambdas, locks, open files or generators), or use num_workers=0, which "
            "passes values by reference"
        ),
        exc_type=kind,
        # Without the chain: the failure of the whole reply that led here says nothing more.
        traceback="".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__, chain=False)
        ),
        env_index=env_index,
    )


def _picklable_result(entry: Tuple[str, Any], env_index: int, what: str) -> Tuple[str, Any]:
    """``entry`` (a Result's ``("ok", value)``) when its value pickles, else
    the ``("error", report)`` that says it could not be sent back."""
    if entry[0] != "ok":
        return entry
    try:
        encode(entry[1])
    except Exception as exc:
        return ("error", unpicklable_report(exc, env_index, what))
    return entry


def error_payload(exc: BaseException, env_index: Optional[int], where: str) -> ErrorReport:
    """The report of env ``env_index``'s exception ``exc`` raised while
    ``where``; the parent turns it into a WorkerError (ErrorReport.to_exception)."""
    # The checks' private ValueError subclasses are reported as ValueError.
    kind, cls = "WorkerError", type(exc)
    if isinstance(exc, _ObservationMismatch):
        kind, cls = "ObservationError", ValueError
    elif isinstance(exc, _RewardMismatch):
        kind, cls = "RewardError", ValueError
    elif isinstance(exc, InfoMismatch):
        kind, cls = "InfoError", TypeError
    return ErrorReport(
        kind=kind,
        message=str(exc),
        exc_type=f"{cls.__module__}.{cls.__qualname__}",
        traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        env_index=env_index,
        where=where,
    )


class _ObservationMismatch(ValueError):
    pass


class _RewardMismatch(ValueError):
    pass


def _set_pdeathsig(sig: int) -> bool:
    """Linux: have the kernel send ``sig`` to this process when the thread
    that started it exits (``PR_SET_PDEATHSIG``). False: not available."""
    if not sys.platform.startswith("linux"):  # pragma: no cover
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except Exception:  # pragma: no cover - no prctl: the idle checks remain
        return False


def _die_with_parent(parent_pid: int) -> None:
    """Linux: have the kernel SIGKILL this process when its parent exits."""
    if not _set_pdeathsig(signal.SIGKILL):  # pragma: no cover
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _allow_children() -> None:
    """Let the envs start ``multiprocessing`` processes of their own.

    multiprocessing refuses children to a process started with
    ``daemon=True`` ("daemonic processes are not allowed to have children");
    inside the worker that flag only steers multiprocessing's bookkeeping
    (the parent's flag, which decides what the parent's interpreter exit
    does, is untouched), so the worker clears its own copy. An env's
    processes are then non-daemonic by default, as in a plain script.
    """
    import multiprocessing

    # The setter's check (not yet started) holds here: the worker's own
    # Process object was copied or pickled before the parent recorded it.
    multiprocessing.current_process().daemon = False


def _guard_group() -> Optional[int]:
    """Linux: make this worker the leader of a process group of its own and
    fork a guard that SIGKILLs that group once the worker is gone.

    The env's own processes (a simulator's server, a multiprocessing pool)
    join the worker's group unless they leave it (``setsid``,
    ``start_new_session=True``). The guard is told of the worker's death by
    the kernel (``PR_SET_PDEATHSIG``, with a 1 s ``getppid`` check as well),
    so whatever kills the worker (the parent's SIGKILL through the worker's
    own death signal, the watchdog, a crash, a normal exit after the envs
    were closed), the env's processes left in the group are killed within
    milliseconds. Returns the guard's pid (None: no guard, e.g. not Linux).
    """
    if not sys.platform.startswith("linux"):  # pragma: no cover
        return None
    try:
        os.setpgid(0, 0)  # the parent does the same (either may run first)
    except OSError:  # pragma: no cover - a session leader, or not permitted
        pass
    me = os.getpid()
    if os.getpgid(0) != me:  # pragma: no cover
        return None
    import ctypes  # noqa: F401 - imported before the fork, for _set_pdeathsig

    try:
        pid = os.fork()
    except OSError:  # pragma: no cover - out of processes: no guard
        return None
    if pid == 0:  # the guard: runs no env code and holds no vecenv resource
        try:
            _guard(me)
        finally:
            os._exit(0)
    return pid


def _guard(worker: int) -> None:
    """The guard's whole life (see :func:`_guard_group`)."""
    # Drop the worker's pipe and the shared block: neither may outlive it.
    os.closerange(3, 1 << 16)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    _set_pdeathsig(signal.SIGUSR1)
    try:  # its name in ps and psutil (PR_SET_NAME)
        import ctypes

        ctypes.CDLL(None).prctl(15, b"vecenv-guard", 0, 0, 0)
    except Exception:  # pragma: no cover
        pass
    while os.getppid() == worker:
        signal.sigtimedwait({signal.SIGUSR1}, 1.0)
    try:
        os.killpg(worker, signal.SIGKILL)  # the guard is in the group too
    except OSError:
        pass


def _stop_children() -> None:
    """At a worker's exit, after its envs were closed: stop the
    ``multiprocessing`` processes the envs left running (terminate, then
    kill), so the worker's exit never waits for them (multiprocessing joins
    a process's non-daemonic children when it exits). Other processes left
    in the worker's group are killed by the guard once the worker is gone."""
    import multiprocessing

    left = multiprocessing.active_children()
    for p in left:
        try:
            p.terminate()
        except Exception:
            pass
    for p in left:
        p.join(1.0)
        if p.exitcode is None:
            try:
                p.kill()
            except Exception:
                pass
            p.join(1.0)


def to_gymnasium(env):
    """Return ``env`` as a gymnasium env: legacy ``gym`` (0.26 API) envs are
    wrapped by shimmy's converter when gym and shimmy are installed."""
    import gymnasium

    if isinstance(env, gymnasium.Env):
        return env
    # A legacy env's class comes from gym, so gym is imported already if it is
    # one; never import gym here (slow, and it prints a deprecation banner).
    legacy_gym = sys.modules.get("gym")
    gym_env_type = getattr(legacy_gym, "Env", None)
    if gym_env_type is not None and isinstance(env, gym_env_type):
        try:
            from shimmy import GymV26CompatibilityV0
        except ImportError as exc:
            raise TypeError(
                "this env is a legacy gym env; install vecenv[legacy-gym] (gym and shimmy) "
                "to convert it to gymnasium"
            ) from exc
        return GymV26CompatibilityV0(env=env)
    if hasattr(env, "step") and hasattr(env, "reset") and hasattr(env, "observation_space"):
        return env  # duck-typed gymnasium-style env
    raise TypeError(f"the env factory returned {type(env).__name__}, not a gymnasium.Env")


class _Parent:
    """Detects the death of the parent process (checked while idle)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.ppid = os.getppid()

    def alive(self) -> bool:
        if os.getppid() != self.ppid:
            return False
        if self.ppid == self.pid:
            return True
        try:  # forkserver: our parent is the server, not the vec env's process
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


def _recv(conn: WorkerChannel, parent: _Parent):
    """Receive one message, giving up (None) if the parent dies meanwhile."""
    return conn.recv()


def _send(conn: WorkerChannel, msg) -> bool:
    """Send ``msg`` as the reply to the message received last (False: the
    parent is gone). Pickling errors propagate."""
    return conn.send(msg)


def worker_main(spec: WorkerSpec, conn) -> None:
    """Entry point of a worker process."""
    # The parent handles Ctrl-C and shuts workers down: one traceback, not N.
    # The parent blocked SIGINT while starting us (the mask is inherited), so a
    # Ctrl-C during start-up is discarded here instead of killing us midway.
    apply_environ(spec.environ)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if spec.pdeathsig and os.getppid() == spec.parent_pid:
        _die_with_parent(spec.parent_pid)
    parent = _Parent(spec.parent_pid)
    _guard_group()
    _allow_children()
    envs: List[Any] = []
    conn = WorkerChannel(conn, parent.alive, PARENT_CHECK_S)
    try:
        _run(spec, conn, parent, envs)
    finally:
        # The envs stop their own processes in close(); what they leave is
        # stopped after that (_stop_children, then the guard).
        for env in envs:
            try:
                env.close()
            except Exception:
                pass
        _stop_children()
        try:
            conn.close()
        except Exception:
            pass


def _run(spec: WorkerSpec, conn, parent: _Parent, envs: List[Any]) -> None:
    # 1. Build the envs, reporting each step first: a factory that hangs or
    # kills the process is then named by the parent.
    torch_before = "torch" in sys.modules
    reseed_globals(seed_sequence(None))
    if not _send(conn, msgs.Progress(None, int(Activity.UNPICKLE))):
        return
    try:
        fns = pickle.loads(spec.env_fns)
    except BaseException as exc:
        _send(conn, msgs.Error(error_payload(exc, spec.lo, "unpickling the env factories")))
        return
    for k, fn in enumerate(fns):
        if not _send(conn, msgs.Progress(spec.lo + k, int(Activity.CREATE))):
            return
        try:
            envs.append(to_gymnasium(fn()))
        except BaseException as exc:
            _send(conn, msgs.Error(error_payload(exc, spec.lo + k, "creating the env")))
            return
    if not torch_before and "torch" in sys.modules:  # a factory imported torch
        reseed_globals(seed_sequence(None), torch_only=True)
    obs_space, act_space = envs[0].observation_space, envs[0].action_space
    bad = spaces_mismatch(envs, spec.lo) if spec.check_spaces else None
    if bad is not None:
        _send(conn, msgs.Error(error_payload(bad[1], bad[0], "checking spaces")))
        return
    # Every env's metadata: the parent checks that they share their render_mode.
    if not _send(conn, msgs.Spaces(obs_space, act_space, [_metadata(e) for e in envs])):
        return

    # 2. Attach to the shared block.
    msg = _recv(conn, parent)
    if not isinstance(msg, msgs.Attach):
        return
    handle, layout, reset_ids = msg.handle, msg.layout, msg.reset_ids
    block = _shm.attach(handle, layout.nbytes)
    loop = _Loop(spec, conn, parent, envs, block, layout)
    conn.bind(loop.ctrl, spec.index)  # blocked writes now wake a waiting parent
    try:
        # A restarted worker first resets the envs its parent holds (collected,
        # not in flight), so their rows hold valid observations again.
        infos = {}
        for i in reset_ids:
            loop.ctrl.enter(spec.index, i, _RESET)
            try:
                infos[i] = loop._reset(i, i - spec.lo)
            except BaseException as exc:
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                _send(conn, msgs.Error(error_payload(exc, i, "reset after a restart")))
                return
        loop.ctrl.leave(spec.index)
        if not _send(conn, msgs.Attached(os.getpid(), infos)):
            return
        loop.run()
    finally:
        loop.release()


def close_envs(envs: List[Any]) -> None:
    """Close every env of ``envs`` (an env whose close() raises is skipped),
    then empty the list."""
    for env in envs:
        try:
            env.close()
        except Exception:
            pass
    envs.clear()


def spaces_mismatch(envs: List[Any], lo: int) -> Optional[Tuple[int, ValueError]]:
    """The first env of ``envs`` (env indices from ``lo``) whose observation
    or action space differs from the first env's, with the error to report
    for it; None when all share their spaces."""
    obs_space, act_space = envs[0].observation_space, envs[0].action_space
    for k, env in enumerate(envs[1:], 1):
        if env.observation_space != obs_space or env.action_space != act_space:
            return lo + k, ValueError(
                f"env {lo + k} has spaces ({env.observation_space}, {env.action_space}), "
                f"env {lo} has ({obs_space}, {act_space}); all envs must share their spaces"
            )
    return None


def _metadata(env) -> Dict[str, Any]:
    md = dict(getattr(env, "metadata", {}) or {})
    md["render_mode"] = getattr(env, "render_mode", None)
    spec = getattr(env, "spec", None)
    md["env_spec_id"] = getattr(spec, "id", None)
    return md


class _Loop:
    """A worker's loop over its envs ``[lo, hi)``: wait on the control slot,
    handle the parent's messages, run each round of ops with the compiled
    round (``self.round``, :class:`vecenv._core.WorkerRound`).

    The methods ``_step``, ``_finish_step``, ``_reset``, ``_write_obs``,
    ``_publish_round`` and ``_reseed_from`` are that round's one fallback: it
    hands them each env-step (or round) it cannot prove identical to them, so
    they define the round's behaviour wherever the compiled code is not taken.
    """

    ships = True  # its infos cross to another process: those of numbers go in the block

    def __init__(self, spec: WorkerSpec, conn, parent, envs, block, layout):
        self.spec = spec
        self.conn = conn
        self.parent = parent
        self.envs = envs
        self.block = block
        self.layout = layout
        self.ctrl = _core.WorkerControl(block, layout.num_envs, layout.num_workers)
        acts, obs, rew, term, trunc = layout.views(block)
        self.rewards, self.terminated, self.truncated = rew, term, trunc
        cast = not spec.check_observations
        self.writer = _core.LeafWriter(obs, cast)
        final = layout.final_views(block)
        self.final_writer = _core.LeafWriter(final, cast) if final else None
        obs_space, act_space = envs[0].observation_space, envs[0].action_space
        self.flatten_obs = _layout.make_flattener(obs_space)
        self.read_action: Any = (
            None
            if layout.actions_pickled
            else _layout.make_action_reader(layout.action_leaves, act_space, acts)
        )
        # Actions sent through the pipe ("actions" messages) for the next step
        # of each env; a step takes its env's entry instead of the shared row.
        self.pipe_actions: Dict[int, Any] = {}
        self.obs_pickled = layout.obs_pickled
        self.obs_leaves = layout.obs_leaves
        self.reset_kwargs: Dict[int, Dict[str, Any]] = {}
        self.needs_reset = [False] * len(envs)  # next_step autoreset
        self.mode = Autoreset.named(spec.autoreset_mode)
        self.check_rewards = spec.check_rewards
        self.infos = InfoKeeper(spec.info_keys)  # the one check and cut of every env's info
        self._views = (acts, obs, rew, term, trunc, final)
        # A restarted worker picks up the counters where its predecessor left
        # them: it waits for cmd_seq to change from its current value and
        # handles only messages posted from now on (its pipe is new).
        self.seq = self.ctrl.command_seq(spec.index)
        self.handled = self.ctrl.message_seq(spec.index)
        # Pre-fault this worker's rows so the first step does not page-fault.
        for buf in (*obs, rew, term, trunc):
            buf[spec.lo : spec.hi].fill(0)
        # episode_statistics: the running sums (None when the option is off).
        self.episodes = _episodes.EpisodeTracker.attach(layout, block, spec.lo, spec.hi)
        self.info_rows = InfoRows.attach(layout, block, spec.lo, spec.hi) if self.ships else None
        # The round (csrc/_round.pxi): compiled, it hands each env-step it
        # cannot prove identical to the Python methods below (_step,
        # _finish_step, _reset, _write_obs, _publish_round, the action reader,
        # error_payload) to them; it binds them here, so a subclass's
        # overrides (vecenv._inprocess.InprocLoop) are the ones it calls.
        self.round = _core.WorkerRound(self, error_payload, _unpack_reset)

    def release(self):
        self.conn.bind(None, -1)  # the control region goes away below
        self.round.close()  # drops its views of the block (safe twice)
        self.writer = self.final_writer = self.read_action = None
        self._views = self.episodes = self.info_rows = None
        self.rewards = self.terminated = self.truncated = self.ctrl = None
        try:
            self.block.close()
        except BufferError:
            pass

    def run(self) -> None:
        spec, ctrl = self.spec, self.ctrl
        index, lo, hi = spec.index, spec.lo, spec.hi
        spin_s, follow_s = spec.spin_s, spec.follow_s
        seq = self.seq
        handled = self.handled
        while True:
            s = ctrl.worker_wait(index, seq, spin_s, PARENT_CHECK_S, follow_s)
            if s < 0:
                if not self.parent.alive():
                    return
                continue
            seq = s
            # Take the ops first, then read the message count: the parent posts
            # a message (reset kwargs, ...) before it dispatches the ops that
            # depend on it, so every message those ops need is counted here.
            ops = ctrl.take_ops(lo, hi, index)
            posted = ctrl.message_seq(index)
            while handled != posted:
                handled = (handled + 1) & 0xFFFFFFFF
                msg = _recv(self.conn, self.parent)
                if msg is None or not self.handle_message(msg):
                    return
            if ops:
                self.run_round(ops)

    # ------------------------------------------------------------------ ops
    def run_round(self, ops: List[Tuple[int, int]]) -> None:
        """Run the ops, write the envs' rows, publish them (and the round message
        if an env has an info or an error): one call of the compiled round
        (:class:`vecenv._core.WorkerRound`; its reference: tests/reference.py).

        Raises
        ------
        ValueError
            After :meth:`release`, or an env that is not this worker's.
        """
        self.round.run(ops)

    def _publish_round(
        self,
        done_envs: List[int],
        statuses: List[int],
        infos: Dict[int, Any],
        errors: Dict[int, Any],
    ) -> None:
        """Publish the round's envs, then send its infos and errors (if any).
        The compiled round calls this for a round with an info or an error."""
        self._refuse_bad_keys(done_envs, statuses, infos, errors)
        if self.info_rows is not None:
            self.info_rows.take(infos, done_envs, statuses)  # those of numbers, into the block
        msg = None
        if infos or errors:
            msg = (_ROUND, infos, errors)
            try:
                payload = encode(msg)
            except Exception:
                # Blame the envs whose info does not pickle, not every env of the round.
                for i in list(infos):
                    try:
                        encode(infos[i])
                    except Exception as exc:
                        del infos[i]
                        errors[i] = unpicklable_report(exc, i, INFO_WHAT)
                        statuses[done_envs.index(i)] = _ST_ERROR
                payload = encode((_ROUND, infos, errors))
        ticket = self.ctrl.publish(done_envs, statuses, self.spec.index)
        if msg is not None:
            # After the publish: the parent reads it for the envs it collected
            # under this ticket (vecenv._channel).
            self.conn.send_body(payload, ticket)

    def _refuse_bad_keys(self, done_envs, statuses, infos, errors) -> None:
        """An info with a key that is not a str becomes its env's InfoError."""
        for i, exc in InfoKeeper.bad_keys(infos):
            del infos[i]
            errors[i] = error_payload(exc, i, "step or reset")
            statuses[done_envs.index(i)] = _ST_ERROR

    def _reseed_from(self, ops: List[Tuple[int, int]]) -> None:
        """Reseed the global generators from the first seed among this
        round's resets (a seeded run then draws the same numbers again)."""
        for i, op in ops:
            if op == _OP_RESET:
                seed = (self.reset_kwargs.get(i) or {}).get("seed")
                if seed is not None:
                    reseed_globals(seed_sequence(seed))
                    return

    def _write_obs(self, i: int, obs, writer=None, what: str = "an observation"):
        """Write env ``i``'s observation into its shared row; return the values
        of its pickled leaves (None when the layout has none)."""
        try:
            leaves = self.flatten_obs(obs)
            pickled = None
            if self.obs_pickled:
                leaves, pickled = _layout.split_leaves(leaves, self.obs_pickled)
                if not self.obs_leaves:  # every leaf is pickled
                    return pickled
            (writer or self.writer).write(i, leaves)
            return pickled
        except ValueError as exc:
            expected = [(leaf.name, leaf.shape, str(leaf.dtype)) for leaf in self.obs_leaves]
            raise _ObservationMismatch(
                f"env {i} returned {what} that does not match observation_space: {exc} "
                f"(leaves: {expected}; got {_describe_leaves(obs, self.flatten_obs)})"
            ) from None

    def _step(self, i: int, k: int):
        env = self.envs[k]
        piped = self.pipe_actions.pop(i, _NO_ACTION) if self.pipe_actions else _NO_ACTION
        if self.needs_reset[k]:
            self.needs_reset[k] = False
            self.ctrl.enter(self.spec.index, i, _AUTORESET)
            obs, info = env.reset()
            return self._reset_row(i, k, obs, info)  # none of the new episode's env-steps
        action = self.read_action(i) if piped is _NO_ACTION else piped
        return self._finish_step(i, k, env.step(action))

    def _finish_step(self, i: int, k: int, result):
        """The rest of env ``i``'s step once ``env.step`` returned ``result``."""
        env = self.envs[k]
        obs, reward, terminated, truncated, info = result
        info = self.infos.keep(info, i, "step()")
        final_pickled = None
        if self.check_rewards and not _finite(reward):
            raise _RewardMismatch(
                f"env {i} returned reward {reward!r}; expected a finite float (check_rewards=True)"
            )
        if terminated or truncated:
            mode = self.mode
            # The final observation is copied before reset(): an env may reuse
            # (and reset overwrite) the array it returned.
            if mode is _SB3:
                # The last observation goes to its shared row (copied before
                # reset(), which may overwrite the env's array); the parent
                # adds "terminal_observation" and "TimeLimit.truncated", so
                # nothing is pickled unless the env's own infos are non-empty.
                final_pickled = self._write_obs(i, obs, self.final_writer, "a final observation")
                self.ctrl.enter(self.spec.index, i, _AUTORESET)
                obs, reset_info = env.reset()
                reset_info = self.infos.keep(reset_info, i, "reset()")
                if reset_info:
                    info = {**info, RESET_INFO_KEY: reset_info}
            elif mode is _SAME_STEP:
                # Copied before reset(), which may change both in place (vecenv._infos).
                final_obs, final_info = copy.deepcopy(obs), info_snapshot(info)
                self.ctrl.enter(self.spec.index, i, _AUTORESET)
                obs, reset_info = env.reset()
                reset_info = self.infos.keep(reset_info, i, "reset()")
                # gymnasium's layout: final_info, final_obs, then the reset info's keys.
                info = {"final_info": final_info, "final_obs": final_obs, **reset_info}
            elif mode is _NEXT_STEP:
                self.needs_reset[k] = True
        pickled = self._write_obs(i, obs)
        self.rewards[i] = reward
        self.terminated[i] = terminated
        self.truncated[i] = truncated
        info = with_pickled(info, pickled, final_pickled)
        if self.episodes is not None:  # last: only an env-step that succeeded counts
            self.episodes.step(i, k, self.rewards[i], bool(terminated or truncated))
        return info

    def _reset(self, i: int, k: int):
        kwargs = self.reset_kwargs.pop(i, None) or {}
        # A reset is never preceded by a legitimate pipe action for its env:
        # drop one left by an interrupted step_async.
        self.pipe_actions.pop(i, None)
        if self.mode is not _SB3:  # gymnasium's vector envs always pass both keywords
            kwargs = {"seed": kwargs.get("seed"), "options": kwargs.get("options")}
        self.needs_reset[k] = False
        obs, info = self.envs[k].reset(**kwargs)
        return self._reset_row(i, k, obs, info)

    def _reset_row(self, i: int, k: int, obs, info):
        """Env ``i``'s rows after a reset (its observation, reward 0, no
        flags), a new episode; its info."""
        info = self.infos.keep(info, i, "reset()")
        pickled = self._write_obs(i, obs)
        self.rewards[i] = 0.0
        self.terminated[i] = False
        self.truncated[i] = False
        info = with_pickled(info, pickled, None)
        if self.episodes is not None:
            self.episodes.restart(k)
        return info

    # ------------------------------------------------------------- messages
    def handle_message(self, msg) -> bool:
        """Handle one parent message; False means exit."""
        kind = msg.kind
        if kind == Msg.CLOSE:
            close_envs(self.envs)
            _send(self.conn, msgs.Closed())
            return False
        if kind == Msg.RESET_KWARGS:
            self.reset_kwargs.update(msg.kwargs)
            return True
        if kind == Msg.ACTIONS:  # {env index: action} for their next step
            if msg.replace:
                self.pipe_actions.clear()
            self.pipe_actions.update(msg.actions)
            return True
        if kind == Msg.SYNC:  # the parent drops every message sent before this reply
            return _send(self.conn, msgs.Synced(msg.token))
        if kind == Msg.CALL:
            what, name, args, kwargs, env_ids = (
                msg.what,
                msg.name,
                msg.args,
                msg.kwargs,
                msg.env_ids,
            )
            results = []
            for i in env_ids:
                env = self.envs[i - self.spec.lo]
                try:
                    results.append(("ok", self._call(env, what, name, args, kwargs)))
                except BaseException as exc:
                    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                        raise
                    results.append(("error", error_payload(exc, i, f"{what}({name!r})")))
            try:
                return _send(self.conn, msgs.Result(results))
            except Exception:  # a value that does not pickle: find whose, blame it alone
                label = "render()" if what == "render" else f"{what}({name!r})"
                results = [_picklable_result(entry, i, label) for i, entry in zip(env_ids, results)]
                return _send(self.conn, msgs.Result(results))
        raise RuntimeError(f"unknown message {kind!r} from the parent")

    def _call(self, env, what, name, args, kwargs):
        """Run one call on ``env`` with the slot naming it (a crash blames it)."""
        w = self.spec.index
        k = next((k for k, e in enumerate(self.envs) if e is env), None)
        if k is None:
            return self._call_env(env, what, name, args, kwargs)
        self.ctrl.enter(w, self.spec.lo + k, _CALL_ACTIVITY.get(what, Activity.CALL))
        try:
            return self._call_env(env, what, name, args, kwargs)
        finally:
            self.ctrl.leave(w)

    @staticmethod
    def _call_env(env, what, name, args, kwargs):
        if what == "get_attr":
            getter = getattr(env, "get_wrapper_attr", None)
            return getter(name) if getter is not None else getattr(env, name)
        if what == "set_attr":
            setter = getattr(env, "set_wrapper_attr", None)
            if setter is not None:
                setter(name, args[0])
            else:
                setattr(env, name, args[0])
            return None
        if what == "env_method":
            getter = getattr(env, "get_wrapper_attr", None)
            method = getter(name) if getter is not None else getattr(env, name)
            return method(*args, **kwargs)
        if what == "call":  # gymnasium's VectorEnv.call: call it if callable
            getter = getattr(env, "get_wrapper_attr", None)
            attr = getter(name) if getter is not None else getattr(env, name)
            return attr(*args, **kwargs) if callable(attr) else attr
        if what == "render":
            return env.render()
        if what == "is_wrapped":
            from gymnasium import Wrapper

            e = env
            while isinstance(e, Wrapper):
                if isinstance(e, args[0]):
                    return True
                e = e.env
            return False
        raise ValueError(f"unknown call kind {what!r}")


_NO_ACTION = object()


def _describe_leaves(obs, flatten) -> str:
    """``[(shape, dtype), ...]`` of the values an env returned, for messages."""
    try:
        values = flatten(obs)
    except Exception:
        return f"a {type(obs).__name__}"
    out: List[Any] = []
    for v in values:
        a = v if isinstance(v, np.ndarray) else None
        if a is None:
            try:
                a = np.asarray(v)
            except Exception:
                out.append(type(v).__name__)
                continue
        out.append((tuple(a.shape), str(a.dtype)))
    return str(out)


def _unpack_reset(result):
    """``obs, info = result`` as :meth:`_Loop._reset` unpacks ``env.reset()``
    (for the compiled round's automatic reset, which meets a result that is
    not a 2-tuple: the same error as Python's unpacking)."""
    obs, info = result
    return obs, info


def _finite(x) -> bool:
    try:
        return math.isfinite(x)
    except TypeError:
        return False
