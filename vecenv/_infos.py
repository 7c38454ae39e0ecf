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
from typing import Any, Collection, Dict, List, Optional, Tuple

from vecenv._protocol import PICKLED_FINAL_KEY, PICKLED_OBS_KEY
from vecenv.errors import InvalidArgumentError

_STR = {str}


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
