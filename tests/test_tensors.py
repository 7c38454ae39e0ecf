"""vecenv.tensors: torch tensors over the shared block equal what the steps
return, share its memory, and refuse what has no shared block."""

import functools
import subprocess

import gymnasium as gym
import numpy as np
import pytest
from helpers import SAFE_PYTHON

import vecenv
from vecenv.envs import BigObsEnv, CounterEnv
from vecenv.tensors import shared_tensors

torch = pytest.importorskip("torch")


def _leaves(x):
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in _leaves(x[k])]
    if isinstance(x, tuple):
        return [leaf for v in x for leaf in _leaves(v)]
    return [x]


def _assert_equal(tensors, arrays):
    got, want = _leaves(tensors), _leaves(arrays)
    assert len(got) == len(want)
    for t, a in zip(got, want):
        assert isinstance(t, torch.Tensor)
        assert t.shape == a.shape and t.numpy().dtype == a.dtype
        np.testing.assert_array_equal(t.numpy(), a)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("mode", ["sb3", "next_step", "same_step"])
def test_tensors_hold_every_steps_batch_without_a_copy(num_workers, mode):
    fns = [functools.partial(CounterEnv, e, episode_length=3 + e) for e in range(4)]
    with vecenv.ShmemVecEnv(fns, num_workers=num_workers, autoreset_mode=mode) as venv:
        t = shared_tensors(venv)
        obs = venv.reset()
        _assert_equal(t.observations, obs)
        first = [leaf.data_ptr() for leaf in _leaves(t.observations)]
        for _ in range(8):
            venv.step_async(np.arange(4) % 3)
            obs, rew, term, trunc, _ = venv.step_wait_gym()
            _assert_equal(t.observations, obs)
            np.testing.assert_array_equal(t.rewards.numpy(), rew)
            np.testing.assert_array_equal(t.terminated.numpy(), term)
            np.testing.assert_array_equal(t.truncated.numpy(), trunc)
            # The same memory every step: nothing was allocated or copied.
            assert [leaf.data_ptr() for leaf in _leaves(t.observations)] == first
        assert t.rewards.dtype == torch.float64 and t.terminated.dtype == torch.bool


@pytest.mark.timeout(60)
def test_frames_are_uint8_tensors_of_the_block():
    fns = [BigObsEnv] * 3
    with vecenv.ShmemVecEnv(fns, num_workers=1, copy=False) as venv:
        t = shared_tensors(venv)
        view = venv.reset()
        assert t.observations.dtype == torch.uint8
        assert t.observations.shape == (3, *venv.observation_space.shape)
        # copy=False hands out views of the same rows the tensor covers.
        assert t.observations.data_ptr() == view.ctypes.data
        assert t.observations.is_contiguous()


@pytest.mark.timeout(60)
def test_partial_batches_fill_the_rows_of_the_envs_received():
    fns = [functools.partial(CounterEnv, e) for e in range(4)]
    with vecenv.ShmemVecEnv(fns, num_workers=2, batch_size=2) as venv:
        t = shared_tensors(venv)
        venv.reset()  # starts all 4 resets
        for _ in range(6):
            obs, rew, _, _, env_ids = venv.recv()
            np.testing.assert_array_equal(t.observations["count"].numpy()[env_ids], obs["count"])
            np.testing.assert_array_equal(t.rewards.numpy()[env_ids], rew)
            venv.send(np.ones(2, np.int64), env_ids)


@pytest.mark.timeout(60)
def test_the_drop_ins_share_their_engine_block():
    fns = [lambda: gym.make("CartPole-v1")] * 2
    envs = vecenv.AsyncVectorEnv(fns)
    try:
        t = shared_tensors(envs)
        obs, _ = envs.reset(seed=1)
        _assert_equal(t.observations, obs)
        obs, rew, term, trunc, _ = envs.step(np.array([0, 1]))
        _assert_equal(t.observations, obs)
        np.testing.assert_array_equal(t.rewards.numpy(), rew)
    finally:
        envs.close()
    pytest.importorskip("stable_baselines3")
    from vecenv.sb3 import SubprocVecEnv

    sub = SubprocVecEnv(fns, start_method="fork")
    try:
        t = shared_tensors(sub)
        _assert_equal(t.observations, sub.reset())
        obs, rew, _, _ = sub.step(np.array([1, 0]))
        _assert_equal(t.observations, obs)
        np.testing.assert_array_equal(t.rewards.numpy(), rew)
    finally:
        sub.close()


