#!/usr/bin/env bash
# The device checks of issues 23 and 25, as one prepared run for a lent GPU
# machine (16 cores, one NVIDIA GPU, no network; its python3 holds PyTorch,
# Cython and NumPy but not gymnasium, ale-py or envpool):
#   1. benchmarks/scaling.py: the many-core curve (1 to 16 workers, Pong x64 and
#      CartPole x256, gymnasium's AsyncVectorEnv beside, the ideal);
#   2. benchmarks/transfer.py: a Pong x16 batch to the GPU from the page-locked
#      shared block against pageable memory, and the loop with the policy on the GPU.
#
# Two steps:
#   bash scripts/device_check.sh --prepare   # here, with network: the wheels the
#                                            # machine lacks, into .whl/ (git-ignored
#                                            # through .git/info/exclude)
#   bash scripts/device_check.sh             # there (carry .whl): install, build, run;
#                                            # results in $OUT (default ./device-out)
# It keeps within about 9 minutes: the scaling run first (its own estimate is
# printed), then the transfer run.
set -euo pipefail
cd "$(dirname "$0")/.."
# envpool is not among them: with the assets it imports it is over 100 MB, more
# than one call carries (64 MiB with the tree); scaling.py then notes it as skipped.
WHEELS=(gymnasium==1.4.0 farama-notifications==0.0.4 ale-py==0.12.1 cloudpickle==3.1.2
  typing-extensions==4.15.0)
if [ "${1:-}" = "--prepare" ]; then
  grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
  for w in "${WHEELS[@]}"; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 -d .whl "$w"
  done
  du -sh .whl
  exit 0
fi
OUT="${OUT:-$PWD/device-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
site=/tmp/vecenv-site
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl
export PYTHONPATH="$site"
# vecenv itself, built there (Cython and a compiler are on the machine).
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$site" .
nproc | tee "$OUT/cores.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.csv" || true
cd /tmp  # the installed vecenv, not the source tree
python3 -P "$OLDPWD/benchmarks/scaling.py" --out "$OUT/scaling.json" 2>&1 | tee "$OUT/scaling.log"
python3 -P "$OLDPWD/benchmarks/transfer.py" --device cuda --out "$OUT/transfer.json" 2>&1 |
  tee "$OUT/transfer.log"
