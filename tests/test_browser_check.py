"""tools/browser_check.py: each check fails exactly where it should, on tiny pages laid out like a built book.

The browser part needs Playwright and the Debian ``chromium`` (CI installs it before ``make test``); it is
skipped only when one of them is absent. The text rules are also tested without a browser.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import plotly.graph_objects as go
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import browser_check as bc  # noqa: E402

from lib import viz  # noqa: E402

NAV = '<nav class="bd-docs-nav"><a class="reference internal" href="/intro.html">Introduction</a></nav>'
STYLE = ("<style>body{margin:0;font:16px sans-serif} article{width:720px;margin-left:300px}"
         " pre{overflow:auto;white-space:pre;margin:0}</style>")


LOCAL_JS = "<script src='/_static/plotly.min.js'></script>"  # as _ext/offline_assets.py adds it to every page
MATHJAX = "<script defer src='/_static/mathjax/tex-svg.js'></script>"


def _page(body: str, head: str = LOCAL_JS) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'>{STYLE}{head}</head><body>{NAV}"
            f"<main><article class='bd-article'>{body}</article></main></body></html>")


def _cell(code: str, output: str | None = None) -> str:
    out = "" if output is None else (
        f"<div class='cell_output docutils container'><div class='output stream highlight-myst-ansi'>"
        f"<div class='highlight'><pre>{output}</pre></div></div></div>")
    return (f"<div class='cell docutils container'><div class='cell_input docutils container'>"
            f"<div class='highlight-ipython3'><div class='highlight'><pre>{code}</pre></div></div></div>"
            f"{out}</div>")


def _figure(div_id: str, legend: dict | None, title: str, house: bool = False) -> str:
    fig = go.Figure([go.Scatter(x=[0, 1, 2], y=[k, k + 1, k], name=f"a series called number {k}")
                     for k in range(4)])
    fig.update_xaxes(title_text="time (ms)")
    fig.update_yaxes(title_text="memory (GiB)")
    if house:
        viz.layout(fig, title, 400)
    else:
        fig.update_layout(title=dict(text=title), height=400, legend=legend)
    html = fig.to_html(include_plotlyjs="cdn", full_html=False, div_id=div_id)
    return f"<div class='cell_output docutils container'><div class='output text_html'>{html}</div></div>"


#: sphinx-togglebutton's assets and settings, as the built book's pages load them (see its _static/).
TOGGLE = ("<script>let toggleHintShow = 'Click to show';</script>"
          "<script>let toggleHintHide = 'Click to hide';</script>"
          "<script>let toggleOpenOnPrint = 'true';</script>"
          "<script>var togglebuttonSelector = '.toggle, .admonition.dropdown';</script>"
          "<link rel='stylesheet' href='/_static/togglebutton.css'>"
          "<script src='/_static/togglebutton.js'></script>")


def _solution(classes: str = "solution dropdown admonition", n: int = 1) -> str:
    """An exercise and its solution as sphinx-exercise writes them (the solution's code asserts, by design)."""
    return (f"<div class='exercise admonition' id='ex-{n}'><p class='admonition-title'>Exercise {n}</p>"
            f"<section id='exercise-content'><p>What is six times seven?</p></section></div>"
            f"<div class='{classes}' id='solution-{n}'><p class='admonition-title'>Solution to "
            f"<a class='reference internal' href='#ex-{n}'>Exercise {n}</a></p><section id='solution-content'>"
            f"<p>Six sevens make forty-two.</p>"
            + _cell("answer = 6 * 7\nassert answer == 42, answer", "42") + "</section></div>")


def _write(root, rel: str, html: str):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")


LONG_TITLE = ("Per-device peak memory of every plan the search kept, against the budget, on eight "
              "simulated GPUs of the 8xA100 profile")
WIDE_LINE = "wide_output = " + ", ".join(f"value_{k}" for k in range(60))


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    import shutil
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_ext"))
    import offline_assets

    (root / "_static" / "mathjax").mkdir(parents=True)
    shutil.copy(offline_assets.plotly_js_source(), root / "_static" / "plotly.min.js")
    shutil.copy(offline_assets.mathjax_js_source(), root / "_static" / "mathjax" / "tex-svg.js")
    import sphinx_togglebutton

    for name in ("togglebutton.js", "togglebutton.css"):
        shutil.copy(os.path.join(os.path.dirname(sphinx_togglebutton.__file__), "_static", name), root / "_static")
    _write(root, "index.html", "<meta http-equiv='Refresh' content='0; url=intro.html'>")
    _write(root, "intro.html", _page(
        "<h1>Good page</h1><p>Measured on cuda:0 (NVIDIA H200). See "
        "<a href='https://colab.research.google.com/github/x/home/y'>https://colab.research.google.com/"
        "github/x/home/y</a>; profiles live in data/hardware/4xT4-pcie.json; 3/4 of runs.</p>"
        + _cell("import lib.viz as viz\nx = 1  # a short line", "1.0 ms, simulated with 4xT4-pcie")
        + _figure("fig-house", None, LONG_TITLE, house=True)
        + "<details><summary>show</summary>" + _cell("y = 2") + "</details>"
        + "<p>A formula: <span class='math notranslate nohighlight'>\\(a^2 + b^2 = c^2\\)</span></p>",
        head=LOCAL_JS + MATHJAX))
    _write(root, "book/x/math.html", _page(  # MathJax from a CDN: blocked, so the formula is not drawn
        "<h1>Math</h1><p><span class='math notranslate nohighlight'>\\(x^2\\)</span></p>",
        head=LOCAL_JS + "<script defer src='https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-svg.js'></script>"))
    _write(root, "book/x/cdn.html", _page(  # plotly.js only from its CDN: blocked, so the figure is not drawn
        "<h1>CDN</h1>" + _figure("fig-cdn", None, "A figure whose plotly.js is on a CDN", house=True), head=""))
    _write(root, "genindex.html", _page("<h1>Index</h1>"))  # not a page of the book: skipped
    _write(root, "references.html", _page(
        "<h1>References</h1><div class='admonition warning'><p class='admonition-title'>Warning</p>"
        "<p>A warning admonition is prose, not a Python warning.</p></div>"))
    _write(root, "book/x/solutions.html", _page(  # two collapsed solutions that open on a click
        "<h1>Exercises</h1>" + _solution(n=1) + _solution(n=2), head=LOCAL_JS + TOGGLE))
    _write(root, "book/x/shown.html", _page(  # not a dropdown: shown from the start, nothing to click
        "<h1>Shown</h1>" + _solution("solution admonition"), head=LOCAL_JS + TOGGLE))
    _write(root, "book/x/stuck.html", _page(  # collapsed, but a style keeps the body hidden after the click
        "<h1>Stuck</h1>" + _solution(), head=LOCAL_JS + TOGGLE
        + "<style>div.solution section{display:none !important}</style>"))
    _write(root, "book/x/wide.html", _page("<h1>Wide</h1>" + _cell("print(wide_output)", WIDE_LINE)))
    _write(root, "book/x/legend.html", _page(
        "<h1>Legends</h1>"
        + _figure("fig-on-title", dict(x=0.1, xanchor="left", y=0.98, yanchor="top",
                                       orientation="h", yref="container"), "A title the legend sits on")
        + _figure("fig-on-axis", dict(x=0.5, xanchor="center", y=-0.08, yanchor="top",
                                      orientation="h"), "A title clear of the legend")))
    _write(root, "book/x/text.html", _page(
        "<h1>Machinery</h1><p>The spec was read from /work/main/shared/spec.md today.</p>"
        + _cell("run(out)", "wrote runs to placement-runs-ab12cd\n"
                "Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                "lib/x.py:3: FutureWarning: old")
        + "<details><summary>show</summary>" + _cell("# Oracle\nassert x == 1") + "</details>"))
    return root


def _have_browser() -> bool:
    return importlib.util.find_spec("playwright") is not None and bc.find_chromium() is not None


@pytest.fixture(scope="module")
def failures(book):
    if not _have_browser():
        pytest.skip("needs Playwright and the Debian chromium (CI installs it)")
    shots = book.parent / (book.name + "-shots")
    found = bc.run(str(book), shots=str(shots), echo=False)
    return {"shots": shots, "by_page": {p: [f for f in found if f.page == p] for p in bc.pages(str(book))}}


def test_pages_are_the_root_pages_then_the_chapters(book):
    assert bc.pages(str(book)) == ["intro.html", "references.html", "book/x/cdn.html", "book/x/legend.html",
                                   "book/x/math.html", "book/x/shown.html", "book/x/solutions.html",
                                   "book/x/stuck.html", "book/x/text.html", "book/x/wide.html"]


def test_good_pages_pass_every_check(failures):
    assert failures["by_page"]["intro.html"] == []
    assert failures["by_page"]["references.html"] == []


def test_screenshots_one_per_page(failures):
    names = sorted(os.listdir(failures["shots"]))
    assert names == ["book__x__cdn.png", "book__x__legend.png", "book__x__math.png", "book__x__shown.png",
                     "book__x__solutions.png", "book__x__stuck.png", "book__x__text.png", "book__x__wide.png",
                     "intro.png", "references.png"]


def test_offline_a_cdn_formula_or_figure_is_not_drawn_and_says_so(failures):
    """Every outside request is blocked: plotly.js and MathJax must come from the book's own _static/."""
    (math,) = failures["by_page"]["book/x/math.html"]
    assert math.kind == bc.MATH and "0 of 1 formulas" in math.message
    kinds = {f.kind for f in failures["by_page"]["book/x/cdn.html"]}
    assert bc.FIGURES in kinds


def test_wide_block_is_reported_with_its_start_and_overflow(failures):
    (f,) = failures["by_page"]["book/x/wide.html"]
    assert f.kind == bc.WIDE
    assert "'wide_output = value_0" in f.message
    over = int(f.message.split(" by ")[1].split(" px")[0])
    assert over > 100  # the line is far wider than the 720 px column


def test_legend_on_title_and_on_axis_title_are_reported(failures):
    found = failures["by_page"]["book/x/legend.html"]
    assert {f.kind for f in found} == {bc.LEGEND}
    msgs = sorted(f.message for f in found)
    assert len(msgs) == 2, msgs
    assert msgs[0].startswith("figure fig-on-axis: legend intersects the x-axis title")
    assert msgs[1].startswith("figure fig-on-title: legend intersects the title")


def test_machinery_text_is_reported_once_per_line(failures):
    found = failures["by_page"]["book/x/text.html"]
    assert {f.kind for f in found} == {bc.TEXT}
    whats = sorted(f.message.split(":")[0] for f in found)
    assert whats == sorted(["an absolute path", "a temporary folder", "a Python traceback",
                            "a Python warning", "a check cell", "a check cell"])
    assert any("/work/main/shared/spec.md" in f.message for f in found)


@pytest.mark.parametrize("line", [
    "Traceback (most recent call last):",
    "  /home/me/x.py:3: UserWarning: slow",
    "saved under /tmp/abc/run.json",
    r"C:\Users\me\book",
    "from .venv/lib/python3.11/site-packages/torch",
    "runs in tmpa1b2c3d4/",
    "DeprecationWarning raised",
])
def test_text_rules_catch(line):
    assert bc.text_failures("p", line, []), line


@pytest.mark.parametrize("line", [
    "https://colab.research.google.com/github/org/repo/blob/main/home/x.ipynb",
    "profiles in data/hardware/ and runs/tmp/ (relative)",
    "3/4 of the runs; O(L·E·|S|) time",
    "measured on cuda:0 (NVIDIA H200)",
    "a warning sign, not a Python one",
])
def test_text_rules_spare(line):
    assert bc.text_failures("p", line, []) == []


def test_check_cell_rules_only_apply_to_code_blocks():
    assert bc.text_failures("p", "nbval checks the oracle cells; assert x", []) == []
    assert [f.message.split(":")[0] for f in bc.text_failures("p", "", ["x = 1\nassert x == 1"])] == ["a check cell"]
    assert bc.text_failures("p", "", ["# Oracle: stored output"])
    assert bc.text_failures("p", "", ["x = 1  # assertive comment"]) == []


def test_collapsed_solutions_that_open_on_a_click_pass_and_their_asserts_are_spared(failures):
    """sphinx-togglebutton hides both bodies; clicking each toggle shows it. A solution asserts its own answer
    (the exercises' rule), so its code is not a check cell."""
    assert failures["by_page"]["book/x/solutions.html"] == []


def test_a_solution_shown_before_a_click_is_reported(failures):
    found = failures["by_page"]["book/x/shown.html"]
    assert {f.kind for f in found} == {bc.SOLUTIONS}
    msgs = sorted(f.message for f in found)
    assert len(msgs) == 2, msgs
    assert "has no toggle button" in msgs[0]
    assert "shows its body before a click" in msgs[1] and "Six sevens make forty-two" in msgs[1]


def test_a_solution_that_stays_hidden_after_its_click_is_reported(failures):
    (f,) = failures["by_page"]["book/x/stuck.html"]
    assert f.kind == bc.SOLUTIONS and "stays hidden after clicking its toggle button" in f.message


def test_solution_failures_without_a_browser():
    closed = {"i": 0, "label": "Solution to Exercise 1", "dropdown": True, "button": True, "hasBody": True,
              "visible": ""}
    opened = {**closed, "visible": "Six sevens make forty-two."}
    assert bc.solution_failures("p", [closed], [opened]) == []
    assert [f.kind for f in bc.solution_failures("p", [opened], [opened])] == [bc.SOLUTIONS]
    (f,) = bc.solution_failures("p", [closed], [closed])
    assert "stays hidden" in f.message
