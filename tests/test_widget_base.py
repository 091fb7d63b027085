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
