"""NumPy/plain-Python references the tests compare vecenv against."""

from __future__ import annotations

import copy
import math
import pickle
import random
import sys
import time
import traceback

import numpy as np

from vecenv._infos import InfoKeeper, InfoMismatch


def stack(values):
    """Stack per-env values (arrays, tuples, dicts, nested) along a new axis 0."""
    first = values[0]
    if isinstance(first, dict):
        return {k: stack([v[k] for v in values]) for k in first}
    if isinstance(first, tuple):
        return tuple(stack([v[j] for v in values]) for j in range(len(first)))
    return np.stack([np.asarray(v) for v in values])


def assert_tree_equal(a, b, path="obs"):
    """Assert two nested structures of arrays are equal (same dtype, shape and values)."""
    if isinstance(b, dict):
        assert isinstance(a, dict) and set(a) == set(b), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in b:
            assert_tree_equal(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(b, tuple):
        assert isinstance(a, tuple) and len(a) == len(b), f"{path}: tuple lengths differ"
        for j, (x, y) in enumerate(zip(a, b)):
            assert_tree_equal(x, y, f"{path}[{j}]")
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, f"{path}: shape {a.shape} != {b.shape}"
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} != {b.dtype}"
        np.testing.assert_array_equal(a, b, err_msg=path)


def rollout_loop(env_fns, actions, seed):
    """Step envs in a plain loop with SB3-style autoreset (reset in the same
    step, last observation in infos). Returns per-step (obs, rewards, dones,
    terminal observations by env) and the first observation."""
    envs = [fn() for fn in env_fns]
    try:
        first = stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
        steps = []
        for acts in actions:
            obs, rews, dones, terminal = [], [], [], {}
            for i, env in enumerate(envs):
                o, r, te, tr, _ = env.step(acts[i])
                if te or tr:
                    terminal[i] = (o, bool(tr and not te))
                    o, _ = env.reset()
                obs.append(o)
                rews.append(r)
                dones.append(te or tr)
            steps.append((stack(obs), np.asarray(rews, np.float64), np.asarray(dones), terminal))
        return first, steps
    finally:
        for env in envs:
            env.close()


def gather_rows_ref(src, ids):
    return src[np.asarray(ids, dtype=np.int64)]


# ------------------------------------------------------------- the worker round
#
# A plain-Python model of one worker's rounds (what vecenv._core.WorkerRound
# does), written for clarity, not speed. It shares no code with the library's
# round: it only borrows vecenv._layout's observation flattener and the
# protocol's names (message kinds, statuses, activities, info keys).


class _ObservationMismatch(ValueError):
    """Reported as a ValueError of kind "ObservationError"."""


class _RewardMismatch(ValueError):
    """Reported as a ValueError of kind "RewardError"."""


def _unpicklable_report(exc, env):
    """The report of env ``env``'s info that could not be sent to the parent."""
    from vecenv._protocol import ErrorReport

    kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
    return ErrorReport(
        kind="ResultNotPicklableError",
        message=(
            f"env {env}'s step() or reset() info dict returned a value that could not be sent "
            f"back to the parent process: pickling it raised {kind}: {exc}. Return a picklable "
            "value (no lambdas, locks, open files or generators), or use num_workers=0, which "
            "passes values by reference"
        ),
        exc_type=kind,
        traceback="".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__, chain=False)
        ),
        env_index=env,
    )


def _report(exc, env, where):
    """The error report a parent reads for env ``env``'s exception ``exc``."""
    from vecenv._protocol import ErrorReport

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
        env_index=env,
        where=where,
    )


