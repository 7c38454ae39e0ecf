"""scripts/test.sh for a user without root, and a quiet passing run."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEST_SH = ROOT / "scripts" / "test.sh"


def _test_sh(tmp_path, *args, **env):
    # An `unshare` that fails as it does for a user without root.
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    (stub / "unshare").write_text(
        "#!/bin/sh\necho 'unshare: Operation not permitted' >&2\nexit 1\n"
    )
    (stub / "unshare").chmod(0o755)
    full_env = dict(os.environ)
    for key in ("VECENV_REQUIRE_RAY_TESTS", "VECENV_SKIP_RAY_TESTS", "VECENV_TEST_PART"):
        full_env.pop(key, None)
    full_env.update(
        PATH=f"{stub}{os.pathsep}{full_env['PATH']}",
        PYTHON=sys.executable,
        VECENV_TEST_NO_INSTALL="1",
        **env,
    )
    return subprocess.run(
        ["bash", str(TEST_SH), *args],
        capture_output=True,
        text=True,
        timeout=170,
        env=full_env,
    )


SELECTION = ("tests/test_errors.py", "-k", "idempotent", "-p", "no:cacheprovider", "-q")


@pytest.mark.timeout(180)
def test_without_root_the_ray_part_is_skipped_with_one_line(tmp_path):
    r = _test_sh(tmp_path, *SELECTION)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if "Ray tests" in ln]
    assert len(lines) == 1, r.stderr
    assert "Ray tests skipped" in lines[0] and "sudo" in lines[0] and "unshare -n" in lines[0]


@pytest.mark.timeout(180)
def test_ci_fails_when_the_ray_part_cannot_run(tmp_path):
    r = _test_sh(tmp_path, *SELECTION, VECENV_REQUIRE_RAY_TESTS="1")
    assert r.returncode == 1
    assert "VECENV_REQUIRE_RAY_TESTS=1" in r.stderr


def test_test_sh_installs_no_legacy_gym():
    text = TEST_SH.read_text()
    install = [ln for ln in text.splitlines() if "pip install" in ln and "[" in ln]
    assert install and not any("legacy-gym" in ln for ln in install)


@pytest.mark.timeout(120)
def test_deliberate_segfault_prints_no_fatal_error_stack():
    # test_faults.py and test_workers.py crash workers on purpose; pytest's
    # faulthandler (inherited by forked workers) printed a 50-line stack into a
    # passing run. tests/conftest.py switches it off in forked children.
    files = [ROOT / "tests" / f for f in ("test_faults.py", "test_workers.py")]
    r = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            *[str(f) for f in files if f.exists()],
            "-k",
            "segv",
            "-p",
            "no:cacheprovider",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=110,
        cwd=ROOT,
        env={**os.environ, "VECENV_TEST_PART": "no-ray"},
    )
    assert r.returncode == 0, r.stdout[-2000:]
    assert " passed" in r.stdout and "no tests ran" not in r.stdout
    assert "Fatal Python error" not in r.stdout + r.stderr
