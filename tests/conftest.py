"""Shared fixtures: every test checks it leaves no child process and no
shared-memory segment behind."""

import faulthandler
import os
import pathlib
import re

import psutil
import pytest

import vecenv

SRC = pathlib.Path(__file__).resolve().parent.parent / "vecenv"

# pytest enables faulthandler, and forked workers inherit it: the tests that
# crash a worker on purpose (SIGSEGV) would print a "Fatal Python error" stack
# into a passing run. Workers started by fork get it switched off; the parent
# keeps it (spawn and forkserver children never had it).
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=faulthandler.disable)


def pytest_report_header(config):
    return f"vecenv {vecenv.__version__} from {pathlib.Path(vecenv.__file__).parent}"


@pytest.fixture(scope="session", autouse=True)
def _installed_package():
    if os.environ.get("VECENV_TEST_SOURCE_TREE") != "1":
        here = pathlib.Path(vecenv.__file__).resolve().parent
        assert here != SRC, (
            f"tests import vecenv from the source tree ({here}); install it with "
            "`pip install .` and run pytest via scripts/test.sh"
        )


def _shm_entries():
    try:
        return {n for n in os.listdir("/dev/shm") if "vecenv" in n}
    except FileNotFoundError:  # pragma: no cover
        return set()


@pytest.fixture(autouse=True)
def no_leaks(request):
    """Fail a test that leaves a child process or a /dev/shm segment behind."""
    ray_test = request.node.get_closest_marker("ray") is not None
    me = psutil.Process()
    before_children = {p.pid for p in me.children(recursive=True)}
    before_shm = _shm_entries()
    yield
    deadline = 5.0
    _gone, alive = psutil.wait_procs(
        [
            p
            for p in me.children(recursive=True)
            if p.pid not in before_children and _is_ours(p, ray_test)
        ],
        timeout=deadline,
    )
    names = [(p.pid, _safe_name(p)) for p in alive]
    for p in alive:
        p.kill()
    assert not names, f"child processes left behind: {names}"
    assert _shm_entries() - before_shm == set(), "shared-memory segments left behind"


# Ray's node processes (gcs_server, raylet, agents, idle workers) come and go
# as Ray pleases; the Ray fixtures check that none outlives ray.shutdown().
# Actor processes ("ray::_EnvActor...") and their vec-env workers still count.
_RAY_NODE_PROCS = ("ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent")
_RAY_PACKAGE = re.compile(r"[/\\](site|dist)-packages[/\\]ray[/\\]")


def _is_ours(p, ray_test=False):
    # The forkserver and the resource tracker are multiprocessing's own and
    # live for the whole session.
    try:
        cmd = " ".join(p.cmdline())
    except psutil.Error:
        return False
    if ray_test and (cmd.startswith(_RAY_NODE_PROCS) or _RAY_PACKAGE.search(cmd)):
        return False
    return "forkserver" not in cmd and "resource_tracker" not in cmd


def _safe_name(p):
    try:
        return p.name()
    except psutil.Error:
        return "?"


def pytest_collection_modifyitems(config, items):
    # scripts/test.sh runs the suite in two parts: VECENV_TEST_PART=no-ray
    # (everything else) and =ray (the Ray tests, inside a loopback-only
    # network namespace). Deselecting here composes with the caller's -m/-k.
    part = os.environ.get("VECENV_TEST_PART")
    if part in ("ray", "no-ray"):
        keep = [it for it in items if (it.get_closest_marker("ray") is not None) == (part == "ray")]
        dropped = [it for it in items if it not in keep]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
    # Test modules are imported by path (importlib mode), so a spawned worker
    # could not import them by name: pickle their envs and helpers by value.
    import cloudpickle

    for module in {item.module for item in items if getattr(item, "module", None)}:
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:
            pass
