"""ErrorReport (vecenv._protocol): the one report of an exception that
crosses the process boundary, and its one decoder into vecenv's exceptions
(used by the local engine for its workers and by RayVecEnv for its actors)."""

import pickle

import pytest

import vecenv
from vecenv._protocol import ErrorReport
from vecenv._worker import error_payload


def _raised(exc):
    try:
        raise exc
    except BaseException as e:
        return e


def test_an_env_error_reads_as_a_worker_error_naming_the_env():
    report = error_payload(_raised(KeyError("boom")), 3, "step")
    report = pickle.loads(pickle.dumps(report))
    assert report.kind == "WorkerError" and report.exc_type == "builtins.KeyError"
    err = report.to_exception()
    assert type(err) is vecenv.WorkerError
    assert str(err) == "env 3 raised builtins.KeyError in step: 'boom'"
    assert err.env_index == 3 and err.exc_type == "builtins.KeyError"
    assert "KeyError" in err.worker_traceback
    assert isinstance(err.__cause__, vecenv.errors.RemoteTraceback)


def test_the_checks_errors_keep_their_classes():
    from vecenv._worker import _ObservationMismatch, _RewardMismatch

    obs = error_payload(_raised(_ObservationMismatch("shape")), 0, "step").to_exception()
    rew = error_payload(_raised(_RewardMismatch("nan")), 1, "step").to_exception()
    # vecenv's own check of what the env returned: the env raised nothing.
    assert type(obs) is vecenv.ObservationError and "raised" not in str(obs)
    assert str(obs) == "shape (found in step)"
    assert type(rew) is vecenv.RewardError and rew.env_index == 1


@pytest.mark.parametrize(
    "exc",
    [
        vecenv.WorkerDiedError("worker 0 died", env_indices=[0, 1], exitcode=-9, env_index=1),
        vecenv.WatchdogTimeoutError("late", env_indices=[1], env_index=1),
        vecenv.PendingTimeoutError("still pending", env_indices=[0]),
        vecenv.StateError("call reset() first"),
        ValueError("not a vecenv error"),
    ],
)
def test_an_actors_error_keeps_its_class_with_global_indices(exc):
    report = pickle.loads(pickle.dumps(ErrorReport.of_exception(_raised(exc))))
    err = report.to_exception(prefix="Ray actor 1 while stepping: ", offset=4)
    want = type(exc) if isinstance(exc, vecenv.VecEnvError) else vecenv.WorkerError
    assert type(err) is want
    assert str(err) == f"Ray actor 1 while stepping: {exc}"
    if getattr(exc, "env_indices", ()):
        assert err.env_indices == tuple(4 + i for i in exc.env_indices)
    if getattr(exc, "env_index", None) is not None:
        assert err.env_index == 4 + exc.env_index
    if isinstance(exc, vecenv.WorkerDiedError):
        assert err.exitcode == -9


def test_an_unknown_kind_is_a_worker_error():
    err = ErrorReport(kind="NoSuchError", message="m", env_index=0).to_exception()
    assert type(err) is vecenv.WorkerError and err.env_index == 0
    err = ErrorReport(kind="Exception", message="m").to_exception()  # not a vecenv error
    assert type(err) is vecenv.WorkerError
