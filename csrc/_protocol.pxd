# The tables of vecenv._protocol for the compiled core, which cimports them:
# one cdef enum per IntEnum there (Op, Status, Activity, Autoreset, Region,
# Header, SlotWord, ParentCode, WaitCode; the geometry's are anonymous, since
# Cython indexes and offsets with plain ints only), each constant named
# <TABLE PREFIX>_<member name>, and the info keys as C strings under the names
# of their Python constants. Keep both sides equal: _core.pyx exposes this
# side as vecenv._core.PROTOCOL, and tests/test_protocol.py compares it, name
# by name, with vecenv._protocol.mirrored_tables().

# op[env]: the parent's command for an env (one byte).
cdef enum Op:
    OP_NONE = 0
    OP_STEP = 1
    OP_RESET = 2

# status[env]: a worker's report for an env it publishes (one byte).
cdef enum Status:
    STATUS_OK = 0
    STATUS_INFO = 1
    STATUS_ERROR = 2
    STATUS_SHARED_INFO = 3

# The slot's SLOT_ACTIVITY word: what the env the worker is inside is doing.
cdef enum Activity:
    ACTIVITY_NONE = 0
    ACTIVITY_UNPICKLE = 1
    ACTIVITY_CREATE = 2
    ACTIVITY_RESET = 3
    ACTIVITY_STEP = 4
    ACTIVITY_AUTORESET = 5
    ACTIVITY_RENDER = 6
    ACTIVITY_GET_ATTR = 7
    ACTIVITY_SET_ATTR = 8
    ACTIVITY_ENV_METHOD = 9
    ACTIVITY_CALL = 10
    ACTIVITY_IS_WRAPPED = 11

# The engine's autoreset modes.
cdef enum Autoreset:
    AUTORESET_SB3 = 0
    AUTORESET_NEXT_STEP = 1
    AUTORESET_SAME_STEP = 2
    AUTORESET_DISABLED = 3

# Region: the control region's geometry (bytes) and its header's magic word.
cdef enum:
    REGION_HEADER_BYTES = 256
    REGION_SLOT_BYTES = 128
    REGION_ALIGN = 64
    REGION_MAGIC = 0x56454331  # "VEC1"

# Header: byte offsets of the header's u32 words.
cdef enum:
    HDR_MAGIC = 0
    HDR_NUM_ENVS = 4
    HDR_NUM_WORKERS = 8
    HDR_DOORBELL = 64  # rung on every publish; never a count
    HDR_PARENT_WAITING = 68
    HDR_PARENT_TARGET = 72
    HDR_TICKET_COUNTER = 128

# SlotWord: index of each u32 word of a worker's slot.
cdef enum:
    SLOT_CMD_SEQ = 0
    SLOT_SLEEPING = 1
    SLOT_MSG_SEQ = 2
    SLOT_PUBLISHED = 3
    SLOT_COLLECTED = 4
    SLOT_TX_BLOCKED = 5
    SLOT_OPS_WRITING = 6
    SLOT_ENV = 8
    SLOT_ACTIVITY = 9
    SLOT_BUSY_NS = 10  # u64 over words 10-11

# What ParentStep's calls return instead of a result.
cdef enum ParentCode:
    PARENT_NOT_EXACT = -1
    PARENT_WAITING = 0
    PARENT_TOO_FEW = -2
    PARENT_CHECK_DUE = 1

# What Control.wait_ready and WorkerControl.worker_wait return instead of a
# count or a sequence number.
cdef enum WaitCode:
    WAIT_TIMED_OUT = -1
    WAIT_TX_BLOCKED = -2

# The info keys (ASCII).
cdef extern from *:
    """
    #define VE_RESET_INFO_KEY "_vecenv_reset_info"
    #define VE_PICKLED_OBS_KEY "_vecenv_pickled_obs"
    #define VE_PICKLED_FINAL_KEY "_vecenv_pickled_final"
    #define VE_TERMINAL_OBS_KEY "terminal_observation"
    #define VE_TIME_LIMIT_KEY "TimeLimit.truncated"
    """
    const char* RESET_INFO_KEY "VE_RESET_INFO_KEY"
    const char* PICKLED_OBS_KEY "VE_PICKLED_OBS_KEY"
    const char* PICKLED_FINAL_KEY "VE_PICKLED_FINAL_KEY"
    const char* TERMINAL_OBS_KEY "VE_TERMINAL_OBS_KEY"
    const char* TIME_LIMIT_KEY "VE_TIME_LIMIT_KEY"
