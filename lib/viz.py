"""Plotly set-up that renders in the built book, the house palette, and frame-slider helpers.

Plotly >= 6 emits only ``application/vnd.plotly.v1+json`` under nbclient/papermill, which myst-nb drops,
so a figure silently vanishes from the HTML. ``show`` instead displays the figure's own HTML (plotly.js from
the CDN, a stable ``div_id`` so outputs are deterministic) and, in a live Jupyter front end, the same HTML
works as well. In the reader's browser kernel (Pyodide, the book's "Run it live" button) there is no CDN to
ask: there ``show`` and :class:`PlotlyHTML` hand JupyterLite plotly's MIME bundle
(``application/vnd.plotly.v1+json``), which its plotly extension draws with the plotly.js it serves itself.
Used in: every chapter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

#: The house palette: one colour per role, used by every chapter so a reader learns it once.
PALETTE: Mapping[str, str] = {
    "primary": "#2E6FBA",   # our result / the main series
    "secondary": "#E07B39",  # the comparison / a baseline
    "good": "#3B9C5A",      # kept work, a win
    "bad": "#C8453B",       # lost work, out of memory, a loss
    "neutral": "#8A8F98",   # context, reference lines
    "accent": "#7A5BB5",    # a highlighted choice (the reader's setting, a chosen plan)
    "light": "#D9E3F0",
}

#: A qualitative sequence for devices, strategies or runs (device 0, 1, 2, ...).
SEQUENCE: Sequence[str] = (
    "#2E6FBA", "#E07B39", "#3B9C5A", "#C8453B", "#7A5BB5", "#B8860B", "#1B9AAA", "#8A8F98",
)

_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


#: Characters per title line before it wraps: the book's text column is about 750 px wide at 1400 px, and a
#: 15 px title font fits about 85 characters in it; keep a margin for the y-axis labels.
TITLE_CHARS = 78
_TITLE_LINE_PX, _TITLE_PAD_PX = 21, 24


def wrap_title(text: str, width: int = TITLE_CHARS) -> str:
    """``text`` with ``<br>`` line breaks so that no line is longer than ``width`` characters (words kept whole).

    Existing ``<br>`` breaks are kept. Plotly never wraps a title by itself: a long one runs off the figure.
    """
    import textwrap

    lines = []
    for part in str(text).split("<br>"):
        lines += textwrap.wrap(part, width=width, break_long_words=False, break_on_hyphens=False) or [""]
    return "<br>".join(lines)


def title_margin(text: str | None) -> int:
    """Top margin (px) that holds ``text`` as wrapped by :func:`wrap_title` (and the mode bar above it)."""
    if not text:
        return 40
    return _TITLE_PAD_PX + _TITLE_LINE_PX * (wrap_title(text).count("<br>") + 1) + 14


def layout(fig, title: str | None = None, height: int = 420):
    """Apply the house layout and return ``fig``.

    The house rule: the legend sits outside the plot, to its right and top-aligned with it, so it can never cover
    the title (above the plot), an axis title (left of and below the plot) or a slider (below); titles wrap at
    :data:`TITLE_CHARS` and the top margin grows with them, so no title is cut off. White background, readable
    fonts, the house colours.
    """
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin=dict(l=60, r=20, t=title_margin(title), b=50),
        font=dict(family="Helvetica, Arial, sans-serif", size=13),
        legend=dict(orientation="v", yanchor="top", y=1, xanchor="left", x=1.02, yref="paper",
                    font=dict(size=12)),
        colorway=list(SEQUENCE),
    )
    if title:
        fig.update_layout(title=dict(text=wrap_title(title), x=0, xanchor="left", y=1, yanchor="top",
                                     yref="container", pad=dict(t=_TITLE_PAD_PX - 8), font=dict(size=15)))
    return fig


PLOTLY_MIME = "application/vnd.plotly.v1+json"
_CONFIG = {"displaylogo": False, "responsive": True}


def in_browser_kernel() -> bool:
    """Whether this kernel runs in the reader's browser (Pyodide: WebAssembly, no network but its own site)."""
    import sys

    return sys.platform == "emscripten"


def mime_bundle(fig) -> dict:
    """Plotly's MIME bundle of ``fig`` (data, layout, frames and the house config), as JupyterLab draws it."""
    import json

    import plotly.io as pio

    spec = json.loads(pio.to_json(fig, validate=False))
    spec["config"] = dict(_CONFIG)
    return {PLOTLY_MIME: spec, "text/plain": f"<plotly figure: {len(spec.get('data', []))} traces>"}


class FigureHTML(str):
    """The HTML of :func:`to_html`, which also remembers its figure (so the browser kernel can draw it)."""

    figure = None


