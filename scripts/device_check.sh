#!/usr/bin/env bash
# The device checks of issues 23 and 25, as one prepared run for a lent GPU
# machine (16 cores, one NVIDIA GPU, no network; its python3 is CPython 3.12 on
# x86-64 and holds PyTorch and NumPy, but not gymnasium or ale-py):
#   1. benchmarks/transfer.py: a Pong x16 batch to the GPU from the page-locked
#      shared block against pageable memory, and the loop with the policy on the GPU;
#   2. benchmarks/scaling.py: the many-core curve (1 to 16 workers, Pong x64 and
#      CartPole x256, gymnasium's AsyncVectorEnv beside, the ideal).
#
# Two steps:
#   bash scripts/device_check.sh --prepare   # here, with network and pyenv's 3.12:
#                                            # vecenv built as a cp312 wheel, and the
#                                            # wheels the machine lacks, into .whl/
#                                            # (git-ignored), with the commit they are of
#   bash scripts/device_check.sh             # there (carry .whl): install, run;
#                                            # results in $OUT (default ./device-out)
# Each run has its own time limit and a failing one does not stop the other:
# transfer about 2 minutes, scaling at most 6; about 9 in all with the installs.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# envpool is not among them: with the assets it imports it is over 100 MB, more
# than one call carries (64 MiB with the tree); scaling.py then notes it as skipped.
WHEELS=(gymnasium==1.4.0 farama-notifications==0.0.4 ale-py==0.12.1 cloudpickle==3.1.2
  typing-extensions==4.15.0)
if [ "${1:-}" = "--prepare" ]; then
  set -e
  py312=$(pyenv prefix 3.12 2>/dev/null)/bin/python ||
    py312=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python | tail -1)
  "$py312" -c 'import sys; assert sys.version_info[:2] == (3, 12)'
  rm -rf .whl
  mkdir .whl
  "$py312" -m pip wheel -q --no-deps -w .whl .  # vecenv, compiled here for cp312
  for w in "${WHEELS[@]}"; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 -d .whl "$w"
  done
  git rev-parse HEAD >.whl/COMMIT
  git status --porcelain --untracked-files=no | grep -q . && echo dirty >>.whl/COMMIT
  du -sh .whl
  exit 0
fi
OUT="${OUT:-$ROOT/device-out}"
mkdir -p "$OUT"
if ! ls .whl/vecenv-*-cp312-*.whl >/dev/null 2>&1; then
  echo "device_check.sh: no .whl/vecenv-*-cp312-*.whl: run 'bash scripts/device_check.sh --prepare' here first and carry .whl" >&2
  exit 2
fi
python3 -c 'import platform, sys; assert sys.version_info[:2] == (3, 12) and platform.machine() == "x86_64", sys.version' ||
  { echo "device_check.sh: the wheels are for CPython 3.12 on x86-64" >&2; exit 2; }
export PYTHONUNBUFFERED=1
site=/tmp/vecenv-site
rm -rf "$site"  # a rerun on a warm machine installs this tree's wheels, not the last ones
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl || exit 1
export PYTHONPATH="$site"
cp .whl/COMMIT "$OUT/commit.txt"
nproc | tee "$OUT/cores.txt"
cat /sys/fs/cgroup/cpu.max >>"$OUT/cores.txt" 2>/dev/null || true
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.csv" || true
cd /tmp  # the installed vecenv, not the source tree
status=0
timeout 180 python3 -P "$ROOT/benchmarks/transfer.py" --device cuda --out "$OUT/transfer.json" \
  2>&1 | tee "$OUT/transfer.log" || status=1
timeout 360 python3 -P "$ROOT/benchmarks/scaling.py" --out "$OUT/scaling.json" \
  2>&1 | tee "$OUT/scaling.log" || status=1
exit $status
