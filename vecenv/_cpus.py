"""The usable CPU cores of this process (parent side, and the benchmarks).

One helper that the worker layout (default ``num_workers``, the auto layout's
cost model, the compiled step's spin rule), the ``vecenv.bench`` CLI and the
benchmark suite share, so that all of them count the same cores.
"""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPU cores this process may run on (>= 1).

    ``len(os.sched_getaffinity(0))`` where the platform has it (Linux: it
    honours ``taskset``, cgroup cpusets and container limits on affinity),
    else ``os.cpu_count()``.
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS
        return os.cpu_count() or 1
