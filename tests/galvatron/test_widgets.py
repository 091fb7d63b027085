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


def _small_grid(tmp_path):
    path = str(tmp_path / "grid.json")
    GW.write_twin_grid(path, models=["bert-huge-32", "vit-huge-32"], gpus=(4, 8), budgets_gb=(6.0, 8.0))
    return GW.load_twin_grid(path)


def test_static_twin_is_a_grid_with_a_button_per_model(tmp_path):
    grid = _small_grid(tmp_path)
    fig = GW.static_figure("vit-huge-32", (8, 8.0), grid)
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert [t.name for t in heat] == ["vit-huge-32", "bert-huge-32"]            # the chosen model first
    assert [t.visible for t in heat] == [True, False]
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == ["vit-huge-32", "bert-huge-32"]
    assert buttons[1].args[0]["visible"] == [False, False, True, True]           # heatmap + crosses per model
    # the axes are the grid's, the same for every model: two controls, GPUs and budget
    assert list(fig.layout.xaxis.categoryarray) == ["6 GB", "8 GB"]
    assert list(fig.layout.yaxis.categoryarray) == ["4 GPUs", "8 GPUs"]
    # each cell is the search's answer; a cell with no plan is empty and crossed
    for t, cross in zip(heat, [t for t in fig.data if t.type == "scatter"]):
        for i, n in enumerate((4, 8)):
            for j, gb in enumerate((6.0, 8.0)):
                a = GW.plan_answer(GW.PlanSettings(t.name, n, gb, "vldb2023")).result
                got = t.z[i][j]
                if a.feasible:
                    assert abs(got - a.throughput) < 1e-3 and f"pp={a.plan.pp_deg}" in t.text[i][j]
                else:
                    assert got is None and (f"{gb:g} GB", f"{n} GPUs") in zip(cross.x, cross.y)
    assert any(not c["feasible"] for c in grid["cells"])  # the small grid has a cell where nothing fits
    with pytest.raises(ValueError, match="active must be a"):
        GW.static_figure("bert-huge-32", (2, 8.0), grid)
    with pytest.raises(ValueError, match="model must be one of"):
        GW.static_figure("swin-huge-32", (8, 8.0), grid)


def test_stored_twin_grid_is_the_searchs_answer():
    """The committed grid (data/galvatron/twin_grid.json) against fresh searches on a sample of its cells."""
    grid = GW.load_twin_grid()
    assert set(grid["models"]) == set(GW._model_names())
    cells = {(c["model"], c["n_gpus"], c["budget_gb"]): c for c in grid["cells"]}
    assert len(cells) == len(grid["models"]) * len(grid["gpus"]) * len(grid["budgets_gb"])
    for key in (("bert-huge-32", 8, 8.0), ("bert-huge-32", 4, 6.0), ("vit-huge-32", 8, 16.0)):
        assert GW.grid_cell(*key) == cells[key], key


def test_a_missing_or_foreign_grid_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="is missing"):
        GW.load_twin_grid(str(tmp_path / "none.json"))
    (tmp_path / "g.json").write_text('{"rules": "galvatron2", "cells": [1]}')
    with pytest.raises(ValueError, match="not a vldb2023 grid"):
        GW.load_twin_grid(str(tmp_path / "g.json"))


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
