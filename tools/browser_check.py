"""Open the built book in headless Chromium and check what a reader would see.

For the front page and every chapter page: it loads without JavaScript errors, and every plotly figure on it
drew an SVG. Saves a screenshot of each page. The sandbox has no internet, so plotly.js requested from its CDN
is served from the plotly Python package (same file), and other outside requests are aborted and listed.

    python tools/browser_check.py _build/html --screenshots _build/screenshots
"""

from __future__ import annotations

import argparse
import functools
import glob
import http.server
import os
import shutil
import sys
import threading

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def plotly_js_path() -> str:
    import plotly

    path = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
    if not os.path.exists(path):
        raise FileNotFoundError(f"plotly.min.js not found at {path}")
    return path


def find_chromium() -> str:
    for c in CHROMIUM_CANDIDATES:
        if os.path.exists(c):
            return c
    found = shutil.which("chromium")
    if found:
        return found
    raise SystemExit("headless Chromium not found: install the Debian package 'chromium'")


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
    """The root page (index.html redirects to it) and every chapter page, as paths relative to ``html_root``."""
    chapters = sorted(
        os.path.relpath(p, html_root) for p in glob.glob(os.path.join(html_root, "book", "**", "*.html"), recursive=True)
    )
    roots = [p for p in ("intro.html",) if os.path.exists(os.path.join(html_root, p))]
    return roots + chapters


def _router(base: str, plotly_js: bytes, aborted: list[str]):
    """Serve the book from loopback, plotly.js from the installed package, and block everything else."""

    def route(r, request=None):
        url = r.request.url
        if url.startswith(base):
            return r.continue_()
        if "cdn.plot.ly" in url and url.endswith(".js"):
            return r.fulfill(status=200, content_type="application/javascript", body=plotly_js)
        aborted.append(url)
        return r.abort()

    return route


def check(html_root: str, shots: str | None) -> int:
    from playwright.sync_api import sync_playwright

    plotly_js = open(plotly_js_path(), "rb").read()
    httpd, base = serve(html_root)
    failures: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        for rel in pages(html_root):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            aborted: list[str] = []
            page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))

            page.route("**/*", _router(base, plotly_js, aborted))
            resp = page.goto(f"{base}/{rel}", wait_until="load")
            if resp is None or resp.status != 200:
                failures.append(f"{rel}: HTTP {resp.status if resp else 'no response'}")
                page.close()
                continue
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
            drawn = page.evaluate(
                "() => [...document.querySelectorAll('div.plotly-graph-div')]"
                ".filter(d => d.querySelector('svg.main-svg')).length"
            )
            nav_links = page.locator("nav.bd-docs-nav a.reference.internal").count()
            if shots:
                os.makedirs(shots, exist_ok=True)
                page.screenshot(path=os.path.join(shots, rel.replace("/", "__").replace(".html", ".png")), full_page=True)
            status = "ok"
            if errors:
                failures.append(f"{rel}: JavaScript errors: {errors[:3]}")
                status = "JS ERRORS"
            if drawn != n_plots:
                failures.append(f"{rel}: {drawn} of {n_plots} plotly figures drew an SVG")
                status = "FIGURES MISSING"
            if nav_links == 0:
                failures.append(f"{rel}: no navigation links in the sidebar")
                status = "NO NAVIGATION"
            print(f"{status:>15}  {rel}: {n_plots} plotly figures, {drawn} drawn, {nav_links} nav links, "
                  f"{len(aborted)} outside requests blocked")
            page.close()
        browser.close()
    httpd.shutdown()
    if failures:
        print("\nbrowser check FAILED:")
        for f in failures:
            print("  " + f)
        return 1
    print("\nbrowser check passed")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html_root", help="the built book, e.g. _build/html")
    ap.add_argument("--screenshots", default=None, help="folder for one PNG per page")
    a = ap.parse_args(argv)
    if not os.path.exists(os.path.join(a.html_root, "index.html")):
        print(f"{a.html_root}/index.html not found: run `make book` first")
        return 2
    return check(a.html_root, a.screenshots)


if __name__ == "__main__":
    sys.exit(main())
