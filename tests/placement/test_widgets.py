"""The Part I widget, driven in Python: controls set, callbacks triggered, answers checked against the
environment itself (lib/placement/widgets.py)."""

import pytest

from lib.graph import colocate, crossing_edges, expand
from lib.placement import baselines
from lib.placement import widgets as PW
from lib.placement.sim_env import SimPlacementEnv
from lib.viz import title_margin


@pytest.fixture(scope="module")
def sim():
    return SimPlacementEnv("49m", "4xT4-pcie")


@pytest.fixture
def widget():
    w = PW.PlaceItYourself(live=True)
    w.widget()  # builds the controls and answers once
    return w


def test_all_on_one_gpu_reports_what_the_environment_measures(widget, sim):
    w = widget._widgets()
    for picker in w["groups"]:
        picker.value = 2  # every group on GPU 2, one callback per picker
    expected = sim.measure(baselines.single_device(sim.graph, 2))
    assert widget.placement() == (2,) * sim.n_nodes
    assert widget.last.step_s == pytest.approx(expected.step_s, rel=1e-12)
    assert widget.last.peak_bytes == expected.peak_mem_bytes
    assert widget.last.n_copies == 0 and widget.last.copy_bytes == 0 and widget.last.copy_s == 0
    assert f"{expected.step_s * 1e3:.1f} ms a step" in w["summary"].value


def test_a_preset_that_splits_a_group_switches_to_nodes_and_pays_the_logits_wall(widget, sim):
    w = widget._widgets()
    w["preset"].value = "only the loss on GPU 1"
    p = (0,) * (sim.n_nodes - 1) + (1,)
    assert w["unit"].value == "nodes" and widget.placement() == p
    assert widget.last.step_s == pytest.approx(sim.measure(p).step_s, rel=1e-12)
    cut = crossing_edges(sim.graph, p)
    assert widget.last.n_copies == 2 * len(cut)
    assert widget.last.copy_bytes == 2 * sum(sim.graph.nodes[a].out_bytes for a, _ in cut)
    # the copies' time on the bus is what the trace says: the logits forward and their gradient backward
    copy_ev = [e for e in sim.trace(p) if e.kind == "copy"]
    assert widget.last.copy_s == pytest.approx(sum(e.end_s - e.start_s for e in copy_ev), rel=1e-9)
    w["preset"].value = "head and loss on GPU 1"
    assert widget.last.step_s < sim.measure(p).step_s - 0.1  # moving both together is nearly free


def test_a_group_preset_stays_in_groups_and_unit_switch_keeps_the_placement(widget, sim):
    w = widget._widgets()
    w["preset"].value = "4-way layer split"
    assert w["unit"].value == "groups"
    four = baselines.layer_split(sim.graph, (0, 1, 2, 3))
    assert widget.placement() == four
    w["unit"].value = "nodes"
    assert widget.placement() == four and widget.last.placement == four
    w["nodes"][-1].value = 0  # the loss alone on GPU 0: its group is split now
    assert PW.as_groups(widget.placement(), colocate(sim.graph)) is None
    w["unit"].value = "groups"  # back to groups: a split group goes where its last node is
    assert widget.placement() == four[:-6] + (0,) * 6 and widget.last.placement == widget.placement()


def test_experiment_toggles_change_the_environment(widget, sim):
    w = widget._widgets()
    w["preset"].value = "human 2-GPU split on 0,1"
    split = baselines.human_split(sim.graph, 0, 1)
    w["b"].value = True
    b_env = SimPlacementEnv("49m", "4xT4-pcie", n_micro=PW.B_MICRO)
    assert widget.last.step_s == pytest.approx(b_env.measure(split).step_s, rel=1e-12)
    assert widget.last.n_copies == 2 * PW.B_MICRO * len(crossing_edges(sim.graph, split))
    w["b"].value = False
    w["c"].value = True
    w["preset"].value = "single GPU 0"
    c_env = SimPlacementEnv("49m", "4xT4-pcie", mem_cap=PW.C_CAP)
    assert widget.last.oom and c_env.measure((0,) * sim.n_nodes).oom  # experiment C: one GPU does not fit
    assert widget.last.peak_bytes[0] > widget.last.cap_bytes[0] == c_env.cap_bytes[0]
    assert "out of memory" in w["summary"].value and widget.last.events == ()
    w["preset"].value = "4-way layer split"
    assert not widget.last.oom  # the write-up: the four-way split fits at cap 0.24


