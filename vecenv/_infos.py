"""What the engine does to an env's info dicts (runs in the workers, and in
the calling process for in-process envs and the caller's share).

:class:`InfoKeeper` checks each info an env returns (a dict with str keys)
and keeps only the keys of ``info_keys`` (the engine option), before
anything else sees it: what is dropped is never copied, pickled or sent.

:func:`info_snapshot` keeps an info from being changed by its env's next
``reset()``: an env may reuse one dict (or array) for every step and reset,
and an info that crosses the process boundary is pickled only when its
round is published, after the automatic reset that ends an episode.

:func:`with_pickled` adds the pickled observation leaves to an info.
"""

from __future__ import annotations

import copy
import hashlib
import pickle
import struct
import sys
from typing import Any, Collection, Dict, List, Optional, Tuple

import numpy as np

from vecenv import _core
from vecenv._protocol import PICKLED_FINAL_KEY, PICKLED_OBS_KEY, Status
from vecenv.errors import InvalidArgumentError

_STR = {str}
_SHARED_INFO = int(Status.SHARED_INFO)


class InfoMismatch(TypeError):
    """An env returned an info that is not a dict with str keys (reported to
    the parent as :class:`~vecenv.errors.InfoError`)."""


def check_info_keys(info_keys: Any) -> Optional[Tuple[str, ...]]:
    """The ``info_keys`` option as a tuple of distinct str (None: keep every key).

    Raises
    ------
    InvalidArgumentError
        A str (one key must be given as ``("lives",)``), not a collection, or
        an element that is not a str.
    """
    if info_keys is None:
        return None
    if isinstance(info_keys, (str, bytes)) or not isinstance(info_keys, Collection):
        raise InvalidArgumentError(
            f"info_keys must be None or a collection of str (one key: ('lives',)), "
            f"got {info_keys!r}"
        )
    bad = [k for k in info_keys if not isinstance(k, str)]
    if bad:
        raise InvalidArgumentError(f"info_keys must hold str keys only, got {bad!r}")
    return tuple(dict.fromkeys(info_keys))


def _mismatch(info: Any, i: int, what: str) -> InfoMismatch:
    if not isinstance(info, dict):
        return InfoMismatch(
            f"env {i} returned an info of type {type(info).__name__} from {what}; "
            "expected a dict (gymnasium's Env API)"
        )
    bad = [k for k in info if not isinstance(k, str)]
    return InfoMismatch(f"env {i} returned an info from {what} with keys that are not str: {bad!r}")


class InfoKeeper:
    """Each info an env returns, checked and cut to ``info_keys``.

    ``keep(info, i, what)`` returns ``info`` itself when every key is kept
    (``info_keys=None``), else a new dict of the kept keys that are present,
    in ``info_keys``' order (``()``: always ``{}``). It raises
    :class:`InfoMismatch` naming env ``i`` and ``what`` (``"step()"``,
    ``"reset()"``) for an info that is not a dict; str keys are checked
    where a round's infos are published (:meth:`bad_keys`).
    """

    def __init__(self, info_keys: Optional[Tuple[str, ...]]):
        self.info_keys = info_keys  # None: nothing dropped (the compiled round skips keep)

    def keep(self, info: Any, i: int, what: str) -> Any:
        if type(info) is not dict and not isinstance(info, dict):
            raise _mismatch(info, i, what)
        keys = self.info_keys
        if keys is None:
            return info
        if not keys or not info:
            return {}
        return {k: info[k] for k in keys if k in info}

    @staticmethod
    def bad_keys(infos: Dict[int, Any]) -> List[Tuple[int, InfoMismatch]]:
        """Of a round's infos (env -> info), those with a key that is not a
        str, as ``(env, error)``."""
        bad = []
        for i, info in infos.items():
            # The key types collected in C (no Python loop per key); str subclasses pass too.
            if not {*map(type, info)} <= _STR and not all(isinstance(k, str) for k in info):
                bad.append((i, _mismatch(info, i, "step() or reset()")))
        return bad


def info_snapshot(info: Any) -> Any:
    """A copy of ``info`` that a later ``reset()`` of its env cannot change:
    a deep copy, or where a value cannot be deep-copied (a lock, a handle) a
    copy of the dict, whose values keep what they were when it was taken.
    gymnasium's ``SyncVectorEnv`` batches the terminal step's info before its
    reset (gymnasium PR #1680); this gives the workers the same result."""
    try:
        return copy.deepcopy(info)
    except Exception:
        return dict(info) if isinstance(info, dict) else info


