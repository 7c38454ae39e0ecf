"""Helpers shared by the drop-in tests (tests/test_dropin_*.py)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


def describe(x):
    """Type and value of an action as an env received it, recursively (tuple
    and dict structure kept), comparable across processes."""
    if isinstance(x, tuple):
        return tuple(describe(v) for v in x)
    if isinstance(x, dict):
        return {k: describe(v) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        return ("ndarray", str(x.dtype), x.tolist())
    return (type(x).__name__, x.item() if isinstance(x, np.generic) else x)


class WordSpace(gym.Space):
    """A custom space of strings: no fixed layout, so its values travel pickled."""

    def sample(self, mask=None, probability=None):
        return "w"

    def contains(self, x):
        return isinstance(x, str)

    def __eq__(self, other):
        return isinstance(other, WordSpace)
