"""Regressions from a review of the compiled step paths against the Python ones.

Each test runs under the compiled paths (the default) and the Python ones
(``VECENV_PARENT_STEP=python``, ``VECENV_PY_ROUND=1``), which must agree.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import vecenv
from tests.test_faults import DieAtEnv, _die_after_publishing


@pytest.fixture(params=["compiled", "python"])
def path(request, monkeypatch):
    """Run the test under the compiled parent step, then the Python one."""
    if request.param == "python":
        monkeypatch.setenv("VECENV_PARENT_STEP", "python")
    return request.param


@pytest.mark.timeout(60)
@pytest.mark.parametrize("batch_size", [4, 2], ids=["lockstep", "partial"])
def test_a_worker_restarted_while_its_info_is_read_reports_the_resets_reward(
    tmp_path, monkeypatch, path, batch_size
):
    # The restart resets the env (reward 0.0 in its shared row, as every
    # reset); the compiled step and recv had copied the rewards before the
    # infos were read and returned the pre-death step's 1.0.
    marker = _die_after_publishing(tmp_path, monkeypatch)
    fns = [functools.partial(DieAtEnv, i, 1) for i in range(4)]
    with vecenv.ShmemVecEnv(
        fns, envs_per_worker=1, batch_size=batch_size, context="fork", on_worker_death="restart"
    ) as venv:
        venv.reset()
        if batch_size == 2:
            venv.recv(), venv.recv()
        seen = {}
        for _ in range(3):
            if batch_size == 4:
                _, rew, dones, infos = venv.step(np.zeros(4, np.int64))
                ids = np.arange(4)
            else:
                venv.send(np.zeros(4, np.int64), np.arange(4))
                parts = [venv.recv() for _ in range(2)]
                rew = np.concatenate([p[1] for p in parts])
                dones = np.concatenate([p[2] for p in parts])
                infos = [info for p in parts for info in p[3]]
                ids = np.concatenate([p[4] for p in parts])
            for row, i in enumerate(ids.tolist()):
                seen.setdefault(i, []).append(
                    (float(rew[row]), bool(dones[row]), bool(infos[row].get("worker_restarted")))
                )
        assert marker.exists() and venv.restart_count == 1
        assert seen[1] == [(1.0, False, False), (0.0, True, True), (1.0, False, False)]
