#!/usr/bin/env bash
# Build vecenv's core in debug mode (VECENV_DEBUG=1 in setup.py: Cython bounds,
# wraparound and initialization checks on, C assertions on, -O0 -g) into the
# virtual environment .venv-debug and run the fast part of the suite (-m "not
# slow") against it through scripts/test.sh. Extra arguments go to pytest,
# e.g. `-k core -x`.
#
# The venv sees the system site-packages, so the extras that scripts/test.sh
# installed there are reused rather than downloaded again.
# tests/test_packaging.py checks that the installed build is the debug one.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-debug
rm -rf "$VENV"
"$PY" -m venv --system-site-packages "$VENV"
VECENV_DEBUG=1 VECENV_EXPECT_DEBUG=1 PYTHON="$VENV/bin/python" \
  bash scripts/test.sh -m "not slow" "$@"
