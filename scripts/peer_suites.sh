#!/usr/bin/env bash
# Run the peers' own test suites against vecenv's drop-ins, and against the
# peers' own classes in the same run, and print the counts side by side.
#
# This script fetches nothing. Put the suites in place first (outside the
# project tree; never commit them):
#
#   gymnasium: the repository's tests/ at the tag of the installed version
#     (or the newest 1.x tag), e.g. from a clone:
#       git --git-dir=Gymnasium/.git archive v1.3.0 tests | tar -x -C "$GYM_DIR"
#   stable-baselines3: the sdist of the installed version ships tests/:
#       pip download --no-deps --no-binary :all: stable-baselines3==2.9.2 -d /tmp/sb3
#       tar xzf /tmp/sb3/stable_baselines3-2.9.2.tar.gz -C /tmp/sb3
#       cp -r /tmp/sb3/stable_baselines3-2.9.2/tests "$SB3_DIR"/
#     (copy tests/ alone: the sdist's package folder next to it would shadow
#     the installed stable_baselines3).
#
# Usage: GYM_DIR=/work/peers/gymnasium SB3_DIR=/work/peers/sb3 \
#          PYTHON=/path/to/venv/bin/python scripts/peer_suites.sh [pytest args...]
# Either folder may be left unset to skip that suite. vecenv must be installed
# into $PYTHON (pip install .); the tests run with -P, outside the source tree.
#
# How the swap works: the script writes a conftest.py into each folder that,
# when VECENV_DROPIN=1, rebinds the peer's class to vecenv's before any test
# module imports it:
#   gymnasium.vector.AsyncVectorEnv (and gymnasium.vector.async_vector_env's)
#     -> vecenv.AsyncVectorEnv (gymnasium.make_vec looks it up at call time)
#   stable_baselines3.common.vec_env.SubprocVecEnv (and subproc_vec_env's,
#     env_util's) -> vecenv.sb3.SubprocVecEnv
# Each suite then runs twice: VECENV_DROPIN=0 (the peer's class) and 1.
set -uo pipefail
PY=${PYTHON:-python3}
LOG_DIR=${LOG_DIR:-$(mktemp -d)}  # full pytest outputs: $LOG_DIR/<suite>-dropin<0|1>.txt
mkdir -p "$LOG_DIR"
echo "pytest outputs in $LOG_DIR"
GYM_TESTS=${GYM_TESTS:-"tests/vector tests/envs/registration/test_make_vec.py tests/wrappers/vector/test_vectorize_transform.py"}
# test_her.py is left out until large env_method replies no longer hang.
SB3_TESTS=${SB3_TESTS:-"tests/test_vec_envs.py tests/test_dict_env.py tests/test_utils.py"}

write_conftest() {
  cat >"$1/conftest.py" <<'EOF'
# Written by vecenv's scripts/peer_suites.sh: swaps the peer's vector env class
# for vecenv's when VECENV_DROPIN=1.
import os

if os.environ.get("VECENV_DROPIN") == "1":
    import vecenv

    try:
        import gymnasium.vector
        import gymnasium.vector.async_vector_env

        gymnasium.vector.AsyncVectorEnv = vecenv.AsyncVectorEnv
        gymnasium.vector.async_vector_env.AsyncVectorEnv = vecenv.AsyncVectorEnv
    except ImportError:
        pass
    try:
        import stable_baselines3.common.env_util
        import stable_baselines3.common.vec_env
        import stable_baselines3.common.vec_env.subproc_vec_env

        import vecenv.sb3

        for module in (
            stable_baselines3.common.vec_env,
            stable_baselines3.common.vec_env.subproc_vec_env,
            stable_baselines3.common.env_util,
        ):
            module.SubprocVecEnv = vecenv.sb3.SubprocVecEnv
    except ImportError:
        pass


def pytest_report_header(config):
    return f"VECENV_DROPIN={os.environ.get('VECENV_DROPIN', '0')}"
EOF
}

# Each peer's own pytest settings (warning filters its tests rely on).
write_ini() {
  case "$2" in
    gym)
      printf '%s\n' "[pytest]" "filterwarnings =" \
        "    ignore::DeprecationWarning:gymnasium.*:" >"$1/pytest.ini" ;;
    sb3)
      printf '%s\n' "[pytest]" "filterwarnings =" \
        "    ignore::DeprecationWarning:multiprocessing.popen_fork" \
        "    ignore::UserWarning:gymnasium" \
        "    ignore::DeprecationWarning:gymnasium.envs.registration" >"$1/pytest.ini" ;;
  esac
}

summary() {  # the last line of a pytest run: "N failed, M passed in T s"
  grep -E "(passed|failed|error|skipped).* in [0-9.]+s" "$1" | tail -1 | sed -E 's/=+ ?//g'
}

run_suite() {  # folder, label, tests
  local dir=$1 label=$2 tests=$3 swap out
  write_conftest "$dir"
  write_ini "$dir" "$label"
  for swap in 0 1; do
    out=$LOG_DIR/$label-dropin$swap.txt
    (cd "$dir" && VECENV_DROPIN=$swap timeout 1800 "$PY" -P -m pytest $tests -q \
      -p no:cacheprovider --timeout=120 -rfE "${@:4}" >"$out" 2>&1)
    grep -E "^(FAILED|ERROR) " "$out" | sed -E 's/^(FAILED|ERROR) //; s/ - .*//' | sort >"$out.failed"
  done
  echo "$label with the peer's class: $(summary "$LOG_DIR/$label-dropin0.txt")"
  sed 's/^/    /' "$LOG_DIR/$label-dropin0.txt.failed"
  echo "$label with vecenv's class:  $(summary "$LOG_DIR/$label-dropin1.txt")"
  echo "  failing only with vecenv's class:"
  comm -13 "$LOG_DIR/$label-dropin0.txt.failed" "$LOG_DIR/$label-dropin1.txt.failed" | sed 's/^/    /'
}

[ -n "${GYM_DIR:-}" ] && run_suite "$GYM_DIR" gym "$GYM_TESTS" "$@"
[ -n "${SB3_DIR:-}" ] && run_suite "$SB3_DIR" sb3 "$SB3_TESTS" "$@"
exit 0
