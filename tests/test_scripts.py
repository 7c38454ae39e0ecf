"""scripts/test.sh for a user without root, and a quiet passing run."""

import os
import pathlib
import subprocess
import sys

import pytest
from helpers import SAFE_PYTHON

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
            *SAFE_PYTHON,
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


SYSTEM_PYTHON = pathlib.Path("/usr/bin/python3")


def _externally_managed(python):
    code = (
        "import os, sys, sysconfig; marker = os.path.join(sysconfig.get_path('stdlib'), "
        "'EXTERNALLY-MANAGED'); print(sys.prefix == sys.base_prefix and os.path.exists(marker))"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=30)
    return out.stdout.strip() == "True"


def _pick_python(tmp_path, python3, **env):
    """Source scripts/_python.sh in a checkout-like folder whose PATH has
    ``python3`` first; return (the PY it picked, its stderr)."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True, exist_ok=True)
    (checkout / "scripts" / "_python.sh").write_text((ROOT / "scripts" / "_python.sh").read_text())
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    # A wrapper, not a symlink: a venv's python found through a symlink
    # outside the venv does not know it is one (no pyvenv.cfg beside it).
    wrapper = stub / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{python3}" "$@"\n')
    wrapper.chmod(0o755)
    full_env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VIRTUAL_ENV")}
    full_env.update(PATH=f"{stub}{os.pathsep}{full_env['PATH']}", **env)
    r = subprocess.run(
        ["bash", "-c", '. scripts/_python.sh && echo "$PY"'],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=170,
        env=full_env,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip(), r.stderr


@pytest.mark.timeout(180)
@pytest.mark.skipif(
    not SYSTEM_PYTHON.exists()
    or not _externally_managed(SYSTEM_PYTHON)
    or subprocess.run([str(SYSTEM_PYTHON), "-c", "import ensurepip, venv"], timeout=30).returncode,
    reason="no externally managed (PEP 668) system Python with venv here",
)
def test_an_externally_managed_python3_gets_a_venv_in_the_checkout(tmp_path):
    # A user without root on Debian or Ubuntu: pip refuses to install into the
    # system python3, so the README's commands make .venv and use it.
    py, err = _pick_python(tmp_path, SYSTEM_PYTHON)
    venv_python = tmp_path / "checkout" / ".venv" / "bin" / "python"
    assert py == str(venv_python) and venv_python.exists()
    assert "externally managed (PEP 668)" in err and "PYTHON=" in err
    assert not _externally_managed(venv_python)
    again, err = _pick_python(tmp_path, SYSTEM_PYTHON)  # made once, then reused
    assert again == py and "making" not in err


@pytest.mark.timeout(60)
def test_python3_that_pip_may_install_into_and_python_are_used_as_they_are(tmp_path):
    if _externally_managed(sys.executable):
        pytest.skip("this interpreter is externally managed")
    py, err = _pick_python(tmp_path, sys.executable)
    assert py == "python3" and err == ""
    assert not (tmp_path / "checkout" / ".venv").exists()
    py, err = _pick_python(tmp_path, SYSTEM_PYTHON, PYTHON="/opt/some/python")
    assert py == "/opt/some/python" and err == ""
