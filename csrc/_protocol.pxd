# The codes of vecenv._protocol (Op, Status) for the compiled core, which
# cimports them. Keep both tables equal: tests/test_protocol.py compares them
# through vecenv._core.PROTOCOL.

cdef enum Op:
    OP_NONE = 0
    OP_STEP = 1
    OP_RESET = 2

cdef enum Status:
    STATUS_OK = 0
    STATUS_INFO = 1
    STATUS_ERROR = 2
