"""Benchmark your own env: which vecenv layout, or which peer, steps it fastest here.

Runs in the parent process (the contenders start their own workers). Usage::

    python -m vecenv.bench CartPole-v1 --num-envs 16
    python -m vecenv.bench CartPole-v1 --num-envs 16 --policy-us 400   # policy in the loop
    python -m vecenv.bench mypackage.envs:make_env --num-envs 32   # a factory
    python -m vecenv.bench ./my_env.py:MyEnv --num-envs 8 --env-kwargs '{"level": 3}'
    vecenv-bench ALE/Pong-v5 --num-envs 16 --json pong.json        # the console script

``ENV`` is a gymnasium id (``"ALE/..."`` imports ale_py, ``"module:Id"``
imports the module that registers ``Id``), or ``module:factory`` /
``path/to/file.py:factory`` naming a callable that returns one env (a
``gymnasium.Env`` class works). Each contender is measured in turn, briefly
(``--seconds`` each after ``--warmup``, about a second with its start-up):
:class:`~vecenv.ShmemVecEnv` in process (``num_workers=0``), with the caller
stepping one share beside a worker per other core (``inline=True``), with each worker
layout of :func:`layout_candidates` (``num_workers`` from 1 to the usable
cores, the envs spread evenly: ``envs_per_worker`` = ``ceil(num_envs /
num_workers)``), with ``num_workers="auto"`` and with partial batches of half
the envs (``send``/``recv``; on the most workers and on one core fewer, which
leaves the policy a core); gymnasium's in-process ``SyncVectorEnv`` and its
``AsyncVectorEnv`` (one process per env). It prints a line per contender, then
the recommendation for this machine, with where vecenv's time went
(:meth:`vecenv.ShmemVecEnv.stats`).

Training runs a policy between steps, and the best layout for the env alone
is not the best in the loop: ``--policy-us 500`` spends 500 us of CPU per
batch between steps (what your policy's forward takes), ``--policy
my_policy.py:forward`` calls your own function on each batch's observations.

The functions :func:`compare`, :func:`layout_candidates` and
:func:`recommend` are the same measurement for use from Python.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
import math
import os
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from vecenv._autolayout import workers_to_time
from vecenv._cpus import usable_cpus

__all__ = ["Result", "busy_policy", "compare", "layout_candidates", "main", "recommend"]

ACTION_POOL = 64  # pre-sampled action batches, used in turn
GYM_SYNC, GYM_ASYNC = "gym_sync", "gym_async"
# vecenv's best lockstep layout measured again, then with info_keys=(), back
# to back: what the infos cost (the first pick is the luckiest of its rounds).
INFO_BASE, INFO_CUT = "vecenv_infos", "vecenv_info_keys"
INFO_PROBE_STEPS = 16  # steps of one env that tell whether it returns infos
AS_FAST = 0.95  # "as fast": within 5% (single short measurements are noisy)


def layout_candidates(num_envs: int, cores: int) -> List[int]:
    """Worker counts worth measuring for ``num_envs`` envs on ``cores`` cores.

    Of the worker counts that ``num_workers="auto"`` ranks for an env that
    computes (1 to ``min(num_envs, cores)``): 1, the powers of two, one fewer
    than the cores, and the most (one per core, or one per env when there
    are fewer envs). Fewer workers cost fewer wake-ups, more use more cores.

    Returns
    -------
    list of int
        Sorted, distinct, each in ``[1, min(num_envs, cores)]``.

    Raises
    ------
    ValueError
        ``num_envs`` or ``cores`` below 1.
    """
    return workers_to_time(num_envs, cores)


# ---------------------------------------------------------------- the env
class EnvFactory:
    """A picklable factory for ``ENV`` as the command line names it.

    Parameters
    ----------
    env : str
        A gymnasium id, ``"module:Id"``, ``"module:factory"`` or
        ``"path/to/file.py:factory"``.
    kwargs : dict
        Keyword arguments for ``gymnasium.make`` or the factory.
    """

    def __init__(self, env: str, kwargs: Optional[Dict[str, Any]] = None):
        self.env = env
        self.kwargs = dict(kwargs or {})
        self._factory: Optional[Callable[..., Any]] = None
        self._gym_id = env
        module_name, sep, attr = env.rpartition(":")
        if sep and module_name:
            module = _import(module_name)
            target = getattr(module, attr, None)
            if callable(target):
                self._factory = target  # pickled by reference, or by value for a file
            elif _registered(attr):
                self._gym_id = attr  # "module:Id": the module registered Id
            else:
                found = (
                    f"module {module_name!r} has no {attr!r}"
                    if target is None
                    else f"{module_name}.{attr} is a {type(target).__name__}, not a factory"
                )
                raise ValueError(
                    f"{found}, and no gymnasium env id {attr!r} is registered; ENV is "
                    "module:factory (a callable returning a gymnasium.Env), module:Id (the "
                    "module registers Id) or a gymnasium id"
                )

    def __call__(self):
        if self._factory is not None:
            return self._factory(**self.kwargs)
        import gymnasium

        env_id = self._gym_id
        if env_id.startswith("ALE/"):
            ale_py = importlib.import_module("ale_py")
            ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner per env
            gymnasium.register_envs(ale_py)
        elif env_id.startswith("vecenv/"):
            importlib.import_module("vecenv.envs")
        return gymnasium.make(env_id, **self.kwargs)

    def code(
        self,
        num_envs: int,
        num_workers: Any,
        batch_size: Optional[int] = None,
        inline: bool = False,
    ) -> str:
        """The line of Python that builds this layout (``batch_size``: partial
        batches; ``inline``: the caller steps a share)."""
        kw = "".join(f", {k}={v!r}" for k, v in self.kwargs.items())
        mode = f"num_workers={num_workers!r}" + (", inline=True" if inline else "")
        if batch_size is not None:
            mode += f", batch_size={batch_size}"
        if self._factory is None:
            return f"vecenv.make({self.env!r}, {num_envs}{kw}, {mode})"
        name = getattr(self._factory, "__name__", "make_env")
        fn = f"functools.partial({name}{kw})" if kw else name
        return f"vecenv.ShmemVecEnv([{fn}] * {num_envs}, {mode})"

    def __repr__(self) -> str:
        return f"EnvFactory({self.env!r}, {self.kwargs!r})"


def _registered(env_id: str) -> bool:
    """Whether gymnasium knows ``env_id`` (a versionless id counts as known
    when some version of it is)."""
    import gymnasium

    try:
        gymnasium.spec(env_id)
    except gymnasium.error.Error:
        return False
    return True


def _import(name: str):
    """Import a module by name, or a ``.py`` file by path (its code then travels
    to the workers by value)."""
    if name.endswith(".py") or os.sep in name:
        path = os.path.abspath(name)
        if not os.path.isfile(path):
            raise ValueError(f"ENV names the file {name!r}, which does not exist")
        mod_name = "_vecenv_bench_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"ENV names the file {name!r}, which Python cannot import")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
        import cloudpickle

        cloudpickle.register_pickle_by_value(module)
        return module
    return importlib.import_module(name)


# ---------------------------------------------------------------- measuring
@dataclasses.dataclass
class Result:
    """One contender's measurement.

    Attributes
    ----------
    name : str
        ``"vecenv"``, ``"gym_sync"``, ``"gym_async"``, or ``"vecenv_infos"``
        and ``"vecenv_info_keys"`` (vecenv's best lockstep layout again, then
        with ``info_keys=()``: see :func:`compare`).
    label : str
        What it is, for people (``"vecenv num_workers=2 (8 envs each)"``).
    options : dict
        Its constructor's options (``num_workers``, ``envs_per_worker``).
    env_steps_per_s : float or None
        Env-steps per second (num_envs per batch step); None if it failed.
    seconds : float
        Wall time it took, start-up and close included.
    error : str or None
        Why it failed (``"TypeName: message"``), or None.
    stats : str or None
        For vecenv, where the time went in the timed loop (``str`` of
        :meth:`vecenv.ShmemVecEnv.stats`: the verdict, per-batch times, advice).
    """

    name: str
    label: str
    options: Dict[str, Any]
    env_steps_per_s: Optional[float] = None
    seconds: float = 0.0
    error: Optional[str] = None
    stats: Optional[str] = None


def _sample_actions(space, num_envs: int, seed: int) -> List[np.ndarray]:
    space.seed(seed)
    flat = [space.sample() for _ in range(ACTION_POOL * num_envs)]
    arr = np.asarray(flat).reshape(ACTION_POOL, num_envs, *space.shape)
    return list(arr)


def busy_policy(microseconds: float) -> Callable[[Any], None]:
    """A stand-in policy: burns ``microseconds`` of this process's CPU per batch
    (as a forward pass does on the learner's core), whatever the observations."""
    seconds = microseconds / 1e6

    def policy(obs) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return policy


def _nothing() -> None:
    """The default ``on_timing``: nothing to do when the timing starts."""


def _no_policy(obs) -> None:
    return None


def _timed_steps(
    step: Callable[[Any], Any],
    actions,
    seconds: float,
    warmup: float,
    policy: Callable[[Any], Any] = _no_policy,
    on_timing: Callable[[], Any] = _nothing,
) -> float:
    """Env-steps/s of ``policy(step(actions[i])[0])`` over ``seconds`` after
    ``warmup`` seconds: the policy's time is in the loop, as in training.
    ``on_timing()`` is called once, when the timed part starts."""
    n = len(actions[0])
    perf = time.perf_counter
    end = perf() + warmup
    i = 0
    while True:
        policy(step(actions[i % ACTION_POOL])[0])
        i += 1
        if perf() >= end and i >= 3:
            break
    on_timing()
    calls = 0
    t0 = perf()
    end = t0 + seconds
    while True:
        policy(step(actions[calls % ACTION_POOL])[0])
        calls += 1
        t = perf()
        if t >= end:
            break
    return calls * n / (t - t0)


def _timed_batches(
    venv, actions, seconds: float, warmup: float, policy, on_timing: Callable[[], Any] = _nothing
) -> float:
    """Env-steps/s of a partial-batch loop (``recv``, the policy, ``send``):
    the policy runs on one batch while the other envs step. ``on_timing()``
    is called once, when the timed part starts."""
    k = venv.batch_size
    perf = time.perf_counter
    venv.reset()
    steps, t0, i = 0, perf(), 0
    timing = False
    while True:
        obs, _, _, _, env_ids = venv.recv()
        policy(obs)
        venv.send(actions[i % ACTION_POOL][:k], env_ids)
        i += 1
        t = perf()
        if not timing and t - t0 >= warmup and i >= 3:
            on_timing()
            timing, steps, t0 = True, 0, perf()
        elif timing:
            steps += k
            if t - t0 >= seconds:
                return steps / (t - t0)


def _contenders(num_envs: int, cores: int, which: Sequence[str]):
    """(name, label, options) in measuring order: vecenv in process, the
    caller's share beside a worker per other core (``inline=True``), each
    worker layout, ``num_workers="auto"``, partial batches of half the envs on
    the most workers and on one core fewer; then gymnasium's Sync and Async."""
    out: List[Any] = []
    if "vecenv" in which:
        out.append(("vecenv", "vecenv num_workers=0 (in process)", {"num_workers": 0}))
        shares = min(num_envs, cores)
        if shares >= 2:  # the caller steps one share, a worker per other core the rest
            per = math.ceil(num_envs / shares)
            label = f"vecenv num_workers={shares - 1}, inline=True ({per} env{'s' if per > 1 else ''} each)"
            out.append(("vecenv", label, {"num_workers": shares - 1, "inline": True}))
        layouts = layout_candidates(num_envs, cores)
        for w in layouts:
            per = math.ceil(num_envs / w)
            label = f"vecenv num_workers={w} ({per} env{'s' if per > 1 else ''} each)"
            out.append(("vecenv", label, {"num_workers": w, "envs_per_worker": per}))
        out.append(("vecenv", 'vecenv num_workers="auto"', {"num_workers": "auto"}))
        if num_envs >= 2:
            # The most workers, and one core fewer: with partial batches the
            # policy runs while workers step, on a core of its own (CartPole
            # x64 in benchmarks/rollout.py: 1 worker 157k env-steps/s, 2 136k).
            half = num_envs // 2
            for w in sorted({layouts[-1], max(1, min(layouts[-1], cores - 1))}, reverse=True):
                label = f"vecenv num_workers={w}, batch_size={half} (partial batches)"
                opts = {"num_workers": w, "envs_per_worker": math.ceil(num_envs / w)}
                out.append(("vecenv", label, {**opts, "batch_size": half}))
    if GYM_SYNC in which:
        out.append((GYM_SYNC, "gymnasium SyncVectorEnv (in-process)", {}))
    if GYM_ASYNC in which:
        out.append((GYM_ASYNC, "gymnasium AsyncVectorEnv (one process per env)", {}))
    return out


def _measure_one(name, options, env_fn, num_envs, actions, seconds, warmup, seed, policy):
    """``(env-steps/s, stats)`` of one contender; stats for vecenv only."""
    if name == "vecenv":
        from vecenv.shmem_vec_env import ShmemVecEnv

        with ShmemVecEnv([env_fn] * num_envs, **options) as venv:
            venv.seed(seed)
            # Where the timed part's time went: the reset and the warm-up left out.
            start: List[Any] = []

            def snapshot() -> None:
                start.append(venv.stats())

            if venv.batch_size < num_envs:
                rate = _timed_batches(venv, actions, seconds, warmup, policy, snapshot)
            else:
                venv.reset()
                rate = _timed_steps(venv.step, actions, seconds, warmup, policy, snapshot)
            return rate, str(venv.stats().since(start[0]))
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    cls = SyncVectorEnv if name == GYM_SYNC else AsyncVectorEnv
    venv = cls([env_fn] * num_envs)
    try:
        venv.reset(seed=seed)
        return _timed_steps(venv.step, actions, seconds, warmup, policy), None
    finally:
        venv.close()


def compare(
    env_fn: Callable[[], Any],
    num_envs: int,
    *,
    seconds: float = 0.5,
    warmup: float = 0.2,
    contenders: Sequence[str] = ("vecenv", GYM_SYNC, GYM_ASYNC),
    cores: Optional[int] = None,
    seed: int = 0,
    progress: Optional[Callable[[int, int, Result], None]] = None,
    policy: Optional[Callable[[Any], Any]] = None,
) -> List[Result]:
    """Measure ``num_envs`` copies of ``env_fn`` with each contender in turn,
    with ``policy`` (when given) called on each batch's observations between
    steps, as a training loop calls its policy.

    Parameters
    ----------
    env_fn : callable
        Returns one env (picklable with cloudpickle: the workers build their own).
    num_envs : int
        Envs per vectorized env (>= 1).
    seconds : float
        Timed seconds per contender (> 0), after ``warmup`` untimed seconds (>= 0).
    contenders : sequence of str
        Any of ``"vecenv"`` (in process, each layout of
        :func:`layout_candidates`, ``num_workers="auto"``, and partial batches
        of ``num_envs // 2`` on the most workers), ``"gym_sync"``, ``"gym_async"``.
        With ``"vecenv"``, an env that returns infos (:func:`returns_infos`)
        adds two last contenders: vecenv's best lockstep layout again
        (``"vecenv_infos"``), then with ``info_keys=()`` (``"vecenv_info_keys"``).
    cores : int, optional
        Usable cores to plan layouts for (default: this process's affinity).
    seed : int
        Seeds the envs (env ``i`` gets ``seed + i``) and the sampled actions.
    progress : callable, optional
        Called as ``progress(done, total, result)`` after each contender.
    policy : callable, optional
        ``policy(observations)``, timed in the loop: the user's policy, or
        :func:`busy_policy` for a known time per batch (default: none). With
        partial batches it gets each ``recv``'s batch.

    Returns
    -------
    list of Result
        In measuring order; a contender that failed has ``error`` set.

    Raises
    ------
    ValueError
        Bad ``num_envs``, ``seconds``, ``warmup`` or an unknown contender.
    """
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
    if seconds <= 0 or warmup < 0:
        raise ValueError(f"seconds must be > 0 and warmup >= 0, got {seconds} and {warmup}")
    unknown = sorted(set(contenders) - {"vecenv", GYM_SYNC, GYM_ASYNC})
    if unknown:
        raise ValueError(f"contenders {unknown} unknown; choose from vecenv, gym_sync, gym_async")
    probe = env_fn()
    try:
        actions = _sample_actions(probe.action_space, num_envs, seed)
        infos = "vecenv" in contenders and returns_infos(probe, seed)
    finally:
        probe.close()
    plan = _contenders(num_envs, cores or usable_cpus(), contenders)
    total = len(plan) + 2 * bool(infos)
    results: List[Result] = []

    def run(name: str, label: str, options: Dict[str, Any]) -> None:
        t0 = time.perf_counter()
        res = Result(name, label, options)
        try:
            res.env_steps_per_s, res.stats = _measure_one(
                "vecenv" if name in (INFO_BASE, INFO_CUT) else name,
                options,
                env_fn,
                num_envs,
                actions,
                seconds,
                warmup,
                seed,
                policy or _no_policy,
            )
        except Exception as exc:
            res.error = f"{type(exc).__name__}: {exc}"
        res.seconds = time.perf_counter() - t0
        results.append(res)
        if progress is not None:
            progress(len(results), total, res)

    for name, label, options in plan:
        run(name, label, options)
    lockstep = [
        r
        for r in results
        if r.name == "vecenv" and r.env_steps_per_s and "batch_size" not in r.options
    ]
    if infos and lockstep:  # the best lockstep layout again, back to back without infos
        best = max(lockstep, key=_rate)
        run(INFO_BASE, f"{best.label} again", best.options)
        run(INFO_CUT, f"{best.label}, info_keys=()", {**best.options, "info_keys": ()})
    return results


def returns_infos(env: Any, seed: int = 0) -> bool:
    """Whether ``env`` returns a non-empty info from ``reset`` or from one
    of its first :data:`INFO_PROBE_STEPS` steps (random actions)."""
    _, info = env.reset(seed=seed)
    if info:
        return True
    env.action_space.seed(seed)
    for _ in range(INFO_PROBE_STEPS):
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if info:
            return True
        if terminated or truncated:
            env.reset()
    return False


def fmt_rate(x: Optional[float]) -> str:
    """``1234567`` -> ``"1.23M"``; None -> ``"-"``."""
    if x is None:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def _rate(r: Result) -> float:
    """``r``'s env-steps/s, 0.0 when it was not measured."""
    return r.env_steps_per_s or 0.0


def recommend(
    results: Sequence[Result], code: Optional[Callable[[Dict[str, Any]], str]] = None
) -> List[str]:
    """The conclusion for this machine, as lines of text.

    Names the fastest contender, the vecenv mode to use (with
    ``code(options)``, the line that builds it, when given) and where its
    time went (its verdict; when it reads policy-bound, whether the partial
    batches it advises were measured slower), and whether gymnasium's
    in-process SyncVectorEnv is as fast or faster (within 5%); for an env
    that returns infos, the share of the step they take (from the
    ``info_keys=()`` measurement) and the option that removes it.
    """
    ok = [r for r in results if r.env_steps_per_s and r.name not in (INFO_BASE, INFO_CUT)]
    base = next((r for r in results if r.env_steps_per_s and r.name == INFO_BASE), None)
    cut = next((r for r in results if r.env_steps_per_s and r.name == INFO_CUT), None)
    if not ok:
        return ["nothing could be measured: see the errors above"]
    best = max(ok, key=_rate)
    ours = [r for r in ok if r.name == "vecenv"]
    sync = next((r for r in ok if r.name == GYM_SYNC), None)
    gasync = next((r for r in ok if r.name == GYM_ASYNC), None)
    lines = [f"fastest: {best.label}, {fmt_rate(best.env_steps_per_s)} env-steps/s"]
    if ours:
        v = max(ours, key=_rate)
        vs = f", {_rate(v) / _rate(gasync):.1f}x gymnasium AsyncVectorEnv" if gasync else ""
        mode = v.label[len("vecenv ") :] if v.label.startswith("vecenv ") else v.label
        lines.append(f"vecenv: use {mode}: {fmt_rate(v.env_steps_per_s)} env-steps/s{vs}")
        if code is not None:
            lines.append(f"  {code(v.options)}")
        if v.stats:
            lines.append(f"  where its time went: {v.stats}")
        partial = [r for r in ours if "batch_size" in r.options]
        if v.stats and v.stats.startswith("policy-bound") and partial and v not in partial:
            # The verdict's advice is general; this run measured it.
            p = max(partial, key=_rate)
            lines.append(
                f"  partial batches were measured here too and were slower "
                f"({fmt_rate(p.env_steps_per_s)} env-steps/s, {_rate(p) / _rate(v):.2f}x): "
                "keep lockstep on this machine"
            )
        if sync is not None:
            ratio = _rate(sync) / _rate(v)
            if ratio >= AS_FAST:
                lines.append(
                    f"gymnasium SyncVectorEnv (in-process) is as fast or faster here "
                    f"({ratio:.2f}x vecenv's best): the env steps too cheaply for worker "
                    "processes to pay off in this loop"
                )
            else:
                lines.append(
                    f"gymnasium SyncVectorEnv (in-process) is slower here ({ratio:.2f}x vecenv's best)"
                )
    if base is not None and cut is not None:
        share = max(0.0, 1.0 - _rate(base) / _rate(cut))
        lines.append(
            f"infos: the env returns infos; they take {share:.0%} of its step time here "
            f"({base.label}: {fmt_rate(base.env_steps_per_s)} env-steps/s, "
            f"{fmt_rate(cut.env_steps_per_s)} with info_keys=(), "
            f"{_rate(cut) / _rate(base):.2f}x): a loop that reads no per-step infos passes "
            "info_keys=() (or the keys it reads)"
        )
    return lines


# ---------------------------------------------------------------- command line
def _parse(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m vecenv.bench",
        description="Measure your env with each vecenv worker layout and gymnasium's "
        "SyncVectorEnv/AsyncVectorEnv, then print which to use on this machine.",
    )
    p.add_argument(
        "env",
        metavar="ENV",
        help="a gymnasium id (CartPole-v1, ALE/Pong-v5, module:Id), or module:factory or "
        "path/to/file.py:factory returning one env",
    )
    p.add_argument("--num-envs", type=int, default=16, help="envs per vec env (default 16)")
    p.add_argument(
        "--seconds", type=float, default=0.5, help="timed seconds per contender (default 0.5)"
    )
    p.add_argument(
        "--warmup", type=float, default=0.2, help="untimed seconds per contender (default 0.2)"
    )
    p.add_argument(
        "--contenders",
        default="vecenv,gym_sync,gym_async",
        help="comma-separated from vecenv, gym_sync, gym_async (default: all three)",
    )
    p.add_argument(
        "--policy-us",
        type=float,
        default=0.0,
        help="your policy's time per batch in microseconds, spent (CPU) between steps as in "
        "training (default 0: the env alone)",
    )
    p.add_argument(
        "--policy",
        metavar="FN",
        help="module:function or path/to/file.py:function called on each batch's observations "
        "between steps (your policy's forward), instead of --policy-us",
    )
    p.add_argument("--env-kwargs", default="{}", help="JSON dict for gymnasium.make or the factory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    args = p.parse_args(argv)
    if args.num_envs < 1:
        p.error("--num-envs must be >= 1")
    if args.seconds <= 0 or args.warmup < 0:
        p.error("--seconds must be > 0 and --warmup >= 0")
    if args.policy_us < 0 or (args.policy and args.policy_us):
        p.error("--policy-us must be >= 0, and not given with --policy")
    try:
        args.env_kwargs = json.loads(args.env_kwargs)
    except ValueError as exc:
        p.error(f"--env-kwargs is not JSON: {exc}")
    if not isinstance(args.env_kwargs, dict):
        p.error("--env-kwargs must be a JSON object")
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    bad = sorted(set(args.contenders) - {"vecenv", GYM_SYNC, GYM_ASYNC})
    if bad:
        p.error(f"unknown contenders {bad}; choose from vecenv, gym_sync, gym_async")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m vecenv.bench`` / ``vecenv-bench``: returns the exit status."""
    args = _parse(argv)
    # Envs' own warnings (deprecations, casts) would bury the report; workers
    # started with spawn/forkserver read the variable.
    warnings.filterwarnings("ignore")
    os.environ["PYTHONWARNINGS"] = "ignore"
    cores = usable_cpus()
    try:
        env_fn = EnvFactory(args.env, args.env_kwargs)
        probe = env_fn()
        probe.close()
        t0 = time.perf_counter()  # once more, imports done: what building one env costs
        probe = env_fn()
        probe.reset(seed=args.seed)
        make_s = time.perf_counter() - t0
        infos = returns_infos(probe, args.seed)  # compare() then times infos too
        probe.close()
    except Exception as exc:
        print(
            f"vecenv.bench: cannot make {args.env!r}: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return 2
    policy = busy_policy(args.policy_us) if args.policy_us else None
    if args.policy:
        module_name, _, attr = args.policy.rpartition(":")
        try:
            policy = getattr(_import(module_name), attr) if module_name else None
        except Exception as exc:
            policy = None
            print(f"vecenv.bench: cannot import --policy {args.policy!r}: {exc}", file=sys.stderr)
        if not callable(policy):
            print(f"vecenv.bench: --policy {args.policy!r} is not module:function", file=sys.stderr)
            return 2
    plan = _contenders(args.num_envs, cores, args.contenders)
    per = args.seconds + args.warmup
    # Each contender builds num_envs envs (in parallel on the cores, except
    # SyncVectorEnv) and starts its processes (about 0.2 s).
    build = args.num_envs * make_s
    estimate = sum(
        per + 0.2 + (build if name == GYM_SYNC else build / cores) for name, _, _ in plan
    ) + 2 * (per + 0.2 + build / cores) * (infos and "vecenv" in args.contenders)
    print(
        f"vecenv.bench: {args.env} x{args.num_envs} on {cores} usable cores: {len(plan)} "
        f"contenders, {per:g} s each plus start-up: about {estimate:.0f} s",
        flush=True,
    )
    started = time.perf_counter()

    def progress(done, total, res):
        rate = (
            f"{fmt_rate(res.env_steps_per_s)} env-steps/s"
            if res.error is None
            else f"failed: {res.error}"
        )
        print(f"[{done}/{total}] {res.label}: {rate} ({res.seconds:.1f} s)", flush=True)

    results = compare(
        env_fn,
        args.num_envs,
        seconds=args.seconds,
        warmup=args.warmup,
        contenders=args.contenders,
        cores=cores,
        seed=args.seed,
        progress=progress,
        policy=policy,
    )
    elapsed = time.perf_counter() - started
    in_loop = (
        f", with {args.policy} in the loop"
        if args.policy
        else (f", with {args.policy_us:g} us of policy per batch" if args.policy_us else "")
    )
    print(f"\nOn this machine ({cores} usable cores), {args.env} x{args.num_envs}{in_loop}:")

    def code(options: Dict[str, Any]) -> str:
        return env_fn.code(
            args.num_envs,
            options["num_workers"],
            options.get("batch_size"),
            bool(options.get("inline", False)),
        )

    conclusion = recommend(results, code)
    for line in conclusion:
        print(f"  {line}")
    print(f"(measured in {elapsed:.1f} s; one short run: rerun with --seconds 2 to confirm)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "env": args.env,
                    "env_kwargs": args.env_kwargs,
                    "num_envs": args.num_envs,
                    "usable_cores": cores,
                    "seconds": args.seconds,
                    "warmup": args.warmup,
                    "policy_us": args.policy_us,
                    "policy": args.policy,
                    "elapsed_s": elapsed,
                    "results": [dataclasses.asdict(r) for r in results],
                    "recommendation": conclusion,
                },
                f,
                indent=1,
            )
            f.write("\n")
    return 0 if any(r.env_steps_per_s for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
