"""Task processes forked from a launcher that imported TensorFlow once.

``python -c PRELUDE + code`` spends about 5 s of CPU importing TensorFlow before a task does
anything; a localhost cluster of four tasks spent 20 s starting, and a restarted task was
seconds away from serving again. So the cluster's launcher imports TensorFlow once
(``preload``: the same import a task would do, no runtime, no device, no thread started) and
``start`` forks each task from it, as TF's own ``multi_process_runner`` tests start their
workers from a forkserver. Each child then creates its own TF runtime, servers and sessions,
as a fresh process would: what is shared is the imported code only.

A child gets what ``subprocess.Popen`` would give it: its environment (``os.environ``
replaced, ``tempfile``'s cached folder forgotten so that ``TMPDIR`` counts), ``sys.argv``
(``["-c", *args]``), stdout and stderr on its files, default signal handlers, and it dies
with its parent (``PR_SET_PDEATHSIG``). Its name (``/proc/PID/comm``, what ``ps`` and
``psutil.Process.name()`` show) is the task's. It runs the code as ``__main__``; an uncaught
exception prints its traceback and exits 1, ``SystemExit`` exits with its code, and the
child waits for its non-daemon threads, as the interpreter does at exit. It never runs the
launcher's ``atexit`` handlers (they would remove the launcher's folders).

``DISTLAB_FORK_TASKS=0`` in the environment turns this off (each task a fresh Python).
"""

from __future__ import annotations

import builtins
import ctypes
import io
import os
import signal
import sys
import tempfile
import threading
import traceback

PR_SET_NAME = 15


def enabled() -> bool:
    """Whether tasks are forked (``DISTLAB_FORK_TASKS`` is not ``0``) on this platform."""
    return sys.platform.startswith("linux") and os.environ.get("DISTLAB_FORK_TASKS") != "0"


def preload(code: str, env: dict) -> None:
    """Run ``code`` (the imports every task starts with) here, under the tasks' environment
    ``env`` (TF reads some of it as it imports: ``TF_CPP_MIN_LOG_LEVEL``,
    ``TF_USE_LEGACY_KERAS``); what the import writes on stderr is dropped."""
    saved = dict(os.environ)
    os.environ.update(env)
    stderr = os.dup(2)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 2)
    try:
        exec(compile(code, "<preload>", "exec"), {"__name__": "__preload__"})
    finally:
        os.dup2(stderr, 2)
        os.close(stderr)
        os.environ.clear()
        os.environ.update(saved)


class Forked:
    """A task forked by ``start``, as ``subprocess.Popen`` shows a child: ``pid``,
    ``returncode`` (negative: the signal that ended it), ``poll``, ``wait``, ``kill``,
    ``send_signal``."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        if timeout is not None:
            raise ValueError("Forked.wait takes no timeout")
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start(code: str, args: list[str], env: dict, stdout, stderr, name: str, stdin=None,
          namespaces=None, close_fds=(), filename: str = "<string>") -> Forked:
    """Fork a child that runs ``code`` as ``python -c code *args`` would, with ``env``, its
    stdout and stderr on the open files ``stdout`` and ``stderr`` (and stdin on ``stdin``),
    named ``name``, in a ``PrivateNetwork``'s ``namespaces`` if given; the child closes
    ``close_fds`` (its parent's own) first; the code's frames are ``filename``'s
    (``python -c``'s: ``<string>``)."""
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return Forked(pid)
    status = 1
    try:
        for fd in close_fds:
            os.close(fd)
        if namespaces:
            from realdist.runtime.private_network import join_namespaces
            join_namespaces(namespaces)
        if stdin is not None:
            os.dup2(stdin.fileno(), 0)
        status = _child(code, args, env, stdout, stderr, name, parent, filename)
    except BaseException:  # noqa: BLE001 - nothing may escape a forked child
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


def _child(code, args, env, stdout, stderr, name, parent, filename) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the line above
        return 1
    libc.prctl(PR_SET_NAME, name.encode()[:15])
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.dup2(stdout.fileno(), 1)
    os.dup2(stderr.fileno(), 2)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None
    sys.argv = ["-c", *args]
    main = type(sys)("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    _hide_launcher_frames()
    try:
        exec(compile(code, filename, "exec"), main.__dict__)
        status = 0
    except SystemExit as end:
        status = _exit_status(end.code)
    except BaseException as error:  # noqa: BLE001 - as the interpreter: print it, exit 1
        error = error.with_traceback(error.__traceback__.tb_next)  # from the task's code on
        sys.excepthook(type(error), error, error.__traceback__)
        status = 1
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    return status


def _hide_launcher_frames() -> None:
    """Leave the launcher's frames, under the task's code on this thread's stack, out of
    the tracebacks TF records for the ops the task creates (``Detected at node ... defined
    at``), as they are in a fresh ``python -c``: TF's own stack-trace filter
    (``tf_stack.StackTraceFilter``), entered for the rest of the child's life."""
    tf_stack = sys.modules.get("tensorflow.python.util.tf_stack")
    if tf_stack is None:
        return
    launcher = {frame.f_code.co_filename for frame in _frames()}

    class LauncherFilter(tf_stack.StackTraceFilter):
        def get_filtered_filenames(self):
            return frozenset(launcher) | self.parent.get_filtered_filenames()

    LauncherFilter().__enter__()


def _frames():
    frame = sys._getframe(1)
    while frame is not None:
        yield frame
        frame = frame.f_back


def _exit_status(code) -> int:
    """The exit status ``sys.exit(code)`` gives."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1
