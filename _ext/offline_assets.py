"""Sphinx extension: the built book needs nothing from the network.

plotly.js is copied from the installed plotly package into ``_static/`` and loaded once in every page's head;
the ``<script src="https://cdn.plot.ly/...">`` tags that ``lib.viz.show`` emits (so that figures also draw in a
live notebook) are removed from the pages. MathJax 3 (``tex-svg``, one self-contained file) is copied from the
PyPI package ``django-static-mathjax`` (a packaged MathJax 3.2.2 with no dependencies) and ``mathjax_path``
points at it. A downloaded ``_build/html`` therefore draws every figure and formula offline.
"""

from __future__ import annotations

import os
import re
import shutil

PLOTLY_JS = "plotly.min.js"
MATHJAX_JS = "mathjax/tex-svg.js"
_CDN_PLOTLY = re.compile(r'<script[^>]*src="https://cdn\.plot\.ly/[^"]*"[^>]*>\s*</script>\s*')


def plotly_js_source() -> str:
    import plotly

    path = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
    if not os.path.exists(path):
        raise FileNotFoundError(f"plotly.min.js not found in the plotly package at {path}")
    return path


def mathjax_js_source() -> str:
    try:
        import mathjax
    except ImportError as exc:
        raise ImportError("the book serves MathJax itself: pip install django-static-mathjax "
                          "(listed in requirements.txt)") from exc
    path = os.path.join(os.path.dirname(mathjax.__file__), "static", "mathjax", "es5", "tex-svg.js")
    if not os.path.exists(path):
        raise FileNotFoundError(f"MathJax tex-svg.js not found at {path}")
    return path


def strip_cdn_plotly(html: str) -> str:
    return _CDN_PLOTLY.sub("", html)


def _config_inited(app, config):
    config.mathjax_path = MATHJAX_JS


def _page_context(app, pagename, templatename, context, doctree):
    if "body" in context and "cdn.plot.ly" in context["body"]:
        context["body"] = strip_cdn_plotly(context["body"])


def _copy_assets(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    static = os.path.join(app.outdir, "_static")
    os.makedirs(os.path.join(static, "mathjax"), exist_ok=True)
    shutil.copyfile(plotly_js_source(), os.path.join(static, PLOTLY_JS))
    shutil.copyfile(mathjax_js_source(), os.path.join(static, MATHJAX_JS))


def setup(app):
    plotly_js_source(), mathjax_js_source()  # fail at the start of a build, not at its end
    app.connect("config-inited", _config_inited)
    app.add_js_file(PLOTLY_JS, priority=300)  # before the page body's inline Plotly.newPlot calls run
    app.connect("html-page-context", _page_context, priority=800)
    app.connect("build-finished", _copy_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
