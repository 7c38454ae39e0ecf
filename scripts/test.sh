#!/usr/bin/env bash
# Install vecenv with every test extra into the current Python and run the test
# suite against the installed package (not the source tree).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# stable-baselines3 pulls in PyTorch: take the CPU build first so pip does not
# fetch a multi-gigabyte CUDA one.
"$PY" -m pip install -q "torch==2.13.0"
"$PY" -m pip install -q ".[test,sb3,atari,ray,legacy-gym]"
# -P keeps the source tree off sys.path, so `import vecenv` finds the installed copy.
set +e
"$PY" -P -m pytest tests "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
