"""Spaces to shared-memory layout (runs in the parent and in workers).

A gymnasium space is flattened into *leaves*: one fixed-shape, fixed-dtype
array per Box/Discrete/MultiDiscrete/MultiBinary found in a depth-first walk of
Tuple and Dict spaces (Dict in its key order). Each leaf gets one contiguous
``(num_envs, *shape)`` buffer in the shared block, so a batch of observations
is a view, never a gather.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, List, Sequence, Tuple

import numpy as np
from gymnasium import spaces

from vecenv import _core
from vecenv._infos import INFO_ROW_BYTES
from vecenv.errors import ActionTypeError, InvalidArgumentError, SpaceError

ALIGN = 64
PAGE = 4096


@dataclass(frozen=True)
class Leaf:
    """One array of a flattened space.

    path: keys (str) and indices (int) from the root space to the leaf.
    shape, dtype: of one env's value (without the num_envs axis).
    space: the leaf space itself (Box, Discrete, MultiDiscrete or MultiBinary).
    """

    path: Tuple[Any, ...]
    shape: Tuple[int, ...]
    dtype: np.dtype
    space: spaces.Space
    # True: no fixed layout (Text, Graph, Sequence, OneOf, custom spaces); its
    # values travel pickled through the worker's pipe, never in shared memory.
    pickled: bool = False

    @property
    def nbytes(self) -> int:
        """Bytes of one env's value."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def name(self) -> str:
        return "".join(f"[{p!r}]" for p in self.path) or "(root)"


def _leaf_of(space: spaces.Space, path, what: str, pickled: bool = False) -> Leaf:
    if isinstance(space, spaces.Box):
        return Leaf(path, tuple(space.shape), np.dtype(space.dtype), space)
    if isinstance(space, spaces.Discrete):
        return Leaf(path, (), np.dtype(space.dtype), space)
    if isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
        return Leaf(path, tuple(space.shape), np.dtype(space.dtype), space)
    if pickled:
        return Leaf(path, (), np.dtype(object), space, pickled=True)
    where = f"{what}{''.join(f'[{p!r}]' for p in path)}"
    raise SpaceError(
        f"{where} is {type(space).__name__}, which has no fixed size and cannot live in "
        "shared memory; supported: Box, Discrete, MultiDiscrete, MultiBinary, and Tuple/Dict "
        "of them. Wrap the env to encode it as one of these (for example a padded Box)."
    )


def flatten_space(
    space: spaces.Space, what: str = "observation_space", pickled: bool = False
) -> List[Leaf]:
    """Leaves of ``space`` in depth-first order.

    With ``pickled=True``, a space with no fixed size (Text, Graph, Sequence,
    OneOf, a custom ``Space`` subclass) becomes one leaf with ``pickled=True``.

    Raises
    ------
    SpaceError
        For spaces with no fixed size (unless ``pickled``) or anything that is
        not a gymnasium space.
    """
    if not isinstance(space, spaces.Space):
        raise SpaceError(f"{what} must be a gymnasium.spaces.Space, got {type(space).__name__}")
    leaves: List[Leaf] = []

    def walk(s, path):
        if isinstance(s, spaces.Tuple):
            for i, sub in enumerate(s.spaces):
                walk(sub, (*path, i))
        elif isinstance(s, spaces.Dict):
            for k, sub in s.spaces.items():
                walk(sub, (*path, k))
        else:
            leaves.append(_leaf_of(s, path, what, pickled))

    walk(space, ())
    return leaves


def split_leaves(values: Sequence[Any], pickled: Sequence[int]):
    """``values`` (all leaves, flatten order) as (fixed leaves, pickled leaves);
    ``pickled`` are the positions of the pickled ones."""
    if not pickled:
        return values, ()
    skip = set(pickled)
    return [v for j, v in enumerate(values) if j not in skip], [values[j] for j in pickled]


