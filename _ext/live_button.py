"""Sphinx extension: the "Run it live" button (directive ``live-widget``), only in a live build.

A chapter puts the code that runs its widget in the directive's body, under the static twin::

    ```{live-widget}
    from lib.straggler.widgets import StragglerExplorer
    StragglerExplorer().show()
    ```

In a plain build (``make book``) the directive writes nothing: the page is exactly as before. In a live build
(``make book LIVE=1`` sets ``BOOK_LIVE=1``) it writes a hidden block with a button and a few lines of inline
script. Nothing is fetched before the click: the script only shows the button (not from ``file://``, where
JupyterLite cannot run: a line says how to serve the folder instead). One click opens JupyterLite's REPL from
the site (``live/repl/``) in a frame, with the chapter's code, which installs the book's wheel and runs the
widget. The button names the one outside request, Pyodide's numpy wheel, from tools/live/pins.py.
"""

from __future__ import annotations

import html
import os
import sys

from docutils import nodes
from docutils.parsers.rst import Directive

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
from lib.widget_base import live_page  # noqa: E402
from tools.live import pins  # noqa: E402

#: The line every live run starts with: the book's wheel (served from the site) and numpy (Pyodide's CDN).
INSTALL = "%pip install -q parallelism-rebuilt-lib numpy"

_SCRIPT = """<script>(function () {
  var box = document.currentScript.previousElementSibling;
  if (window.location.protocol === "file:") {
    box.querySelector(".live-run-file").hidden = false;
    box.querySelector(".live-run-button").hidden = true;
    box.hidden = false;
    return;
  }
  box.hidden = false;
  box.querySelector(".live-run-button").addEventListener("click", function () {
    var url = box.dataset.liveRoot + "live/repl/index.html?kernel=python&toolbar=1&code="
      + encodeURIComponent(box.dataset.liveCode);
    var frame = document.createElement("iframe");
    frame.className = "live-run-frame";
    frame.src = url;
    frame.title = "Live Python in your browser";
    frame.style.cssText = "width:100%;height:900px;border:1px solid #ccc;";
    this.disabled = true;
    this.textContent = "Starting Python in your browser (first time: a minute or two)";
    box.appendChild(frame);
  }, {once: true});
})();</script>"""


live_enabled = live_page  # BOOK_LIVE=1 (make book LIVE=1), read where the widgets' notes read it


def note() -> str:
    """The words beside the button: what runs where, and the one outside request."""
    host = pins.NUMPY_URL.split("/")[2]
    return (f"Runs this widget in your browser: Python (Pyodide) and the book's library come from this site; "
            f"numpy (about {pins.NUMPY_MB} MB) comes from {host} the first time.")


def button_html(code: str, root: str) -> str:
    """The hidden block, its button and its script; ``root`` is the site root relative to the page."""
    c = html.escape(f"{INSTALL}\n{code.strip()}\n", quote=True)
    return ('<div class="live-run" hidden style="margin:0.5em 0 1.2em" '
            f'data-live-root="{html.escape(root, quote=True)}" '
            f'data-live-code="{c}" data-numpy-url="{html.escape(pins.NUMPY_URL, quote=True)}">'
            f'<button type="button" class="live-run-button" title="numpy: '
            f'{html.escape(pins.NUMPY_URL, quote=True)}">Run it live</button> '
            f'<small class="live-run-note">{html.escape(note())}</small>'
            '<p class="live-run-file" hidden><small>To run it live, serve the downloaded book: '
            '<code>python -m http.server -d _build/html</code>, then open http://localhost:8000.</small></p>'
            "</div>" + _SCRIPT)


class LiveWidget(Directive):
    has_content = True

    def run(self):
        if not self.content:
            raise self.error("live-widget: the directive needs the code that runs the chapter's widget")
        if not live_enabled():
            return []
        docname = self.state.document.settings.env.docname
        root = "../" * docname.count("/")
        return [nodes.raw("", button_html("\n".join(self.content), root), format="html")]


def setup(app):
    app.add_directive("live-widget", LiveWidget)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