def with_pickled(info: Any, pickled: Any, final_pickled: Any) -> Any:
    """``info`` with the pickled observation leaves added (see PICKLED_OBS_KEY)."""
    if pickled is None and final_pickled is None:
        return info
    info = dict(info)
    if pickled is not None:
        info[PICKLED_OBS_KEY] = pickled
    if final_pickled is not None:
        info[PICKLED_FINAL_KEY] = final_pickled
    return info


# ---------------------------------------------------------------- info rows
# Each env has one row of INFO_ROW_BYTES in the shared block
# (vecenv._layout.BlockLayout.info_offset). A worker writes an env's info
# there when every value is a number (bool, int, float, a NumPy number
# scalar), a NumPy array of numbers, or a dict of those (nested by path), and
# it fits; it then publishes the env with Status.SHARED_INFO and sends nothing
# on its pipe. The row: ``<IIQ`` (the schema's length, the values' offset in
# the row, the schema's digest), the schema (a pickled tuple describing each
# value: its path, its kind and its type, dtype or shape), the values (the
# scalars packed with one ``struct`` format, then each array's bytes, 8-byte
# aligned). Every row carries its own schema, so the parent needs no earlier
# message to read it (a Ctrl-C, a restart or an unread round loses nothing)
# and an env's info layout may change from one step to the next: the worker
# writes a schema into a row only when it changes, and the parent unpickles
# each schema once (it knows a schema by its length and digest).
# Anything else (a str, None, a list, an object, a subclass of a number, a
# value out of int64's range, a row too small) goes pickled on the pipe as
# before, for that env and step only.

INFO_ROW_BYTES = 1024
_HEAD = struct.Struct("<IIQ")
_SCALAR, _ARRAY, _DICT = 0, 1, 2
_SIZED = {"i": "bhiq", "u": "BHIQ", "f": "-efd"}  # struct codes by log2(itemsize); -: none
_CACHED = 4096  # layouts kept per InfoRows (an env that never repeats one stays bounded)


def _struct_code(dtype: np.dtype) -> Optional[str]:
    if dtype.kind == "b":
        return "?"
    codes = _SIZED.get(dtype.kind)
    size = {1: 0, 2: 1, 4: 2, 8: 3}.get(dtype.itemsize)
    if codes is None or size is None or codes[size] == "-":
        return None
    return codes[size]


# The exact scalar types a row holds, with their struct code (subclasses go pickled).
_CODES: Dict[type, str] = {bool: "?", int: "q", float: "d"}
for _t in set(np.sctypeDict.values()):
    if issubclass(_t, (np.bool_, np.number)):
        _code = _struct_code(np.dtype(_t))
        if _code is not None:
            _CODES[_t] = _code
_ARRAY_KINDS = frozenset("biufc")
# The compiled round's way to write each scalar type (csrc/_round.pxi _INFO_*):
# a double, an int64 (an int out of range: the info goes pickled), a bool's
# byte, or the NumPy scalar's own bytes.
_C_NUMPY = 3
_C_KIND = {float: 0, np.float64: 0, int: 1, bool: 2}
_READ_KIND = {float: 0, int: 1, bool: 2}  # the parent makes these, NumPy's from their bytes


class _Plan:
    """How one info layout is written and read: built from an info (worker)
    or from its schema (parent)."""

    def __init__(self, schema: tuple):
        self.schema = schema
        self.blob = pickle.dumps(schema, protocol=pickle.HIGHEST_PROTOCOL)
        self.digest = int.from_bytes(hashlib.blake2b(self.blob, digest_size=8).digest(), "little")
        scalars = [e for e in schema if e[1] == _SCALAR]
        self.scalars = struct.Struct("<" + "".join(_CODES[e[2]] for e in scalars))
        self.values_at = (_HEAD.size + len(self.blob) + 7) & ~7
        at = self.values_at + self.scalars.size
        self.arrays = []  # (offset in the row, dtype, shape, count)
        for e in schema:
            if e[1] == _ARRAY:
                at = (at + 7) & ~7
                dtype = np.dtype(e[2])
                count = int(np.prod(e[3], dtype=np.int64))
                self.arrays.append((at, dtype, e[3], count))
                at += dtype.itemsize * count
        self.nbytes = at
        self.flat = all(e[1] != _DICT for e in schema)
        self.keys = tuple(e[0][0] for e in schema) if self.flat else ()
        self.types = [e[2] for e in scalars]
        # What the compiled round writes without Python (csrc/_round.pxi
        # WorkerRound._write_info): a flat info of scalars, little-endian.
        self.c_form = None
        if self.flat and not self.arrays and sys.byteorder == "little":
            kinds = bytes(_C_KIND.get(t, _C_NUMPY) for t in self.types)
            offsets, at = [], self.values_at
            for t in self.types:
                offsets.append(at)
                at += struct.calcsize("<" + _CODES[t])
            self.c_form = (self.keys, tuple(self.types), kinds, tuple(offsets))
        # What the compiled read builds (csrc/_infos.pxi read_info_row).
        self.c_read = None
        if self.c_form is not None:
            made = bytes(_READ_KIND.get(t, _C_NUMPY) for t in self.types)
            dtypes = tuple(None if t in _READ_KIND else np.dtype(t) for t in self.types)
            self.c_read = (self.keys, made, self.c_form[3], dtypes)

    def read(self, rows: Any, base: int) -> Dict[str, Any]:
        # Nested or with arrays (a flat info of scalars is read by c_read).
        values = self.scalars.unpack_from(rows, base + self.values_at)
        scalars = iter([t(v) for t, v in zip(self.types, values)])
        arrays = iter(
            np.frombuffer(rows, dtype, count, base + at).reshape(shape).copy()
            for at, dtype, shape, count in self.arrays
        )
        info: Dict[str, Any] = {}
        for path, kind, *_ in self.schema:
            value = next(scalars) if kind == _SCALAR else next(arrays) if kind == _ARRAY else {}
            node = info
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = value
        return info


