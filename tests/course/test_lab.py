"""`make lab`: JupyterLab on notebooks/, listening on 127.0.0.1 only, printing its URL."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.mark.notebook
@pytest.mark.timeout(120)
def test_make_lab_serves_the_notebooks_on_this_machine_only():
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "jupyter-lab").exists():
        pytest.fail(f"JupyterLab is not installed beside {sys.executable}: pip install -e .[dev]")
    # -o: take the set-up as done (this Python's environment is the one to use)
    proc = subprocess.Popen(["make", "-s", "-o", ".venv/.installed", "lab", f"BIN={bin_dir}",
                             "LAB_FLAGS=--no-browser --ServerApp.port=0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        url, seen, deadline = None, [], time.monotonic() + 90
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            seen.append(line)
            match = re.search(r"(http://[^/\s]+)/lab\?token=(\w+)", line)
            if match:
                url = match
        assert url, "no URL printed:\n" + "".join(seen[-30:])
        base, token = url.groups()
        assert base.startswith("http://127.0.0.1:")
        request = urllib.request.Request(f"{base}/api/contents",
                                         headers={"Authorization": f"token {token}"})
        while True:  # the URL can be printed a moment before the server listens
            try:
                listing = json.load(urllib.request.urlopen(request, timeout=30))
                break
            except urllib.error.URLError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        names = {item["name"] for item in listing["content"]}
        assert {p.name for p in (ROOT / "notebooks").glob("*.ipynb")} <= names
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
