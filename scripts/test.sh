#!/usr/bin/env bash
# Install vecenv with every test extra into the current Python and run the test
# suite against the installed package (not the source tree).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# stable-baselines3 pulls in PyTorch: take the CPU build first so pip does not
# fetch a multi-gigabyte CUDA one.
"$PY" -m pip install -q "torch==2.13.0"
"$PY" -m pip install -q ".[test,sb3,atari,ray,legacy-gym,pettingzoo]"
# -P keeps the source tree off sys.path, so `import vecenv` finds the installed copy.
set +e
VECENV_TEST_PART=no-ray "$PY" -P -m pytest tests "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
# The Ray tests (marker "ray") start real Ray clusters, and Ray binds to the
# machine's network address: run them apart, in a network namespace that holds
# only loopback (unshare -n, as root; the tests bring lo up themselves, so
# iproute2 is not needed). VECENV_TEST_PART picks the part (tests/conftest.py).
if [ "${VECENV_SKIP_RAY_TESTS:-0}" = 1 ]; then
  echo "VECENV_SKIP_RAY_TESTS=1: Ray tests not run" >&2
elif ! unshare -n true 2>/dev/null; then
  echo "cannot create a network namespace (unshare -n needs root), so the Ray tests cannot" \
    "run on loopback only; set VECENV_SKIP_RAY_TESTS=1 to skip them knowingly" >&2
  exit 1
else
  set +e
  VECENV_TEST_PART=ray unshare -n "$PY" -P -m pytest tests "$@"
  ray_rc=$?
  set -e
  # 5: the caller's own selection left no Ray test, which is fine here.
  if [ "$rc" -eq 0 ] && [ "$ray_rc" -ne 5 ]; then
    rc=$ray_rc
  fi
fi
exit "$rc"
