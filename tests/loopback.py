"""Test and benchmark support: a loopback-only network namespace for Ray.

The Ray tests (tests/test_ray.py) and benchmarks/ray_overhead.py start Ray
clusters only inside a network namespace whose one interface is ``lo``
(``unshare -n``; scripts/test.sh runs them that way), so that Ray can bind
nothing but 127.0.0.1. Not part of the vecenv package.
"""

from __future__ import annotations


def loopback_namespace() -> bool:
    """For tests and benchmarks: True when this process is in a network
    namespace whose only interface is ``lo`` (``unshare -n``), after bringing
    ``lo`` up (a fresh namespace has it down; needs CAP_NET_ADMIN there).

    Ray binds to the machine's network address; in such a namespace it can
    only use 127.0.0.1. False (and nothing touched) anywhere else.
    """
    import fcntl
    import socket
    import struct

    try:
        if [name for _, name in socket.if_nameindex()] != ["lo"]:
            return False
        get_flags, set_flags, up = 0x8913, 0x8914, 0x1  # SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            ifreq = fcntl.ioctl(s, get_flags, struct.pack("16sH22x", b"lo", 0))
            flags = struct.unpack("16sH22x", ifreq)[1]
            if not flags & up:
                fcntl.ioctl(s, set_flags, struct.pack("16sH22x", b"lo", flags | up))
    except OSError:
        return False
    return True
