"""vecenv.errors: errors an env raises reach the caller as their own type too."""

import gymnasium
import pytest

import vecenv
from vecenv.errors import WorkerError, as_env_exception


@pytest.mark.timeout(60)
def test_misspelled_env_id_is_gymnasiums_own_error_and_a_worker_error():
    # A typo in the id. gymnasium.make_vec raises NameNotFound;
    # vecenv.make raised a bare WorkerError that `except NameNotFound` missed.
    with pytest.raises(gymnasium.error.NameNotFound) as info:
        vecenv.make("CartPoel", 2)
    err = info.value
    assert isinstance(err, vecenv.WorkerError)
    assert err.env_index == 0
    assert err.exc_type == "gymnasium.error.NameNotFound"
    assert "CartPoel" in str(err) and "env 0" in str(err)
    assert "NameNotFound" in err.worker_traceback and "Traceback" in err.worker_traceback
    assert isinstance(err.__cause__, vecenv.errors.RemoteTraceback)


def _raises_key_error():
    raise KeyError("no such level")


@pytest.mark.timeout(60)
def test_factory_error_is_its_own_type_in_shmem_vec_env():
    with pytest.raises(KeyError) as info:
        vecenv.ShmemVecEnv([_raises_key_error] * 2, num_workers=1)
    assert isinstance(info.value, vecenv.WorkerError)
    assert "no such level" in str(info.value)


def test_as_env_exception_is_idempotent_and_keeps_unknown_types():
    err = WorkerError("env 3 raised x", env_index=3, exc_type="builtins.ValueError")
    dual = as_env_exception(err)
    assert isinstance(dual, ValueError) and isinstance(dual, WorkerError)
    assert dual.env_index == 3
    assert as_env_exception(dual) is dual
    unknown = WorkerError("env 0 raised", env_index=0, exc_type="no_such_module.Boom")
    assert as_env_exception(unknown) is unknown
