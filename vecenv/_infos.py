"""What the engine does to an env's info dicts (runs in the workers, and in
the calling process for in-process envs and the caller's share).

:func:`info_snapshot` keeps an info from being changed by its env's next
``reset()``: an env may reuse one dict (or array) for every step and reset,
and an info that crosses the process boundary is pickled only when its
round is published, after the automatic reset that ends an episode.
"""

from __future__ import annotations

import copy
from typing import Any


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
