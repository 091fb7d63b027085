"""What the offline browser check runs in the live kernel (numpy blocked): install the book's wheel, import
ipywidgets, plotly and the wheel's numpy-free modules, and draw a plotly figure that an ipywidgets slider
redraws (through ``lib.viz.show``, as the chapters' widgets draw)."""

from __future__ import annotations

#: The wheel's modules that import no numpy (checked by tests/test_live.py against the wheel).
NUMPY_FREE = ("lib.viz", "lib.widget_base", "lib.book", "lib.html_table", "lib.atomic", "lib.cli_errors")

#: Printed when every import has worked; the slider's figure title reads ``TITLE.format(k)``.
READY = "LIVE-SELFTEST-READY"
TITLE = "self-test: k = {}"

CODE = f"""%pip install -q parallelism-rebuilt-lib
import ipywidgets as W
import plotly.graph_objects as go
import {", ".join(NUMPY_FREE)}
from lib.viz import show
k = W.IntSlider(value=1, min=1, max=5, description="k")
out = W.Output()
def draw(*_):
    fig = go.Figure(go.Scatter(y=[i ** k.value for i in range(5)]))
    fig.update_layout(title="{TITLE}".format(k.value))
    with out:
        out.clear_output(wait=True)
        show(fig, "live-selftest")
k.observe(draw, "value")
draw()
display(W.VBox([k, out]))
print("{READY}", lib.viz.in_browser_kernel())
"""