def merge_leaves(fixed: Sequence[Any], pickled_values: Sequence[Any], pickled: Sequence[int]):
    """Inverse of :func:`split_leaves`."""
    if not pickled:
        return fixed
    out = list(fixed)
    for j, v in zip(pickled, pickled_values):
        out.insert(j, v)
    return out


def make_flattener(space: spaces.Space) -> Callable[[Any], Sequence[Any]]:
    """A function mapping a value of ``space`` (array, tuple or dict, nested)
    to the list of its leaf values, in :func:`flatten_space` order."""
    if not isinstance(space, (spaces.Tuple, spaces.Dict)):
        return lambda x: (x,)

    def build(s):
        if isinstance(s, spaces.Tuple):
            subs = [build(c) for c in s.spaces]
            n = len(subs)

            def f(x, out):
                if not isinstance(x, (tuple, list)) or len(x) != n:
                    raise ValueError(f"expected a tuple of {n} items, got {type(x).__name__}")
                for sub, v in zip(subs, x):
                    sub(v, out)

            return f
        if isinstance(s, spaces.Dict):
            subs = [(k, build(c)) for k, c in s.spaces.items()]

            def f(x, out):
                try:
                    for k, sub in subs:
                        sub(x[k], out)
                except (KeyError, TypeError) as exc:
                    raise ValueError(
                        f"expected a dict with keys {list(s.spaces)}, got "
                        f"{type(x).__name__}{' without ' + repr(exc.args[0]) if isinstance(exc, KeyError) else ''}"
                    ) from None

            return f
        return lambda x, out: out.append(x)

    root = build(space)

    def flatten(x):
        out: list = []
        root(x, out)
        return out

    return flatten


def make_unflattener(space: spaces.Space) -> Callable[[Sequence[Any]], Any]:
    """Inverse of :func:`make_flattener`: leaf values to a (nested) tuple/dict."""
    if not isinstance(space, (spaces.Tuple, spaces.Dict)):
        return lambda leaves: leaves[0]

    def build(s, it):
        if isinstance(s, spaces.Tuple):
            subs = [build(c, it) for c in s.spaces]
            return lambda leaves: tuple(f(leaves) for f in subs)
        if isinstance(s, spaces.Dict):
            subs = [(k, build(c, it)) for k, c in s.spaces.items()]
            return lambda leaves: {k: f(leaves) for k, f in subs}
        j = next(it)
        return lambda leaves: leaves[j]

    return build(space, iter(range(10**9)))


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