@pytest.mark.timeout(60)
def test_tensors_outliving_close_keep_the_last_step_readable():
    with vecenv.ShmemVecEnv([BigObsEnv] * 2, num_workers=1) as venv:
        t = shared_tensors(venv)
        venv.reset()
        obs, *_ = venv.step(np.zeros(2, np.int64))
    # The tensors keep the block mapped: reading after close is safe.
    np.testing.assert_array_equal(t.observations.numpy(), obs)
    with pytest.raises(vecenv.InvalidArgumentError, match="closed"):
        shared_tensors(venv)


class _TextObsEnv(gym.Env):
    observation_space = gym.spaces.Text(5)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return "a", {}

    def step(self, action):
        return "b", 0.0, False, False, {}


@pytest.mark.timeout(60)
def test_what_has_no_shared_block_is_refused_by_name():
    with pytest.raises(vecenv.InvalidArgumentError, match="got SyncVectorEnv"):
        shared_tensors(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")]))
    with vecenv.ShmemVecEnv([_TextObsEnv], num_workers=0, pickled_leaves=True) as venv:
        with pytest.raises(vecenv.InvalidArgumentError, match="pickled_leaves"):
            shared_tensors(venv)


@pytest.mark.timeout(60)
def test_without_torch_the_error_says_what_to_install():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import vecenv\nfrom vecenv.envs import NoopEnv\nfrom vecenv.tensors import shared_tensors\n"
        "venv = vecenv.ShmemVecEnv([NoopEnv], num_workers=0)\n"
        "try:\n    shared_tensors(venv)\n"
        "except ModuleNotFoundError as e:\n    print(e)\n"
        "finally:\n    venv.close()\n"
    )
    out = subprocess.run([*SAFE_PYTHON, "-c", code], capture_output=True, text=True, timeout=50)
    assert out.returncode == 0, out.stderr
    assert "pip install torch" in out.stdout


class _FakeCudart:
    """torch.cuda.cudart() as a CUDA build returns it: records each call, and
    reads the registered pages when they are unregistered (a crash here would
    mean the block was unmapped first)."""

    def __init__(self, register_error=0):
        self.register_error = register_error
        self.registered = []
        self.unregistered = []
        self.synced = 0  # torch.cuda.synchronize calls, which must come before an unregister

    def cudaHostRegister(self, ptr, size, flags):
        self.registered.append((ptr, size, flags))
        return self.register_error

    def cudaHostUnregister(self, ptr):
        import ctypes

        size = next(s for p, s, _ in self.registered if p == ptr)
        self.unregistered.append((ptr, ctypes.string_at(ptr + size - 1, 1), self.synced))
        return 0

    def synchronize(self):
        self.synced += 1


@pytest.fixture
def fake_cuda(monkeypatch):
    cudart = _FakeCudart()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "cudart", lambda: cudart)
    monkeypatch.setattr(torch.cuda, "synchronize", cudart.synchronize)
    return cudart


def _span(t):
    ptr = t.data_ptr()
    return ptr, ptr + t.numel() * t.element_size()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 1])
def test_pin_memory_registers_the_whole_block_once_while_pinned_tensors_live(
    fake_cuda, num_workers
):
    import gc
    import mmap

    venv = vecenv.ShmemVecEnv([BigObsEnv] * 3, num_workers=num_workers)
    try:
        t = shared_tensors(venv, pin_memory=True)
        assert t.pinned and not shared_tensors(venv).pinned
        [(ptr, size, flags)] = fake_cuda.registered
        assert flags == 1  # cudaHostRegisterPortable
        assert ptr % mmap.PAGESIZE == 0 and size % mmap.PAGESIZE == 0
        for lo, hi in map(_span, (t.observations, t.rewards, t.terminated, t.truncated)):
            assert ptr <= lo and hi <= ptr + size
        # Still the block the steps fill.
        venv.reset()
        obs, rew, _, _ = venv.step(np.zeros(3, np.int64))
        np.testing.assert_array_equal(t.observations.numpy(), obs)
        np.testing.assert_array_equal(t.rewards.numpy(), rew)
        # A second pinned call shares the registration (CUDA refuses a range twice).
        t2 = shared_tensors(venv, pin_memory=True)
        assert len(fake_cuda.registered) == 1 and t2.pinned
        observations = t.observations
        del t, t2
        gc.collect()
        assert fake_cuda.unregistered == []  # one pinned tensor is alive
    finally:
        venv.close()
    gc.collect()
    assert fake_cuda.unregistered == []  # it outlives close(), still pinned
    last = observations.numpy().copy()
    del observations
    gc.collect()
    [(unregistered, _, synced)] = fake_cuda.unregistered
    assert unregistered == ptr and synced == 1  # the device was waited for first
    np.testing.assert_array_equal(last, obs)  # the last step, read after close