def test_random_button_places_groups_and_the_answer_is_the_pure_functions(widget, sim):
    w = widget._widgets()
    seen = set()
    for _ in range(3):
        w["random"].click()
        p = widget.placement()
        seen.add(p)
        assert PW.as_groups(p, colocate(sim.graph)) is not None
        assert widget.last == PW.answer(widget.current_settings(), p)
    assert len(seen) == 3
    w["unit"].value = "nodes"
    w["random"].click()
    assert widget.last.placement == widget.placement()


def test_best_so_far_is_the_fastest_tried_and_faces_the_best_baseline(widget, sim):
    w = widget._widgets()
    tried = []
    for label in ("only the loss on GPU 1", "embedding | body | head on 3 GPUs", "human 2-GPU split on 0,1"):
        w["preset"].value = label
        tried.append(widget.last.step_s)
    s = widget.current_settings()
    assert widget.best[s][0] == min(tried)
    hand = baselines.all_baselines(sim.graph, 4)
    label, base = PW.best_baseline(s)
    assert base.step_s == min(sim.measure(p).step_s for p in hand.values())
    assert label in w["summary"].value and f"{min(tried) * 1e3:.1f} ms" in w["summary"].value
    w["c"].value = True  # another experiment: its own best so far; a placement out of memory is none
    assert widget.last.oom and widget.current_settings() not in widget.best
    assert "no placement of yours fits yet" in w["summary"].value
    w["preset"].value = "4-way layer split"
    assert widget.best[widget.current_settings()][0] == widget.last.step_s < PW.OOM_PENALTY_S


def test_settings_and_placements_refused_with_one_line():
    with pytest.raises(ValueError, match="mode must be one of"):
        PW.Settings(mode="gpu")
    with pytest.raises(ValueError, match="micro_batches must be True or False"):
        PW.Settings(micro_batches=1)
    with pytest.raises(ValueError, match="placement has 3 entries"):
        PW.answer(PW.Settings(), (0, 1, 2))
    with pytest.raises(ValueError, match="unknown preset"):
        PW.PlaceItYourself().apply_preset("everything everywhere")


def test_static_twin_has_a_dropdown_over_the_instructive_placements(sim):
    fig = PW.static_figure()
    menu = fig.layout.updatemenus[0]
    assert [b.label for b in menu.buttons] == list(PW.TWIN_LABELS)
    places = PW.instructive(sim.graph, 4)
    for b in menu.buttons:
        a = PW.answer(PW.Settings(), places[b.label])
        data, lay, traces = b.args
        assert list(traces) == list(range(5)) and len(data["x"]) == 5
        head = a.headline()
        assert head.split(";")[0].replace(" ", "") in lay["title.text"].replace("<br>", "").replace(" ", "")
        assert data["y"][4] == [round(x / 2**30, 4) for x in a.peak_bytes]
    # the dropdown sits between the title and the plot: the top margin holds the longest title and the menu
    longest = max((b.args[1]["title.text"] for b in menu.buttons), key=lambda t: t.count("<br>"))
    assert menu.y == 1 and menu.yanchor == "bottom" and fig.layout.margin.t >= title_margin(longest) + 40
    assert fig.layout.legend.x > 1  # the house legend, right of the plot


def test_show_gives_the_twin_and_the_note_in_ci_and_the_widget_otherwise(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    monkeypatch.setenv("CI", "true")
    w = PW.PlaceItYourself()
    w.show()
    assert w._built is None  # the live widget was never created
    assert "plotly" in shown[0].html and "placement-twin" in shown[0].html
    assert "Colab or Binder" in shown[1].data
    shown.clear()
    monkeypatch.setenv("CI", "false")
    w.show()
    import ipywidgets

    assert isinstance(shown[-1], ipywidgets.VBox) and w.last is not None  # (the timeline goes to its Output)
    shown.clear()
    PW.PlaceItYourself(live=False).show()
    assert "Colab or Binder" in shown[1].data


def test_real_mode_times_on_the_given_devices():
    # mode="real" on two logical CPU devices (what a kernel with GPUs does with cuda:0, cuda:1)
    w = PW.PlaceItYourself(preset="ci", mode="real", devices=("cpu", "cpu"))
    w.widget()
    a = w.last
    assert a.source.startswith("measured on cpu") and not a.oom and len(a.peak_bytes) == 2
    assert a.timeline_source == ""  # the 4-GPU simulator's timeline would not match two devices
    g = w.graph
    w.set_placement(expand([i % 2 for i in range(len(w.groups))], w.groups, g.n_nodes))
    assert w.last.n_copies > 0 and w.last.step_s > 0