@dataclass(frozen=True)
class BlockLayout:
    """Byte offsets of every buffer in the shared block.

    All fields are plain data so the layout pickles to workers.
    """

    num_envs: int
    num_workers: int
    action_leaves: Tuple[Leaf, ...]
    obs_leaves: Tuple[Leaf, ...]
    action_offsets: Tuple[int, ...]
    obs_offsets: Tuple[int, ...]
    reward_offset: int
    terminated_offset: int
    truncated_offset: int
    nbytes: int
    # Rows for the last observation of an episode ("sb3" autoreset), one per
    # obs leaf, so terminal observations travel without pickling; () if unused.
    final_offsets: Tuple[int, ...] = ()
    # Positions (in flatten_space order) of observation leaves without a fixed
    # layout: not in obs_leaves, their values travel pickled in the worker's
    # round message. actions_pickled: the action space has such a leaf, so
    # every action travels pickled (action_leaves is then empty).
    obs_pickled: Tuple[int, ...] = ()
    actions_pickled: bool = False
    # episode_statistics: the last finished episode's return (float64),
    # length (int64) and duration (float64, seconds) of each env; () if unused.
    # Only the env's worker writes them (vecenv._episodes states the protocol).
    episode_offsets: Tuple[int, ...] = ()
    # infos: one row of vecenv._infos.INFO_ROW_BYTES per env, where a worker
    # writes an info of numbers instead of pickling it (vecenv._infos); 0 if unused.
    info_offset: int = 0

    @classmethod
    def build(
        cls,
        observation_space,
        action_space,
        num_envs: int,
        num_workers: int,
        final_obs: bool = False,
        pickled: bool = False,
        episodes: bool = False,
        infos: bool = False,
    ):
        all_obs = flatten_space(observation_space, "observation_space", pickled)
        obs_pickled = tuple(j for j, leaf in enumerate(all_obs) if leaf.pickled)
        obs_leaves = tuple(leaf for leaf in all_obs if not leaf.pickled)
        act_leaves = tuple(flatten_space(action_space, "action_space", pickled))
        actions_pickled = any(leaf.pickled for leaf in act_leaves)
        if actions_pickled:
            act_leaves = ()
        off = _core.control_nbytes(num_envs, num_workers)

        def place(nbytes):
            nonlocal off
            # Large buffers start on a page so rows of big observations do not
            # share pages with the control words.
            off = _align(off, PAGE if nbytes >= PAGE else ALIGN)
            at = off
            off += max(nbytes, 1)
            return at

        act_off = tuple(place(leaf.nbytes * num_envs) for leaf in act_leaves)
        rew = place(8 * num_envs)
        term = place(num_envs)
        trunc = place(num_envs)
        obs_off = tuple(place(leaf.nbytes * num_envs) for leaf in obs_leaves)
        final_off = tuple(place(leaf.nbytes * num_envs) for leaf in obs_leaves) if final_obs else ()
        # Last, so that the option off leaves every other offset where it was.
        episode_off = tuple(place(8 * num_envs) for _ in range(3)) if episodes else ()
        info_off = place(INFO_ROW_BYTES * num_envs) if infos else 0
        return cls(
            num_envs,
            num_workers,
            act_leaves,
            obs_leaves,
            act_off,
            obs_off,
            rew,
            term,
            trunc,
            _align(off, PAGE),
            final_off,
            obs_pickled,
            actions_pickled,
            episode_off,
            info_off,
        )

    def episode_views(self, block) -> List[np.ndarray]:
        """Views ``(num_envs,)`` of the last finished episode's return
        (float64), length (int64) and duration (float64, seconds) of each
        env, in that order ([] when the layout has none)."""
        n = self.num_envs
        return [
            np.frombuffer(block, dtype=dtype, count=n, offset=o)
            for o, dtype in zip(self.episode_offsets, (np.float64, np.int64, np.float64))
        ]

    def final_views(self, block):
        """Views ``(num_envs, *shape)`` of the final-observation rows, one per
        obs leaf ([] when the layout has none)."""
        n = self.num_envs
        return [
            np.frombuffer(
                block, dtype=leaf.dtype, count=n * math.prod(leaf.shape), offset=o
            ).reshape(n, *leaf.shape)
            for o, leaf in zip(self.final_offsets, self.obs_leaves)
        ]

    def views(self, block):
        """NumPy views over ``block``: (action leaves, obs leaves, rewards,
        terminated, truncated); each leaf view has shape (num_envs, *shape)."""
        n = self.num_envs

        def view(offset, dtype, shape):
            count = n * math.prod(shape)
            return np.frombuffer(block, dtype=dtype, count=count, offset=offset).reshape(n, *shape)

        acts = [
            view(o, leaf.dtype, leaf.shape)
            for o, leaf in zip(self.action_offsets, self.action_leaves)
        ]
        obs = [
            view(o, leaf.dtype, leaf.shape) for o, leaf in zip(self.obs_offsets, self.obs_leaves)
        ]
        rew = view(self.reward_offset, np.float64, ())
        term = view(self.terminated_offset, np.bool_, ())
        trunc = view(self.truncated_offset, np.bool_, ())
        return acts, obs, rew, term, trunc


# --------------------------------------------------------------------- actions


