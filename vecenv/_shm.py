"""Shared-memory segments: create (parent), attach (workers), release (parent).

On Linux the segment is an anonymous ``memfd``: it has no name in ``/dev/shm``
at any time, so nothing can leak there, whatever kills the parent. Workers
attach through ``/proc/<parent pid>/fd/<fd>``, which works under fork, spawn
and forkserver alike and for workers restarted later. The memory is freed
when the last process holding the fd or a mapping exits.

Elsewhere (macOS) a POSIX ``shm_open`` segment with a random name is used; the
parent unlinks the name as soon as every worker attached, and on close.
"""

from __future__ import annotations

import os
import secrets
import sys

from vecenv._core import SharedBlock

_HAS_MEMFD = sys.platform.startswith("linux") and hasattr(os, "memfd_create")


class Segment:
    """A shared-memory segment owned by the parent.

    Attributes
    ----------
    fd : int
        Open descriptor of the segment (closed by :meth:`close`).
    nbytes : int
        Size in bytes.
    handle : str
        What a worker passes to :func:`attach`.
    """

    def __init__(self, nbytes: int):
        if nbytes <= 0:
            raise ValueError(f"nbytes must be > 0, got {nbytes}")
        self.nbytes = int(nbytes)
        self._name = None
        if _HAS_MEMFD:
            self.fd = os.memfd_create("vecenv", os.MFD_CLOEXEC)
            self.handle = f"/proc/{os.getpid()}/fd/{self.fd}"
        else:  # pragma: no cover - exercised on macOS only
            import _posixshmem

            self._name = f"/vecenv-{os.getpid()}-{secrets.token_hex(6)}"
            self.fd = _posixshmem.shm_open(
                self._name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600
            )
            self.handle = self._name
        try:
            os.ftruncate(self.fd, self.nbytes)
        except BaseException:
            self.close()
            raise

    def map(self) -> SharedBlock:
        """Map the whole segment read-write."""
        return SharedBlock(self.fd, self.nbytes)

    def unlink(self) -> None:
        """Remove the segment's name, if it has one (safe to call twice)."""
        if self._name is not None:  # pragma: no cover - macOS only
            import _posixshmem

            try:
                _posixshmem.shm_unlink(self._name)
            except FileNotFoundError:
                pass
            self._name = None

    def close(self) -> None:
        """Unlink and close the descriptor (safe to call twice). Mappings stay
        valid until they are unmapped."""
        self.unlink()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def attach(handle: str, nbytes: int) -> SharedBlock:
    """Worker side: map the segment named by ``handle`` (from :class:`Segment`)."""
    if handle.startswith("/proc/"):
        fd = os.open(handle, os.O_RDWR | os.O_CLOEXEC)
    else:  # pragma: no cover - macOS only
        import _posixshmem

        fd = _posixshmem.shm_open(handle, os.O_RDWR, mode=0o600)
    try:
        return SharedBlock(fd, nbytes)
    finally:
        os.close(fd)
