# The worker round as one compiled call (issue 16). Included at the end of
# _core.pyx, so it reaches the cdef fields of the worker's WorkerControl
# (those of ControlRegion) directly.
#
# Runs in the worker (or in the process hosting an in-process loop). One
# WorkerRound belongs to one vecenv._worker._Loop and is its only round: per
# env it does what the loop's Python methods do, in the same order and with the
# same side effects, for the cases it can prove identical; every other
# env-step is handed to those methods (the one fallback):
#
#   whole env-step in Python (_Loop._step): a pipe action for the env, pickled
#     actions or pickled observation leaves in the layout;
#   after env.step (_Loop._finish_step): a result that is not a 5-tuple, a
#     reward that is not a float, int or numpy float32/float64, flags that are
#     not bool or numpy.bool_, an info that is not a dict, check_rewards, the
#     end of an episode with same_step autoreset or with sb3 and no final rows;
#   reset ops (_Loop._reset), observations that are not one exact ndarray of
#     the leaf's dtype and shape (_Loop._write_obs: LeafWriter, or the error),
#     actions of Tuple/Dict spaces (the loop's action reader), the error report
#     (error_payload), and a round with any info or error (_Loop._publish_round:
#     pickling, publish, the round message).
#
# Its plain-Python reference, which the tests compare it against in every
# autoreset mode, is tests/reference.py (WorkerRoundReference).
#
# Protocol: the worker slot's activity words (SLOT_ENV: env + 1, SLOT_ACTIVITY)
# name the env being run; its rows, status and ticket are written before the
# ready bytes, which come before the published count and the doorbell (see
# WorkerControl.publish). With episode statistics (the loop's EpisodeTracker,
# vecenv._episodes), an env-step that ends an episode writes the env's three
# finals (return, length, duration) after its reward and flags, so before that
# publish: the parent reads them with the done flag of the same episode.

from cpython.dict cimport PyDict_Next, PyDict_Size
from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_AsDouble, PyFloat_CheckExact
from cpython.ref cimport PyObject
from cpython.long cimport PyLong_Check


cdef extern from "Python.h":
    # Never raises for an int: an int out of range sets *overflow instead.
    long long _ve_long_value "PyLong_AsLongLongAndOverflow" (object x, int* overflow)


cdef extern from "numpy/arrayobject.h":
    # A NumPy scalar holding a copy of the item at ``data`` (what arr[i] gives).
    object _ve_array_scalar "PyArray_Scalar" (void* data, cnp.dtype descr, object base)


cdef enum:
    # How _write_info writes each scalar of an info (vecenv._infos._C_KIND).
    _INFO_DOUBLE = 0  # float, numpy.float64
    _INFO_INT64 = 1  # int (out of int64's range: the info goes pickled)
    _INFO_BOOL = 2  # bool
    _INFO_NUMPY = 3  # another NumPy scalar: its own bytes


cdef extern from "numpy/arrayobject.h":
    # Copies a NumPy scalar's value (its dtype's bytes) to ``out``.
    void _ve_scalar_bytes "PyArray_ScalarAsCtype" (object scalar, void* out)


cdef enum:
    _ACT_PY = 0  # the loop's action reader (Tuple/Dict spaces)
    _ACT_SCALAR = 1  # one leaf of shape (): a NumPy scalar
    _ACT_ARRAY = 2  # one leaf with a shape: a fresh C-contiguous ndarray



