"""Open the built book in headless Chromium at 1400 px and check what a reader would see.

For the front page, the reference pages and every chapter page it checks that:

- the page loads without JavaScript errors, every plotly figure drew an SVG, every formula was drawn by MathJax,
  and the sidebar has navigation links, with every outside request blocked (the book must work offline);
- no code or output block is wider than its box (content clipped behind a scroll bar: ``scrollWidth`` more
  than ``clientWidth`` + 1 px, collapsed blocks opened first);
- no plotly figure's legend box intersects its title or an axis title (bounding boxes measured in the browser);
- the article's visible text shows no absolute path (``/work/``, ``/home/``, ``/tmp/``, ``C:\\``,
  ``site-packages``...), no temporary folder (``tmpXXXXXXXX``, ``placement-runs-...``), no Python traceback or
  warning, and no cell meant only for checks (a code block with ``# Oracle``, ``nbval``, ``keep_output`` or a
  line starting with ``assert``; an exercise's solution asserts its own answer by design, so its code is spared);
- every exercise solution (sphinx-exercise's ``div.solution.dropdown``, collapsed by sphinx-togglebutton) shows
  no text of its body before a click, and clicking its toggle button makes the body visible.

Prints one line per page, then every failure; exits 1 on any. Saves a full-page screenshot of each page. Every
request that leaves the local server is aborted and counted: plotly.js and MathJax must come from the book's own
``_static/`` (``_ext/offline_assets.py`` copies them there).

    python tools/browser_check.py _build/html --screenshots _build/screenshots
"""

from __future__ import annotations

import argparse
import functools
import glob
import http.server
import os
import re
import shutil
import sys
import threading
from dataclasses import dataclass

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 900}
#: Root pages that are not the book's own pages (index.html only redirects to the root page).
NOT_PAGES = {"index.html", "genindex.html", "search.html", "py-modindex.html"}

#: The kinds of failure, as reported (tests match on them).
JS, FIGURES, NAV, HTTP, WIDE, LEGEND, TEXT, MATH, SOLUTIONS = (
    "javascript", "figures", "navigation", "http", "wide-block", "legend-overlap", "text", "formulas", "solutions",
)


@dataclass(frozen=True)
class Failure:
    page: str
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.page}: [{self.kind}] {self.message}"


def find_chromium() -> str | None:
    for c in CHROMIUM_CANDIDATES:
        if os.path.exists(c):
            return c
    return shutil.which("chromium")


