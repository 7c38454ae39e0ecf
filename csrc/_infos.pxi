# The parent's read of the block's info rows (vecenv._infos.InfoRows, whose
# comment gives the row's layout): an info of scalars whose schema the parent
# knows is built here as a dict, with no Python code per value. The worker's
# write of the same rows is WorkerRound._write_info (_round.pxi).

from cpython.long cimport PyLong_FromLongLong
from cpython.float cimport PyFloat_FromDouble


cdef enum:
    # How read_info_row makes each value (vecenv._infos._READ_KIND).
    _MAKE_FLOAT = 0  # float, from a double
    _MAKE_INT = 1  # int, from an int64
    _MAKE_BOOL = 2  # bool, from a byte
    _MAKE_NUMPY = 3  # a NumPy scalar of the value's dtype, from its bytes


def read_info_row(cnp.ndarray rows, Py_ssize_t base, tuple form):
    """The info of the row at byte ``base`` of ``rows`` (uint8, C-contiguous),
    laid out as ``form`` says: ``(keys, kinds, offsets, dtypes)``, one entry
    per value (``kinds`` a bytes of _MAKE_*; ``offsets`` from the row's start;
    ``dtypes`` a numpy.dtype for each _MAKE_NUMPY value, else None).

    Raises
    ------
    ValueError
        A value beyond the end of ``rows``.
    """
    return _info_of_row(<char*>cnp.PyArray_DATA(rows), cnp.PyArray_NBYTES(rows), base, form)


cdef dict _info_of_row(char* data, Py_ssize_t size, Py_ssize_t base, tuple form):
    """read_info_row over ``size`` bytes at ``data``."""
    cdef tuple keys = <tuple>form[0]
    cdef bytes kinds = <bytes>form[1]
    cdef tuple offsets = <tuple>form[2]
    cdef tuple dtypes = <tuple>form[3]
    cdef Py_ssize_t n = len(keys), j, off, width
    cdef const char* kind = kinds
    cdef char* row = data + base
    cdef double d
    cdef long long q
    cdef dict info = {}
    if len(kinds) != n or len(offsets) != n or len(dtypes) != n:
        raise ValueError("an info row's form has entries of different lengths")
    for j in range(n):
        off = <Py_ssize_t>offsets[j]
        if kind[j] == _MAKE_BOOL:
            width = 1
        elif kind[j] == _MAKE_NUMPY:
            width = (<cnp.dtype>dtypes[j]).itemsize
        else:
            width = 8
        if base < 0 or off < 0 or base + off + width > size:
            raise ValueError(f"value {j} of an info row lies beyond the rows")
        if kind[j] == _MAKE_FLOAT:
            memcpy(&d, row + off, 8)
            value = PyFloat_FromDouble(d)
        elif kind[j] == _MAKE_INT:
            memcpy(&q, row + off, 8)
            value = PyLong_FromLongLong(q)
        elif kind[j] == _MAKE_BOOL:
            value = row[off] != 0
        else:
            value = _ve_array_scalar(row + off, <cnp.dtype>dtypes[j], None)
        info[keys[j]] = value
    return info


def read_info_rows(cnp.ndarray rows, Py_ssize_t row_bytes, Py_ssize_t lo, list envs,
                   dict forms, object read_one):
    """``{env: info}`` for ``envs`` (their rows start at ``row_bytes * (env -
    lo)``): a row whose schema digest (the header's third word) is a key of
    ``forms`` is built by :func:`read_info_row` with that form, any other by
    ``read_one(env)`` (Python, which learns its schema).

    Raises
    ------
    ValueError
        An env whose row lies outside ``rows``.
    """
    cdef Py_ssize_t size = cnp.PyArray_NBYTES(rows), base
    cdef char* data = <char*>cnp.PyArray_DATA(rows)
    cdef uint64_t digest
    cdef dict out = {}
    for env in envs:
        base = row_bytes * (<Py_ssize_t>env - lo)
        if base < 0 or base + row_bytes > size:
            raise ValueError(f"env {env} has no info row in envs [{lo}, {lo + size // row_bytes})")
        memcpy(&digest, data + base + 8, 8)
        form = forms.get(digest)
        out[env] = read_one(env) if form is None else _info_of_row(data, size, base, <tuple>form)
    return out
