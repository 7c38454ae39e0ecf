#!/usr/bin/env python3
"""vecenv benchmark suite: real environments, vecenv against its peers, one run.

Runs in the parent process only (workers are the contenders' own). For every
environment and every ``num_envs`` it opens each installed contender, warms it
up, then measures all of them in several interleaved rounds (the order rotates
each round) so that noise on a shared machine hits every contender alike. It
reports medians with their spread, ratios against gymnasium's
``AsyncVectorEnv`` and against the ideal (usable cores x one raw env's
steps/s, measured in the same run), a per-batch-step latency for ``noop``
next to the wait/wake floor of a small C program, and the targets of issue 16
as pass/short from the run's own ratios. It ends with what to conclude for this machine:
per env, the fastest contender, the vecenv layout to use, and where
gymnasium's in-process ``SyncVectorEnv`` is as fast or faster.

Usage::

    python benchmarks/run.py                      # the default suite (it states its duration)
    python benchmarks/run.py --quick              # a smoke test (about 10-20 s)
    python benchmarks/run.py --envs noop,cartpole --num-envs 8,16 --contenders vecenv,gym_async
    python benchmarks/run.py --list               # contenders and environments, and what is installed

Writes ``benchmarks/results/local/run-<UTC time>.json``, ``.md`` (a summary) and ``.png`` (git-ignored;
``--out`` to choose, ``--publish`` for the committed ``results/latest.json``).
See ``benchmarks/README.md`` for the method. The code is the package
``benchmarks/suite/``, one module per job (its ``__init__`` lists them); this
file is the entry point.
"""

from __future__ import annotations

import sys
from pathlib import Path

# benchmarks/ (this file's folder) heads sys.path when run as a script, but not
# under ``python -P`` or when a test loads this file: put it there for the
# suite package. Never the checkout's root, whose vecenv/ is unbuilt source:
# the suite measures the installed vecenv.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from suite.command import main  # noqa: E402


def _main(argv) -> int:
    """The suite; with ``--then-rollout`` (scripts/bench.sh, which runs
    benchmarks/rollout.py next) the rollout's estimate counts in the whole
    job's, printed first."""
    if "--then-rollout" not in argv:
        return main(argv)
    import rollout

    argv = [a for a in argv if a != "--then-rollout"]
    after = rollout.estimate_s(["--quick"] if "--quick" in argv else [])
    return main(argv, parts_after={"the rollout benchmark": after})


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
