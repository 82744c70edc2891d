"""A tiny DevTools-protocol driver for headless Chromium over `--remote-debugging-pipe` (stdlib only).

Chromium reads commands from fd 3 and writes replies and events to fd 4, each one JSON message ended by
a NUL byte. `Browser.open(url)` loads a page and keeps every console message, exception, log entry and
network request; `evaluate` runs JavaScript; `screenshot` writes a PNG. Every wait has a deadline.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-pipe")


def _high(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class CDPError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page (a flattened target session)."""

    def __init__(self, *, timeout_s: float = 60.0, width: int = 1280, height: int = 900):
        self.timeout_s = timeout_s
        self.events: list[dict] = []
        self._profile = tempfile.mkdtemp(prefix="fabriclab-chromium-")
        # pipe ends above 10, so that moving them onto 3 and 4 in the child never meets itself
        cmd_r, self._cmd_w, self._resp_r, resp_w = (_high(fd) for fd in (*os.pipe(), *os.pipe()))

        def wire() -> None:  # in the child: fd 3 = commands in, fd 4 = replies out
            os.dup2(cmd_r, 3)
            os.dup2(resp_w, 4)

        # stderr to a file: a pipe nobody reads would fill up and stall Chromium
        self._log = open(os.path.join(self._profile, "stderr.log"), "w+b")
        self._proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=self._log, preexec_fn=wire, close_fds=False)
        os.close(cmd_r)
        os.close(resp_w)
        self._buf = b""
        self._next_id = 0
        self.session = None
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(f"{domain}.enable")
            self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                             "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise

    def _send(self, method: str, params: dict | None, session: str | None) -> int:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._cmd_w, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._resp_r], [], [], left)
            if ready:
                chunk = os.read(self._resp_r, 1 << 20)
                if not chunk:
                    raise CDPError("Chromium closed the pipe: " + self._stderr_tail())
                self._buf += chunk
        message, self._buf = self._buf.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None) -> dict:
        """Send a command to the page (or the browser before a page is attached); wait for its reply."""
        wanted = self._send(method, params, self.session)
        deadline = time.monotonic() + self.timeout_s
        while True:
            message = self._read(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise CDPError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, since: int = 0) -> dict:
        """The first event `method` among those after index `since`, waiting for it if needed."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            for event in self.events[since:]:
                if event["method"] == method:
                    return event
            since = len(self.events)
            message = self._read(deadline)
            if "method" in message:
                self.events.append(message)

    def open(self, url: str) -> None:
        mark = len(self.events)
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", mark)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise CDPError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, *, full_page: bool = False, clip_height: int | None = None) -> Path:
        params: dict = {"format": "png"}
        if full_page or clip_height:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            height = min(size["height"], clip_height) if clip_height else size["height"]
            params |= {"captureBeyondViewport": True,
                       "clip": {"x": 0, "y": 0, "width": size["width"], "height": height, "scale": 1}}
        data = self.call("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions, error log entries and failed loads seen so far."""
        found = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                found.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p['args']]}")
            elif e["method"] == "Runtime.exceptionThrown":
                found.append(f"exception: {p['exceptionDetails'].get('text')}")
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                found.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
            elif e["method"] == "Network.loadingFailed":
                found.append(f"failed load: {p.get('errorText')}")
        return found

    def requests(self) -> list[str]:
        """URLs the page asked for (the page itself included)."""
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def _stderr_tail(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def close(self) -> None:
        try:
            self.session = None
            self._send("Browser.close", None, None)
            self._proc.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait(timeout=15)
        finally:
            for fd in (self._cmd_w, self._resp_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._log.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
