"""NumPy/plain-Python references the tests compare vecenv against."""

from __future__ import annotations

import numpy as np


def stack(values):
    """Stack per-env values (arrays, tuples, dicts, nested) along a new axis 0."""
    first = values[0]
    if isinstance(first, dict):
        return {k: stack([v[k] for v in values]) for k in first}
    if isinstance(first, tuple):
        return tuple(stack([v[j] for v in values]) for j in range(len(first)))
    return np.stack([np.asarray(v) for v in values])


def assert_tree_equal(a, b, path="obs"):
    """Assert two nested structures of arrays are equal (same dtype, shape and values)."""
    if isinstance(b, dict):
        assert isinstance(a, dict) and set(a) == set(b), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in b:
            assert_tree_equal(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(b, tuple):
        assert isinstance(a, tuple) and len(a) == len(b), f"{path}: tuple lengths differ"
        for j, (x, y) in enumerate(zip(a, b)):
            assert_tree_equal(x, y, f"{path}[{j}]")
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, f"{path}: shape {a.shape} != {b.shape}"
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} != {b.dtype}"
        np.testing.assert_array_equal(a, b, err_msg=path)


def rollout_loop(env_fns, actions, seed):
    """Step envs in a plain loop with SB3-style autoreset (reset in the same
    step, last observation in infos). Returns per-step (obs, rewards, dones,
    terminal observations by env) and the first observation."""
    envs = [fn() for fn in env_fns]
    try:
        first = stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
        steps = []
        for acts in actions:
            obs, rews, dones, terminal = [], [], [], {}
            for i, env in enumerate(envs):
                o, r, te, tr, _ = env.step(acts[i])
                if te or tr:
                    terminal[i] = (o, bool(tr and not te))
                    o, _ = env.reset()
                obs.append(o)
                rews.append(r)
                dones.append(te or tr)
            steps.append((stack(obs), np.asarray(rews, np.float64), np.asarray(dones), terminal))
        return first, steps
    finally:
        for env in envs:
            env.close()


def gather_rows_ref(src, ids):
    return src[np.asarray(ids, dtype=np.int64)]