def _schema(info: dict, path: tuple, out: list, values: list) -> bool:
    """Describe ``info``'s values into ``out`` (and collect them into
    ``values``); False if one cannot be held in a row."""
    for k, v in info.items():
        t = type(v)
        p = (*path, k)
        if t in _CODES:
            out.append((p, _SCALAR, t))
            values.append(v)
        elif t is np.ndarray:
            if v.dtype.kind not in _ARRAY_KINDS or not v.dtype.isnative:
                return False
            out.append((p, _ARRAY, v.dtype.str, v.shape))
            values.append(v)
        elif t is dict:
            out.append((p, _DICT))
            if not _schema(v, p, out, values):
                return False
        else:
            return False
    return True


def fits_row(info: Any) -> bool:
    """True when :meth:`InfoRows.write` holds ``info`` in a row (it is not pickled)."""
    schema: list = []
    values: list = []
    if type(info) is not dict or not _schema(info, (), schema, values):
        return False
    if any(type(v) is int and not -(2**63) <= v < 2**63 for v in values):
        return False
    return _Plan(tuple(schema)).nbytes <= INFO_ROW_BYTES


class InfoRows:
    """The block's info rows of envs ``[lo, hi)``: :meth:`write` (a worker)
    and :meth:`read` (the parent). See the comment above."""

    def __init__(self, block: Any, offset: int, lo: int, hi: int):
        n = INFO_ROW_BYTES * (hi - lo)
        self.rows: Any = np.frombuffer(block, np.uint8, n, offset + INFO_ROW_BYTES * lo)
        self.lo = lo
        self._fast: Dict[tuple, Any] = {}  # (keys, types) of a flat info -> _Plan or None
        self._plans: Dict[Any, Any] = {}  # a schema (worker) or (length, digest) -> _Plan
        self._written: List[Any] = [None] * (hi - lo)  # the plan whose schema each row holds
        self.forms: Dict[int, tuple] = {}  # parent: a schema's digest -> its compiled read

    @classmethod
    def attach(cls, layout: Any, block: Any, lo: int, hi: int) -> Optional[InfoRows]:
        """The rows of ``[lo, hi)``; None when the layout has none."""
        return cls(block, layout.info_offset, lo, hi) if layout.info_offset else None

    def close(self) -> None:
        """Drop the view of the block (before it is unmapped)."""
        self.rows = None

    def _plan(self, info: dict) -> Tuple[Any, Any]:
        keys, types = tuple(info), tuple(map(type, info.values()))
        plan = self._fast.get((keys, types), False)
        if plan is not False:
            return plan, info.values()
        schema: list = []
        values: list = []
        plan = None
        if _schema(info, (), schema, values):
            key = tuple(schema)
            plan = self._plans.get(key)
            if plan is None:
                plan = _Plan(key)
                if plan.nbytes > INFO_ROW_BYTES:
                    plan = None
                if len(self._plans) < _CACHED:
                    self._plans[key] = plan
        if all(t in _CODES for t in types) and len(self._fast) < _CACHED:
            self._fast[(keys, types)] = plan
        return plan, values

    def write(self, i: int, info: dict) -> bool:
        """Write env ``i``'s info into its row; False (nothing the parent
        reads is written) when it does not fit one."""
        if type(info) is not dict:
            return False  # a subclass keeps its type through the pipe
        plan, values = self._plan(info)
        if plan is None:
            return False
        k = i - self.lo
        rows, base = self.rows, INFO_ROW_BYTES * k
        # _written[k] names the row's layout only while the row holds it
        # whole: cleared before a new schema or any value goes in, set after,
        # so an interrupt anywhere between (a Ctrl-C in the caller's share)
        # leaves no layout for the compiled round to write into.
        written, self._written[k] = self._written[k], None
        try:
            if written is not plan:
                blob = plan.blob
                rows[base + _HEAD.size : base + _HEAD.size + len(blob)] = np.frombuffer(
                    blob, np.uint8
                )
                _HEAD.pack_into(rows, base, len(blob), plan.values_at, plan.digest)
            if plan.arrays:
                plan.scalars.pack_into(
                    rows, base + plan.values_at, *[v for v in values if type(v) is not np.ndarray]
                )
                arrays = [v for v in values if type(v) is np.ndarray]
                for (at, dtype, shape, count), a in zip(plan.arrays, arrays):
                    np.frombuffer(rows, dtype, count, base + at).reshape(shape)[...] = a
            else:
                plan.scalars.pack_into(rows, base + plan.values_at, *values)
        except (struct.error, OverflowError, ValueError):
            return False  # an int out of range: this step's info goes pickled
        self._written[k] = plan
        return True

    def read(self, i: int) -> Dict[str, Any]:
        """Env ``i``'s info from its row (the worker published it with
        Status.SHARED_INFO)."""
        rows, base = self.rows, INFO_ROW_BYTES * (i - self.lo)
        size, _, digest = key = _HEAD.unpack_from(rows, base)
        plan = self._plans.get(key)
        if plan is None:
            blob = rows[base + _HEAD.size : base + _HEAD.size + size].tobytes()
            plan = _Plan(pickle.loads(blob))
            if len(self._plans) < _CACHED and plan.digest == digest:
                self._plans[key] = plan
        if plan.c_read is not None:
            if len(self.forms) < _CACHED and plan.digest == digest:
                self.forms[digest] = plan.c_read  # read_many builds it in C from now on
            return _core.read_info_row(rows, base, plan.c_read)
        return plan.read(rows, base)

    def read_many(self, envs: List[int]) -> Dict[int, Dict[str, Any]]:
        """``{env: info}`` for ``envs`` (each published with Status.SHARED_INFO)."""
        return _core.read_info_rows(self.rows, INFO_ROW_BYTES, self.lo, envs, self.forms, self.read)

    def take(self, infos: Dict[int, Any], done_envs: List[int], statuses: List[int]) -> None:
        """Write the round's infos that fit into their rows: each leaves
        ``infos`` and its env's status becomes SHARED_INFO."""
        where = None
        for i in list(infos):
            if self.write(i, infos[i]):
                del infos[i]
                if where is None:
                    where = {e: j for j, e in enumerate(done_envs)}
                statuses[where[i]] = _SHARED_INFO


