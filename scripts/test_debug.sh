#!/usr/bin/env bash
# Build vecenv's core in debug mode (VECENV_DEBUG=1 in setup.py: Cython bounds,
# wraparound and initialization checks on, C assertions on, -O0 -g) into the
# virtual environment .venv-debug and run the fast part of the suite (-m "not
# slow") against it. Extra arguments go to pytest, e.g. `-k core -x`.
#
# The venv sees the system site-packages, so the extras scripts/test.sh
# installed (sb3, ale, ray) are used when present; the test extra is
# installed if missing. tests/test_packaging.py checks the build is the debug one.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-debug
rm -rf "$VENV"
"$PY" -m venv --system-site-packages "$VENV"
VECENV_DEBUG=1 "$VENV/bin/python" -m pip install -q ".[test]"
# -P keeps the source tree off sys.path, so `import vecenv` finds the debug build.
set +e
VECENV_EXPECT_DEBUG=1 "$VENV/bin/python" -P -m pytest tests -m "not slow" -q "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
