"""A network namespace whose only interface is its own loopback, for TF's servers.

TF's gRPC server (``tf.distribute.Server``, and the one MultiWorkerMirroredStrategy starts
from ``TF_CONFIG``) is unauthenticated, and it listens on every interface whatever host the
cluster spec names: TF 2.21's ``GrpcServer::Init`` binds ``"0.0.0.0:" + port`` (gRPC makes
that the dual-stack ``[::]``), and neither ``ServerDef`` nor ``ConfigProto`` has a
bind-address option. So every TF server realdist starts runs in a ``PrivateNetwork``: a
Linux network namespace (with a user namespace that maps the user to itself, when not root)
whose only interface is its own loopback, held by a small holder process; ``preexec_fn``
moves each new process into it. Where no namespace can be made (not Linux, a container
that forbids them), ``isolated`` is False, ``reason`` says why and a warning on stderr says
that the servers listen on every interface of the machine.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import subprocess
import sys

from simdist.base.processes import die_with_parent

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000

#: the holder, its ``lo`` up (``_unshare``): says READY, waits for stdin to close
_HOLDER = "import sys\nprint('READY', flush=True)\nsys.stdin.read()\n"


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _loopback_up() -> None:
    """Bring ``lo`` up (a new network namespace starts with it down)."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, siocgifflags, request)[:18])[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH", b"lo", flags | iff_up))


def _unshare() -> None:
    """In the holder, before exec: a new network namespace (and user namespace if needed)
    with ``lo`` up, while the holder still has its capabilities there (a user other than
    root loses them at exec)."""
    die_with_parent()
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNET if uid == 0 else CLONE_NEWUSER | CLONE_NEWNET
    if _libc().unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    if uid != 0:  # map the user to itself, so that files it writes are the user's
        for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    _loopback_up()


class PrivateNetwork:
    """A network namespace with only a loopback, for the duration of a ``with`` block."""

    def __init__(self):
        self.isolated, self.reason, self._holder = False, "", None

    def __enter__(self) -> PrivateNetwork:
        self._start()
        if not self.isolated:
            print(f"realdist: warning: {self.reason}; TF's servers listen on every network "
                  "interface of this machine during this run (their worker service is "
                  "unauthenticated)", file=sys.stderr, flush=True)
        return self

    def _start(self) -> None:
        if not sys.platform.startswith("linux"):
            self.reason = f"network namespaces are Linux only (this is {sys.platform})"
            return
        try:
            self._holder = subprocess.Popen([sys.executable, "-c", _HOLDER],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True,
                                            preexec_fn=_unshare)
            line = self._holder.stdout.readline()
        except (OSError, subprocess.SubprocessError) as error:
            self.reason = f"cannot make a network namespace: {error}"
            self._stop()
            return
        if line.strip() != "READY":
            self.reason = ("the private network's holder did not start: "
                           f"{self._holder.stderr.read()[-300:].strip() or line!r}")
            self._stop()
            return
        self.isolated = True

    def __exit__(self, *exc) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._holder is not None:
            self._holder.kill()
            self._holder.wait()
            for stream in (self._holder.stdin, self._holder.stdout, self._holder.stderr):
                stream.close()
            self._holder = None

    def namespaces(self) -> dict | None:
        """What a new process joins to be in this network (``join_namespaces``), None when
        the network is not isolated."""
        if not self.isolated:
            return None
        return {"holder": self._holder.pid, "user": os.getuid() != 0}

    def preexec_fn(self):
        """A ``preexec_fn`` that moves a new process into this network (and dies with its
        parent), or only the latter when the network is not isolated."""
        namespaces = self.namespaces()
        if namespaces is None:
            return die_with_parent

        def join():
            die_with_parent()
            join_namespaces(namespaces)

        return join


def join_namespaces(namespaces: dict) -> None:
    """Move this (single-threaded) process into the network of ``namespaces`` (a
    ``PrivateNetwork.namespaces()``): its holder's user namespace where needed, then its
    network namespace."""
    libc = _libc()
    for kind, flag in (("user", CLONE_NEWUSER), ("net", CLONE_NEWNET)):
        if kind == "user" and not namespaces["user"]:
            continue
        fd = os.open(f"/proc/{namespaces['holder']}/ns/{kind}", os.O_RDONLY)
        try:
            if libc.setns(fd, flag) != 0:
                raise OSError(ctypes.get_errno(), f"setns {kind}: "
                              f"{os.strerror(ctypes.get_errno())}")
        finally:
            os.close(fd)
