#!/usr/bin/env bash
# Install vecenv with its test extras into the current Python and run the test
# suite against the installed package (not the source tree).
#
# The legacy-gym extra (gym 0.26, which makes every later SB3 import print a
# deprecation banner) is not installed here: .ci/run tests it in a venv of its own.
# The Ray tests need a loopback-only network namespace (unshare -n, as root):
# without one they are skipped with a note, unless VECENV_REQUIRE_RAY_TESTS=1
# (set by .ci/run), which makes that a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_python.sh  # sets PY: PYTHON, python3, or a .venv where python3 is externally managed
# VECENV_TEST_NO_INSTALL=1 skips the installs (vecenv and the extras already there).
if [ "${VECENV_TEST_NO_INSTALL:-0}" != 1 ]; then
  # stable-baselines3 pulls in PyTorch: take the CPU build first so pip does not
  # fetch a multi-gigabyte CUDA one.
  "$PY" -m pip install -q "torch==2.13.0"
  "$PY" -m pip install -q ".[test,sb3,atari,ray,pettingzoo]"
  # torchrl for its integration example (docs/guides/integrations.md): after torch,
  # pinned, so pip keeps the CPU torch above; the example is skipped without it.
  "$PY" -m pip install -q "torchrl==0.14.1" ||
    echo "test.sh: torchrl did not install; its integration example will be skipped" >&2
fi
# -P keeps the source tree off sys.path, so `import vecenv` finds the installed copy;
# Python 3.9 and 3.10 lack -P, and -I does that there.
SAFE=$("$PY" -c 'import sys; print("-P" if sys.version_info >= (3, 11) else "-I")')
set +e
VECENV_TEST_PART=no-ray "$PY" "$SAFE" -m pytest tests "$@"
rc=$?
set -e
# The Ray tests (marker "ray") start real Ray clusters, and Ray binds to the
# machine's network address: run them apart, in a network namespace that holds
# only loopback (unshare -n, as root; the tests bring lo up themselves, so
# iproute2 is not needed). VECENV_TEST_PART picks the part (tests/conftest.py).
if [ "${VECENV_SKIP_RAY_TESTS:-0}" = 1 ]; then
  echo "VECENV_SKIP_RAY_TESTS=1: Ray tests not run" >&2
elif ! unshare -n true 2>/dev/null; then
  if [ "${VECENV_REQUIRE_RAY_TESTS:-0}" = 1 ]; then
    echo "VECENV_REQUIRE_RAY_TESTS=1 but a network namespace cannot be created" \
      "(unshare -n needs root): the Ray tests cannot run" >&2
    exit 1
  fi
  echo "Ray tests skipped: they need a loopback-only network namespace (unshare -n needs root);" \
    "to run them: sudo VECENV_TEST_PART=ray unshare -n $(command -v "$PY") $SAFE -m pytest tests" \
    "-p no:cacheprovider" >&2
else
  set +e
  VECENV_TEST_PART=ray unshare -n "$PY" "$SAFE" -m pytest tests "$@"
  ray_rc=$?
  set -e
  # 5 (nothing collected): the caller's selection (-m, -k) left only one part.
  if [ "$rc" -eq 5 ]; then
    rc=$ray_rc
  elif [ "$rc" -eq 0 ] && [ "$ray_rc" -ne 5 ]; then
    rc=$ray_rc
  fi
fi
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
say_where
exit "$rc"
