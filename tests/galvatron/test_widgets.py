"""The Part II widget, driven in Python: sliders and selectors set, callbacks triggered, plans checked against
the search itself (lib/galvatron/widgets.py)."""

import pytest

from lib.galvatron import widgets as GW
from lib.galvatron.search.engine import search
from lib.galvatron.search.profiles import load_model, published_cluster
from lib.galvatron.search.report import BASELINES


@pytest.fixture
def widget():
    w = GW.YourBudgetYourPlan(live=True)
    w.widget()
    return w


def _rules_kw(name):
    rules = GW.available_rules()[name]
    return {} if rules is None else {"rules": rules}


def test_at_8_gb_the_widget_reports_the_searchs_plan(widget):
    direct = search(load_model("bert-huge-32"), published_cluster(8), 8.0)
    a = widget.last
    assert a.result.feasible and a.result.plan == direct.plan
    assert a.result.throughput == direct.throughput
    assert f"{direct.throughput:.2f} samples/s" in widget._widgets()["summary"].value
    assert direct.plan.summary() in widget._widgets()["summary"].value


def test_moving_the_sliders_searches_again(widget):
    w = widget._widgets()
    w["budget"].value = 12.0
    assert widget.last.result.plan == search(load_model("bert-huge-32"), published_cluster(8), 12.0).plan
    w["gpus"].value = 16
    res16 = search(load_model("bert-huge-32"), published_cluster(16), 12.0)
    assert widget.last.result.plan == res16.plan and widget.last.result.plan.world_size == 16
    w["model"].value = "vit-huge-32"
    assert widget.last.result.plan == search(load_model("vit-huge-32"), published_cluster(16), 12.0).plan
    w["space"].value = "dp+tp"
    w["uniform"].value = True
    restricted = search(load_model("vit-huge-32"), published_cluster(16), 12.0, space="dp+tp", uniform=True)
    assert widget.last.result.throughput == restricted.throughput
    assert len({s.code for s in widget.last.result.plan.strategies()}) == 1  # one strategy for every layer


def test_every_rule_set_offered_is_the_one_the_search_gets(widget):
    w = widget._widgets()
    assert list(w["rules"].options) == list(GW.available_rules())
    for name in w["rules"].options:
        w["rules"].value = name
        direct = search(load_model("bert-huge-32"), published_cluster(8), 8.0, **_rules_kw(name))
        assert widget.last.result.plan == direct.plan and widget.last.settings.rules == name
        assert GW.YourBudgetYourPlan(rules=name).settings.rules == name  # what a chapter passes


def test_the_best_baseline_is_the_fastest_baseline_space():
    a = GW.plan_answer(GW.PlanSettings())
    model, cluster = load_model("bert-huge-32"), published_cluster(8)
    each = {sp: search(model, cluster, 8.0, space=sp, uniform=True).throughput for sp in BASELINES}
    assert dict(a.baselines) == each
    assert a.best_baseline == max(each, key=each.get)
    assert a.gain == pytest.approx(a.result.throughput / max(each.values()) - 1)
    assert a.gain >= -1e-12  # Galvatron's space holds every baseline's


def test_a_budget_too_small_says_what_it_needs(widget):
    w = widget._widgets()
    w["model"].value = "t5-large-48"
    w["budget"].value = 4.0
    a = widget.last
    assert not a.result.feasible and "needs at least" in w["summary"].value
    assert a.result.min_budget_gb > 4.0
    assert widget.figure.layout.title.text.startswith("t5-large-48 on 8 GPUs, 4 GB each: no plan fits")


def test_settings_refused_with_one_line():
    with pytest.raises(ValueError, match="model must be one of"):
        GW.PlanSettings(model="gpt-5")
    with pytest.raises(ValueError, match="n_gpus must be a power of two"):
        GW.PlanSettings(n_gpus=6)
    with pytest.raises(ValueError, match="budget_gb must be a number"):
        GW.PlanSettings(budget_gb=-1)
    with pytest.raises(ValueError, match="space must be one of"):
        GW.PlanSettings(space="zero")
    with pytest.raises(ValueError, match="rules must be one of"):
        GW.PlanSettings(rules="gpt4")


def test_static_twin_has_one_frame_per_gpu_count_and_budget():
    gpus, budgets = (4, 8), (8.0, 16.0)
    fig = GW.static_figure("bert-huge-32", gpus, budgets, active=(8, 8.0))
    labels = [f.name for f in fig.frames]
    assert labels == ["4 GPUs, 8 GB", "4 GPUs, 16 GB", "8 GPUs, 8 GB", "8 GPUs, 16 GB"]
    assert fig.layout.sliders[0].active == 2
    n_layers = load_model("bert-huge-32").n_layers
    for f, (n, gb) in zip(fig.frames, [(n, gb) for n in gpus for gb in budgets]):
        a = GW.plan_answer(GW.PlanSettings("bert-huge-32", n, gb))
        assert len(f.data) == n_layers
        assert f"{a.result.throughput:.1f} samples/s" in f.layout.title.text.replace("<br>", " ")
        # every layer's rectangle lies inside the frame's axes, and fills most of them
        x, y = max(max(t.x) for t in f.data), max(max(t.y) for t in f.data)
        assert 0.9 * f.layout.xaxis.range[1] < x <= f.layout.xaxis.range[1]
        assert 0.9 * f.layout.yaxis.range[1] < y <= f.layout.yaxis.range[1]
    with pytest.raises(ValueError, match="active must be one of"):
        GW.static_figure("bert-huge-32", gpus, budgets, active=(2, 8.0))


def test_show_gives_the_twin_and_the_note_in_ci(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    monkeypatch.setenv("CI", "true")
    w = GW.YourBudgetYourPlan()
    w.show()
    assert w._built is None and "galv-plan-twin" in shown[0].html and "Colab or Binder" in shown[1].data
    shown.clear()
    monkeypatch.delenv("CI")
    w.show()
    import ipywidgets

    assert isinstance(shown[-1], ipywidgets.VBox) and w.last is not None