cdef class WorkerRound:
    """One worker round (step and reset ops of the worker's envs) in compiled code.

    Built by ``vecenv._worker._Loop`` from itself; what it writes (observation
    rows, rewards, flags, statuses, infos, errors) equals what the loop's
    Python methods would write for the same env-steps, to which it hands every
    case it cannot prove identical.

    Parameters
    ----------
    loop : vecenv._worker._Loop
        The worker loop: its envs, layout, shared views, WorkerControl, action
        reader and the Python methods used for the cases handled there.
    error_payload : callable
        ``error_payload(exc, env_index, where)``: the picklable error report.
    unpack_reset : callable
        ``unpack_reset(result)``: ``(obs, info)`` from what ``env.reset()``
        returned, with Python's unpacking (and its errors).

    Raises
    ------
    ValueError
        The loop's views are not C-contiguous writable arrays of num_envs rows.
    """

    cdef object loop
    cdef WorkerControl ctrl
    cdef uint32_t* slot
    cdef Py_ssize_t worker, lo, hi
    cdef list envs
    cdef object error_payload, unpack_reset
    cdef object py_step, py_finish, py_reset, py_write_obs, py_publish, read_action
    cdef object keep_info  # the loop's InfoKeeper.keep: every info checked and cut
    cdef bint cut_infos  # info_keys given: every dict info goes through keep_info
    cdef object final_writer
    cdef object reset_info_key
    cdef int mode
    cdef bint all_py  # every env-step goes to _Loop._step
    cdef bint check_rewards
    cdef bint has_final
    # action: the shared row of env i is act_base + act_row * i
    cdef int act_kind
    cdef cnp.ndarray act_buf
    cdef cnp.dtype act_descr
    cdef char* act_base
    cdef size_t act_row
    cdef int act_nd, act_typenum
    cdef cnp.npy_intp* act_dims
    # observation: the fast path is one ndarray leaf copied with memcpy
    cdef bint obs_fast
    cdef cnp.ndarray obs_buf, final_buf
    cdef cnp.dtype obs_descr
    cdef char* obs_base
    cdef char* final_base
    cdef size_t obs_row
    cdef int obs_nd
    cdef cnp.npy_intp* obs_dims
    # reward and flags
    cdef cnp.ndarray rew_buf, term_buf, trunc_buf
    cdef double* rew
    cdef uint8_t* term
    cdef uint8_t* trunc
    # episode statistics (vecenv._episodes.EpisodeTracker's arrays): running
    # sums of env lo + k at [k], worker-private; the finals of env i at [i],
    # in the block. ep_on False: the option is off and none is touched.
    cdef bint ep_on
    cdef list ep_bufs
    cdef double* ep_ret
    cdef int64_t* ep_len
    cdef double* ep_start
    cdef double* fin_ret
    cdef int64_t* fin_len
    cdef double* fin_time
    # infos of numbers (vecenv._infos.InfoRows): env lo + k's row starts at
    # info_base + info_row * k and holds the schema of info_plans[k] (the
    # rows' list, kept by the loop's Python write); None: no rows.
    cdef list info_plans
    cdef cnp.ndarray info_buf
    cdef char* info_base
    cdef Py_ssize_t info_row
    # this round's published envs and statuses (at most hi - lo)
    cdef int64_t* done
    cdef uint8_t* statuses
    cdef object np_float32, np_float64, np_bool

    def __cinit__(self, loop, error_payload, unpack_reset):
        self.act_dims = NULL
        self.obs_dims = NULL
        self.done = NULL
        self.statuses = NULL
        self.slot = NULL

    def __init__(self, loop, error_payload, unpack_reset):
        from gymnasium import spaces

        spec, layout = loop.spec, loop.layout
        self.loop = loop
        self.ctrl = loop.ctrl
        self.worker, self.lo, self.hi = spec.index, spec.lo, spec.hi
        if not (0 <= self.worker < self.ctrl.num_workers and 0 <= self.lo <= self.hi <= self.ctrl.num_envs):
            raise ValueError(f"worker {self.worker} with envs [{self.lo}, {self.hi}) does not fit the Control")
        self.slot = self.ctrl._slot(self.worker)
        self.envs = loop.envs
        self.error_payload = error_payload
        self.unpack_reset = unpack_reset
        self.py_step = loop._step
        self.py_finish = loop._finish_step
        self.py_reset = loop._reset
        self.py_write_obs = loop._write_obs
        self.py_publish = loop._publish_round
        self.keep_info = loop.infos.keep
        self.cut_infos = loop.infos.info_keys is not None
        self.read_action = loop.read_action
        self.final_writer = loop.final_writer
        self.reset_info_key = _RESET_INFO_KEY
        self.mode = int(loop.mode)  # a vecenv._protocol.Autoreset
        if self.mode not in (P.AUTORESET_SB3, P.AUTORESET_NEXT_STEP, P.AUTORESET_SAME_STEP,
                             P.AUTORESET_DISABLED):
            raise ValueError(f"loop.mode={loop.mode!r} is not an autoreset mode code")
        self.check_rewards = bool(loop.check_rewards)
        self.np_float32, self.np_float64, self.np_bool = np.float32, np.float64, np.bool_
        rows = loop.info_rows
        self.info_plans = None
        if rows is not None:
            from vecenv._infos import INFO_ROW_BYTES

            self.info_buf = _round_rows(rows.rows, INFO_ROW_BYTES * (self.hi - self.lo), "info rows")
            self.info_base = <char*>cnp.PyArray_DATA(self.info_buf)
            self.info_row = INFO_ROW_BYTES
            self.info_plans = rows._written
        n = max(self.hi - self.lo, 1)
        self.done = <int64_t*>malloc(sizeof(int64_t) * n)
        self.statuses = <uint8_t*>malloc(n)
        if self.done == NULL or self.statuses == NULL:
            raise MemoryError()

        acts, obs, rew, term, trunc, final = loop._views
        self.rew_buf = _round_rows(rew, layout.num_envs, "rewards")
        self.term_buf = _round_rows(term, layout.num_envs, "terminated")
        self.trunc_buf = _round_rows(trunc, layout.num_envs, "truncated")
        self.rew = <double*>cnp.PyArray_DATA(self.rew_buf)
        self.term = <uint8_t*>cnp.PyArray_DATA(self.term_buf)
        self.trunc = <uint8_t*>cnp.PyArray_DATA(self.trunc_buf)

        obs_space = loop.envs[0].observation_space if loop.envs else None
        act_space = loop.envs[0].action_space if loop.envs else None
        structured = (spaces.Tuple, spaces.Dict)
        self.all_py = bool(layout.actions_pickled or layout.obs_pickled)

        self.act_kind = _ACT_PY
        if (not layout.actions_pickled and len(acts) == 1
                and not isinstance(act_space, structured)):
            self.act_buf = _round_rows(acts[0], layout.num_envs, "actions")
            self.act_descr = self.act_buf.dtype
            self.act_base = <char*>cnp.PyArray_DATA(self.act_buf)
            self.act_row = <size_t>(self.act_buf.nbytes // max(layout.num_envs, 1))
            self.act_nd = self.act_buf.ndim - 1
            self.act_typenum = self.act_descr.type_num
            self.act_dims = <cnp.npy_intp*>malloc(sizeof(cnp.npy_intp) * max(self.act_nd, 1))
            if self.act_dims == NULL:
                raise MemoryError()
            for d in range(self.act_nd):
                self.act_dims[d] = self.act_buf.shape[d + 1]
            if self.act_nd == 0:
                self.act_kind = _ACT_SCALAR
            elif self._empty_action().dtype == self.act_descr:  # a builtin, native dtype
                self.act_kind = _ACT_ARRAY

        self.obs_fast = False
        self.has_final = bool(final) and self.final_writer is not None
        if not layout.obs_pickled and len(obs) == 1 and not isinstance(obs_space, structured):
            self.obs_buf = _round_rows(obs[0], layout.num_envs, "observations")
            self.obs_descr = self.obs_buf.dtype
            self.obs_base = <char*>cnp.PyArray_DATA(self.obs_buf)
            self.obs_row = <size_t>(self.obs_buf.nbytes // max(layout.num_envs, 1))
            self.obs_nd = self.obs_buf.ndim - 1
            self.obs_dims = <cnp.npy_intp*>malloc(sizeof(cnp.npy_intp) * max(self.obs_nd, 1))
            if self.obs_dims == NULL:
                raise MemoryError()
            for d in range(self.obs_nd):
                self.obs_dims[d] = self.obs_buf.shape[d + 1]
            if self.has_final:
                self.final_buf = _round_rows(final[0], layout.num_envs, "final observations")
                if ((<object>self.final_buf).dtype != self.obs_descr
                        or (<object>self.final_buf).shape != (<object>self.obs_buf).shape):
                    raise ValueError("the final-observation rows must match the observation rows")
                self.final_base = <char*>cnp.PyArray_DATA(self.final_buf)
            self.obs_fast = True
        self._bind_episodes(loop.episodes, layout.num_envs)

    cdef int _bind_episodes(self, object tracker, Py_ssize_t num_envs) except -1:
        """Take raw pointers to ``tracker``'s arrays (None: the option is off)."""
        self.ep_on = False
        self.ep_bufs = None
        if tracker is None:
            return 0
        bufs = list(tracker.buffers())
        k = self.hi - self.lo
        for j, (what, dtype, rows) in enumerate((
                ("running returns", np.float64, k), ("running lengths", np.int64, k),
                ("episode starts", np.float64, k), ("episode returns", np.float64, num_envs),
                ("episode lengths", np.int64, num_envs), ("episode times", np.float64, num_envs))):
            b = bufs[j]
            if (type(b) is not np.ndarray or b.shape != (rows,) or b.dtype != dtype
                    or not b.flags.c_contiguous or not b.flags.writeable):
                raise ValueError(f"the {what} must be a writable C-contiguous {np.dtype(dtype)} "
                                 f"array of shape ({rows},)")
        self.ep_bufs = bufs
        self.ep_ret = <double*>cnp.PyArray_DATA(<cnp.ndarray>bufs[0])
        self.ep_len = <int64_t*>cnp.PyArray_DATA(<cnp.ndarray>bufs[1])
        self.ep_start = <double*>cnp.PyArray_DATA(<cnp.ndarray>bufs[2])
        self.fin_ret = <double*>cnp.PyArray_DATA(<cnp.ndarray>bufs[3])
        self.fin_len = <int64_t*>cnp.PyArray_DATA(<cnp.ndarray>bufs[4])
        self.fin_time = <double*>cnp.PyArray_DATA(<cnp.ndarray>bufs[5])
        self.ep_on = True
        return 0

    def __dealloc__(self):
        free(self.act_dims)
        free(self.obs_dims)
        free(self.done)
        free(self.statuses)
        self.act_dims = NULL
        self.obs_dims = NULL
        self.done = NULL
        self.statuses = NULL

    def close(self):
        """Drop the views of the shared block and the loop (safe twice); the
        block can then be unmapped. ``run`` raises ValueError afterwards."""
        self.loop = None
        self.ctrl = None
        self.slot = NULL
        self.envs = None
        self.py_step = self.py_finish = self.py_reset = self.keep_info = None
        self.py_write_obs = self.py_publish = self.read_action = None
        self.final_writer = None
        self.act_buf = self.obs_buf = self.final_buf = None
        self.rew_buf = self.term_buf = self.trunc_buf = None
        self.act_base = self.obs_base = self.final_base = NULL
        self.rew = NULL
        self.term = self.trunc = NULL
        self.ep_on = False
        self.ep_bufs = None
        self.ep_ret = self.ep_start = self.fin_ret = self.fin_time = NULL
        self.ep_len = self.fin_len = NULL
        self.info_plans = None
        self.info_buf = None
        self.info_base = NULL

    @property
    def closed(self):
        return self.loop is None

    def run(self, list ops):
        """Run one round: ``ops`` is ``[(env, op), ...]`` from
        ``WorkerControl.take_ops`` (env in [lo, hi), op STEP or RESET). Writes every
        env's rows, leaves the slot and publishes them under one ticket (with
        the round message when an env has an info or an error).

        Raises
        ------
        ValueError
            After :meth:`close`, or more ops than the worker has envs.
        """
        if self.loop is None:
            raise ValueError("the worker round is closed")
        cdef uint64_t started = ve_now_ns()
        cdef Py_ssize_t n = len(ops), j = 0, i, k
        cdef int op
        cdef uint8_t st
        cdef tuple item
        if n > self.hi - self.lo:
            raise ValueError(f"{n} ops for the {self.hi - self.lo} envs of worker {self.worker}")
        loop = self.loop
        if loop.reset_kwargs:
            loop._reseed_from(ops)
        cdef dict pipe = loop.pipe_actions
        cdef list needs = loop.needs_reset
        cdef dict infos = None
        cdef dict errors = None
        for j in range(n):
            item = <tuple>ops[j]
            i = item[0]
            op = item[1]
            k = i - self.lo
            if k < 0 or i >= self.hi:
                raise ValueError(f"env {i} is not one of worker {self.worker}'s envs [{self.lo}, {self.hi})")
            try:
                if op == P.OP_STEP:
                    self.slot[P.SLOT_ACTIVITY] = P.ACTIVITY_STEP
                    self.slot[P.SLOT_ENV] = <uint32_t>(i + 1)
                    info = self._step(i, k, pipe, needs)
                else:
                    self.slot[P.SLOT_ACTIVITY] = P.ACTIVITY_RESET
                    self.slot[P.SLOT_ENV] = <uint32_t>(i + 1)
                    info = self.py_reset(i, k)
            except BaseException as exc:
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                if errors is None:
                    errors = {}
                errors[i] = self.error_payload(exc, i, "step" if op == P.OP_STEP else "reset")
                st = P.STATUS_ERROR
            else:
                if info:
                    if self.info_plans is not None and type(info) is dict and self._write_info(k, <dict>info):
                        st = P.STATUS_SHARED_INFO  # in its row, as the last layout
                    else:
                        if infos is None:
                            infos = {}
                        infos[i] = info
                        st = P.STATUS_INFO
                else:
                    st = P.STATUS_OK
            self.done[j] = i
            self.statuses[j] = st
        self.slot[P.SLOT_ENV] = 0
        self.slot[P.SLOT_ACTIVITY] = 0
        # The round's time, before its publish: a parent that sees the envs
        # published sees this round counted (SLOT_BUSY_NS: only this worker
        # writes it; a u64, 8-byte aligned, read whole by the parent).
        (<uint64_t*>&self.slot[P.SLOT_BUSY_NS])[0] += ve_now_ns() - started
        if infos is not None or errors is not None:
            self.py_publish(
                [self.done[j] for j in range(n)],
                [self.statuses[j] for j in range(n)],
                infos if infos is not None else {},
                errors if errors is not None else {},
            )
        elif n:
            self._publish(n)

    cdef bint _write_info(self, Py_ssize_t k, dict info) except -1:
        """Write env ``lo + k``'s info into its row when it has the layout
        whose schema the row holds (its keys in order, each value's exact
        type) and it is a flat info of scalars; False leaves the info to
        _Loop._publish_round (vecenv._infos.InfoRows.write), which writes
        a new layout's schema, or pickles it. Only this env's values region
        is written before a False, which no reader sees (the status says
        the info is on the pipe)."""
        plan = self.info_plans[k]
        if plan is None:
            return False
        form = plan.c_form
        if form is None:
            return False
        cdef tuple keys = <tuple>form[0]
        cdef tuple types = <tuple>form[1]
        cdef bytes kinds = <bytes>form[2]
        cdef tuple offsets = <tuple>form[3]
        cdef Py_ssize_t n = len(keys), pos = 0, j = 0, off
        if PyDict_Size(info) != n:
            return False
        cdef PyObject* key
        cdef PyObject* value
        cdef char* row = self.info_base + self.info_row * k
        cdef char* at
        cdef const char* kind = kinds
        cdef double d
        cdef long long q
        cdef int overflow = 0
        while PyDict_Next(info, &pos, &key, &value):
            if key != <PyObject*>keys[j] and not (
                    type(<object>key) is str and <object>key == keys[j]):
                return False
            if type(<object>value) is not types[j]:
                return False
            off = <Py_ssize_t>offsets[j]
            if off < 0 or off + 8 > self.info_row:  # every value is at most 8 bytes
                return False
            at = row + off
            if kind[j] == _INFO_DOUBLE:
                d = PyFloat_AS_DOUBLE(<object>value)
                memcpy(at, &d, 8)
            elif kind[j] == _INFO_INT64:
                q = _ve_long_value(<object>value, &overflow)
                if overflow:
                    return False
                memcpy(at, &q, 8)
            elif kind[j] == _INFO_BOOL:
                at[0] = 1 if (<object>value) is True else 0
            else:
                _ve_scalar_bytes(<object>value, at)
            j += 1
        return True

    cdef void _publish(self, Py_ssize_t n) noexcept:
        # The statuses, then WorkerControl's publish (tickets, ready bytes, doorbell).
        cdef WorkerControl c = self.ctrl
        cdef Py_ssize_t j
        for j in range(n):
            c.status[self.done[j]] = self.statuses[j]
        c._publish_envs(self.slot, self.done, n)

    cdef object _empty_action(self):
        return cnp.PyArray_EMPTY(self.act_nd, self.act_dims, self.act_typenum, 0)

    cdef inline object _action(self, Py_ssize_t i):
        cdef char* src = self.act_base + self.act_row * <size_t>i
        if self.act_kind == _ACT_SCALAR:
            return _ve_array_scalar(src, self.act_descr, self.act_buf)
        if self.act_kind == _ACT_ARRAY:
            a = self._empty_action()
            memcpy(cnp.PyArray_DATA(<cnp.ndarray>a), src, self.act_row)
            return a
        return self.read_action(i)

    cdef inline bint _copy_obs(self, Py_ssize_t i, object obs, char* base) except -1:
        """memcpy ``obs`` into row ``i`` of ``base`` if it is one exact ndarray
        of the leaf's dtype and shape, C-contiguous; False otherwise."""
        cdef cnp.ndarray a
        cdef int d
        if not self.obs_fast or type(obs) is not np.ndarray:
            return False
        a = <cnp.ndarray>obs
        if cnp.PyArray_NDIM(a) != self.obs_nd or not cnp.PyArray_IS_C_CONTIGUOUS(a):
            return False
        if (<void*>cnp.PyArray_DESCR(a) != <void*>self.obs_descr
                and not cnp.PyArray_EquivTypes(a.dtype, self.obs_descr)):
            return False
        for d in range(self.obs_nd):
            if cnp.PyArray_DIMS(a)[d] != self.obs_dims[d]:
                return False
        memcpy(base + self.obs_row * <size_t>i, cnp.PyArray_DATA(a), self.obs_row)
        return True

    cdef inline object _autoreset(self, Py_ssize_t i, Py_ssize_t k):
        """``env.reset()`` with the slot saying so: ``(obs, info)``."""
        self.slot[P.SLOT_ACTIVITY] = P.ACTIVITY_AUTORESET
        self.slot[P.SLOT_ENV] = <uint32_t>(i + 1)
        result = self.envs[k].reset()
        if type(result) is not tuple or len(<tuple>result) != 2:
            result = self.unpack_reset(result)
        if self.cut_infos or type((<tuple>result)[1]) is not dict:  # keep_info raises for a non-dict
            result = ((<tuple>result)[0], self.keep_info((<tuple>result)[1], i, "reset()"))
        return result

    cdef object _step(self, Py_ssize_t i, Py_ssize_t k, dict pipe, list needs):
        """Env ``i``'s step (k = i - lo): what _Loop._step returns (its info)."""
        cdef double r
        cdef long long v
        cdef int t, u, overflow = 0
        if self.all_py or (pipe and i in pipe):
            return self.py_step(i, k)
        env = self.envs[k]
        if needs[k]:  # next_step autoreset: this step is the reset
            needs[k] = False
            obs, info = self._autoreset(i, k)
            if not self._copy_obs(i, obs, self.obs_base):
                self.py_write_obs(i, obs)
            self.rew[i] = 0.0
            self.term[i] = 0
            self.trunc[i] = 0
            if self.ep_on:  # a new episode: this step is none of its env-steps
                self._episode_restart(k, ve_now())
            return info
        result = env.step(self._action(i))
        # Everything the compiled tail needs is checked before its first side
        # effect; anything else goes to the Python tail with the result.
        if type(result) is not tuple or len(<tuple>result) != 5 or self.check_rewards:
            return self.py_finish(i, k, result)
        obs, reward, terminated, truncated, info = <tuple>result
        if type(info) is not dict:
            return self.py_finish(i, k, result)
        if self.cut_infos:
            info = self.keep_info(info, i, "step()")
        if PyFloat_CheckExact(reward) or type(reward) is self.np_float64:
            r = PyFloat_AS_DOUBLE(reward)
        elif type(reward) is self.np_float32:
            r = PyFloat_AsDouble(reward)
        elif PyLong_Check(reward):  # int and bool
            v = _ve_long_value(reward, &overflow)
            if overflow:  # the Python tail raises, after any autoreset
                return self.py_finish(i, k, result)
            r = <double>v  # rounded as float(int) rounds
        else:
            return self.py_finish(i, k, result)
        t = _flag(terminated, self.np_bool)
        u = _flag(truncated, self.np_bool)
        if t < 0 or u < 0:
            return self.py_finish(i, k, result)
        if t or u:
            if self.mode == P.AUTORESET_SB3:
                if not self.has_final:
                    return self.py_finish(i, k, result)
                # The last observation goes to its final row before reset(),
                # which may overwrite the env's array.
                if not self._copy_obs(i, obs, self.final_base):
                    self.py_write_obs(i, obs, self.final_writer, "a final observation")
                obs, reset_info = self._autoreset(i, k)
                if reset_info:
                    info = dict(<dict>info)
                    info[self.reset_info_key] = reset_info
            elif self.mode == P.AUTORESET_NEXT_STEP:
                needs[k] = True
            elif self.mode == P.AUTORESET_SAME_STEP:
                return self.py_finish(i, k, result)
        if not self._copy_obs(i, obs, self.obs_base):
            self.py_write_obs(i, obs)
        self.rew[i] = r
        self.term[i] = <uint8_t>t
        self.trunc[i] = <uint8_t>u
        if self.ep_on:
            self._episode_step(i, k, r, t | u)
        return info

    cdef inline void _episode_restart(self, Py_ssize_t k, double now) noexcept nogil:
        self.ep_ret[k] = 0.0
        self.ep_len[k] = 0
        self.ep_start[k] = now

    cdef inline void _episode_step(self, Py_ssize_t i, Py_ssize_t k, double r, int done) noexcept nogil:
        """EpisodeTracker.step: add the env-step; at the episode's end write
        the finals (before the publish) and restart."""
        cdef double now
        self.ep_ret[k] += r
        self.ep_len[k] += 1
        if done:
            now = ve_now()
            self.fin_ret[i] = self.ep_ret[k]
            self.fin_len[i] = self.ep_len[k]
            self.fin_time[i] = now - self.ep_start[k]
            self._episode_restart(k, now)


cdef inline int _flag(object x, object np_bool):
    """1 or 0 for a bool or numpy.bool_, -1 for anything else."""
    if x is True:
        return 1
    if x is False:
        return 0
    if type(x) is np_bool:
        return 1 if x else 0
    return -1


cdef cnp.ndarray _round_rows(object buf, Py_ssize_t num_envs, str what):
    if (type(buf) is not np.ndarray or buf.ndim < 1 or buf.shape[0] != num_envs
            or not buf.flags.c_contiguous or not buf.flags.writeable):
        raise ValueError(f"the {what} view must be a writable C-contiguous ndarray of {num_envs} rows")
    return <cnp.ndarray>buf
