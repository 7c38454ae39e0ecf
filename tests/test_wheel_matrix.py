"""scripts/build_wheels.sh's matrix: the Pythons it builds for are the declared
ones, a missing one fails before any build, the floor pins every dependency to
its lowest allowed version, and the summary counts what pytest reported."""

import os
import pathlib
import re
import subprocess

import pytest
from helpers import load_script

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "wheel_matrix.py"
BUILD_WHEELS = ROOT / "scripts" / "build_wheels.sh"

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not SCRIPT.is_file(), reason="needs the checkout's scripts/"),
]


@pytest.fixture(scope="module")
def matrix():
    return load_script(SCRIPT)


def test_the_declared_pythons_are_the_ones_cibuildwheel_builds_from_the_floor_up(matrix):
    # build_wheels.sh reads the same classifiers (with sed) for its default list.
    meta = matrix.project()
    prefix = "Programming Language :: Python :: "
    versions = [c[len(prefix) :] for c in meta["classifiers"] if c.startswith(prefix)]
    declared = [v for v in versions if re.fullmatch(r"3\.\d+", v)]
    with open(ROOT / "pyproject.toml", "rb") as f:
        build = matrix.tomllib.load(f)["tool"]["cibuildwheel"]["build"].split()
    assert build == [f"cp{v.replace('.', '')}-*" for v in declared]
    assert meta["requires-python"] == f">={declared[0]}"
    minors = [int(v.split(".")[1]) for v in declared]
    assert minors == list(range(minors[0], minors[-1] + 1)), "a gap in the declared Pythons"


def test_the_floor_pins_each_dependency_to_its_lower_bound(matrix):
    meta = matrix.project()
    pins = matrix.floor_pins(meta)
    assert len(pins) == len(meta["dependencies"])
    for dep, pin in zip(meta["dependencies"], pins):
        name, lowest = dep.split(">=")
        assert pin == f"{name.strip()}=={lowest.strip()}"


@pytest.mark.parametrize("dep", ["numpy", "numpy<3", "numpy>1.0", "numpy>=1.23,<3"])
def test_a_dependency_without_a_lone_lower_bound_has_no_floor(matrix, dep):
    with pytest.raises(ValueError, match=re.escape(repr(dep))):
        matrix.floor_pins({"dependencies": [dep]})


def _junit(path, tests, failures, errors, skipped):
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites>'
        f'<testsuite name="pytest" tests="{tests}" failures="{failures}" errors="{errors}" '
        f'skipped="{skipped}"/></testsuites>'
    )
    return path


def test_the_summary_counts_and_times_each_part_and_fails_on_one_failure(matrix, tmp_path):
    ok = tmp_path / "ok"
    ok.write_text(
        "python=3.9\nstage=build\nstart_build=100\nwheel=vecenv-0.1.0-cp39.whl\n"
        f"stage=install\nstart_install=130\nstage=test\nstart_test=150\n"
        f"junit={_junit(tmp_path / 'a.xml', 10, 0, 0, 3)}\nrc=0\nend=250\n"
    )
    bad = tmp_path / "bad"
    bad.write_text(
        "python=3.13\nstage=build\nstart_build=300\nwheel=vecenv-0.1.0-cp313.whl\n"
        f"stage=install\nstart_install=320\nstage=test\nstart_test=330\n"
        f"junit={_junit(tmp_path / 'b.xml', 10, 2, 1, 0)}\nrc=1\nend=400\n"
    )
    broken = tmp_path / "broken"  # its build failed: no wheel, no tests
    broken.write_text("python=3.10\nstage=build\nstart_build=500\nrc=1\nend=510\n")
    r = matrix.read_result(ok)
    assert (r["passed"], r["failed"], r["skipped"], r["errors"]) == (7, 0, 3, 0)
    assert (r["build_s"], r["install_s"], r["test_s"]) == (30, 20, 100)
    r = matrix.read_result(bad)
    assert (r["passed"], r["failed"], r["skipped"], r["errors"]) == (7, 2, 0, 1)
    r = matrix.read_result(broken)
    assert (r["build_s"], r["install_s"], r["passed"]) == (10, "-", "-")

    class Out(list):
        write = list.append

    out = Out()
    assert matrix.summary([ok], out) is True
    out = Out()
    assert matrix.summary([ok, bad, broken], out) is False
    lines = "".join(out).splitlines()
    assert lines[0].split()[:7] == [
        "python",
        "wheel",
        "result",
        "passed",
        "failed",
        "skipped",
        "errors",
    ]
    assert lines[1].split() == [
        "3.9",
        "vecenv-0.1.0-cp39.whl",
        "ok",
        "7",
        "0",
        "3",
        "0",
        "30",
        "20",
        "100",
        "150",
    ]
    assert "FAILED in test (rc 1)" in lines[2]
    assert "FAILED in build (rc 1)" in lines[3]
    assert lines[-1] == "total: 260 s in 3 parts"


def test_a_missing_python_fails_before_any_build_and_says_what_to_do(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    env.update(VECENV_WHEEL_PYTHONS="3.99", PYENV_ROOT=str(tmp_path))
    r = subprocess.run(
        ["bash", str(BUILD_WHEELS)], capture_output=True, text=True, timeout=50, env=env
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no Python 3.99" in r.stderr
    for way_out in ("pyenv install", "VECENV_WHEEL_PYTHONS", "PYTHON="):
        assert way_out in r.stderr
    assert "== tools" not in r.stdout
