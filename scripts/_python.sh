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

# say_where: the last lines of test.sh and bench.sh. Which Python now has vecenv,
# and how to run the CLI and the examples with it: with -P (3.11+; -I before), so
# that neither the checkout's unbuilt vecenv/ nor, next to it, the checkout's own
# folder is imported in place of the installed package.
say_where() {
  local safe
  safe=$("$PY" -c 'import sys; print("-P" if sys.version_info >= (3, 11) else "-I")')
  local shown=$PY
  [ "$PY" = "$(pwd)/.venv/bin/python" ] && shown=.venv/bin/python
  echo "vecenv is installed for $shown. From this folder, run the CLI and the examples with it:" >&2
  echo "  $shown $safe -m vecenv.bench CartPole-v1 --num-envs 16" >&2
  echo "  $shown $safe examples/ppo_cartpole.py" >&2
  if [ "$shown" = .venv/bin/python ]; then
    echo "(or '. .venv/bin/activate', then 'python $safe ...'; '-P' keeps this checkout's unbuilt" \
      "vecenv/ source folder from being imported instead)" >&2
  fi
}