def _integral_check(arr: np.ndarray, leaf: Leaf, argname: str) -> None:
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise InvalidArgumentError(
                f"{argname}{leaf.name if leaf.path else ''}: non-finite value (NaN or inf) "
                f"where {type(leaf.space).__name__} needs integers"
            )
        if not np.all(arr == np.round(arr)):
            raise InvalidArgumentError(
                f"{argname}{leaf.name if leaf.path else ''}: non-integral float where "
                f"{type(leaf.space).__name__} needs integers"
            )
    elif arr.dtype.kind not in "iub":
        raise InvalidArgumentError(
            f"{argname}{leaf.name if leaf.path else ''}: dtype {arr.dtype} cannot hold values of "
            f"{leaf.space}; pass integers"
        )


def make_action_writer(leaves: Sequence[Leaf], space: spaces.Space, argname: str = "actions"):
    """A function ``write(actions, bufs, rows)`` that validates a batch of
    actions and copies it into the leaf buffers.

    ``rows`` is None (all num_envs rows, the batch must have num_envs rows) or
    an int64 array of env indices (the batch has len(rows) rows).

    Raises
    ------
    InvalidArgumentError
        Wrong structure, wrong number of actions, wrong shape, a dtype that
        cannot represent the space, NaN where integers are needed, or a value
        outside a Discrete/MultiDiscrete/MultiBinary range.
    """
    flatten = make_flattener(space)
    checks = [leaf_check(leaf) for leaf in leaves]
    wheres = [f"{argname}{leaf.name}" if leaf.path else argname for leaf in leaves]

    def write(actions, bufs, rows=None):
        n = bufs[0].shape[0] if rows is None else len(rows)
        try:
            values = flatten(actions)
        except ValueError as exc:
            raise InvalidArgumentError(f"{argname} does not match {space}: {exc}") from None
        for leaf, value, buf, check, where in zip(leaves, values, bufs, checks, wheres):
            arr = value if type(value) is np.ndarray else np.asarray(value)
            expected = (n, *leaf.shape)
            if arr.shape != expected:
                if arr.ndim >= 1 and arr.shape[0] != n:
                    raise InvalidArgumentError(
                        f"{where}: got {arr.shape[0]} actions, expected {n} (one per env); "
                        f"shape {arr.shape}, expected {expected}"
                    )
                raise InvalidArgumentError(f"{where}: shape {arr.shape}, expected {expected}")
            if check.integral:
                if arr.dtype.kind not in "iu":
                    _integral_check(arr, leaf, where)
            elif arr.dtype.kind not in "biuf":
                raise InvalidArgumentError(f"{where}: dtype {arr.dtype}, expected a numeric dtype")
            dst = buf if rows is None else np.empty(expected, dtype=leaf.dtype)
            np.copyto(dst, arr, casting="unsafe")
            check.check_range(dst, arr, leaf, where)
            if rows is not None:
                _core.scatter_rows(_bytes2d(dst), rows, _bytes2d(buf))

    return write


class LeafCheck:
    """How :func:`make_action_writer` validates one action leaf: a Box of
    integers (whole numbers, any value), the base; see :func:`leaf_check`."""

    integral = True  # the values must be whole numbers (no NaN, no fraction)

    def check_range(self, dst: np.ndarray, arr: np.ndarray, leaf: Leaf, where: str) -> None:
        """Raise InvalidArgumentError naming ``where`` if ``dst`` (the batch
        cast to the leaf's dtype) holds a value outside the leaf's space;
        ``arr`` is the batch as given."""


class FloatBoxCheck(LeafCheck):
    """A Box of floats: any numeric dtype, any value."""

    integral = False


@dataclass(frozen=True)
class DiscreteCheck(LeafCheck):
    """A Discrete space: integers in ``[lo, hi)``."""

    lo: int
    hi: int

    def check_range(self, dst, arr, leaf, where) -> None:
        lo, hi = self.lo, self.hi
        flat = dst.reshape(-1)
        bad = (
            _core.check_int_range(flat, lo, hi)
            if flat.dtype == np.int64
            else _first_out_of_range(flat, lo, hi)
        )
        if bad >= 0:
            raise InvalidArgumentError(
                f"{where}[{bad}]={arr.reshape(-1)[bad]} is outside {leaf.space} "
                f"(valid: {lo}..{hi - 1})"
            )
        if arr.dtype != dst.dtype and not np.array_equal(dst, arr):
            raise InvalidArgumentError(f"{where}: values do not fit {leaf.dtype}")


