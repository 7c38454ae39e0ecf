"""Importing vecenv from an unbuilt source checkout says so, with the fix."""

import importlib.machinery
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.timeout(60)
def test_unbuilt_source_tree_is_named_with_the_fix():
    src = ROOT / "vecenv"
    if not (ROOT / "csrc" / "_core.pyx").exists():
        pytest.skip("not a source checkout")
    if any(
        p.name.startswith("_core")
        for s in importlib.machinery.EXTENSION_SUFFIXES
        for p in src.glob(f"_core*{s}")
    ):
        pytest.skip("the core was built in place: the source tree is a working vecenv")
    # Without -P, python -c puts the current folder (the checkout) first on sys.path.
    r = subprocess.run(
        [sys.executable, "-c", "import vecenv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert r.returncode == 1
    assert "circular import" not in r.stderr, r.stderr
    assert f"unbuilt source checkout ({src})" in r.stderr, r.stderr
    assert "python -P" in r.stderr and "pip install -e ." in r.stderr
    # The tests run against an installed vecenv, so the message names it.
    assert "shadows the installed vecenv in" in r.stderr, r.stderr
