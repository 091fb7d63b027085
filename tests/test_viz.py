"""lib.viz: figures reach the built HTML (text/html with a stable id), and slider frames are consistent."""

import plotly.graph_objects as go
import pytest

from lib import viz


def _fig():
    return viz.layout(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])), title="t")


def test_to_html_is_deterministic_and_uses_the_cdn():
    a, b = viz.to_html(_fig(), "fig-a"), viz.to_html(_fig(), "fig-a")
    assert a == b  # nbval-stable: no random ids
    assert 'id="fig-a"' in a
    assert "cdn.plot.ly" in a
    assert "<html" not in a.lower()  # a fragment, not a full page


@pytest.mark.parametrize("bad", ["", "1abc", "has space", None, "a/b"])
def test_to_html_rejects_bad_ids(bad):
    with pytest.raises(ValueError, match="div_id"):
        viz.to_html(_fig(), bad)


def test_show_displays_html_not_the_plotly_mimetype(monkeypatch):
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    assert viz.show(_fig(), "fig-b") is None  # no second display as a cell's last expression
    (obj,) = shown
    assert 'id="fig-b"' in obj._repr_html_()
    assert not hasattr(obj, "_repr_mimebundle_")


def test_frames_figure_builds_one_slider_step_per_frame():
    frames = viz.sweep_frames([1, 2, 3], lambda k: [go.Scatter(x=[0, 1], y=[0, k])], label=lambda k: f"k={k}")
    fig = viz.frames_figure(frames, "k", active=1)
    assert [f.name for f in fig.frames] == ["k=1", "k=2", "k=3"]
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["k=1", "k=2", "k=3"]
    assert fig.layout.sliders[0].active == 1
    assert list(fig.data[0].y) == [0, 2]  # starts on the active frame


def test_frames_figure_does_not_autoplay_in_html():
    frames = viz.sweep_frames([1, 2], lambda k: [go.Scatter(x=[0, 1], y=[0, k])])
    html = viz.to_html(viz.frames_figure(frames, "k"), "slider-a")
    assert "Plotly.animate" not in html


def test_frames_figure_rejects_inconsistent_frames():
    frames = [viz.Frame("a", [go.Scatter()]), viz.Frame("b", [go.Scatter(), go.Scatter()])]
    with pytest.raises(ValueError, match="traces"):
        viz.frames_figure(frames, "x")
    with pytest.raises(ValueError, match="at least one"):
        viz.frames_figure([], "x")
    with pytest.raises(ValueError, match="active"):
        viz.frames_figure(frames[:1], "x", active=3)


def test_palette_colours_are_hex():
    for c in list(viz.PALETTE.values()) + list(viz.SEQUENCE):
        assert c.startswith("#") and len(c) == 7


def test_long_titles_wrap_and_the_margin_grows_with_them():
    long = "Estimated throughput: Galvatron against every baseline, for every model and memory budget (0 = none)"
    wrapped = viz.wrap_title(long)
    assert "<br>" in wrapped and all(len(line) <= viz.TITLE_CHARS for line in wrapped.split("<br>"))
    assert wrapped.replace("<br>", " ") == long  # words kept whole, nothing lost
    short = viz.layout(go.Figure(), title="short")
    tall = viz.layout(go.Figure(), title=long)
    assert tall.layout.margin.t > short.layout.margin.t
    assert tall.layout.title.text == wrapped


def test_house_legend_sits_right_of_the_plot_not_over_titles():
    fig = viz.layout(go.Figure(go.Scatter(x=[1], y=[1], name="a")), title="t")
    leg = fig.layout.legend
    assert leg.x > 1 and leg.xanchor == "left" and leg.orientation == "v"  # outside the plot area


def test_frames_figure_leaves_room_for_its_longest_frame_title():
    long = "a frame title that is long enough to need two lines in the book's text column, and then some more"
    frames = [viz.Frame("a", [go.Scatter()], title="short"), viz.Frame("b", [go.Scatter()], title=long)]
    fig = viz.frames_figure(frames, "x", base_layout=viz.layout(go.Figure(), title="short").layout.to_plotly_json())
    assert fig.layout.margin.t >= viz.title_margin(long)
    assert "<br>" in fig.frames[1].layout.title.text