def serve(root: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``root`` on an ephemeral port of 127.0.0.1 (loopback only)."""
    handler = functools.partial(_QuietHandler, directory=root)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep CI logs readable
        pass


def pages(html_root: str) -> list[str]:
    """The root page and the other root pages (glossary, references...), then every chapter page, as paths
    relative to ``html_root``."""
    roots = sorted(
        os.path.basename(p) for p in glob.glob(os.path.join(html_root, "*.html"))
        if os.path.basename(p) not in NOT_PAGES
    )
    if "intro.html" in roots:
        roots.remove("intro.html")
        roots.insert(0, "intro.html")
    chapters = sorted(
        os.path.relpath(p, html_root)
        for p in glob.glob(os.path.join(html_root, "book", "**", "*.html"), recursive=True)
    )
    return roots + chapters


def _router(base: str, aborted: list[str]):
    """Serve the book from loopback and block every outside request: the book must work offline (plotly.js and
    MathJax come from its own _static/, see _ext/offline_assets.py)."""

    def route(r, request=None):
        url = r.request.url
        if url.startswith(base) or url.startswith("data:"):
            return r.continue_()
        aborted.append(url)
        return r.abort()

    return route


#: Formulas: Sphinx writes each as an element of class "math"; MathJax puts an mjx-container in it when drawn.
_MATH_JS = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    try { await MathJax.startup.promise; } catch (e) {}
  }
  const all = [...document.querySelectorAll('span.math, div.math')];
  return {n: all.length, drawn: all.filter(m => m.querySelector('mjx-container')).length};
}"""


# --- what is measured in the browser ---------------------------------------------------------------------

_ARTICLE_JS = "(document.querySelector('article.bd-article') || document.querySelector('main') || document.body)"

#: Code and output blocks whose content must fit their box. Innermost offenders only are reported.
WIDE_SELECTORS = (
    "div.highlight pre", "div.cell_output pre", "div.cell_output div.output", "div.cell_output table",
    "div.pst-scrollable-table-container", "div.table-wrapper", "div.cell_output", "div.cell_input",
)

_WIDE_JS = """(selectors) => {
  const art = %s;
  const seen = new Set(), wide = [];
  for (const el of art.querySelectorAll(selectors.join(','))) {
    if (seen.has(el)) continue;
    seen.add(el);
    const over = el.scrollWidth - el.clientWidth;
    if (el.clientWidth > 0 && over > 1) wide.push(el);
  }
  return wide.filter(el => !wide.some(o => o !== el && el.contains(o))).map(el => ({
    text: (el.innerText || el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 60),
    over: el.scrollWidth - el.clientWidth,
  }));
}""" % _ARTICLE_JS

_LEGEND_JS = """() => {
  const out = [];
  const hit = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 &&
                        Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  document.querySelectorAll('div.plotly-graph-div').forEach((div, i) => {
    const id = div.id || ('figure #' + (i + 1));
    const legends = [...div.querySelectorAll('g')].filter(g => [...g.classList].some(c => /^legend\\d*$/.test(c)));
    const titles = [...div.querySelectorAll('text')].filter(t =>
      [...t.classList].some(c => /^(g|[xy]\\d*)title$/.test(c)) && (t.textContent || '').trim());
    for (const lg of legends) {
      const lr = lg.getBoundingClientRect();
      if (lr.width < 1 || lr.height < 1) continue;
      for (const t of titles) {
        const tr = t.getBoundingClientRect();
        if (tr.width < 1 || tr.height < 1 || !hit(lr, tr)) continue;
        const cls = [...t.classList].find(c => /title$/.test(c));
        const name = cls === 'gtitle' ? 'the title' : 'the ' + cls.replace('title', '') + '-axis title';
        out.push({id, title: name, text: t.textContent.trim().slice(0, 60)});
      }
    }
  });
  return out;
}"""

_TEXT_JS = """() => {
  const art = %s;
  const code = [...art.querySelectorAll('pre')].filter(p => !p.closest('div.solution'));
  return {text: art.innerText, code: code.map(p => p.innerText)};
}""" % _ARTICLE_JS

#: Solutions (sphinx-exercise: ``div.solution``; sphinx-togglebutton hides everything after the title of a
#: ``.toggle`` admonition and adds a ``button.toggle-button`` to its title). For each, the visible text of its
#: body: the children after its title that are rendered (not display:none, visibility:hidden or opacity 0, a
#: box of some height) and have text.
_SOLUTIONS_JS = """() => [...document.querySelectorAll('div.solution')].map((sol, i) => {
  const title = sol.querySelector(':scope > .admonition-title');
  const seen = (el) => {
    const r = el.getBoundingClientRect();
    const ok = el.checkVisibility ? el.checkVisibility({opacityProperty: true, visibilityProperty: true})
                                  : getComputedStyle(el).visibility === 'visible';
    return ok && r.height > 0 && r.width > 0;
  };
  const body = [...sol.children].filter(c => c !== title);
  const text = body.filter(seen).map(c => (c.innerText || '').trim()).filter(Boolean).join(' ');
  return {i, label: (title ? title.innerText : '').trim().replace(/\\s+/g, ' ').slice(0, 60),
          dropdown: sol.classList.contains('dropdown'),
          button: !!sol.querySelector(':scope > .admonition-title button.toggle-button'),
          hasBody: body.some(c => (c.textContent || '').trim()),
          visible: text.replace(/\\s+/g, ' ').slice(0, 60)};
})"""


def solution_failures(rel: str, before: list[dict], after: list[dict]) -> list[Failure]:
    """Failures for the solutions of a page: ``before`` and ``after`` are :data:`_SOLUTIONS_JS`'s answers
    before any click and after clicking each solution's toggle button."""
    found = []
    opened = {s["i"]: s for s in after}
    for s in before:
        name = f"solution {s['i'] + 1} ({s['label']!r})"
        if s["visible"]:
            found.append(Failure(rel, SOLUTIONS, f"{name} shows its body before a click: {s['visible']!r}"))
        if not s["button"]:
            found.append(Failure(rel, SOLUTIONS, f"{name} has no toggle button"))
        elif s["hasBody"] and not opened.get(s["i"], {}).get("visible"):
            found.append(Failure(rel, SOLUTIONS, f"{name} stays hidden after clicking its toggle button"))
    return found

#: Visible-text rules: (what it is, pattern). Matched line by line against the article's innerText.
TEXT_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("an absolute path", re.compile(
        r"(?<![\w.:/~-])/(?:work|home|tmp|root|usr|var|opt|private|Users|mnt|scratch)/"
        r"|(?<![A-Za-z])[A-Za-z]:\\\\?[A-Za-z_]|site-packages|dist-packages")),
    ("a temporary folder", re.compile(r"placement-runs-|\btmp[a-z0-9_]{8}\b|/var/folders/")),
    ("a Python traceback", re.compile(r"Traceback \(most recent call last\)")),
    ("a Python warning", re.compile(r"\b\w*Warning:|\b(?:Future|User|Deprecation|Runtime)Warning\b")),
)
#: Code-block rules: a block that shows one of these is a cell meant only for checks.
CHECK_CELL_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("a check cell", re.compile(r"^\s*#\s*oracle\b|nbval|keep_output|^\s*assert\s", re.I | re.M)),
)


