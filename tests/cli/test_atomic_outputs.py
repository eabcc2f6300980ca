"""Outputs are written whole or not at all (issue 30, item 6): every file DistLab writes goes
through ``simdist.base.files.atomic_output`` (a temporary file beside the target, then
``os.replace``), so a failing or killed write leaves the old file as it was."""

import ast
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from simdist.base.files import atomic_output, write_atomic, write_csv
from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(60)

#: the packages whose writes must go through the atomic writer
PACKAGES = ("simdist", "realdist", "course", "benchmarks", "distlab")

#: writes that are not a command's output, each with why (file, a text on its line)
NOT_OUTPUTS = {
    ("simdist/base/files.py", ""): "the atomic writer itself",
    ("simdist/calibration/measuring.py", "plan.write_text"): "the plan, in a temporary folder",
    ("simdist/calibration/measuring.py", '"w+"'): "TF's log, in a temporary folder",
    ("realdist/runtime/private_network.py", "/proc/self/"): "uid and gid maps of a namespace",
    ("realdist/runtime/forkstart.py", "os.devnull"): "the import's stderr, dropped",
    ("realdist/graph/tf1.py", "os.devnull"): "the TF servers' stderr, dropped",
    ("realdist/runtime/localcluster.py", ".out"): "a task's log, in its job folder",
    ("realdist/runtime/localcluster.py", ".log"): "a task's log, in its job folder",
    ("realdist/training/parameter_server_loop.py", "control"): "kill orders, appended (IPC)",
    ("realdist/training/parameter_server_eval.py", "DONE"): "an empty marker file",
    ("realdist/distribute/multiworker.py", "job.json"): "the job, in its temporary folder",
    ("realdist/distribute/multiworker.py", "worker{i}.log"): "a worker's log, in the job folder",
    ("realdist/distribute/multiworker.py", "part."): "a worker's result: its own temp + rename",
    ("realdist/distribute/multiworker.py", "PROGRESS"): "progress lines, appended (IPC)",
    ("course/cell.py", "buffer"): "a figure drawn into memory",
    ("course/site.py", "copytree"): "traces copied into the page folder made just before",
    # the TF1 API's files (simdist/graph/, tf1_script.py) are another engineer's: tf1_script
    # writes its results with its own temp + os.replace, the saver's state file too; the
    # saver's .npz is written in place (TF's own Saver writes a temp file and renames it)
    ("simdist/training/tf1_script.py", "tmp"): "its own temp file + os.replace",
    ("simdist/graph/saver.py", "tmp"): "the checkpoint state: its own temp + os.replace",
    ("simdist/graph/saver.py", "np.savez"): "a checkpoint's values: NOT atomic yet",
    ("simdist/graph/timeline.py", '"timeline.json"'): "an example in a docstring",
}

#: (module, function) pairs that write a file, and the argument that names it
WRITING_CALLS = {("shutil", "copyfile"): 1, ("shutil", "copy"): 1, ("shutil", "copy2"): 1,
                 ("shutil", "copytree"): 1, ("shutil", "move"): 1, ("np", "save"): 0,
                 ("np", "savez"): 0, ("np", "savez_compressed"): 0, ("json", "dump"): 1,
                 ("nbformat", "write"): 1, ("os", "replace"): 1, ("os", "rename"): 1}
#: methods that write a file whatever the object: the file is the object (None) or an argument
WRITING_METHODS = {"write_text": None, "write_bytes": None, "rename": 0, "savefig": 0}