@dataclass(frozen=True)
class ElementRangeCheck(LeafCheck):
    """A MultiDiscrete or MultiBinary space: each element in ``[lo, hi)``
    (arrays of the leaf's shape, or scalars)."""

    lo: Any
    hi: Any

    def check_range(self, dst, arr, leaf, where) -> None:
        bad_mask = (dst < self.lo) | (dst >= self.hi)
        if bad_mask.any() or not np.array_equal(dst, arr):
            idx = tuple(int(i) for i in np.argwhere(bad_mask | (dst != arr))[0])
            raise InvalidArgumentError(f"{where}{list(idx)}={arr[idx]} is outside {leaf.space}")


def leaf_check(leaf: Leaf) -> LeafCheck:
    """The :class:`LeafCheck` of an action leaf, by its space and dtype."""
    s = leaf.space
    if isinstance(s, spaces.Discrete):
        return DiscreteCheck(int(s.start), int(s.start) + int(s.n))
    if isinstance(s, spaces.MultiDiscrete):
        return ElementRangeCheck(np.asarray(s.start), np.asarray(s.start) + np.asarray(s.nvec))
    if isinstance(s, spaces.MultiBinary):
        return ElementRangeCheck(0, 2)
    if leaf.dtype.kind in "iub":
        return LeafCheck()
    return FloatBoxCheck()


def make_exact_writer(leaves: Sequence[Leaf], space: spaces.Space):
    """A function ``write(actions, bufs, rows=None) -> bool`` that copies a
    batch of actions into the leaf buffers only if every leaf value is already
    an ndarray of the leaf's dtype and shape ``(n, *shape)`` (n: num_envs, or
    ``len(rows)``), so each env reads back exactly the element the caller
    gave (the type gymnasium's ``iterate`` hands out). Returns False, having
    written nothing, for anything else (lists, other dtypes, wrong shapes):
    the caller then sends the actions another way or validates them."""
    if not leaves:
        return lambda actions, bufs, rows=None: False
    flatten = make_flattener(space)
    expected = [(leaf.dtype, leaf.shape) for leaf in leaves]
    single = len(leaves) == 1 and not isinstance(space, (spaces.Tuple, spaces.Dict))

    def write(actions, bufs, rows=None):
        n = bufs[0].shape[0] if rows is None else len(rows)
        if single:
            if type(actions) is not np.ndarray:
                return False
            values = (actions,)
        else:
            try:
                values = flatten(actions)
            except (ValueError, TypeError, KeyError, IndexError):
                return False
        for v, (dtype, shape) in zip(values, expected):
            if type(v) is not np.ndarray or v.dtype != dtype or v.shape != (n, *shape):
                return False
        for v, buf in zip(values, bufs):
            if rows is None:
                np.copyto(buf, v, casting="no")
            else:
                _core.scatter_rows(_bytes2d(np.ascontiguousarray(v)), rows, _bytes2d(buf))
        return True

    return write


def per_env_form(space: spaces.Space, actions, n: int) -> bool:
    """Whether ``actions`` for a Tuple/Dict ``space`` is a sequence of ``n``
    per-env actions (the seed's and SB3's form) rather than the batched form
    (a tuple, or dict, of arrays with ``n`` rows: gymnasium's form).

    Dict: a non-mapping sequence of n mappings. Tuple: a list of n tuples of
    ``len(space)`` items, or a tuple of them when n != len(space) (a tuple of
    ``len(space)`` items is the batched form)."""
    if isinstance(space, spaces.Dict):
        return (
            isinstance(actions, (list, tuple))
            and len(actions) == n
            and all(isinstance(a, dict) for a in actions)
        )
    if isinstance(space, spaces.Tuple):
        k = len(space.spaces)
        if not isinstance(actions, (list, tuple)) or len(actions) != n:
            return False
        if isinstance(actions, tuple) and n == k:
            return False
        return all(isinstance(a, tuple) and len(a) == k for a in actions)
    return False