@pytest.mark.timeout(60)
def test_pin_memory_registers_again_once_the_last_pinned_tensor_is_gone(fake_cuda):
    import gc

    with vecenv.ShmemVecEnv([CounterEnv] * 2, num_workers=0) as venv:
        shared_tensors(venv, pin_memory=True)  # dropped at once
        gc.collect()
        assert len(fake_cuda.registered) == len(fake_cuda.unregistered) == 1
        t = shared_tensors(venv, pin_memory=True)
        assert len(fake_cuda.registered) == 2 and t.pinned


@pytest.mark.timeout(60)
def test_pin_memory_failure_names_the_cuda_error_and_keeps_nothing(fake_cuda):
    import gc

    fake_cuda.register_error = 712  # cudaErrorHostMemoryAlreadyRegistered
    with vecenv.ShmemVecEnv([CounterEnv] * 2, num_workers=0) as venv:
        with pytest.raises(vecenv.CudaError, match=r"cudaHostRegister returned cudaError 712") as e:
            shared_tensors(venv, pin_memory=True)
        assert e.value.code == 712 and isinstance(e.value, RuntimeError)
        gc.collect()
        assert fake_cuda.unregistered == []  # nothing was registered: nothing undone
        fake_cuda.register_error = 0
        assert shared_tensors(venv, pin_memory=True).pinned  # a retry registers
        assert len(fake_cuda.registered) == 2


@pytest.mark.timeout(60)
def test_pin_memory_without_cuda_is_refused_by_name():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with vecenv.ShmemVecEnv([CounterEnv] * 2, num_workers=0) as venv:
        with pytest.raises(vecenv.InvalidArgumentError, match=r"pin_memory=True.*CUDA is not"):
            shared_tensors(venv, pin_memory=True)
        venv.reset()  # unharmed
        assert not shared_tensors(venv).pinned


@pytest.mark.timeout(60)
def test_pin_memory_must_be_a_bool_and_is_checked_first():
    with vecenv.ShmemVecEnv([CounterEnv] * 2, num_workers=0) as venv:
        with pytest.raises(vecenv.InvalidArgumentError, match=r"expected True or False, got 1"):
            shared_tensors(venv, pin_memory=1)
    with pytest.raises(vecenv.InvalidArgumentError, match=r"expected True or False, got 'yes'"):
        shared_tensors(venv, pin_memory="yes")  # before the closed vec env is noticed


class _DictObsEnv(gym.Env):
    observation_space = gym.spaces.Dict(
        {
            "frame": gym.spaces.Box(0, 255, (3, 5), np.uint8),
            "pos": gym.spaces.Tuple(
                (gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(4))
            ),
        }
    )
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(self.t), False, False, {}


@pytest.mark.timeout(60)
def test_pinned_tensors_of_a_dict_space_are_the_blocks_leaves(fake_cuda):
    with vecenv.ShmemVecEnv([_DictObsEnv] * 3, num_workers=1) as venv:
        plain, pinned = shared_tensors(venv), shared_tensors(venv, pin_memory=True)
        venv.reset()
        obs, rew, _, _ = venv.step(np.zeros(3, np.int64))
        _assert_equal(pinned.observations, obs)
        for a, b in zip(_leaves(plain.observations), _leaves(pinned.observations)):
            assert a.data_ptr() == b.data_ptr() and a.stride() == b.stride() and a.dtype == b.dtype
        np.testing.assert_array_equal(pinned.rewards.numpy(), rew)
        [(ptr, size, _)] = fake_cuda.registered
        for leaf in _leaves(pinned.observations):
            assert ptr <= leaf.data_ptr() < ptr + size
