"""The built book needs nothing from the network: plotly.js and MathJax are served from its own _static/."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "_ext"))

import offline_assets  # noqa: E402


def test_cdn_plotly_tags_are_removed_and_nothing_else():
    body = ('<p>a</p><script src="https://cdn.plot.ly/plotly-3.1.1.min.js" charset="utf-8"></script>\n'
            '<div id="f"></div><script type="text/javascript">Plotly.newPlot("f", [])</script>')
    out = offline_assets.strip_cdn_plotly(body)
    assert "cdn.plot.ly" not in out and 'Plotly.newPlot("f", [])' in out and "<p>a</p>" in out


def test_the_assets_come_from_installed_packages():
    assert os.path.getsize(offline_assets.plotly_js_source()) > 1_000_000
    assert os.path.getsize(offline_assets.mathjax_js_source()) > 1_000_000


@pytest.mark.timeout(300)
def test_a_built_page_loads_plotly_and_mathjax_locally(tmp_path):
    book = tmp_path / "book"
    os.makedirs(book / "_ext")
    shutil.copy(os.path.join(ROOT, "_ext", "offline_assets.py"), book / "_ext")
    (book / "_config.yml").write_text(
        "title: t\nexecute:\n  execute_notebooks: force\n  raise_on_error: true\n"
        "parse:\n  myst_enable_extensions: [dollarmath]\n"
        "sphinx:\n  local_extensions:\n    offline_assets: _ext/\n")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: ch\n")
    (book / "intro.md").write_text("# Intro\n\nA formula: $a^2 + b^2 = c^2$.\n")
    code = ("import plotly.graph_objects as go\nfrom lib.viz import show\n"
            "show(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])), 'fig-a')")
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "cells": [{"cell_type": "markdown", "id": "a", "metadata": {}, "source": "# Chapter"},
                    {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": code}]}
    (book / "ch.ipynb").write_text(json.dumps(nb))
    jb = os.path.join(os.path.dirname(sys.executable), "jupyter-book")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([jb, "build", str(book), "--all", "-W"], check=True, capture_output=True, env=env, timeout=280)
    html = book / "_build" / "html"
    assert (html / "_static" / "plotly.min.js").stat().st_size > 1_000_000
    assert (html / "_static" / "mathjax" / "tex-svg.js").stat().st_size > 1_000_000
    for page in ("intro.html", "ch.html"):
        text = (html / page).read_text()
        srcs = re.findall(r'<script[^>]*src="([^"]+)"', text)
        outside = [s for s in srcs if s.startswith(("http:", "https:", "//"))]
        assert not [s for s in outside if "plot.ly" in s or "mathjax" in s.lower()], outside
        assert any(s.endswith("_static/plotly.min.js") for s in srcs)
        assert ("_static/mathjax/tex-svg.js" in " ".join(srcs)) == (page == "intro.html")  # pages with math
    assert 'id="fig-a"' in (html / "ch.html").read_text()
