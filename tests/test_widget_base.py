"""lib.widget_base: live in a kernel, the static twin and its note under CI; controls built once, on first use."""

import plotly.graph_objects as go

from lib import widget_base


class Toy(widget_base.LiveOrTwin):
    TWIN_ID = "toy-twin"

    def __init__(self, live=True):
        self.live, self.builds, self.refreshes, self.last = live, 0, 0, None

    def _build(self):
        self.builds += 1
        return {"box": "the live box"}

    def refresh(self):
        self.refreshes += 1
        self.last = "answered"

    def static_twin(self):
        return go.Figure()


def _shown(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda x: shown.append(x))
    monkeypatch.setattr("lib.viz.show", lambda fig, div: shown.append(("twin", div)))
    return shown


def test_in_ci_the_twin_and_the_note_and_no_controls(monkeypatch):
    shown = _shown(monkeypatch)
    monkeypatch.setenv("CI", "true")
    t = Toy()
    t.show()
    assert shown[0] == ("twin", "toy-twin") and widget_base.LIVE_NOTE in shown[1].data and t.builds == 0


def test_in_a_kernel_the_live_widget_answered_once(monkeypatch):
    shown = _shown(monkeypatch)
    monkeypatch.setenv("CI", "")
    t = Toy()
    t.show()
    t.widget()
    assert shown == ["the live box"] and (t.builds, t.refreshes) == (1, 1)
    Toy(live=False).show()
    assert shown[1] == ("twin", "toy-twin")  # live=False forces the twin


def test_the_note_names_the_run_it_live_button_only_on_a_live_page_of_a_widget_that_has_one(monkeypatch):
    shown = _shown(monkeypatch)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("BOOK_LIVE", "1")
    Toy().show()  # no live-widget block in its chapter: Colab or Binder only
    assert widget_base.LIVE_NOTE in shown[-1].data and "Run it live" not in shown[-1].data

    class InPage(Toy):
        runs_in_page = True

    InPage().show()
    assert "Run it live" in shown[-1].data
    monkeypatch.setenv("BOOK_LIVE", "0")  # a static build has no button to point at
    InPage().show()
    assert "Run it live" not in shown[-1].data and widget_base.LIVE_NOTE in shown[-1].data


def test_the_straggler_notes_follow_the_live_build(monkeypatch):
    from lib.straggler.widgets import ABOVE_NOTE, StragglerExplorer

    w = StragglerExplorer.__new__(StragglerExplorer)
    w.twin_above = True
    monkeypatch.setenv("BOOK_LIVE", "")
    assert w.twin_note() == ABOVE_NOTE
    monkeypatch.setenv("BOOK_LIVE", "1")
    assert "Run it live" in w.twin_note()
    w.twin_above = False
    assert "Run it live" in w.twin_note() and "static twin" in w.twin_note()
