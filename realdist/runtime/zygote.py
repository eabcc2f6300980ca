"""A process that imported TensorFlow once and forks TF programs on request.

A test or a notebook never imports TensorFlow itself (``realdist.runtime.processes``): each
real TF program runs in a child process, and ``python -c`` spent about 5 s of CPU importing
TensorFlow for every one of them, a TF1 snippet, each client of a shared-counter story,
each worker of a MultiWorkerMirroredStrategy job. A ``Zygote`` is started once per calling
process and set of imports (``zygote(imports, env)``), imports them, and forks each program
from itself (``realdist.runtime.forkstart``: the program gets what ``python -c`` would give
it), as TF's own ``multi_process_runner`` tests start their workers from a forkserver.

``spawn`` sends the program, its arguments, its environment and its standard files (file
descriptors, over a Unix socket) and, for a ``PrivateNetwork``, the namespaces to join; it
returns a ``Spawned``, polled, waited for (with a timeout) and killed as a
``subprocess.Popen``, whose exit status the zygote reports as it reaps it. The zygote dies
with its caller (``PR_SET_PDEATHSIG``) and is killed at the caller's exit; its children die
with it. It ignores SIGINT, which a terminal's Ctrl-C or a Jupyter kernel's interrupt sends
to the caller's whole process group: the caller decides what ends. ``DISTLAB_FORK_TASKS=0``
turns it off: callers then start ``python -c`` as before.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from simdist.base.errors import UnavailableError
from simdist.base.processes import die_with_parent

from realdist.runtime import forkstart
from realdist.runtime.processes import IMPORTS, import_env


def main() -> None:
    """The zygote (``python -m realdist.runtime.zygote FD IMPORTS ENV``): preload, then fork a
    child per request. A module, not ``python -c`` code: a frame of its own at the bottom of
    every child's stack would be ``<string>``, the name of the children's own code, and the
    children's TF op tracebacks leave out the frames below their code by file name
    (``forkstart``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C or a kernel's interrupt: the caller's
    sock = socket.socket(fileno=int(sys.argv[1]))
    forkstart.preload(sys.argv[2], json.loads(sys.argv[3]))
    sock.send(b'{"ready": true}')
    serve(sock)


_MAX_FDS = 3


def serve(sock: socket.socket) -> None:
    """The zygote's loop: fork a child per request, report each child's exit, until the
    caller closes its end."""
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    children: set[int] = set()
    while True:
        for _ in selector.select(timeout=0.02):
            message, fds, _, _ = socket.recv_fds(sock, 1 << 20, _MAX_FDS)
            if not message:
                return
            request = json.loads(message)
            files = [os.fdopen(fd, "wb", closefd=True) for fd in fds]
            try:
                child = forkstart.start(request["code"], request["args"], request["env"],
                                        files[0], files[1], request["name"],
                                        stdin=files[2] if len(files) > 2 else None,
                                        namespaces=request.get("namespaces"),
                                        close_fds=(sock.fileno(),),
                                        filename=request.get("filename", "<string>"))
            finally:
                for f in files:
                    f.close()
            children.add(child.pid)
            sock.send(json.dumps({"pid": child.pid}).encode())
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                sock.send(json.dumps({"exited": pid,
                                      "code": os.waitstatus_to_exitcode(status)}).encode())


class Spawned:
    """A program the zygote forked, as ``subprocess.Popen`` shows a child: ``pid``,
    ``returncode``, ``poll``, ``wait`` (with a timeout), ``kill``."""

    def __init__(self, pid: int, zygote: Zygote):
        self.pid, self.returncode, self._zygote = pid, None, zygote

    def poll(self):
        if self.returncode is None:
            self.returncode = self._zygote.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            self._zygote.wait_for_news(0.05)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Zygote:
    """The zygote process of one set of imports (see the module docstring)."""

    def __init__(self, imports: str, env: dict):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock, self._codes, self._lock = mine, {}, threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "realdist.runtime.zygote", str(theirs.fileno()), imports,
             json.dumps(env)],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, preexec_fn=die_with_parent,
            env={**os.environ, **env})
        theirs.close()
        self._pending: list[dict] = []
        first = self._receive()
        if first != {"ready": True}:
            self.close()
            raise UnavailableError(f"the TF zygote did not start (got {first!r})")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _receive(self) -> dict | None:
        message = self._sock.recv(1 << 16)
        return json.loads(message) if message else None

    def _read(self) -> None:
        while True:
            try:
                message = self._receive()
            except OSError:
                message = None
            with self._lock:
                if message is None:
                    self._codes["closed"] = True
                elif "exited" in message:
                    self._codes[message["exited"]] = message["code"]
                else:
                    self._pending.append(message)
                self._lock.notify_all()
            if message is None:
                return

    def spawn(self, code: str, args: list[str], env: dict, stdout: int, stderr: int,
              name: str, stdin: int | None = None, namespaces=None,
              filename: str = "<string>") -> Spawned:
        """Fork ``code`` (run as ``python -c code *args``) with ``env``, its stdout and stderr
        on the file descriptors given (and stdin, if given), in ``namespaces``
        (``PrivateNetwork.namespaces()``), named ``name``; its frames are ``filename``'s."""
        request = {"code": code, "args": list(args), "env": env, "name": name,
                   "namespaces": namespaces, "filename": filename}
        fds = [stdout, stderr] + ([stdin] if stdin is not None else [])
        with self._lock:
            socket.send_fds(self._sock, [json.dumps(request).encode()], fds)
            while not self._pending:
                if self._codes.get("closed"):
                    raise UnavailableError("the TF zygote ended")
                self._lock.wait(1.0)
            return Spawned(self._pending.pop(0)["pid"], self)

    def exit_code(self, pid: int):
        with self._lock:
            return self._codes.get(pid)

    def wait_for_news(self, timeout: float) -> None:
        with self._lock:
            self._lock.wait(timeout)

    def close(self) -> None:
        self._sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