def make_action_splitter(space: spaces.Space):
    """A function ``split(actions, n)`` returning the list of the ``n``
    per-env actions in ``actions``, each the very element gymnasium's
    ``iterate(batch_space(space, n), actions)`` hands out (a row of an array,
    an item of a list), or for Tuple/Dict spaces the items of a sequence of
    per-env actions (:func:`per_env_form`). Nothing is cast or range-checked.

    Raises
    ------
    ActionTypeError
        ``actions`` cannot be iterated (a scalar where a batch is needed).
    InvalidArgumentError
        Not ``n`` actions, or a Tuple/Dict batch that does not fit the space.
    """
    from gymnasium.vector.utils import batch_space, iterate

    batched: dict = {}
    structured = isinstance(space, (spaces.Tuple, spaces.Dict))

    def split(actions, n: int) -> list:
        if structured and per_env_form(space, actions, n):
            per_env = list(actions)
        else:
            bs = batched.get(n)
            if bs is None:
                bs = batched[n] = batch_space(space, n)
            try:
                per_env = list(iterate(bs, actions))
            except TypeError as exc:
                raise ActionTypeError(
                    f"actions={actions!r}: expected one action per env (num_envs={n}), an "
                    f"element of {bs} or a sequence of {n} actions of {space} ({exc})"
                ) from None
            except (ValueError, KeyError, IndexError, AttributeError) as exc:
                raise InvalidArgumentError(
                    f"actions do not match {bs}: {type(exc).__name__}: {exc}"
                ) from None
            except Exception as exc:  # gymnasium's CustomSpaceError and friends
                raise ActionTypeError(
                    f"actions cannot be split into per-env actions of {space}: {exc}"
                ) from None
        if len(per_env) != n:
            raise InvalidArgumentError(
                f"actions: got {len(per_env)} actions, expected {n} (one per env)"
            )
        return per_env

    return split


def stack_actions(space: spaces.Space, per_env: Sequence[Any]):
    """The batched form (one array per leaf) of a sequence of per-env actions
    of a fixed-layout ``space``.

    Raises
    ------
    InvalidArgumentError
        An action that does not fit ``space``.
    """
    from gymnasium.vector.utils import concatenate, create_empty_array

    out: Any = create_empty_array(space, len(per_env), fn=np.zeros)
    try:
        return concatenate(space, list(per_env), out)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise InvalidArgumentError(
            f"actions: expected {len(per_env)} per-env actions of {space} ({exc})"
        ) from None


def _first_out_of_range(flat, lo, hi) -> int:
    bad = np.flatnonzero((flat < lo) | (flat >= hi))
    return int(bad[0]) if bad.size else -1


def _bytes2d(a: np.ndarray) -> np.ndarray:
    """A (rows, row_bytes) uint8 view of a C-contiguous array."""
    return (
        a.reshape(a.shape[0], -1).view(np.uint8)
        if a.size
        else a.reshape(a.shape[0], 0).view(np.uint8)
    )


def make_action_reader(leaves: Sequence[Leaf], space: spaces.Space, bufs):
    """Worker side: ``read(i)`` returns env ``i``'s action as the space's
    structure, each leaf a fresh copy (the env may keep it)."""
    unflatten = make_unflattener(space)
    if len(leaves) == 1:
        buf = bufs[0]
        if leaves[0].shape == ():
            return buf.__getitem__  # a NumPy scalar, a copy
        return lambda i: buf[i].copy()
    getters = [
        (b.__getitem__ if leaf.shape == () else (lambda i, b=b: b[i].copy()))
        for leaf, b in zip(leaves, bufs)
    ]
    return lambda i: unflatten([g(i) for g in getters])
