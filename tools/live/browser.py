"""The live part's browser check (``tools/browser_check.py --live``): headless Chromium on a live build.

1. The self-test (tools/live/selftest.py) in JupyterLite's REPL: the kernel boots from the site, installs the
   book's wheel, imports ipywidgets, plotly and the wheel's numpy-free modules, draws a plotly figure, and a
   key press on the ipywidgets slider redraws it.
2. Every page with a "Run it live" button: the button shows; nothing of the live part (and nothing outside)
   is asked for before the click; the click opens the REPL with the chapter's code. Offline (the default) the
   check waits for the kernel to ask for the pinned numpy wheel, which is blocked; ``online`` lets that one
   request through and waits for the chapter's widget to draw a plotly figure and to redraw it after a key
   press on its first slider (the publish workflow, which has the internet).

Every other request that leaves the local server is aborted and is a failure.
"""

from __future__ import annotations

import glob
import os
import time
import urllib.parse

from tools.live import pins, selftest

LIVE = "live"
REPL = "live/repl/index.html?kernel=python&toolbar=1&code="


def live_pages(html_root: str) -> list[str]:
    """Pages of the built site with a "Run it live" block, relative to ``html_root``."""
    out = []
    for p in sorted(glob.glob(os.path.join(html_root, "**", "*.html"), recursive=True)):
        rel = os.path.relpath(p, html_root)
        if rel.startswith(LIVE + os.sep):
            continue
        with open(p, encoding="utf-8", errors="replace") as f:
            if 'class="live-run"' in f.read():
                out.append(rel)
    return out


class Requests:
    """Routes a browser context: the local server passes; the pinned numpy wheel passes only ``online``;
    everything else outside is aborted and kept in ``outside``."""

    def __init__(self, base: str, online: bool):
        self.base, self.online = base, online
        self.outside: list[str] = []
        self.numpy: list[str] = []
        self.local: list[str] = []

    def __call__(self, route, request=None):
        url = route.request.url
        if url.startswith(self.base) or url.startswith(("data:", "blob:")):
            self.local.append(url)
            return route.continue_()
        if url == pins.NUMPY_URL:
            self.numpy.append(url)
            return route.continue_() if self.online else route.abort()
        self.outside.append(url)
        return route.abort()


_SIGNATURE_JS = """() => {
  const p = document.querySelector('.js-plotly-plot');
  return p ? (p.querySelector('.gtitle') || p).textContent : null;
}"""


def _pause(page, s: float = 1.0):
    """Wait while Playwright keeps serving routed requests (``time.sleep`` would stall every request)."""
    page.wait_for_timeout(int(s * 1000))


def _wait_signature(frame, old, deadline: float):
    """Wait until the first plotly figure in ``frame`` draws with a signature (title text) other than ``old``."""
    page = getattr(frame, "page", frame)
    while time.time() < deadline:
        try:
            sig = frame.evaluate(_SIGNATURE_JS)
        except Exception:  # the frame is still navigating
            sig = None
        if sig is not None and sig != old:
            return sig
        _pause(page)
    return None


def _press_first_slider(frame) -> bool:
    handle = frame.query_selector(".widget-slider .noUi-handle, .noUi-handle")
    if handle is None:
        return False
    handle.focus()
    handle.press("ArrowRight")
    return True