def _excerpt(line: str, m: re.Match, width: int = 90) -> str:
    """``line`` stripped, or a ``width``-character window of it around the match ``m``."""
    lead = len(line) - len(line.lstrip())
    line = line.strip()
    if len(line) <= width:
        return line
    start = max(0, min(m.start() - lead - width // 3, len(line) - width))
    return ("…" if start else "") + line[start:start + width] + ("…" if start + width < len(line) else "")


def text_failures(rel: str, text: str, code_blocks: list[str]) -> list[Failure]:
    """Failures for the article's visible ``text`` and its code blocks (each offending line once)."""
    found: list[Failure] = []
    seen: set[tuple[str, str]] = set()

    def add(what: str, line: str, m: re.Match):
        key = (what, line.strip())
        if key not in seen:
            seen.add(key)
            found.append(Failure(rel, TEXT, f"{what}: {_excerpt(line, m)!r}"))

    for line in text.splitlines():
        for what, rx in TEXT_RULES:
            m = rx.search(line)
            if m:
                add(what, line, m)
    for block in code_blocks:
        for line in block.splitlines():
            for what, rx in CHECK_CELL_RULES:
                m = rx.search(line)
                if m:
                    add(what, line, m)
    return found


@dataclass
class PageResult:
    page: str
    failures: list[Failure]
    summary: str


def check_page(browser, base: str, rel: str, shots: str | None) -> PageResult:
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    aborted: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.route("**/*", _router(base, aborted))
    try:
        resp = page.goto(f"{base}/{rel}", wait_until="load")
        if resp is None or resp.status != 200:
            why = f"HTTP {resp.status if resp else 'no response'}"
            return PageResult(rel, [Failure(rel, HTTP, why)], why)
        n_plots = page.locator("div.plotly-graph-div").count()
        if n_plots:
            try:
                page.wait_for_function(
                    "() => [...document.querySelectorAll('div.plotly-graph-div')]"
                    ".every(d => d.querySelector('svg.main-svg'))",
                    timeout=20000,
                )
            except Exception:
                pass
        page.evaluate("() => document.fonts.ready")
        page.wait_for_timeout(100)  # let plotly's responsive resize settle
        drawn = page.evaluate(
            "() => [...document.querySelectorAll('div.plotly-graph-div')]"
            ".filter(d => d.querySelector('svg.main-svg')).length"
        )
        nav_links = page.locator("nav.bd-docs-nav a.reference.internal").count()
        math = page.evaluate(_MATH_JS)
        if shots:
            os.makedirs(shots, exist_ok=True)
            name = rel.replace("/", "__").replace(".html", ".png")
            page.screenshot(path=os.path.join(shots, name), full_page=True)
        legends = page.evaluate(_LEGEND_JS)
        before = page.evaluate(_SOLUTIONS_JS)  # before any click: every solution collapsed
        buttons = page.locator("div.solution > .admonition-title button.toggle-button")
        for i in range(buttons.count()):
            buttons.nth(i).click()
        if before:
            page.wait_for_timeout(400)  # togglebutton's 0.3 s fade-in
        after = page.evaluate(_SOLUTIONS_JS)  # opened: their code is measured and read below, too
        # A reader can open every collapsed block ("Show code cell source"): measure them open.
        page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
        wide = page.evaluate(_WIDE_JS, list(WIDE_SELECTORS))
        # plotly resizes a figure to its box a moment after load (later on a busy machine): nudge it with a
        # resize event and measure again, up to three times, before reporting; a real wide block stays wide
        for _ in range(3):
            if not wide:
                break
            page.evaluate("() => window.dispatchEvent(new Event('resize'))")
            page.wait_for_timeout(1500)
            again = {w["text"] for w in page.evaluate(_WIDE_JS, list(WIDE_SELECTORS))}
            wide = [w for w in wide if w["text"] in again]
        shown = page.evaluate(_TEXT_JS)
    finally:
        page.close()

    failures: list[Failure] = []
    if errors:
        failures.append(Failure(rel, JS, f"JavaScript errors: {errors[:3]}"))
    if drawn != n_plots:
        failures.append(Failure(rel, FIGURES, f"{drawn} of {n_plots} plotly figures drew an SVG"))
    if nav_links == 0:
        failures.append(Failure(rel, NAV, "no navigation links in the sidebar"))
    if math["drawn"] != math["n"]:
        failures.append(Failure(rel, MATH, f"{math['drawn']} of {math['n']} formulas drawn by MathJax"))
    for w in wide:
        failures.append(Failure(rel, WIDE, f"block wider than its box by {w['over']} px: {w['text']!r}"))
    for lg in legends:
        failures.append(Failure(rel, LEGEND, f"figure {lg['id']}: legend intersects {lg['title']} "
                                             f"({lg['text']!r})"))
    texts = text_failures(rel, shown["text"], shown["code"])
    failures += texts
    hidden = solution_failures(rel, before, after)
    failures += hidden
    summary = (f"{n_plots} plotly figures, {drawn} drawn, {math['n']} formulas, {math['drawn']} drawn, "
               f"{nav_links} nav links, {len(wide)} wide blocks, "
               f"{len(before)} solutions, {len(hidden)} solution problems, "
               f"{len(legends)} legend overlaps, {len(texts)} text problems, "
               f"{len(aborted)} outside requests blocked")
    return PageResult(rel, failures, summary)


def run(html_root: str, shots: str | None = None, only: list[str] | None = None, echo: bool = True) -> list[Failure]:
    """Check every page of the built book at ``html_root`` (or just ``only``) in one browser; return the failures."""
    from playwright.sync_api import sync_playwright

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("headless Chromium not found: install the Debian package 'chromium'")
    httpd, base = serve(html_root)
    failures: list[Failure] = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                for rel in only or pages(html_root):
                    r = check_page(browser, base, rel, shots)
                    failures += r.failures
                    if echo:
                        kinds = sorted({f.kind for f in r.failures})
                        status = "ok" if not kinds else "FAIL " + ",".join(kinds)
                        print(f"{status:>24}  {rel}: {r.summary}", flush=True)
            finally:
                browser.close()
    finally:
        httpd.shutdown()
    return failures


def live_main(html_root: str, online: bool) -> int:
    """The live part's check (tools/live/browser.py), in one browser; prints its failures, 0 when none."""
    from playwright.sync_api import sync_playwright

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root not in sys.path:
        sys.path.insert(0, root)  # run as a script: tools/ is on the path, the repository root is not
    from tools.live import browser as live

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("headless Chromium not found: install the Debian package 'chromium'")
    httpd, base = serve(html_root)
    try:
        with sync_playwright() as pw:
            b = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                failures = live.run(b, base, html_root, online=online)
            finally:
                b.close()
    finally:
        httpd.shutdown()
    if failures:
        print(f"\nlive browser check FAILED ({len(failures)} failures):")
        for f in failures:
            print("  " + f)
        return 1
    print("\nlive browser check passed")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html_root", help="the built book, e.g. _build/html")
    ap.add_argument("--screenshots", default=None, help="folder for one full-page PNG per page")
    ap.add_argument("--page", action="append", default=None,
                    help="check only this page (relative to html_root; repeatable)")
    ap.add_argument("--live", action="store_true",
                    help="a live build (make book LIVE=1): check only its live part (tools/live/browser.py), offline "
                         "but for the pinned numpy wheel, which is blocked")
    ap.add_argument("--live-online", action="store_true",
                    help="with --live: let the pinned numpy wheel through and run every page's widget end to end")
    a = ap.parse_args(argv)
    if not os.path.exists(os.path.join(a.html_root, "index.html")):
        print(f"{a.html_root}/index.html not found: run `make book` first")
        return 2
    if a.live or a.live_online:
        return live_main(a.html_root, a.live_online)
    failures = run(a.html_root, a.screenshots, a.page)
    if failures:
        print(f"\nbrowser check FAILED ({len(failures)} failures):")
        for f in failures:
            print("  " + str(f))
        return 1
    print("\nbrowser check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
