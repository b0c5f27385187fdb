"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: commands on fd 3, answers on fd 4; no port, no extra package).

`open_page` loads a file and records what a person cannot see: every console message and
uncaught exception, every error the browser logged, and every request the page (or a frame in
it) made. `Browser.evaluate` asks the page, `Browser.screenshot` saves a PNG. Used by the report
tests and by scripts/report_open_time.py."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

LOCAL_SCHEMES = ("data:", "blob:", "about:")     # in memory: nothing leaves the file


class CdpError(RuntimeError):
    pass


@dataclass
class Observed:
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def requests_leaving(self, page_url: str) -> list[str]:
        """Every request other than the page itself and in-memory data (data:, blob:)."""
        return [url for url in self.requests if url != page_url and not url.startswith(LOCAL_SCHEMES)]


class Browser:
    def __init__(self, *, width: int = 1280, height: int = 900):
        chromium = shutil.which("chromium")
        if not chromium:
            raise CdpError("Debian's chromium is not installed (setup.sh installs it)")
        self.profile = tempfile.TemporaryDirectory(prefix="redline-chromium-")
        to_child, self._to_browser = os.pipe()
        self._from_browser, from_child = os.pipe()

        def wire_fds():          # the protocol's fixed descriptors in the child
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-default-apps", "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND",
             f"--user-data-dir={self.profile.name}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire_fds, pass_fds=(3, 4))
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        self._contexts: dict[str, tuple[str | None, int]] = {}     # frame id → (session, its page's context)
        self._frames: dict[str, str] = {}                          # session of a frame in its own process → url
        self.observed = Observed()
        self.width, self.height = width, height
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self._watch(self.session)
        self.call("Target.setAutoAttach", session=self.session, autoAttach=True, waitForDebuggerOnStart=False,
                  flatten=True)
        self.call("Emulation.setDeviceMetricsOverride", session=self.session, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    # -- protocol ------------------------------------------------------------------------------
    def _send(self, message: dict) -> None:
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")

    def _receive(self, timeout_s: float) -> dict | None:
        deadline = time.monotonic() + timeout_s
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                return None
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise CdpError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, *, session: str | None = None, timeout_s: float = 60, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self._send(message)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            reply = self._receive(deadline - time.monotonic())
            if reply is None:
                break
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)
        raise CdpError(f"{method}: no answer in {timeout_s} s")

    def _watch(self, session: str) -> None:
        for domain in ("Page", "Runtime", "Log", "Network"):
            if domain != "Page" or session == self.session:
                self.call(f"{domain}.enable", session=session)

    def _event(self, event: dict) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.observed.console_errors.append(
                "console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.observed.console_errors.append(
                "exception: " + str(details.get("exception", {}).get("description") or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.observed.console_errors.append("log: " + params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            self.observed.requests.append(params["request"]["url"])
        elif method == "Runtime.executionContextCreated":
            context = params["context"]
            if (context.get("auxData") or {}).get("isDefault"):
                self._contexts[context["auxData"]["frameId"]] = (event.get("sessionId"), context["id"])
        else:
            self._events.append(event)

    def pump(self, seconds: float) -> None:
        """Let events arrive for a while (and watch frames that attached meanwhile)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            reply = self._receive(left)
            if reply is not None:
                self._event(reply)
        self._attach_new_frames()

    def _attach_new_frames(self) -> None:
        attached = [e for e in self._events if e.get("method") == "Target.attachedToTarget"]
        self._events = [e for e in self._events if e.get("method") != "Target.attachedToTarget"]
        for event in attached:
            self._frames[event["params"]["sessionId"]] = event["params"]["targetInfo"].get("url", "")
            try:
                self._watch(event["params"]["sessionId"])
            except CdpError:         # the frame is gone already (the page moved on)
                pass

    # -- pages ---------------------------------------------------------------------------------
    def open_page(self, path: Path, *, ready: str = "true", timeout_s: float = 60) -> float:
        """Navigate to the file and wait for the load event and then for `ready` (a JS expression)
        to be true. Returns the seconds from the navigation to ready."""
        self._events.clear()
        self.observed = Observed()
        started = time.monotonic()
        self.call("Page.navigate", session=self.session, url=path.resolve().as_uri())
        self.wait_for("document.readyState === 'complete' && (" + ready + ")", timeout_s=timeout_s)
        return time.monotonic() - started

    def evaluate(self, expression: str, *, timeout_s: float = 60):
        result = self.call("Runtime.evaluate", session=self.session, expression=expression, returnByValue=True,
                           awaitPromise=True, timeout_s=timeout_s)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise CdpError(f"{expression}: {details.get('exception', {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, *, timeout_s: float = 60, poll_s: float = 0.02) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.evaluate(f"!!({expression})"):
                return
            self.pump(poll_s)
        raise CdpError(f"not true after {timeout_s} s: {expression}")

    def show(self, selector: str, *, offset: int = 40) -> None:
        """Scroll `selector` to the top of the screen and wait until the plots on screen are drawn."""
        self.evaluate(f"window.scrollTo(0, document.querySelector({json.dumps(selector)}).getBoundingClientRect().top"
                      f" + window.scrollY - {offset})")
        self.wait_for("[...document.querySelectorAll('.plot')].filter(p => { const r = p.getBoundingClientRect();"
                      " return r.bottom > 0 && r.top < innerHeight; }).every(p => p.querySelector('.main-svg'))")
        self.pump(0.3)

    def evaluate_in_frame(self, url_prefix: str, expression: str):
        """Evaluate in the page's own script context of the first frame whose address starts with
        `url_prefix` (a flame graph's blob: frame: its own process, which the report may not read)."""
        for session, context in self._contexts.values():
            if session in self._frames:
                href = self.call("Runtime.evaluate", session=session, expression="location.href", contextId=context,
                                 returnByValue=True)["result"].get("value", "")
                if href.startswith(url_prefix):
                    break
        else:
            raise CdpError(f"no frame at {url_prefix}…")
        result = self.call("Runtime.evaluate", session=session, expression=expression, contextId=context,
                           returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise CdpError(f"{expression}: {details.get('exception', {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def screenshot(self, png: Path) -> Path:
        data = self.call("Page.captureScreenshot", session=self.session, format="png")["data"]
        png.write_bytes(base64.b64decode(data))
        return png

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout_s=10)
        except (CdpError, OSError):
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self.profile.cleanup()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
