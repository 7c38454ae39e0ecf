"""The abstract vectorized-env API (parent side).

The interface of OpenAI baselines' ``VecEnv`` (see ``ShmemVecEnv`` in
baselines' ``vec_env``), extended with what stable-baselines3 users expect
(``seed``, ``env_method``, ``get_attr``, ``set_attr``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from vecenv.errors import InvalidArgumentError

Indices = Union[None, int, Sequence[int]]
#: A seed for every env: an int (env ``i`` gets ``seed + i``), one per env, or None.
Seeds = Union[int, Sequence[Optional[int]], None]
#: An env factory: called with no arguments in a worker, returns the env.
EnvFactory = Callable[[], Any]


class VecEnv(ABC):
    """A batch of ``num_envs`` environments stepped together.

    Attributes
    ----------
    num_envs : int
        Number of environments.
    observation_space, action_space : gymnasium.spaces.Space
        The spaces of one environment (not batched), as in baselines.
    """

    def __init__(self, num_envs: int, observation_space, action_space):
        self.num_envs = num_envs
        self.observation_space = observation_space
        self.action_space = action_space

    @abstractmethod
    def reset(self):
        """Reset every env; return the batch of first observations."""

    @abstractmethod
    def step_async(self, actions) -> None:
        """Start a step of every env with ``actions`` (one per env)."""

    @abstractmethod
    def step_wait(self):
        """Wait for the step started by :meth:`step_async`; return
        ``(observations, rewards, dones, infos)``."""

    @abstractmethod
    def close(self) -> None:
        """Release every resource. Safe to call more than once."""

    @abstractmethod
    def get_images(self) -> List[np.ndarray]:
        """One RGB frame per env, from each env's ``render()``."""

    @abstractmethod
    def env_method(
        self, method_name: str, *method_args, indices: Indices = None, **method_kwargs
    ) -> List[Any]:
        """Call ``method_name`` on the envs ``indices``; return their results."""

    @abstractmethod
    def get_attr(self, attr_name: str, indices: Indices = None) -> List[Any]:
        """Return attribute ``attr_name`` of the envs ``indices``."""

    @abstractmethod
    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        """Set attribute ``attr_name`` to ``value`` on the envs ``indices``."""

    @abstractmethod
    def seed(self, seed: Optional[int] = None) -> List[Optional[int]]:
        """Seed env ``i`` with ``seed + i`` at the next :meth:`reset`."""

    def step(self, actions):
        """Step every env with ``actions``: :meth:`step_async` then :meth:`step_wait`."""
        self.step_async(actions)
        return self.step_wait()

    def render(self, mode: str = "rgb_array"):
        """Render every env and tile the frames into one image.

        Parameters
        ----------
        mode : {"rgb_array"}
            Only ``"rgb_array"`` is supported: the envs must have been made
            with ``render_mode="rgb_array"``.

        Returns
        -------
        numpy.ndarray, shape (H * rows, W * cols, 3), uint8
            The frames of all envs on a near-square grid, row-major.
        """
        if mode != "rgb_array":
            raise InvalidArgumentError(f"render(mode={mode!r}): only mode='rgb_array' is supported")
        return tile_images(self.get_images())

    def allow_steps_before_reset(self) -> None:
        """Let the first ``step_async`` come before any reset, as gymnasium's
        and SB3's vector envs do (their drop-ins call this right after
        construction). This default keeps asking for a reset first."""
        return None

    @property
    def unwrapped(self) -> VecEnv:
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def tile_images(images: Sequence[np.ndarray]) -> np.ndarray:
    """Tile N images of equal shape (H, W, C) on a near-square grid.

    Returns an array of shape (H * rows, W * cols, C) with ``cols =
    ceil(sqrt(N))``; missing cells are black. Raises InvalidArgumentError (a
    ValueError) on no images, a None (naming the envs, by position) or
    unequal shapes (naming the envs of each shape).
    """
    imgs = check_frames(images)
    n = len(imgs)
    h, w, c = imgs[0].shape
    cols = int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / cols))
    grid = np.zeros((rows * cols, h, w, c), dtype=imgs[0].dtype)
    grid[:n] = imgs
    return grid.reshape(rows, cols, h, w, c).transpose(0, 2, 1, 3, 4).reshape(rows * h, cols * w, c)


def check_frames(images: Sequence[Any]) -> List[np.ndarray]:
    """The frames of ``render()``, one per env, as arrays of one (H, W, C) shape.

    Raises
    ------
    InvalidArgumentError
        No frames, an env whose frame is None (naming the envs, by
        position), frames that are not (H, W, C), or shapes that differ
        (naming the envs of each shape).
    """
    images = list(images)
    if not images:
        raise InvalidArgumentError("render needs one (H, W, C) frame per env; got no frames")
    missing = [i for i, img in enumerate(images) if img is None]
    if missing:
        raise InvalidArgumentError(
            f"render needs one (H, W, C) frame per env; env(s) {missing} returned None from "
            "render() (envs built without render_mode='rgb_array' return None)"
        )
    imgs = [np.asarray(img) for img in images]
    flat = [i for i, img in enumerate(imgs) if img.ndim != 3]
    if flat:
        raise InvalidArgumentError(
            f"render needs one (H, W, C) frame per env; env(s) {flat} returned arrays of "
            f"shape {[imgs[i].shape for i in flat]}"
        )
    if any(img.shape != imgs[0].shape for img in imgs):
        by_shape: Dict[Tuple[int, ...], List[int]] = {}
        for i, img in enumerate(imgs):
            by_shape.setdefault(img.shape, []).append(i)
        raise InvalidArgumentError(
            "render tiles frames of one shape; they differ: "
            + "; ".join(f"envs {ids}: {shape}" for shape, ids in by_shape.items())
        )
    return imgs


def check_env_ids(env_ids, num_envs: int) -> np.ndarray:
    """``send``'s ``env_ids`` checked: all envs for None, else a 1-D int64
    array of distinct indices in ``[0, num_envs)`` (order kept).

    Raises
    ------
    InvalidArgumentError
        Not a 1-D array of ints, an index out of range, or duplicates.
    """
    if env_ids is None:
        return np.arange(num_envs, dtype=np.int64)
    ids = np.asarray(env_ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise InvalidArgumentError(
            f"env_ids must be a 1-D array of ints, got {ids.dtype} shape {ids.shape}"
        )
    ids = ids.astype(np.int64, copy=False)
    if ids.size and (ids.min() < 0 or ids.max() >= num_envs):
        raise InvalidArgumentError(f"env_ids must be in [0, {num_envs}), got {ids.tolist()}")
    if np.unique(ids).size != ids.size:
        raise InvalidArgumentError(f"env_ids has duplicates: {ids.tolist()}")
    return ids


def check_batch_size(batch_size, num_envs: int) -> int:
    """``batch_size`` checked: num_envs for None, else an int in ``[1, num_envs]``.

    Raises
    ------
    InvalidArgumentError
        Not an int, or out of range.
    """
    if batch_size is None:
        return num_envs
    if (
        not isinstance(batch_size, (int, np.integer))
        or isinstance(batch_size, bool)
        or not 1 <= batch_size <= num_envs
    ):
        raise InvalidArgumentError(
            f"batch_size must be an int in [1, num_envs={num_envs}], got {batch_size!r}"
        )
    return int(batch_size)
