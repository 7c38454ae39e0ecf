# The parent's step path in one compiled call (issue 16). Included at the end
# of _core.pyx, so it reads the C fields of the parent's Control directly.
#
# What one call does, in the order of vecenv.shmem_vec_env's Python path:
# write the actions into their shared rows (only an ndarray of the action
# leaf's dtype and shape, C-contiguous: anything else is left to Python),
# dispatch, wait for one slice (spin, then futex), collect, and build the
# arrays and the per-env info dicts the caller gets. It never reads a pipe,
# never checks worker liveness and never raises for a worker: it returns a
# code instead, and the Python caller takes over from exactly where the call
# stopped (the same state as its own path would be in at that point).
#
# Protocol (as Control's): the actions of an env are written only while it is
# not in flight (the caller's state guard and the in-flight bytes say so),
# before its op byte (dispatch fences); its rows are read only after collect
# saw its ready byte.

from cpython.dict cimport PyDict_New
from libc.math cimport INFINITY

# Return codes of ParentStep.step/finish/recv (tuples are results): the
# PARENT_* of csrc/_protocol.pxd, exposed in _core.pyx.


cdef class ParentStep:
    """Parent side: the common step of a ShmemVecEnv in one call.

    Parameters
    ----------
    ctrl : Control
        The parent's Control (``track_in_flight`` already set).
    act_buf : numpy.ndarray or None
        The single action leaf's shared buffer, shape (num_envs, *shape),
        C-contiguous, writable; None when the action space has another
        layout (Tuple/Dict, pickled leaves): every ``actions`` is then "not
        exact" and the caller writes them.
    obs_bufs : list of numpy.ndarray
        The observation leaves' shared buffers, each (num_envs, *shape),
        C-contiguous.
    gather_out : list of numpy.ndarray
        One (batch_size, *shape) buffer per observation leaf: where
        :meth:`recv` gathers with ``copy=False``.
    rew, term, trunc : numpy.ndarray
        The shared float64 rewards and bool flags, shape (num_envs,).
    ids_out : numpy.ndarray
        int64 scratch, shape (num_envs,), for collect.
    final_bufs : list of numpy.ndarray or None
        "sb3" autoreset: the last observations of ended episodes, one
        (num_envs, *shape) buffer per leaf; None in the other modes.
    unflatten : callable or None
        Leaves -> the observation (Tuple/Dict spaces); None: one leaf, which
        is the observation.
    copy : bool
        True: observations are fresh arrays; False: views into shared memory
        (:meth:`recv`: views of consecutive rows, else ``gather_out``).
    cores : int
        Usable CPU cores. :meth:`recv` spins only while fewer workers than
        this are busy (0: always): a spinning parent would take a core from
        a worker that is stepping its envs.
    ends_in_python : bool
        True: ``ended`` counts every env whose episode ended, for the
        caller's Python part, which adds what only it knows (the episode
        statistics); terminal observations are still added here when no env
        is flagged. Default False.

    Raises
    ------
    ValueError
        A buffer of the wrong shape, dtype or contiguity.
    """

    cdef Control ctrl
    cdef Py_ssize_t n
    cdef object act_buf
    cdef object act_descr
    cdef int act_ndim
    cdef cnp.npy_intp act_row_dims[32]
    cdef char* act_ptr
    cdef size_t act_row_bytes
    cdef list obs_bufs
    cdef list gather_out
    cdef list final_bufs  # None unless "sb3" autoreset
    cdef object obs_view  # the copy=False observation of a lockstep step (one leaf)
    cdef object unflatten
    cdef bint copy
    cdef cnp.ndarray rew
    cdef cnp.ndarray term
    cdef cnp.ndarray trunc
    cdef cnp.ndarray ids_out
    cdef uint8_t* mark  # scratch: one byte per env (send's duplicate check)
    cdef uint8_t* wmark  # scratch: one byte per worker (recv's busy count)
    cdef Py_ssize_t cores
    cdef bint ends_in_python
    cdef readonly bint exact_actions
    # The block's info rows (vecenv._infos.InfoRows, set by use_info_rows):
    # a flagged env whose info is there in a layout of info_forms (schema
    # digest -> compiled read) gets it here, not in Python.
    cdef cnp.ndarray info_rows
    cdef Py_ssize_t info_row_bytes
    cdef dict info_forms

    def __cinit__(self, Control ctrl, act_buf, list obs_bufs, list gather_out,
                  cnp.ndarray rew, cnp.ndarray term, cnp.ndarray trunc,
                  cnp.ndarray ids_out, final_bufs, unflatten, bint copy, Py_ssize_t cores=0,
                  bint ends_in_python=False):
        self.mark = NULL
        self.wmark = NULL
        self.cores = cores
        self.ends_in_python = ends_in_python
        n = ctrl.num_envs
        self.ctrl = ctrl
        self.n = n
        for name, a, dt in (("rew", rew, np.float64), ("term", term, np.bool_),
                            ("trunc", trunc, np.bool_), ("ids_out", ids_out, np.int64)):
            if (<object>a).shape != (n,) or a.dtype != dt or not a.flags.c_contiguous:
                raise ValueError(f"{name} must be a C-contiguous {np.dtype(dt)} array of shape ({n},)")
        for j, b in enumerate(obs_bufs):
            if not isinstance(b, np.ndarray) or b.ndim < 1 or b.shape[0] != n or not b.flags.c_contiguous:
                raise ValueError(f"obs_bufs[{j}] must be a C-contiguous array with {n} rows")
        self.rew, self.term, self.trunc, self.ids_out = rew, term, trunc, ids_out
        self.obs_bufs = list(obs_bufs)
        self.gather_out = list(gather_out)
        self.final_bufs = None if final_bufs is None else list(final_bufs)
        if self.final_bufs is not None and len(self.final_bufs) != len(self.obs_bufs):
            raise ValueError(f"final_bufs has {len(self.final_bufs)} leaves, obs_bufs {len(self.obs_bufs)}")
        self.unflatten = unflatten
        self.copy = copy
        self.obs_view = None
        if unflatten is None:
            if len(obs_bufs) != 1:
                raise ValueError(f"unflatten=None needs one observation leaf, got {len(obs_bufs)}")
            self.obs_view = obs_bufs[0]
        self.exact_actions = act_buf is not None
        self.act_ptr = NULL
        self.act_row_bytes = 0
        self.act_ndim = 0
        if act_buf is not None:
            b = act_buf
            if (not isinstance(b, np.ndarray) or b.ndim < 1 or b.ndim > 32 or b.shape[0] != n
                    or not b.flags.c_contiguous or not b.flags.writeable):
                raise ValueError(f"act_buf must be a writable C-contiguous array with {n} rows")
            self.act_buf = b
            self.act_descr = b.dtype
            self.act_ndim = b.ndim
            for j in range(1, b.ndim):
                self.act_row_dims[j] = b.shape[j]
            self.act_ptr = <char*>cnp.PyArray_DATA(<cnp.ndarray>b)
            self.act_row_bytes = <size_t>(b.nbytes // n)
        self.mark = <uint8_t*>malloc(<size_t>n)
        self.wmark = <uint8_t*>malloc(<size_t>ctrl.num_workers)
        if self.mark == NULL or self.wmark == NULL:
            raise MemoryError()
        memset(self.mark, 0, <size_t>n)
        memset(self.wmark, 0, <size_t>ctrl.num_workers)

    def __dealloc__(self):
        free(self.mark)
        free(self.wmark)
        self.mark = NULL
        self.wmark = NULL

    cdef Py_ssize_t _busy_workers(self) noexcept:
        """Workers with an env dispatched and not yet published (stepping)."""
        cdef Control c = self.ctrl
        cdef Py_ssize_t i, w, busy = 0
        if c.inflight == NULL:
            return 0
        for i in range(self.n):
            if c.inflight[i] and not c.ready[i]:
                w = c.env_worker[i]
                if not self.wmark[w]:
                    self.wmark[w] = 1
                    busy += 1
        memset(self.wmark, 0, <size_t>c.num_workers)
        return busy

    # ------------------------------------------------------------ actions
    cdef const char* _exact(self, object actions, Py_ssize_t rows) except? NULL:
        """The data of ``actions`` when it is an ndarray of the action leaf's
        dtype, shape (rows, *shape) and C-contiguous, else NULL."""
        if self.act_ptr == NULL or type(actions) is not np.ndarray:
            return NULL
        cdef cnp.ndarray a = <cnp.ndarray>actions
        if cnp.PyArray_NDIM(a) != self.act_ndim or not cnp.PyArray_IS_C_CONTIGUOUS(a):
            return NULL
        cdef cnp.npy_intp* dims = cnp.PyArray_DIMS(a)
        if dims[0] != rows:
            return NULL
        cdef int j
        for j in range(1, self.act_ndim):
            if dims[j] != self.act_row_dims[j]:
                return NULL
        if not cnp.PyArray_EquivTypes(a.dtype, <cnp.dtype>self.act_descr):
            return NULL
        return <const char*>cnp.PyArray_DATA(a)

    def start(self, actions):
        """Lockstep: write ``actions`` (None: the caller wrote them) and
        dispatch a step of every env. Returns False, having done nothing,
        when ``actions`` is not an exact array (see the class)."""
        cdef const char* src
        if actions is not None:
            src = self._exact(actions, self.n)
            if src == NULL:
                return False
            with nogil:
                memcpy(self.act_ptr, src, self.act_row_bytes * <size_t>self.n)
        self.ctrl.dispatch_all(P.OP_STEP)
        return True

    def send(self, actions, env_ids):
        """Partial batches: write ``actions`` (row j for env ``env_ids[j]``)
        and dispatch a step of those envs. Returns False, having done nothing,
        unless ``env_ids`` is a non-empty 1-D C-contiguous int64 ndarray of
        distinct envs in [0, num_envs), none in flight, and ``actions`` an
        exact array of ``len(env_ids)`` rows: the caller then checks and
        explains."""
        if type(env_ids) is not np.ndarray:
            return False
        cdef cnp.ndarray ids = <cnp.ndarray>env_ids
        if (cnp.PyArray_NDIM(ids) != 1 or cnp.PyArray_TYPE(ids) != cnp.NPY_INT64
                or not cnp.PyArray_IS_C_CONTIGUOUS(ids)):
            return False
        cdef Py_ssize_t k = cnp.PyArray_DIMS(ids)[0], j
        if k == 0:
            return False
        cdef const int64_t* p = <const int64_t*>cnp.PyArray_DATA(ids)
        cdef const char* src = self._exact(actions, k)
        if src == NULL:
            return False
        cdef bint ok = True
        cdef int64_t e
        cdef uint8_t* inflight = self.ctrl.inflight
        cdef size_t rb = self.act_row_bytes
        with nogil:
            for j in range(k):
                e = p[j]
                if e < 0 or e >= self.n or self.mark[e] or (inflight != NULL and inflight[e]):
                    ok = False
                    break
                self.mark[e] = 1
            for j in range(k):
                e = p[j]
                if e < 0 or e >= self.n:
                    break
                self.mark[e] = 0
            if ok:
                _scatter_c(self.act_ptr, src, p, k, rb)
        if not ok:
            return False
        self.ctrl.dispatch(ids, P.OP_STEP)
        return True

    def use_info_rows(self, cnp.ndarray rows, Py_ssize_t row_bytes, dict forms):
        """Read the infos of flagged envs from ``rows`` (uint8, one row of
        ``row_bytes`` per env) where every flagged env's info is there
        (Status.SHARED_INFO) in a layout of ``forms`` (kept up to date by
        vecenv._infos.InfoRows.read, which reads the others)."""
        if cnp.PyArray_NBYTES(rows) < row_bytes * self.n or not cnp.PyArray_ISCARRAY_RO(rows):
            raise ValueError(f"info rows must be C-contiguous, {row_bytes} bytes per env")
        self.info_rows, self.info_row_bytes, self.info_forms = rows, row_bytes, forms

    # ------------------------------------------------------------ results
    cdef bint _shared_infos(self, list infos, const int64_t* env_of, Py_ssize_t rows) except -1:
        """Every flagged env among the ``rows`` (row j is env ``env_of[j]``,
        or env j when NULL) has its info in the block in a known layout: put
        each into ``infos[j]`` and return True. Otherwise change nothing and
        return False (Collector.read_flagged reads them all)."""
        if self.info_forms is None:
            return False
        cdef Control c = self.ctrl
        cdef Py_ssize_t j, i, base
        cdef char* data = <char*>cnp.PyArray_DATA(self.info_rows)
        cdef Py_ssize_t size = cnp.PyArray_NBYTES(self.info_rows)
        cdef uint64_t digest
        cdef list todo = []
        for j in range(rows):
            i = env_of[j] if env_of != NULL else j
            if c.status[i] == P.STATUS_OK:
                continue
            if c.status[i] != P.STATUS_SHARED_INFO:
                return False
            base = self.info_row_bytes * i
            memcpy(&digest, data + base + 8, 8)
            form = self.info_forms.get(digest)
            if form is None:
                return False
            todo.append((j, base, form))
        for j, base, form in todo:
            infos[j] = _info_of_row(data, size, base, <tuple>form)
        return True

    cdef Py_ssize_t _terminal(self, list infos, list reset_infos, const int64_t* env_of,
                              Py_ssize_t rows, const uint8_t* d) except -1:
        """"sb3" autoreset, no env flagged: what Collector._complete does for
        the ended rows (``d[j]``; row j is env ``env_of[j]``, or env j when
        NULL): a fresh reset info, the last observation (a copy) and
        ``TimeLimit.truncated``. Returns 0 (no ended env left to Python)."""
        cdef Py_ssize_t j, i
        cdef const uint8_t* te = <const uint8_t*>cnp.PyArray_DATA(self.term)
        cdef const uint8_t* tr = <const uint8_t*>cnp.PyArray_DATA(self.trunc)
        if self.final_bufs is None:
            return 0  # nothing to add outside "sb3" autoreset
        if reset_infos is None:
            raise ValueError('"sb3" autoreset needs the reset_infos list')
        for j in range(rows):
            if not d[j]:
                continue
            i = env_of[j] if env_of != NULL else j
            reset_infos[i] = PyDict_New()
            leaves = [b[i].copy() for b in self.final_bufs]
            info = infos[j]
            info[_TERMINAL_OBS_KEY] = leaves[0] if self.unflatten is None else self.unflatten(leaves)
            info[_TIME_LIMIT_KEY] = bool(tr[i] and not te[i])
        return 0

    def step(self, actions, double spin_s, double first_s, list reset_infos=None,
             double next_check=INFINITY):
        """:meth:`start` then :meth:`finish` in one call.

        Returns PARENT_NOT_EXACT (nothing done), or what :meth:`finish`
        returns (PARENT_WAITING and PARENT_CHECK_DUE: dispatched, to be
        waited for and collected in Python)."""
        if not self.start(actions):
            return P.PARENT_NOT_EXACT
        return self.finish(spin_s, first_s, reset_infos, next_check)

    def finish(self, double spin_s, double first_s, list reset_infos=None,
               double next_check=INFINITY):
        """Lockstep: wait (spin up to ``spin_s`` s, at most ``first_s`` s in
        all) for every env, collect them and build the result.

        Returns
        -------
        PARENT_CHECK_DUE
            ``time.monotonic()`` (CLOCK_MONOTONIC) has reached
            ``next_check``: the Python wait checks worker liveness first.
            Nothing was waited for.
        PARENT_WAITING
            Not all published within ``first_s`` (or a worker waits for room
            on its pipe): nothing was collected.
        (obs, rewards, dones, infos, flagged, ended) : tuple
            obs: fresh arrays (copy=True) or the shared views, unflattened;
            rewards: float64 (num_envs,), fresh; dones: bool (num_envs,),
            ``terminated | truncated``, fresh; infos: num_envs new dicts;
            flagged: envs with a message on their pipe (the caller reads
            them); ended: with "sb3" autoreset and a flagged env, or with
            ``ends_in_python``, the envs whose episode ended, else 0. When
            both are 0 the batch is
            complete: with "sb3" autoreset ``reset_infos`` (the vec env's
            list) got a fresh dict and ``infos`` the terminal observation of
            each ended env. Otherwise the caller finishes it
            (Collector._complete).
        """
        cdef Control c = self.ctrl
        if ve_now() >= next_check:
            return P.PARENT_CHECK_DUE
        if self.cores and self._busy_workers() >= self.cores:
            spin_s = 0.0  # the workers need every core: sleep until they publish
        if c.wait_ready(self.n, spin_s, first_s) < 0:
            return P.PARENT_WAITING
        flagged = c.collect_all()
        cdef Py_ssize_t i, n = self.n, ended = 0
        cdef cnp.npy_intp dim = n
        dones = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_BOOL, 0)
        cdef uint8_t* d = <uint8_t*>cnp.PyArray_DATA(<cnp.ndarray>dones)
        cdef const uint8_t* te = <const uint8_t*>cnp.PyArray_DATA(self.term)
        cdef const uint8_t* tr = <const uint8_t*>cnp.PyArray_DATA(self.trunc)
        with nogil:
            for i in range(n):
                d[i] = 1 if (te[i] | tr[i]) else 0
                ended += d[i]
        rew = cnp.PyArray_NewCopy(self.rew, cnp.NPY_CORDER)
        infos = [PyDict_New() for i in range(n)]
        if flagged and self._shared_infos(infos, NULL, n):
            flagged = 0  # every flagged env's info came from the block
        if ended and self.final_bufs is not None and not flagged:
            self._terminal(infos, reset_infos, NULL, n, d)
            if not self.ends_in_python:
                ended = 0
        elif self.final_bufs is None and not self.ends_in_python:
            ended = 0
        if self.copy:
            leaves = [cnp.PyArray_NewCopy(<cnp.ndarray>b, cnp.NPY_CORDER) for b in self.obs_bufs]
            obs = leaves[0] if self.unflatten is None else self.unflatten(leaves)
        elif self.unflatten is None:
            obs = self.obs_view
        else:
            obs = self.unflatten(self.obs_bufs)
        return obs, rew, dones, infos, flagged, ended

    def recv(self, Py_ssize_t k, double spin_s, double first_s, list reset_infos=None,
             double next_check=INFINITY):
        """Partial batches: wait for ``k`` envs, collect the oldest ``k``
        (FIFO, as Control.collect) and build the batch.

        Returns
        -------
        PARENT_TOO_FEW
            Fewer than ``k`` envs are in flight (nothing done).
        PARENT_CHECK_DUE
            A liveness check is due (see :meth:`finish`): nothing done.
        PARENT_WAITING
            Not ``k`` published within ``first_s``: nothing collected.
        (obs, rewards, dones, infos, env_ids, flagged, ended, in_flight) : tuple
            Row j is env ``env_ids[j]`` (int64 (k,), fresh; FIFO order, or
            sorted with copy=False); flagged and ended as in :meth:`finish`.
            obs: when the rows are consecutive envs, a copy of the block (copy=True) or views of it (copy=False);
            else gathered into fresh arrays (copy=True) or ``gather_out``.
            in_flight: envs still in flight after this collect.
        """
        cdef Control c = self.ctrl
        cdef Py_ssize_t i, j, n = self.n, pending = 0, ended = 0
        if k < 1 or k > n:
            raise ValueError(f"k={k} must be in [1, {n}]")
        if c.inflight != NULL:
            for i in range(n):
                pending += c.inflight[i]
        if pending < k:
            return P.PARENT_TOO_FEW
        if ve_now() >= next_check:
            return P.PARENT_CHECK_DUE
        if self.cores and self._busy_workers() >= self.cores:
            spin_s = 0.0  # the workers need every core: sleep until they publish
        if c.wait_ready(k, spin_s, first_s) < 0:
            return P.PARENT_WAITING
        flagged = c.collect(k, self.ids_out)
        cdef cnp.npy_intp dim = k
        ids = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT64, 0)
        cdef int64_t* p = <int64_t*>cnp.PyArray_DATA(<cnp.ndarray>ids)
        cdef int64_t e
        memcpy(p, cnp.PyArray_DATA(self.ids_out), sizeof(int64_t) * <size_t>k)
        cdef bint consecutive = True
        with nogil:
            if not self.copy:  # env order, as the Python path (insertion sort: k is small)
                for i in range(1, k):
                    e = p[i]
                    j = i - 1
                    while j >= 0 and p[j] > e:
                        p[j + 1] = p[j]
                        j -= 1
                    p[j + 1] = e
            for i in range(1, k):
                if p[i] != p[0] + i:
                    consecutive = False
                    break
        rew = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_FLOAT64, 0)
        dones = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_BOOL, 0)
        cdef double* r = <double*>cnp.PyArray_DATA(<cnp.ndarray>rew)
        cdef uint8_t* d = <uint8_t*>cnp.PyArray_DATA(<cnp.ndarray>dones)
        cdef const double* rs = <const double*>cnp.PyArray_DATA(self.rew)
        cdef const uint8_t* te = <const uint8_t*>cnp.PyArray_DATA(self.term)
        cdef const uint8_t* tr = <const uint8_t*>cnp.PyArray_DATA(self.trunc)
        with nogil:
            for j in range(k):
                e = p[j]
                r[j] = rs[e]
                d[j] = 1 if (te[e] | tr[e]) else 0
                ended += d[j]
        infos = [PyDict_New() for j in range(k)]
        if ended and self.final_bufs is not None and not flagged:
            self._terminal(infos, reset_infos, p, k, d)
            if not self.ends_in_python:
                ended = 0
        elif self.final_bufs is None and not self.ends_in_python:
            ended = 0
        cdef Py_ssize_t lo = p[0]
        if consecutive:
            if self.copy:
                leaves = [cnp.PyArray_NewCopy(<cnp.ndarray>(b[lo:lo + k]), cnp.NPY_CORDER)
                          for b in self.obs_bufs]
            else:
                leaves = [b[lo:lo + k] for b in self.obs_bufs]
        else:
            leaves = []
            for b, out in zip(self.obs_bufs, self.gather_out):
                dst = np.empty_like(out) if self.copy else out
                _gather_leaf(<cnp.ndarray>b, p, k, <cnp.ndarray>dst)
                leaves.append(dst)
        obs = leaves[0] if self.unflatten is None else self.unflatten(leaves)
        return obs, rew, dones, infos, ids, flagged, ended, pending - k


cdef int _gather_leaf(cnp.ndarray src, const int64_t* ids, Py_ssize_t k, cnp.ndarray dst) except -1:
    """Rows ``src[ids[j]]`` to ``dst[j]``; both C-contiguous with equal rows."""
    cdef size_t rb = <size_t>(src.nbytes // src.shape[0]) if src.shape[0] else 0
    if dst.shape[0] < k or <size_t>(dst.nbytes // dst.shape[0] if dst.shape[0] else 0) != rb:
        raise ValueError("gather buffer does not match the observation rows")
    cdef const char* s = <const char*>cnp.PyArray_DATA(src)
    cdef char* o = <char*>cnp.PyArray_DATA(dst)
    with nogil:
        _gather_c(o, s, ids, k, rb)
    return 0
