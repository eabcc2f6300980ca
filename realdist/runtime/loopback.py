"""A private network for the TF servers realdist starts: only a loopback, nothing else.

TF's gRPC server (``tf.distribute.Server``, and the one MultiWorkerMirroredStrategy starts
from ``TF_CONFIG``) always listens on every interface of the machine (``grpc_server_lib.cc``
hard-codes the wildcard address; no option binds it elsewhere), and its worker service is
unauthenticated: anyone on the network could run ops in it. So realdist starts those servers
inside a Linux network namespace of their own, whose only interface is its own loopback:
"every interface" is then that loopback, which nothing outside the namespace can reach.

``PrivateNetwork()`` starts a small holder process in a new network namespace (and, when not
root, a user namespace that maps the user to itself), brings its ``lo`` up, and gives
``preexec_fn`` for every process that must join it (they talk to each other on 127.0.0.1;
to the launcher through files). Where namespaces are not available (not Linux, or a container
that forbids them), ``isolated`` is False and ``reason`` says why: the servers then listen on
every interface, and a warning on stderr says so.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000

#: the holder: brings lo up (SIOCGIFFLAGS / SIOCSIFFLAGS), says READY, waits for stdin to close
_HOLDER = """
import fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, struct.pack("16sh", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 1))
print("READY", flush=True)
sys.stdin.read()
"""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    _libc().prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: gone when the launcher is


def _unshare() -> None:
    """In the holder, before exec: a new network namespace (and user namespace if needed)."""
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
            self.reason = ("cannot bring up the private loopback: "
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

    def preexec_fn(self):
        """A ``preexec_fn`` that moves a new process into this network (and dies with its
        parent), or only the latter when the network is not isolated."""
        if not self.isolated:
            return die_with_parent
        pid, user = self._holder.pid, os.getuid() != 0

        def join():
            die_with_parent()
            libc = _libc()
            for kind, flag in (("user", CLONE_NEWUSER), ("net", CLONE_NEWNET)):
                if kind == "user" and not user:
                    continue
                fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY)
                try:
                    if libc.setns(fd, flag) != 0:
                        raise OSError(ctypes.get_errno(), f"setns {kind}: "
                                      f"{os.strerror(ctypes.get_errno())}")
                finally:
                    os.close(fd)

        return join
