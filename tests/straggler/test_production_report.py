"""The production section's tables, glue and figure (lib/straggler/production_report.py and
production_figures.py)."""

import pytest

from lib.straggler import calibration as cal
from lib.straggler import production_report as prod
from lib.straggler.production import KINDS
from lib.straggler.production_figures import figure


@pytest.fixture(scope="module")
def cmp():
    return prod.compare()


def test_table_has_a_row_per_observation_and_marks_the_fitted(cmp):
    t = prod.table(cmp, "x")
    assert len(t.rows) == len(cmp.observations) == 27
    sets = {r[0]: r[1] for r in t.rows}
    assert all(sets[n] == "fitted" for n in cal.fitted_names())
    assert sets["opt175b-restarts-16-days"] == "held out" and sets["rsc1-16k-ettr-5min"] == "calibration set"
    assert {r[5] for r in t.rows if r[2] == "cause share"} == {"no model"}  # the page has no causes


def test_errors_table_keeps_the_sets_apart(cmp):
    s = prod.by_set(cmp)
    assert s[("heldout", "production")]["interruptions"]["n"] == 4
    assert "cause_share" not in s[("heldout", "production")]
    rows = prod.errors_table(cmp, "x").rows
    assert [r[0] for r in rows].count("held out") == len(s[("heldout", "production")])


def test_constants_table_names_what_each_rests_on():
    rows = prod.constants_table("x").rows
    assert len(rows) == len(cal.fitted_constants())
    assert all(r[3].startswith(("fitted to ", "quoted: ", "assumed: ")) for r in rows)


def test_glue_values_are_text_and_follow_the_predictions(cmp):
    g = prod.glue_values(cmp)
    assert all(isinstance(v, str) and v for v in g.values())
    o, a, b = cmp.named("rsc1-1024gpu-mttf")
    assert g["prod_mttf1024_err"] == prod.fmt_error("mttf_hours", b.error)
    assert g["prod_n_obs"] == "27" and g["prod_share_page"] == "100.0%"


def test_figure_has_one_panel_per_kind_and_a_perfect_line_each(cmp):
    fig = figure(cmp, "t")
    titles = [a.text for a in fig.layout.annotations]
    assert len(titles) == len(KINDS)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == len(KINDS)
    markers = [t for t in fig.data if t.mode == "markers"]
    assert sum(len(t.x) for t in markers if t.name.startswith("production")) == 27
    names = [t.name for t in fig.data if t.showlegend]
    assert len(names) == len(set(names)) == 4  # each legend entry once


def test_named_refuses_an_unknown_observation(cmp):
    with pytest.raises(KeyError):
        cmp.named("nope")
