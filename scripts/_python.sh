# Sourced by scripts/test.sh and scripts/bench.sh (run from the checkout's
# root): sets PY, the Python that the script installs into and runs.
#
# PYTHON, when set, is used as it is. Otherwise python3, unless pip may not
# install into it: a system Python marked externally managed (PEP 668, as
# Debian's and Ubuntu's are) outside a virtual environment. Then the script
# makes a virtual environment .venv in the checkout (git-ignored) once and
# uses it, and says so, so that a fresh machine needs no set-up step first.
if [ -n "${PYTHON:-}" ]; then
  PY=$PYTHON
else
  PY=python3
  if ! "$PY" -c 'import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(1 if sys.prefix == sys.base_prefix and os.path.exists(marker) else 0)'; then
    if [ ! -x .venv/bin/python ]; then
      echo "$(command -v "$PY") is externally managed (PEP 668): making a virtual environment" \
        ".venv in $(pwd) for vecenv and its extras (PYTHON=... picks another Python)" >&2
      "$PY" -m venv .venv
    fi
    PY=$(pwd)/.venv/bin/python
    echo "using $PY" >&2
  fi
fi
