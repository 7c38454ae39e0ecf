"""The installed package as a wheel delivers it: version, typing files, the
stub of the compiled core, the debug-build flag, and one real step.

Runs against the installed vecenv (a wheel in scripts/build_wheels.sh, a
`pip install .` elsewhere), never the source tree (tests/conftest.py).
"""

import ast
import importlib.metadata
import inspect
import os
import pathlib
import re

import numpy as np
import pytest
from helpers import SAFE_PYTHON

import vecenv
from vecenv import _core

PKG = pathlib.Path(vecenv.__file__).resolve().parent
STUB = PKG / "_core.pyi"
PYX = pathlib.Path(__file__).resolve().parent.parent / "csrc" / "_core.pyx"


def _stub_tree():
    return ast.parse(STUB.read_text(), filename=str(STUB))


def _stub_params(fn):
    """Parameter names of a stub function, without ``self``."""
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return [n for n in names if n != "self"]


def _stub_classes():
    return {n.name: n for n in _stub_tree().body if isinstance(n, ast.ClassDef)}


def _public_runtime_names():
    """Names defined by _core itself (not modules it imports such as numpy)."""
    return {n for n, v in vars(_core).items() if not n.startswith("_") and not inspect.ismodule(v)}


def test_version_matches_distribution_metadata():
    assert importlib.metadata.version("vecenv") == vecenv.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+|a\d+|b\d+)?", vecenv.__version__)


def test_typing_files_shipped_and_no_build_leftovers():
    assert (PKG / "py.typed").is_file()
    assert STUB.is_file()
    modules = list(PKG.glob("_core*.so")) + list(PKG.glob("_core*.pyd"))
    assert len(modules) == 1, f"expected one compiled _core module in {PKG}, found {modules}"
    leftovers = [
        p.name for pat in ("*.c", "*.pyx", "*.pxd", "*.h", "*.html") for p in PKG.glob(pat)
    ]
    assert leftovers == []


def test_stub_names_match_compiled_module():
    tree = _stub_tree()
    stub_names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stub_names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            stub_names.add(node.target.id)
    stub_names = {n for n in stub_names if not n.startswith("_")}
    assert stub_names == _public_runtime_names()


def test_stub_functions_take_the_same_parameters():
    for node in _stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            runtime = list(inspect.signature(getattr(_core, node.name)).parameters)
            assert _stub_params(node) == runtime, node.name


@pytest.mark.parametrize(
    "cls_name", ["SharedBlock", "ControlRegion", "Control", "WorkerControl", "LeafWriter"]
)
def test_stub_classes_match_compiled_classes(cls_name):
    cls = getattr(_core, cls_name)
    stub = _stub_classes()[cls_name]
    stub_members = {
        n.name: n
        for n in stub.body
        if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
    }
    runtime_members = {n for n in vars(cls) if not n.startswith("_")}
    assert set(stub_members) == runtime_members
    for name, fn in stub_members.items():
        member = vars(cls)[name]
        if callable(member):  # a method; properties have no parameters to compare
            assert _stub_params(fn) == list(inspect.signature(member).parameters)[1:], name


@pytest.mark.skipif(not PYX.is_file(), reason="needs the source checkout's csrc/_core.pyx")
def test_stub_constructors_match_cinit_in_source():
    # Cython hides __cinit__'s parameters from inspect: read them from the source.
    source = PYX.read_text()
    classes = _stub_classes()
    for cls_name in ("SharedBlock", "Control", "WorkerControl", "LeafWriter"):
        m = re.search(
            rf"cdef class {cls_name}\b.*?def __cinit__\(self,(.*?)\):", source, flags=re.S
        )
        assert m, cls_name
        pyx_params = [
            p.split("=")[0].split()[-1]
            for p in m.group(1).replace("\n", " ").split(",")
            if p.strip()
        ]
        init = next(
            n
            for n in classes[cls_name].body
            if isinstance(n, ast.FunctionDef) and n.name == "__init__"
        )
        assert _stub_params(init) == pyx_params, cls_name


def test_debug_build_flag_matches_request():
    """VECENV_EXPECT_DEBUG=1 (set by scripts/test_debug.sh) demands a debug
    build and =0 (scripts/build_wheels.sh) a release one."""
    assert isinstance(_core.DEBUG_BUILD, bool)
    expect = os.environ.get("VECENV_EXPECT_DEBUG")
    if expect is None:
        pytest.skip("VECENV_EXPECT_DEBUG not set")
    assert _core.DEBUG_BUILD is (expect == "1")


@pytest.mark.timeout(60)
def test_installed_core_steps_envs_end_to_end():
    import gymnasium as gym

    import vecenv.envs  # registers vecenv/Noop-v0

    venv = vecenv.ShmemVecEnv(
        [lambda: gym.make("vecenv/Noop-v0", episode_length=3)] * 2, envs_per_worker=1, timeout=30
    )
    try:
        obs = venv.reset()
        assert obs.shape == (2, 4) and obs.dtype == np.float32
        for _ in range(3):
            obs, rewards, dones, _infos = venv.step(np.zeros(2, dtype=np.int64))
        np.testing.assert_array_equal(rewards, np.ones(2, np.float32))
        np.testing.assert_array_equal(dones, [True, True])  # truncated after 3 steps
    finally:
        venv.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "module, missing, extra",
    [
        ("vecenv.sb3", "stable_baselines3", "sb3"),
        ("vecenv.sb3_multi_agent", "stable_baselines3", "sb3"),
        ("vecenv.ray", "ray", "ray"),
    ],
)
def test_a_front_end_without_its_extra_is_a_module_not_found_error_naming_the_extra(
    module, missing, extra
):
    # ModuleNotFoundError (an ImportError) is what pytest.importorskip skips on
    # and what `except ImportError` catches; the message says what to install.
    import subprocess

    code = (
        f"import sys; sys.modules[{missing!r}] = None\n"
        f"try:\n    import {module}\n"
        "except ModuleNotFoundError as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([*SAFE_PYTHON, "-c", code], capture_output=True, text=True, timeout=50)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ModuleNotFoundError"), out.stdout
    assert f"pip install vecenv[{extra}]" in out.stdout
