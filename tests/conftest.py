"""Shared fixtures: every test checks it leaves no child process and no
shared-memory segment behind; the Ray tests get local clusters on loopback.

Helpers and test envs that several test modules use live in tests/helpers.py.
"""

import faulthandler
import os
import pathlib
import signal
import sys

import psutil
import pytest

# The shared helpers' asserts report their operands, as a test module's do.
pytest.register_assert_rewrite("helpers")

from helpers import is_ours  # noqa: E402

import vecenv  # noqa: E402

SRC = pathlib.Path(__file__).resolve().parent.parent / "vecenv"

# pytest enables faulthandler, and forked workers inherit it: the tests that
# crash a worker on purpose (SIGSEGV) would print a "Fatal Python error" stack
# into a passing run. Workers started by fork get it switched off; the parent
# keeps it (spawn and forkserver children never had it).
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=faulthandler.disable)


# A shell starts background jobs (`nohup ... &`, `(cmd &)` without job control)
# with SIGINT ignored, and Python then raises no KeyboardInterrupt: the Ctrl-C
# tests would see none, and their scripts would hang. They test vecenv's
# handling of Ctrl-C, so the run gets Python's own handler back; the scripts
# and workers it starts inherit SIGINT's default with it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
            if p.pid not in before_children and is_ours(p, ray_test)
        ],
        timeout=deadline,
    )
    names = [(p.pid, _safe_name(p)) for p in alive]
    for p in alive:
        p.kill()
    assert not names, f"child processes left behind: {names}"
    assert _shm_entries() - before_shm == set(), "shared-memory segments left behind"


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


# ---------------------------------------------------------------- Ray clusters
# Ray binds to the machine's network address unless it has none: the fixtures
# start clusters only inside a network namespace that holds nothing but
# loopback (``unshare -n``; scripts/test.sh runs the Ray part that way) and
# skip the test anywhere else.
_RAY_NODE = dict(num_cpus=2, object_store_memory=80 * 2**20)


@pytest.fixture(scope="module")
def loopback_namespace():
    """Skip unless Ray is installed and this is a loopback-only namespace."""
    pytest.importorskip("ray")
    from loopback import loopback_namespace as in_loopback_namespace

    if not in_loopback_namespace():
        pytest.skip(
            "Ray tests run only in a loopback-only network namespace: "
            "VECENV_TEST_PART=ray unshare -n python -P -m pytest tests (as root)"
        )


def _ray_children():
    return list(psutil.Process().children(recursive=True))


def _start_ray(request, tmp_path_factory, start):
    """Start Ray with the working directory outside the source tree (Ray puts
    the driver's working directory first on its workers' sys.path, where the
    unbuilt vecenv/ would shadow the installed one); return ``(ray, stop)``."""
    ray = pytest.importorskip("ray")
    from ray import cloudpickle as ray_cloudpickle

    # Ray pickles with its own copy of cloudpickle, and its workers do not have
    # tests/ on sys.path: the test module's envs and the helpers go by value.
    ray_cloudpickle.register_pickle_by_value(request.module)
    ray_cloudpickle.register_pickle_by_value(sys.modules["helpers"])
    if ray.is_initialized():
        ray.shutdown()
    before = {p.pid for p in _ray_children()}
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("ray-cwd"))
    try:
        stop = start(ray)
    finally:
        os.chdir(cwd)

    def shutdown():
        ray.shutdown()
        stop()
        # Nothing Ray started may outlive it (multiprocessing's forkserver and
        # resource tracker live for the session: not Ray's).
        new = [p for p in _ray_children() if p.pid not in before and is_ours(p)]
        _, alive = psutil.wait_procs(new, timeout=20)
        names = []
        for p in alive:
            try:
                names.append((p.pid, " ".join(p.cmdline())[:80]))
                p.kill()
            except psutil.Error:
                pass
        assert not names, f"Ray processes left behind: {names}"

    return ray, shutdown


@pytest.fixture(scope="class")
def one_node(request, loopback_namespace, tmp_path_factory):
    """A one-node local Ray cluster (two CPUs); yields the ``ray`` module."""

    def start(ray):
        ray.init(address="local", include_dashboard=False, log_to_driver=False, **_RAY_NODE)
        return lambda: None

    ray, shutdown = _start_ray(request, tmp_path_factory, start)
    yield ray
    shutdown()


@pytest.fixture(scope="class")
def two_nodes(request, loopback_namespace, tmp_path_factory):
    """A head and a worker node, one CPU each, both on 127.0.0.1; yields
    ``(ray, cluster, worker_node)``."""
    box = {}

    def start(ray):
        from ray.cluster_utils import Cluster

        cluster = Cluster(
            initialize_head=True,
            head_node_args=dict(
                num_cpus=1,
                include_dashboard=False,
                object_store_memory=_RAY_NODE["object_store_memory"],
            ),
        )
        box["worker"] = cluster.add_node(
            num_cpus=1, object_store_memory=_RAY_NODE["object_store_memory"]
        )
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        box["cluster"] = cluster
        return cluster.shutdown

    ray, shutdown = _start_ray(request, tmp_path_factory, start)
    yield ray, box["cluster"], box["worker"]
    shutdown()