def selftest_failures(browser, base: str, online: bool, timeout_s: float) -> tuple[list[str], str]:
    """Run the self-test in the REPL; (failures, summary)."""
    req = Requests(base, online)
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    ctx.route("**/*", req)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    fails: list[str] = []
    t0 = time.time()
    try:
        page.goto(f"{base}/{REPL}{urllib.parse.quote(selftest.CODE)}")
        try:
            page.wait_for_selector(f".jp-OutputArea-output:has-text('{selftest.READY} True')",
                                   timeout=timeout_s * 1000)
        except Exception:
            text = page.inner_text("body")[-600:]
            return [f"self-test: the kernel did not finish the self-test in {timeout_s:g} s; page ends: "
                    f"{text!r}"], "self-test timed out"
        ready_s = time.time() - t0
        deadline = time.time() + 60
        first = _wait_signature(page, None, deadline)
        if first != selftest.TITLE.format(1):
            fails.append(f"self-test: the figure did not draw with title {selftest.TITLE.format(1)!r}; got {first!r}")
        elif not _press_first_slider(page):
            fails.append("self-test: no ipywidgets slider found")
        else:
            second = _wait_signature(page, first, deadline)
            if second != selftest.TITLE.format(2):
                fails.append(f"self-test: the slider did not redraw the figure (title {second!r})")
        if errors:
            fails.append(f"self-test: JavaScript errors: {errors[:3]}")
        if req.outside:
            fails.append(f"self-test: outside requests: {req.outside[:5]}")
        summary = (f"self-test: kernel ready and wheel installed in {ready_s:.0f} s, figure redrawn by the slider: "
                   f"{not fails}; {len(req.outside)} outside requests, numpy requested {len(req.numpy)} times")
        return fails, summary
    finally:
        ctx.close()


def page_failures(browser, base: str, rel: str, online: bool, timeout_s: float) -> tuple[list[str], str]:
    """Check one page's "Run it live" button; (failures, summary)."""
    req = Requests(base, online)
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    ctx.route("**/*", req)
    page = ctx.new_page()
    fails: list[str] = []
    try:
        page.goto(f"{base}/{rel}")
        page.wait_for_load_state("load")
        button = page.query_selector(".live-run-button")
        if button is None or not button.is_visible():
            return [f"{rel}: no visible 'Run it live' button"], "no button"
        early = [u for u in req.local if f"/{LIVE}/" in u]
        if early or req.outside or req.numpy:
            fails.append(f"{rel}: requests before the click: {(early + req.outside + req.numpy)[:5]}")
        t0 = time.time()
        button.click()
        page.wait_for_selector("iframe.live-run-frame", timeout=10_000)
        handle = page.query_selector("iframe.live-run-frame").content_frame()
        deadline = time.time() + timeout_s
        if not online:
            while not req.numpy and time.time() < deadline:
                _pause(page)
            if not req.numpy:
                fails.append(f"{rel}: the live kernel never asked for numpy in {timeout_s:g} s")
            what = f"numpy asked for (blocked) after {time.time() - t0:.0f} s"
        else:
            first = _wait_signature(handle, None, deadline)
            if first is None:
                fails.append(f"{rel}: the live widget drew no plotly figure in {timeout_s:g} s")
                what = "no figure"
            else:
                drawn_s = time.time() - t0
                if not _press_first_slider(handle):
                    fails.append(f"{rel}: the live widget has no slider")
                second = _wait_signature(handle, first, time.time() + 120)
                if second is None:
                    fails.append(f"{rel}: the figure did not change after a slider step")
                what = f"figure drawn after {drawn_s:.0f} s, redrawn after a slider step: {second is not None}"
        if req.outside:
            fails.append(f"{rel}: outside requests: {req.outside[:5]}")
        return fails, f"{rel}: button ok, {what}; {len(req.outside)} outside requests"
    finally:
        ctx.close()


def run(browser, base: str, html_root: str, online: bool = False, timeout_s: float = 400,
        echo: bool = True) -> list[str]:
    """The whole live check in an open ``browser`` on the site served at ``base``; the failures."""
    if not os.path.exists(os.path.join(html_root, LIVE, "repl", "index.html")):
        return [f"{html_root}/{LIVE}/repl/index.html not found: build with `make book LIVE=1`"]
    fails, summary = selftest_failures(browser, base, online, timeout_s)
    if echo:
        print(("ok    " if not fails else "FAIL  ") + summary, flush=True)
    pages = live_pages(html_root)
    if not pages:
        fails.append("no page has a 'Run it live' button")
    for rel in pages:
        f, s = page_failures(browser, base, rel, online, timeout_s)
        fails += f
        if echo:
            print(("ok    " if not f else "FAIL  ") + s, flush=True)
    return fails
