"""Headless Chromium for the site tests, driven over the DevTools protocol on a pipe.

``--remote-debugging-pipe`` makes Chromium read protocol commands from file descriptor 3 and
write replies and events to descriptor 4 (NUL-terminated JSON), so no websocket library and no
network port are needed. :func:`open_page` loads one file, waits for its load event, and reports
what a person would notice: console errors, uncaught exceptions, failed or non-local requests,
the tables and images on the page (with whether each image decoded), and a PNG screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking")
LOCAL_SCHEMES = ("file:", "data:", "about:")


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    return None


@dataclass
class PageReport:
    url: str
    title: str = ""
    tables: int = 0
    table_rows: int = 0
    images: list[dict] = field(default_factory=list)
    """``{"src", "complete", "width"}`` per ``<img>``; width 0 means it did not decode."""
    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions, error log entries, failed loads."""
    external: list[str] = field(default_factory=list)
    """Requests for anything but local files and data: URLs."""
    text: str = ""
    """``document.body.innerText``."""
    scripts: int = 0
    scroll_width: int = 0
    """``document.documentElement.scrollWidth`` at a 1400 px wide viewport: above 1400 the
    page scrolls sideways."""
    panels: list[dict] = field(default_factory=list)
    """``{"title", "counts", "images"}`` per index panel (``section.panel``): its heading, its
    verdict-count badges as shown (``"3 better"``) and how many charts it holds."""
    screenshot: Path | None = None


class _Browser:
    def __init__(self, exe: str, profile_dir: Path):
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()

        def to_3_and_4() -> None:  # in the child, before exec
            hi_r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4
            hi_w = fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [
                exe,
                *FLAGS,
                "--remote-debugging-pipe",
                f"--user-data-dir={profile_dir}",
                "--no-first-run",
                "--no-default-browser-check",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=to_3_and_4,
        )
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self._res_r], [], [], left)
            if ready:
                chunk = os.read(self._res_r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium closed the pipe (exit {self.proc.poll()})")
                self._buf += chunk
        msg, _, self._buf = self._buf.partition(b"\0")
        return json.loads(msg)

    def call(
        self,
        method: str,
        params: dict | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict:
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read_message(deadline))

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read_message(deadline))
        except TimeoutError:
            pass

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._cmd_w, self._res_r):
            with contextlib.suppress(OSError):
                os.close(fd)


PAGE_FACTS = """(() => ({
  title: document.title,
  tables: document.querySelectorAll("table").length,
  rows: document.querySelectorAll("table tbody tr").length,
  scripts: document.querySelectorAll("script").length,
  images: Array.from(document.images).map(i => ({src: i.getAttribute("src"),
                                                  complete: i.complete, width: i.naturalWidth})),
  text: document.body ? document.body.innerText : "",
  scrollWidth: document.documentElement.scrollWidth,
  panels: Array.from(document.querySelectorAll("section.panel")).map(p => ({
    title: (p.querySelector("h3") || {}).innerText || "",
    counts: Array.from(p.querySelectorAll(".count")).map(c => c.innerText),
    images: p.querySelectorAll("img").length,
  })),
}))()"""


def open_page(exe: str, path: Path, screenshot: Path, work_dir: Path) -> PageReport:
    """Load ``path`` in headless Chromium and report on it; saves a full-page screenshot."""
    url = path.resolve().as_uri()
    browser = _Browser(exe, work_dir / "chromium-profile")
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        browser.events.clear()
        browser.call("Page.navigate", {"url": url}, session=session)
        browser.wait_for("Page.loadEventFired")
        browser.drain(0.5)  # late console messages and image decodes
        facts = browser.call(
            "Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True}, session=session
        )
        facts = facts["result"]["value"]
        size = browser.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
        shot = browser.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": min(size["width"], 1600),
                    "height": min(size["height"], 5000),
                    "scale": 1,
                },
            },
            session=session,
        )
        screenshot.write_bytes(base64.b64decode(shot["data"]))
    finally:
        browser.close()
    report = PageReport(
        url,
        facts["title"],
        facts["tables"],
        facts["rows"],
        facts["images"],
        text=facts["text"],
        scripts=facts["scripts"],
        scroll_width=facts["scrollWidth"],
        panels=facts["panels"],
        screenshot=screenshot,
    )
    for event in browser.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            report.errors.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            report.errors.append(
                f"uncaught: {details.get('text')} "
                f"{(details.get('exception') or {}).get('description', '')}"
            )
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            report.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}")
        elif method == "Network.loadingFailed":
            report.errors.append(f"failed load: {params.get('errorText')}")
        elif method == "Network.requestWillBeSent":
            req_url = params["request"]["url"]
            if not req_url.startswith(LOCAL_SCHEMES):
                report.external.append(req_url)
    return report