_ZYGOTES: dict = {}


def start_program(code: str, args: list[str], env: dict, stdout: int, stderr: int, name: str,
                  stdin: int | None = None, network=None, filename: str = "<string>"):
    """Start a TF program (``PRELUDE``'s imports, then ``code``) as ``python -c code *args``
    with ``env`` and these file descriptors, in ``network`` (a ``PrivateNetwork``) if given:
    forked by this process's zygote, or a fresh Python where that is off. A ``Spawned`` or a
    ``subprocess.Popen``: either is polled, waited for with a timeout and killed alike.
    ``filename``: the name of the code's frames (a program that forks others, as a cluster's
    launcher, names its own so that its children's tracebacks can leave it out)."""
    found = zygote(IMPORTS, import_env(env))
    if found is None:
        return subprocess.Popen([sys.executable, "-c", code, *args], stdin=stdin,
                                stdout=stdout, stderr=stderr, env=env,
                                preexec_fn=network.preexec_fn() if network else die_with_parent)
    return found.spawn(code, args, env, stdout, stderr, name, stdin=stdin,
                       namespaces=network.namespaces() if network else None, filename=filename)


def zygote(imports: str, env: dict) -> Zygote | None:
    """This process's zygote for ``imports`` under ``env`` (started at the first call), or
    None where tasks are not forked (``forkstart.enabled()``)."""
    if not forkstart.enabled():
        return None
    key = (os.getpid(), imports, json.dumps(env, sort_keys=True))
    found = _ZYGOTES.get(key)
    if found is None or found.proc.poll() is not None:
        found = _ZYGOTES[key] = Zygote(imports, env)
    return found


def running() -> set[int]:
    """The pids of this process's live zygotes (they live as long as it does)."""
    return {found.proc.pid for key, found in _ZYGOTES.items()
            if key[0] == os.getpid() and found.proc.poll() is None}


@atexit.register
def _close_all() -> None:
    for key, found in list(_ZYGOTES.items()):
        if key[0] == os.getpid():
            found.close()
    _ZYGOTES.clear()


if __name__ == "__main__":
    main()