# ---------------------------------------------------------------- gymnasium's batch
_GYM_SCALARS = frozenset(
    {int, float, bool} | {t for t in set(np.sctypeDict.values()) if issubclass(t, np.number)}
)


def gym_infos(infos: List[Dict[str, Any]], num_envs: int) -> Optional[Dict[str, Any]]:
    """gymnasium's dict of arrays with ``_key`` masks for ``infos`` (one per
    env), built a key at a time, or None where :meth:`VectorEnv._add_info
    <gymnasium.vector.VectorEnv._add_info>` must build it an env at a time.

    Only the common case is taken: flat infos of scalars (an int, float,
    bool or NumPy number; ``np.bool_`` is an object in gymnasium's rules),
    each key of one type in every env that has it, no key ``final_obs`` and
    none that starts with ``_`` (a mask's name). It gives what ``_add_info``
    gives (the same keys in the same order, ``np.zeros(num_envs, type)``
    filled at the envs that have the key, its bool mask), and raises what it
    raises for an int beyond int64 (OverflowError).
    """
    columns: Dict[str, Any] = {}  # key -> [type, envs, values]
    for i, info in enumerate(infos):
        if not info:
            continue
        if type(info) is not dict:
            return None
        for key, value in info.items():
            t = type(value)
            column = columns.get(key)
            if column is None:
                if t not in _GYM_SCALARS or type(key) is not str or key[:1] == "_":
                    return None
                if key == "final_obs":
                    return None
                columns[key] = [t, [i], [value]]
            elif column[0] is not t:
                return None
            else:
                column[1].append(i)
                column[2].append(value)
    out: Dict[str, Any] = {}
    for key, (t, envs, values) in columns.items():
        if len(envs) == num_envs:
            out[key] = np.array(values, dtype=t)
            out["_" + key] = np.ones(num_envs, dtype=np.bool_)
        else:
            array = np.zeros(num_envs, dtype=t)
            array[envs] = np.array(values, dtype=t)
            mask: Any = np.zeros(num_envs, dtype=np.bool_)
            mask[envs] = True
            out[key], out["_" + key] = array, mask
    return out
