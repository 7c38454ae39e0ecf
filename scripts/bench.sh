#!/usr/bin/env bash
# Install what the benchmark suite needs into the current Python, then run it.
# Arguments go to benchmarks/run.py, e.g.
#   bash scripts/bench.sh                       # the default suite (it prints its estimate, about 14 min on 2 cores),
#                                               # then the rollout benchmark (it prints its estimate, about 9 min)
#   bash scripts/bench.sh --quick               # a smoke test of both (about 15 s)
#   bash scripts/bench.sh --envs noop,cartpole --num-envs 8,16
# PYTHON picks the interpreter (default python3); VECENV_BENCH_NO_INSTALL=1
# skips the installs. Results: benchmarks/results/local/ (git-ignored; --out to
# choose, --publish for the committed benchmarks/results/latest.json and .png).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_python.sh  # sets PY: PYTHON, python3, or a .venv where python3 is externally managed
if [ "${VECENV_BENCH_NO_INSTALL:-0}" != "1" ]; then
  # stable-baselines3 pulls in PyTorch: take the CPU build first so pip does not
  # fetch a multi-gigabyte CUDA one.
  "$PY" -m pip install -q "torch==2.13.0"
  # vecenv itself (builds the extension), ale-py, matplotlib, rich, psutil, SB3.
  "$PY" -m pip install -q ".[bench,sb3]"
  # Optional peers and envs, at the versions the published figures were run with
  # (2026-12-07): the suite skips them with a note when they are missing.
  "$PY" -m pip install -q "envpool==1.2.5" ||
    echo "bench.sh: envpool did not install; its contenders will be skipped" >&2
  # gymnasium's AtariPreprocessing (the rollout benchmark's Pong cell) needs OpenCV.
  "$PY" -m pip install -q "opencv-python-headless==5.1.0.95" ||
    echo "bench.sh: opencv did not install; the rollout benchmark will skip Pong" >&2
  "$PY" -m pip install -q ".[mujoco]" "mujoco==4.0.1" ||
    echo "bench.sh: mujoco did not install; HalfCheetah-v5 will be skipped" >&2
  # The multi-agent cells: PettingZoo, mpe2's simple_spread, and the peers
  # SuperSuit and PufferLib 3 (pufferlib-core pins another torch: --no-deps).
  "$PY" -m pip install -q ".[pettingzoo]" "mpe2==1.1.1" supersuit ||
    echo "bench.sh: pettingzoo/mpe2/supersuit did not install; multi-agent cells may be skipped" >&2
  "$PY" -m pip install -q --no-deps "pufferlib-core==3.0.23" ||
    echo "bench.sh: pufferlib-core did not install; its multi-agent contenders will be skipped" >&2
fi
# A script's own folder (benchmarks/) heads sys.path, not the source tree: the
# suite measures the installed vecenv.
if [ "$#" -eq 0 ] || [ "$*" = "--quick" ]; then
  "$PY" benchmarks/run.py "$@" --then-rollout  # its first line: the whole job's estimate
else
  "$PY" benchmarks/run.py "$@"
fi
# The rollout benchmark (benchmarks/rollout.py: the vec envs inside a PPO loop,
# the policy in torch on one thread): after the default suite, and after --quick
# as its smoke test; other arguments are run.py's alone.
if [ "$#" -eq 0 ]; then
  "$PY" benchmarks/rollout.py
elif [ "$*" = "--quick" ]; then
  "$PY" benchmarks/rollout.py --quick
fi
say_where