def to_html(fig, div_id: str) -> str:
    """The figure as an HTML fragment that loads plotly.js from the CDN, with a stable element id.

    ``div_id`` must be unique on its page and start with a letter (it becomes an HTML id). The string also
    carries the figure (``.figure``); in the browser kernel it is only a placeholder, as there is no CDN to ask
    (:class:`PlotlyHTML` draws the figure there).
    """
    if not isinstance(div_id, str) or not _ID_RE.match(div_id):
        raise ValueError(f"div_id must start with a letter and use letters, digits, '_' or '-'; got {div_id!r}")
    if in_browser_kernel():
        out = FigureHTML(f'<div id="{div_id}"></div>')
    else:
        out = FigureHTML(_cdn_html(fig, div_id))
    out.figure = fig
    return out


def _cdn_html(fig, div_id: str) -> str:
    return fig.to_html(
        include_plotlyjs="cdn",
        include_mathjax=False,
        full_html=False,
        div_id=div_id,
        auto_play=False,  # a frames figure must not play through its frames on page load
        config=dict(_CONFIG),
    )


class PlotlyHTML:
    """A displayable wrapper: Jupyter shows ``_repr_html_``, the book keeps it as ``text/html``. In the browser
    kernel, when the HTML came from :func:`to_html` (or ``figure`` is given), it shows plotly's MIME bundle
    instead (no CDN request)."""

    def __init__(self, html: str, figure=None):
        self.html = html
        self.figure = figure if figure is not None else getattr(html, "figure", None)

    def _browser(self) -> bool:
        return self.__dict__.get("figure") is not None and in_browser_kernel()

    def _repr_html_(self) -> str | None:
        return None if self._browser() else self.html

    def __getattr__(self, name):
        # Only in the browser kernel does the object offer a MIME bundle: the book keeps text/html alone.
        if name == "_repr_mimebundle_" and self._browser():
            return lambda include=None, exclude=None: mime_bundle(self.figure)
        raise AttributeError(name)


def show(fig, div_id: str):
    """Display ``fig`` so that it appears in a live notebook *and* in the built HTML book.

    Returns None, so a cell ending in ``show(...)`` does not display the figure a second time.
    """
    from IPython.display import display

    if in_browser_kernel():
        display(mime_bundle(fig), raw=True)
        return
    display(PlotlyHTML(to_html(fig, div_id)))


@dataclass(frozen=True)
class Frame:
    """One precomputed state of a slider figure: its label and the traces' new data."""

    label: str
    data: list  # list of plotly traces (same count and order as the base figure's)
    title: str | None = None


def frames_figure(
    frames: Sequence[Frame],
    slider_label: str,
    active: int = 0,
    base_layout: Mapping[str, Any] | None = None,
):
    """A figure with one slider over precomputed ``frames``: interactive in static HTML, no kernel needed.

    Every frame must carry the same number of traces; the figure starts on ``frames[active]``.
    Used in: the stragglers chapter (GPUs, interval, backups sliders) and wherever a parameter is swept.
    """
    import plotly.graph_objects as go

    if not frames:
        raise ValueError("frames_figure needs at least one frame; got none")
    n_traces = len(frames[0].data)
    for f in frames:
        if len(f.data) != n_traces:
            raise ValueError(
                f"every frame needs {n_traces} traces like the first; frame {f.label!r} has {len(f.data)}"
            )
    if not 0 <= active < len(frames):
        raise ValueError(f"active must be in [0, {len(frames) - 1}]; got {active}")

    start = frames[active]
    fig = go.Figure(data=list(start.data), layout=dict(base_layout or {}))
    fig.frames = [
        go.Frame(data=list(f.data), name=f.label, layout=dict(title=dict(text=wrap_title(f.title))) if f.title else None)
        for f in frames
    ]
    steps = [
        dict(
            method="animate",
            label=f.label,
            args=[[f.label], dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))],
        )
        for f in frames
    ]
    fig.update_layout(
        sliders=[dict(active=active, currentvalue=dict(prefix=f"{slider_label}: "), pad=dict(t=50), steps=steps)]
    )
    if start.title:
        fig.update_layout(title=dict(text=wrap_title(start.title), x=0, xanchor="left", y=1, yanchor="top",
                                     yref="container", pad=dict(t=_TITLE_PAD_PX - 8), font=dict(size=15)))
    longest = max((f.title for f in frames if f.title), key=lambda t: wrap_title(t).count("<br>"), default=None)
    if longest and (fig.layout.margin.t or 0) < title_margin(longest):
        fig.update_layout(margin=dict(t=title_margin(longest)))  # room for every frame's title, not just the first
    return fig


def sweep_frames(
    values: Iterable[Any],
    make_traces: Callable[[Any], list],
    label: Callable[[Any], str] = str,
    title: Callable[[Any], str] | None = None,
) -> list[Frame]:
    """Build frames by calling ``make_traces(v)`` for every slider value ``v`` (a precomputed sweep)."""
    return [Frame(label=label(v), data=make_traces(v), title=title(v) if title else None) for v in values]
