"""Episode statistics computed where the envs run (worker and parent sides).

With the engine option ``episode_statistics=True`` the shared block holds
three more per-env arrays (:meth:`vecenv._layout.BlockLayout.episode_views`):
the return (float64), length (int64) and duration (float64, seconds) of each
env's last finished episode. Two parts use them:

- :class:`EpisodeTracker`, in the worker (a ``_Loop`` holds one; the compiled
  round reads and writes the same arrays through raw pointers): the running
  return, length and start time of each of the worker's envs, private to the
  worker. Every env-step adds its reward (the float64 written to the reward
  row) and 1; a reset op, explicit or automatic, starts the episode afresh
  (sums 0, clock now), so the step that performs a ``next_step`` reset is no
  env-step of the new episode, as in gymnasium's ``RecordEpisodeStatistics``.
- :class:`EpisodeReport`, in the parent (the Collector holds one): the envs
  whose done flag is set in a collected batch get ``info["episode"] =
  {"r": float, "l": int, "t": float}`` from the finals.

Protocol: only the worker hosting an env writes its three finals, in the
env-step that ends its episode (termination or truncation), after its reward
and flags and before the round publishes the env; publishing fences before
the ready byte, so the parent, which reads them only for an env it collected
with its done flag set, sees the finals of that very episode. Nothing else
crosses the process boundary: no message, no pickling.

The clock is ``CLOCK_MONOTONIC`` (``time.monotonic`` here, ``ve_now`` in the
compiled round), so a start taken by one path and an end by the other agree.
A duration runs from the end of the reset that began the episode (in the
worker) to the end of the env-step that ended it, the automatic reset of
"sb3" and "same_step" autoreset included, as gymnasium's wrapper measures it
from the parent.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Collection, Dict, List, Optional, Sequence, Tuple

import numpy as np

#: The info key of a finished episode's statistics (gymnasium's and SB3's).
EPISODE_KEY = "episode"

_clock = time.monotonic  # CLOCK_MONOTONIC, as the compiled round's ve_now()


class EpisodeTracker:
    """Worker side: the running statistics of the envs ``[lo, hi)``.

    Parameters
    ----------
    finals : sequence of 3 numpy.ndarray
        The block's views (``BlockLayout.episode_views``): returns float64,
        lengths int64, durations float64, each of shape (num_envs,),
        C-contiguous, in shared memory. Rows ``[lo, hi)`` are this worker's.
    lo, hi : int
        The worker's envs.

    Attributes
    ----------
    returns, lengths, starts : numpy.ndarray
        The running return (float64), length (int64) and start time
        (float64, ``time.monotonic`` seconds) of env ``lo + k`` at ``[k]``;
        shape (hi - lo,), owned by the tracker (never shared), also written
        by the compiled round.
    """

    def __init__(self, finals: Sequence[np.ndarray], lo: int, hi: int):
        self.final_returns, self.final_lengths, self.final_times = finals
        n = hi - lo
        self.returns: np.ndarray = np.zeros(n, np.float64)
        self.lengths: np.ndarray = np.zeros(n, np.int64)
        self.starts: np.ndarray = np.full(n, _clock(), np.float64)
        for buf in finals:  # pre-fault this worker's rows
            buf[lo:hi] = 0

    @classmethod
    def attach(cls, layout: Any, block: Any, lo: int, hi: int) -> Optional[EpisodeTracker]:
        """The tracker of the envs ``[lo, hi)`` over ``block``, or None when
        its ``layout`` has no episode arrays (the option is off)."""
        finals = layout.episode_views(block)
        return cls(finals, lo, hi) if finals else None

    def buffers(self) -> Tuple[np.ndarray, ...]:
        """``(returns, lengths, starts, final_returns, final_lengths,
        final_times)``: what the compiled round writes through."""
        return (
            self.returns,
            self.lengths,
            self.starts,
            self.final_returns,
            self.final_lengths,
            self.final_times,
        )

    def restart(self, k: int) -> None:
        """Env ``lo + k`` was reset: a new episode starts now."""
        self.returns[k] = 0.0
        self.lengths[k] = 0
        self.starts[k] = _clock()

    def step(self, i: int, k: int, reward: float, done: bool) -> None:
        """Env ``i`` (``lo + k``) made an env-step of ``reward`` (the float64
        in its reward row); ``done``: it ended the episode, whose finals are
        written into the block (before the env is published) and which
        restarts."""
        self.returns[k] += reward
        self.lengths[k] += 1
        if done:
            now = _clock()
            self.final_returns[i] = self.returns[k]
            self.final_lengths[i] = self.lengths[k]
            self.final_times[i] = now - self.starts[k]
            self.returns[k] = 0.0
            self.lengths[k] = 0
            self.starts[k] = now


class EpisodeReport:
    """Parent side: the finished episodes of a collected batch, as infos.

    Parameters
    ----------
    finals : sequence of 3 numpy.ndarray
        The block's views (``BlockLayout.episode_views``), shape (num_envs,):
        returns float64, lengths int64, durations float64 (seconds).
    """

    def __init__(self, finals: Sequence[np.ndarray]):
        self.returns, self.lengths, self.times = finals

    def add(
        self, ended: Any, positions: Any, infos: List[Dict[str, Any]], skip: Collection[int] = ()
    ) -> None:
        """Give each env ``ended[j]`` (its done flag is set in this batch;
        its result is ``infos[positions[j]]``) ``{"r": return, "l": length,
        "t": duration}`` (Python float, int, float rounded to 6 decimals, as
        gymnasium rounds it) under ``"episode"``, as SB3's ``VecMonitor``
        writes it (whose ``"t"`` the SB3 drop-in makes its own, see
        :func:`monitor_times`). The envs in ``skip`` (restarted: their
        episode died with their worker) get none."""
        if not len(ended):
            return
        returns = self.returns[ended].tolist()
        lengths = self.lengths[ended].tolist()
        times = np.round(self.times[ended], 6).tolist()
        for i, pos, r, n, t in zip(np.asarray(ended).tolist(), positions, returns, lengths, times):
            if i not in skip:
                infos[pos][EPISODE_KEY] = {"r": r, "l": n, "t": t}


def monitor_times(infos: List[Dict[str, Any]], t_start: float) -> None:
    """SB3's ``VecMonitor`` meaning of ``"t"``: the ``time.time()`` seconds
    since ``t_start`` (when the vec env was built) at the step that reports
    the episode, rounded to 6 decimals, for every info with an episode."""
    now = None
    for info in infos:
        episode = info.get(EPISODE_KEY)
        if episode is not None:
            if now is None:
                now = round(time.time() - t_start, 6)
            episode["t"] = now


def batch_episodes(
    batch: Callable[[List[Dict[str, Any]]], Dict[str, Any]],
    dones: np.ndarray,
    infos: List[Dict[str, Any]],
) -> Dict[str, Any]:
    """``batch(infos)`` (the gymnasium drop-in's batching of per-env infos)
    with each ended env's ``"episode"`` taken out of its info first and
    added last, batched as gymnasium's vector ``RecordEpisodeStatistics``
    adds it (see :func:`pop_batched`). ``dones``: bool, shape (num_envs,)."""
    episodes = pop_batched(infos, dones)
    out = batch(infos)
    if episodes is not None:
        out[EPISODE_KEY], out["_" + EPISODE_KEY] = episodes
    return out


def pop_batched(
    infos: List[Dict[str, Any]], dones: np.ndarray
) -> Optional[Tuple[Dict[str, np.ndarray], np.ndarray]]:
    """Move the ``"episode"`` entries out of the per-env ``infos`` (envs
    whose ``dones``, bool (num_envs,), is set) into gymnasium's batched form:
    ``({"r": float64, "l": int, "t": float64}, mask)``, arrays of shape
    (num_envs,), 0 where no episode ended, as the vector
    ``RecordEpisodeStatistics`` writes ``infos["episode"]`` and
    ``infos["_episode"]``. None when no episode ended."""
    ended = np.flatnonzero(dones)
    if not ended.size:
        return None
    episodes = {}
    for i in ended.tolist():
        episode = infos[i].pop(EPISODE_KEY, None)
        if episode is not None:
            episodes[i] = episode
    return batch_rows(episodes, len(infos)) if episodes else None


def batch_rows(
    episodes: Dict[int, Dict[str, Any]], n: int
) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
    """``{row: {"r", "l", "t"}}`` as gymnasium's vector
    ``RecordEpisodeStatistics`` batches them over ``n`` rows: ``({"r":
    float64, "l": int, "t": float64}, mask)``, arrays of shape (n,), 0 where
    no episode ended."""
    r: np.ndarray = np.zeros(n, np.float64)
    t: np.ndarray = np.zeros(n, np.float64)
    lengths: np.ndarray = np.zeros(n, dtype=int)  # np.int_, as the wrapper's
    mask: np.ndarray = np.zeros(n, dtype=bool)
    for i, episode in episodes.items():
        r[i], lengths[i], t[i] = episode["r"], episode["l"], episode["t"]
        mask[i] = True
    return {"r": r, "l": lengths, "t": t}, mask