def leaf_value_ref(j, x, dtype, shape, cast=True):
    """The array that observation leaf ``j`` (``dtype``, ``shape``) stores for
    the value ``x``, or the ValueError the worker reports: a value of another
    dtype is converted when its kind is bool, int or float and NumPy's
    ``same_kind`` rule (or int to int) allows it, integers only when every
    value fits; with ``cast=False`` (``check_observations=True``) an ndarray
    must have exactly the leaf's dtype."""
    if type(x) is np.ndarray and (x.dtype == dtype or not cast):
        if x.dtype != dtype:
            raise ValueError(f"leaf {j}: dtype {x.dtype}, expected {dtype}")
        if x.shape != shape:
            raise ValueError(f"leaf {j}: shape {x.shape}, expected {shape}")
        return x
    if isinstance(x, np.ndarray):  # a subclass
        a = x
    else:
        try:
            a = np.asarray(x)
        except Exception as exc:
            raise ValueError(
                f"leaf {j}: cannot convert {type(x).__name__} to an array: {exc}"
            ) from None
    if a.shape != shape:
        raise ValueError(f"leaf {j}: shape {a.shape}, expected {shape}")
    if a.dtype == dtype:
        return a
    both_int = a.dtype.kind in "iu" and dtype.kind in "iu"
    castable = both_int or np.can_cast(a.dtype, dtype, casting="same_kind")
    if a.dtype.kind not in "biuf" or not castable:
        raise ValueError(f"leaf {j}: dtype {a.dtype}, expected {dtype}")
    b = a.astype(dtype)
    if dtype.kind in "biu" and not np.array_equal(b, a):
        raise ValueError(f"leaf {j}: value {a!r} is not representable as {dtype}")
    return b


def _unflatten(space, leaves):
    """Leaf values (flatten order) to the space's (nested) tuple/dict."""
    from gymnasium import spaces

    it = iter(leaves)

    def build(s):
        if isinstance(s, spaces.Tuple):
            return tuple(build(c) for c in s.spaces)
        if isinstance(s, spaces.Dict):
            return {k: build(c) for k, c in s.spaces.items()}
        return next(it)

    return build(space)


