#!/usr/bin/env bash
# Build the documentation site (docs/, mkdocs.yml) strictly into site/ (git-ignored):
# a broken link, a missing page or an unresolved API reference fails the build.
# Installs the pinned tools of docs/requirements.txt into the current Python
# (PYTHON=... picks another; a .venv where python3 is externally managed).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_python.sh
"$PY" -m pip install -q -r docs/requirements.txt
# The benchmark figure shown by docs/benchmarks.md is the committed one.
cp benchmarks/results/latest.png docs/assets/latest.png
NO_MKDOCS_2_WARNING=1 "$PY" -m mkdocs build --strict --site-dir site
echo "docs: site/ built (mkdocs --strict). Browse it from disk: open $(pwd)/site/index.html" \
  "in a browser (the pages link as page.html); or serve it: $PY -m mkdocs serve"