def written_file(call: ast.Call):
    """Whether a call writes a file: False, or the expression naming the file (None when the
    call names none that can be seen)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    owner = getattr(getattr(func, "value", None), "id", None)
    if name == "open" and owner in (None, "io", "builtins"):
        mode = call.args[1] if len(call.args) > 1 else next(
            (k.value for k in call.keywords if k.arg == "mode"), None)
        writes = isinstance(mode, ast.Constant) and bool(set(str(mode.value)) & set("wax+"))
        return call.args[0] if writes and call.args else writes and None
    if (owner, name) in WRITING_CALLS:
        k = WRITING_CALLS[owner, name]
        return call.args[k] if len(call.args) > k else None
    if isinstance(func, ast.Attribute) and name in WRITING_METHODS:
        k = WRITING_METHODS[name]
        return func.value if k is None else (call.args[k] if len(call.args) > k else None)
    return False


def unguarded_writes(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each write in the file that is not to an ``atomic_output`` temp."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    guarded = set()  # names bound by `with atomic_output(...) as NAME`
    for node in ast.walk(tree):
        if isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if (isinstance(call, ast.Call) and getattr(call.func, "id", None)
                        == "atomic_output" and isinstance(item.optional_vars, ast.Name)):
                    guarded.add(item.optional_vars.id)
    lines = text.splitlines()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            target = written_file(node)
            if target is False or (isinstance(target, ast.Name) and target.id in guarded):
                continue
            found.append((node.lineno, lines[node.lineno - 1].strip()))
    return sorted(found)


def test_every_file_is_written_through_the_atomic_writer():
    """A write anywhere in DistLab is to an atomic_output temp, or listed in NOT_OUTPUTS."""
    offending = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for line, text in unguarded_writes(path):
                if not any(rel == file and key in text for file, key in NOT_OUTPUTS):
                    offending.append(f"{rel}:{line}: {text}")
    assert not offending, ("written in place (use simdist.base.files.write_atomic, "
                           "atomic_output or save_figure):\n" + "\n".join(offending))


def test_the_scan_sees_a_write_in_place(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from pathlib import Path\n"
                      "def f(p, fig, nb):\n"
                      "    Path(p).write_text('x')\n"
                      "    fig.savefig(p)\n"
                      "    with open(p, 'w') as h:\n"
                      "        pass\n"
                      "    with atomic_output(p) as tmp:\n"
                      "        fig.savefig(tmp)\n")
    assert [line for line, _ in unguarded_writes(source)] == [3, 4, 5]


def test_a_failing_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "t.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_output(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the writer failed")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["t.json"]


def test_a_written_file_keeps_the_mode_of_the_one_it_replaces(tmp_path):
    target = tmp_path / "t.json"
    write_atomic(target, "new file")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    target.chmod(0o640)
    write_atomic(target, b"again")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 and target.read_bytes() == b"again"


def test_a_symlinked_output_is_written_where_it_points(tmp_path):
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old")
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_a_csv_is_written_whole(tmp_path):
    target = write_csv(tmp_path / "a.csv", ["x", "y"], [{"x": 1, "y": 2}, {"x": 3, "y": 4}])
    assert target.read_bytes() == b"x,y\r\n1,2\r\n3,4\r\n"


#: a simdist run whose trace write stops halfway (each write_text writes 100 characters and
#: waits to be killed), as a kill -9 in the middle of writing a large trace would
HALF_WRITE = """
import pathlib, sys, time
def half(self, data, *args, **kwargs):
    with open(self, "w") as f:
        f.write(data[:100])
        f.flush()
    print("writing", flush=True)
    time.sleep(60)
pathlib.Path.write_text = half
from simdist.commands.cli import main
main(["run", "token_ring", "--quiet", "--trace", sys.argv[1]])
"""


def test_a_run_killed_while_writing_its_trace_leaves_the_old_trace_whole(tmp_path):
    """The issue's case: kill -9 during the write had left a 0-byte trace where a valid one
    had been. Now the old trace stays whole, and the next write sweeps the temporary file."""
    from simdist.commands.cli import main as simdist_main

    trace = tmp_path / "t.json"
    assert simdist_main(["run", "token_ring", "--quiet", "--trace", str(trace)]) == 0
    before = trace.read_bytes()
    proc = subprocess.Popen([sys.executable, "-c", HALF_WRITE, str(trace)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert "writing" in iter(lambda: proc.stdout.readline().strip() or "end", "end")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert trace.read_bytes() == before and json.loads(before)["traceEvents"]
    left = [p.name for p in tmp_path.iterdir() if p.name != "t.json"]
    assert len(left) == 1 and left[0].startswith(".t.") and left[0].endswith(".tmp.json")
    assert simdist_main(["run", "token_ring", "--quiet", "--trace", str(trace)]) == 0
    assert os.listdir(tmp_path) == ["t.json"]  # the killed writer's temp file swept
