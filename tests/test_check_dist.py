"""scripts/check_dist.py: an sdist must hold the tests and every file they
run (scripts, benchmark scripts, examples), and the check names a missing one."""

import pathlib
import tarfile

import pytest
from helpers import load_script

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_dist.py"

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not SCRIPT.is_file(), reason="needs the checkout's scripts/check_dist.py"),
]


@pytest.fixture(scope="module")
def check_dist():
    return load_script(SCRIPT)


def _sdist(tmp_path, names):
    """A tar.gz of the checkout's files ``names`` under ``vecenv-0.0.0/``."""
    path = tmp_path / "vecenv-0.0.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for n in names:
            tar.add(ROOT / n, arcname=f"vecenv-0.0.0/{n}")
    return path


def test_the_files_the_tests_run_are_required(check_dist):
    need = check_dist._source_files()
    for name in (
        "tests/conftest.py",
        "tests/test_check_dist.py",
        "scripts/check_sizes.py",
        "scripts/test.sh",
        "benchmarks/run.py",
        "examples/quickstart.py",
        "README.md",
    ):
        assert name in need


def test_an_sdist_with_every_file_passes(check_dist, tmp_path):
    assert check_dist.check_sdist(_sdist(tmp_path, check_dist._source_files())) == []


@pytest.mark.parametrize(
    "missing", ["examples/quickstart.py", "benchmarks/run.py", "scripts/check_sizes.py"]
)
def test_an_sdist_without_a_file_the_tests_run_fails(check_dist, tmp_path, missing):
    names = [n for n in check_dist._source_files() if n != missing]
    assert check_dist.check_sdist(_sdist(tmp_path, names)) == [f"sdist lacks {missing}"]
