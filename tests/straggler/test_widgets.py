"""The Part III widget, driven in Python (lib/straggler/widgets.py): sliders set, callbacks triggered, the
answer checked against the five ways computed directly."""

import pytest

from lib.straggler import widgets as SW
from lib.straggler.simulate import five_ways


@pytest.fixture
def widget():
    w = SW.StragglerExplorer(n_gpus=4096, interval_min=30.0, days=7.0)
    w.widget()
    return w


def test_the_sliders_redraw_the_five_ways_at_their_setting(widget):
    w = widget._widgets()
    assert widget.comparison == five_ways(4096, 30.0, 0.0, 7.0, 0)[0]
    w["n_gpus"].value = 16_384
    w["backup_pct"].value = 2.0
    w["interval_min"].value = 60.0
    direct = five_ways(16_384, 60.0, 0.02, 7.0, 0)[0]
    assert widget.comparison == direct and widget.comparison.n_gpus == 16_384
    assert f"{direct.rows[0].kept_share:.1%}" in w["table"].value
    dot = widget.figure.data[-2]  # "your setting" on the interval curve
    assert list(dot.x) == [60.0]


def test_the_pure_function_is_the_reports_live_view():
    from lib.straggler.report import live_view

    s = SW.StragglerSettings(512, 15.0, 1.0, 3.0, 2)
    c1, f1 = SW.live_answer(s)
    c2, f2 = live_view(512, 15.0, 1.0, 3.0, 2)
    assert c1 == c2 and f1.to_json() == f2.to_json()
    with pytest.raises(ValueError, match=r"backup_pct: -1 is out of range; allowed: \[0, 100\]"):
        SW.StragglerSettings(backup_pct=-1.0)
    with pytest.raises(ValueError, match=r"n_gpus: 0 is out of range; allowed: \[1, "):
        SW.StragglerSettings(n_gpus=0)


def test_show_gives_the_twin_or_only_the_note_in_ci(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    monkeypatch.setenv("CI", "true")
    SW.StragglerExplorer(days=2.0).show()
    assert "straggler-twin" in shown[0].html and "Colab or Binder" in shown[1].data
    shown.clear()
    w = SW.StragglerExplorer(days=2.0, twin_above=True)
    w.show()
    assert len(shown) == 1 and "slider figures above" in shown[0].data and w._built is None
    shown.clear()
    monkeypatch.setenv("CI", "")
    w.show()
    import ipywidgets

    assert isinstance(shown[-1], ipywidgets.VBox)
