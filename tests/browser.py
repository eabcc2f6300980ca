"""A headless Chromium from the system's packages, driven through the DevTools protocol
(websocket-client): load a page, then say what went wrong on it (console errors, uncaught
exceptions, failed or off-machine requests, images that did not load)."""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

#: how to get a browser where none is found (Debian and Ubuntu)
INSTALL = "apt-get update && apt-get install -y chromium"

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium():
    """The Chromium (or Chrome) on PATH, or $CHROMIUM; None without one."""
    named = os.environ.get("CHROMIUM")
    if named:
        return shutil.which(named)
    return next((shutil.which(n) for n in _NAMES if shutil.which(n)), None)


class Chromium:
    """One headless browser with one tab; ``load(url)`` returns a ``PageReport``."""

    def __init__(self, binary, timeout=60):
        import websocket

        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="distlab-chromium-")
        flags = ["--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                 "--remote-debugging-port=0", "--remote-allow-origins=*",
                 f"--user-data-dir={self.profile}", "--window-size=1280,900"]
        if os.geteuid() == 0:  # Chromium refuses to run its sandbox as root
            flags.append("--no-sandbox")
        self.proc = subprocess.Popen([binary, *flags, "about:blank"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        try:
            port = self._port()
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list",
                                                       timeout=10))
            page = next(t for t in targets if t["type"] == "page")
            self.ws = websocket.create_connection(page["webSocketDebuggerUrl"],
                                                  timeout=timeout, suppress_origin=True)
        except BaseException:
            self.close()
            raise
        self.next_id, self.events = 0, []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def _port(self):
        active = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode} at start")
            if active.is_file() and active.read_text().strip():
                return int(active.read_text().split()[0])
            time.sleep(0.1)
        raise TimeoutError("chromium did not open its DevTools port")

    def call(self, method, **params):
        """Send one command and wait for its result; events that arrive meanwhile are kept."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            if "method" in message:
                self.events.append(message)

    def wait_for(self, event, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            for e in self.events:
                if e["method"] == event:
                    return e
            self.ws.settimeout(max(deadline - time.monotonic(), 0.1))
            message = json.loads(self.ws.recv())
            if "method" in message:
                self.events.append(message)
        raise TimeoutError(f"no {event} within {timeout or self.timeout} s")

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def load(self, url):
        """Open ``url`` and wait for its load event; what went wrong on it."""
        self.events = []
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")
        self.evaluate("new Promise(done => setTimeout(done, 300))")  # late errors arrive
        return PageReport(url, self.events, self.evaluate(
            "Array.from(document.images).map(i => [i.src, i.complete && i.naturalWidth > 0])"))

    def platform_fonts(self, selector) -> dict:
        """{font family: glyphs} that the system's fonts drew the first element matching
        ``selector`` with (DevTools' CSS.getPlatformFontsForNode): what tells glyphs from
        the empty boxes of a missing font."""
        self.call("DOM.enable")
        self.call("CSS.enable")
        root = self.call("DOM.getDocument")["root"]["nodeId"]
        node = self.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
        fonts = self.call("CSS.getPlatformFontsForNode", nodeId=node)["fonts"]
        return {f["familyName"]: f["glyphCount"] for f in fonts}

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def close(self):
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class PageReport:
    """What a loaded page did: ``problems()`` lists each thing that went wrong."""

    def __init__(self, url, events, images):
        self.url, self.images = url, images
        self.requests = [e["params"]["request"]["url"] for e in events
                         if e["method"] == "Network.requestWillBeSent"]
        self.errors = []
        for e in events:
            p = e["params"]
            if e["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
                self.errors.append("console." + p["type"] + ": " + " ".join(
                    str(a.get("value", a.get("description"))) for a in p["args"]))
            elif e["method"] == "Runtime.exceptionThrown":
                self.errors.append("exception: " + p["exceptionDetails"].get("text", "") + " "
                                   + str(p["exceptionDetails"].get("exception", {})
                                         .get("description", "")))
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                self.errors.append(f"log: {p['entry']['text']} {p['entry'].get('url', '')}")
            elif e["method"] == "Network.loadingFailed":
                self.errors.append(f"request failed: {p.get('errorText')}")

    def problems(self, allowed_hosts=("127.0.0.1",)):
        off_machine = [u for u in self.requests if not (
            u.startswith(("file:", "data:", "about:"))
            or any(u.startswith(f"http://{h}") for h in allowed_hosts))]
        broken = [src for src, ok in self.images if not ok]
        return (self.errors + [f"off-machine request: {u}" for u in off_machine]
                + [f"image did not load: {src}" for src in broken])