class WorkerRoundReference:
    """One worker hosting envs ``[0, len(envs))`` of a layout, its rounds run
    in plain Python: what a parent can read after each :meth:`run_round`.

    Parameters
    ----------
    envs : list of gymnasium envs
        Env ``i`` is ``envs[i]``.
    layout : vecenv._layout.BlockLayout
        The block's layout (leaves, pickled leaves).
    views : tuple
        ``(actions, observations, rewards, terminated, truncated)`` as
        ``layout.views`` gives them, plus ``final_observations`` (the
        ``layout.final_views`` list, ``[]`` for none): writable arrays of
        num_envs rows, which the parent writes actions into and reads the rest
        from.
    autoreset_mode : {"sb3", "next_step", "same_step", "disabled"}
    check_rewards : bool
        A reward that is not a finite number is the env's error.
    reseed : bool
        Reseed the global ``random``/``np.random``/``torch`` generators from the
        first seed of a round's resets, as a worker process does.
    episodes : list of 3 arrays, optional
        ``layout.episode_views`` (episode statistics on): where an env-step
        that ends an episode writes its return, length and duration (seconds,
        ``time.monotonic``); :attr:`episode_sums` holds the running return
        and length of each env.

    What the parent reads after a round: the rows of the views,
    :attr:`status` (one ``Status`` per env, the last round's for the envs it
    ran), :attr:`messages` (one ``(infos, errors)`` per round that had an
    info or an error, after a pickle round trip, as a parent unpickles it)
    and :attr:`slot` (``(env, activity)`` while an env call runs, ``(-1, 0)``
    between rounds). The parent's inputs: the action rows, :attr:`pipe_actions`
    (``{env: action}`` for each env's next step) and :attr:`reset_kwargs`
    (``{env: {"seed": ..., "options": ...}}`` for its next reset).
    """

    def __init__(
        self,
        envs,
        layout,
        views,
        autoreset_mode,
        check_rewards=False,
        reseed=True,
        episodes=None,
        info_keys=None,
    ):
        from vecenv import _layout

        self.envs = envs
        self.layout = layout
        self.views = tuple(views)
        self.actions, self.observations, self.rewards = self.views[:3]
        self.terminated, self.truncated, self.final_observations = self.views[3:]
        self.mode = autoreset_mode
        self.check_rewards = check_rewards
        self.infos = InfoKeeper(info_keys)
        self.reseed = reseed
        self.flatten = _layout.make_flattener(envs[0].observation_space)
        self.action_space = envs[0].action_space
        self.pipe_actions = {}
        self.reset_kwargs = {}
        self.needs_reset = [False] * len(envs)  # next_step: the next step is a reset
        self.status = np.zeros(len(envs), np.uint8)
        self.messages = []
        self.slot = (-1, 0)
        self.episodes = episodes or None
        self.episode_sums = [(0.0, 0) for _ in envs]  # (return, length) so far
        self.episode_starts = [time.monotonic() for _ in envs]

    # ------------------------------------------------------------ the round
    def run_round(self, ops):
        """Run ``ops`` (``[(env, Op.STEP or Op.RESET), ...]``) in order."""
        from vecenv._protocol import Msg, Op, Status

        if self.reseed and self.reset_kwargs:
            self._reseed_globals(ops)
        statuses, infos, errors = {}, {}, {}
        for i, op in ops:
            try:
                info = self._step(i) if op == Op.STEP else self._reset(i)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:
                errors[i] = _report(exc, i, "step" if op == Op.STEP else "reset")
                statuses[i] = Status.ERROR
            else:
                if info:
                    infos[i] = info
                    statuses[i] = Status.INFO
                else:
                    statuses[i] = Status.OK
        self.slot = (-1, 0)
        for i, exc in InfoKeeper.bad_keys(infos):  # the engine's one check (vecenv._infos)
            del infos[i]
            errors[i] = _report(exc, i, "step or reset")
            statuses[i] = Status.ERROR
        if infos or errors:
            try:
                sent = pickle.dumps((int(Msg.ROUND), infos, errors))
            except Exception:  # only the envs whose info cannot be pickled fail
                for i in list(infos):
                    try:
                        pickle.dumps(infos[i])
                    except Exception as exc:
                        del infos[i]
                        errors[i] = _unpicklable_report(exc, i)
                        statuses[i] = Status.ERROR
                sent = pickle.dumps((int(Msg.ROUND), infos, errors))
            _, got_infos, got_errors = pickle.loads(sent)
            self.messages.append((got_infos, got_errors))
        for i, st in statuses.items():
            self.status[i] = st

    def _reseed_globals(self, ops):
        from vecenv._protocol import Op

        for i, op in ops:
            seed = (self.reset_kwargs.get(i) or {}).get("seed") if op == Op.RESET else None
            if seed is not None:
                seq = np.random.SeedSequence([int(seed) % (1 << 128), 0x76656E76])
                words = seq.generate_state(4, np.uint32)
                random.seed(int.from_bytes(words.tobytes(), "little"))
                np.random.seed(words)  # noqa: NPY002 - the legacy global state is the point
                torch = sys.modules.get("torch")
                if getattr(torch, "manual_seed", None) is not None:
                    torch.manual_seed(int(words[0]) | (int(words[1]) << 32))
                return

    def _enter(self, i, activity):
        self.slot = (i, int(activity))

    def _read_action(self, i):
        """Env ``i``'s action: a pipe action if one was sent, else its shared
        row (a NumPy scalar for a shape-() leaf, else a copy), as the space's
        structure."""
        if i in self.pipe_actions:
            return self.pipe_actions.pop(i)
        if self.layout.actions_pickled:
            raise TypeError(f"env {i} has no action: pickled actions come through the pipe")
        leaves = [
            buf[i] if leaf.shape == () else buf[i].copy()
            for leaf, buf in zip(self.layout.action_leaves, self.actions)
        ]
        return _unflatten(self.action_space, leaves)

    def _step(self, i):
        from vecenv._worker import Activity

        env = self.envs[i]
        self._enter(i, Activity.STEP)
        if self.needs_reset[i]:  # next_step autoreset: this step is the reset
            self.needs_reset[i] = False
            self.pipe_actions.pop(i, None)  # the action is not used
            self._enter(i, Activity.AUTORESET)
            obs, info = env.reset()
            info = self._write_result(i, obs, 0.0, False, False, self._info(info, i, "reset()"))
            self._new_episode(i)  # the reset step is none of the new episode's steps
            return info
        obs, reward, terminated, truncated, info = env.step(self._read_action(i))
        info = self._info(info, i, "step()")
        if self.check_rewards and not _is_finite(reward):
            raise _RewardMismatch(
                f"env {i} returned reward {reward!r}; expected a finite float (check_rewards=True)"
            )
        final_pickled = None
        if terminated or truncated:
            if self.mode == "sb3":
                # The last observation goes to the final rows (or, with none,
                # the observation rows) before reset() may overwrite it.
                final_pickled = self._write_obs(
                    i, obs, self.final_observations or self.observations, "a final observation"
                )
                self._enter(i, Activity.AUTORESET)
                obs, reset_info = env.reset()
                reset_info = self._info(reset_info, i, "reset()")
                if reset_info:
                    from vecenv._worker import RESET_INFO_KEY

                    info = {**info, RESET_INFO_KEY: reset_info}
            elif self.mode == "same_step":
                final_obs, final_info = copy.deepcopy(obs), info
                self._enter(i, Activity.AUTORESET)
                obs, reset_info = env.reset()
                reset_info = self._info(reset_info, i, "reset()")
                info = {"final_info": final_info, "final_obs": final_obs, **reset_info}
            elif self.mode == "next_step":
                self.needs_reset[i] = True
        info = self._write_result(i, obs, reward, terminated, truncated, info, final_pickled)
        if self.episodes is not None:  # the reward as written (a float64), after the reset
            ret, length = self.episode_sums[i]
            self.episode_sums[i] = (ret + float(self.rewards[i]), length + 1)
            if terminated or truncated:
                ret, length = self.episode_sums[i]
                final_return, final_length, final_time = self.episodes
                final_return[i], final_length[i] = ret, length
                final_time[i] = time.monotonic() - self.episode_starts[i]
                self._new_episode(i)
        return info

    def _info(self, info, i, what):
        """What the env returned as its info, checked and cut by the engine's
        one InfoKeeper (vecenv._infos): the compiled round must call it at
        the same points."""
        return self.infos.keep(info, i, what)

    def _new_episode(self, i):
        self.episode_sums[i] = (0.0, 0)
        self.episode_starts[i] = time.monotonic()

    def _reset(self, i):
        from vecenv._worker import Activity

        self._enter(i, Activity.RESET)
        kwargs = self.reset_kwargs.pop(i, None) or {}
        self.pipe_actions.pop(i, None)  # never used by a reset
        if self.mode != "sb3":  # gymnasium's vector envs pass both keywords
            kwargs = {"seed": kwargs.get("seed"), "options": kwargs.get("options")}
        self.needs_reset[i] = False
        obs, info = self.envs[i].reset(**kwargs)
        info = self._write_result(i, obs, 0.0, False, False, self._info(info, i, "reset()"))
        self._new_episode(i)
        return info

    def _write_result(self, i, obs, reward, terminated, truncated, info, final_pickled=None):
        """Write env ``i``'s observation, then reward and flags (in that
        order: an error in one leaves the earlier ones written); return its
        info with the pickled observation leaves added."""
        from vecenv._protocol import PICKLED_FINAL_KEY, PICKLED_OBS_KEY

        pickled = self._write_obs(i, obs, self.observations, "an observation")
        self.rewards[i] = reward
        self.terminated[i] = terminated
        self.truncated[i] = truncated
        if pickled is None and final_pickled is None:
            return info
        info = dict(info)
        if pickled is not None:
            info[PICKLED_OBS_KEY] = pickled
        if final_pickled is not None:
            info[PICKLED_FINAL_KEY] = final_pickled
        return info

    def _got(self, obs):
        """What the env returned, leaf by leaf: ``[(shape, dtype), ...]``."""
        try:
            values = list(self.flatten(obs))
        except Exception:
            return f"a {type(obs).__name__}"
        got = []
        for v in values:
            try:
                a = np.asarray(v)
            except Exception:
                got.append(type(v).__name__)
                continue
            got.append((tuple(a.shape), str(a.dtype)))
        return str(got)

    def _write_obs(self, i, obs, rows, what):
        """Write env ``i``'s observation into row ``i`` of ``rows`` (all its
        fixed leaves or none); return its pickled leaves' values (None when
        the layout has none)."""
        leaves_spec = self.layout.obs_leaves
        try:
            values = list(self.flatten(obs))
            pickled = None
            if self.layout.obs_pickled:
                skip = set(self.layout.obs_pickled)
                pickled = [values[j] for j in self.layout.obs_pickled]
                values = [v for j, v in enumerate(values) if j not in skip]
                if not leaves_spec:
                    return pickled
            if len(values) != len(rows):
                raise ValueError(f"expected {len(rows)} observation leaves, got {len(values)}")
            arrays = [
                leaf_value_ref(j, x, buf.dtype, buf.shape[1:])
                for j, (x, buf) in enumerate(zip(values, rows))
            ]
        except ValueError as exc:
            leaves = [(leaf.name, leaf.shape, str(leaf.dtype)) for leaf in leaves_spec]
            raise _ObservationMismatch(
                f"env {i} returned {what} that does not match observation_space: {exc} "
                f"(leaves: {leaves}; got {self._got(obs)})"
            ) from None
        for buf, a in zip(rows, arrays):
            buf[i] = a
        return pickled


def _is_finite(x):
    try:
        return math.isfinite(x)
    except TypeError:
        return False
