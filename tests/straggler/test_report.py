"""The chapter's printed and quoted text (lib/straggler/report.py): glue, tables, crossing, checks, Daly."""

import math

import numpy as np
import pytest

from lib.straggler.model import FailureModel, StepModel, optimal_interval_min, young_daly_min
from lib.straggler.figures import PAGE_CLAIMS, efficiency_curves, exact_claims
from lib.straggler.report import (agreement_checks, checks_html, claims_glue, claims_html, crossing_sizes,
                                  crossing_text, daly_higher_order_min, five_ways_html, live_view, lost_runs, plural,
                                  run_gaps, settings_glue, settings_text, spread_glue)


def test_plural_agrees_with_the_count():
    assert plural(1, "minute") == "1 minute" and plural(1.0, "minute") == "1 minute"
    assert plural(5, "minute") == "5 minutes" and plural(0.5, "minute") == "0.5 minutes"
    assert plural(0, "point") == "0 points" and plural(2, "day", "days") == "2 days"


def test_settings_glue_follows_the_model_and_the_readers_backups():
    g = settings_glue(StepModel(compute_s=2.0, p_slow=1e-3), FailureModel(checkpoint_min=2.0), 0.0)
    assert g["compute_s"] == "2 s" and g["p_slow"] == "1 in 1,000" and g["ideal_step_s"] == "2.1 s"
    assert g["checkpoint_min"] == "2 minutes" and g["view_share"] == g["page_share"] == "2%"
    assert settings_glue(StepModel(), FailureModel(), 5.0)["view_share"] == "5%"
    assert settings_glue(StepModel(p_slow=0.0), FailureModel(), 0)["p_slow"] == "none"
    assert FailureModel().checkpoint_min == 1 and settings_glue(StepModel(), FailureModel(), 0)[
        "checkpoint_min"] == "1 minute"


def test_settings_text_is_short_and_says_the_settings():
    lines = settings_text(StepModel(), FailureModel()).splitlines()
    assert len(lines) == 2 and all(len(x) <= 88 for x in lines)
    assert "1 in 10,000" in lines[0] and "restart 5 minutes" in lines[1]


def test_claims_glue_and_table_cover_every_claim_of_the_page():
    exact = exact_claims()
    g = claims_glue(exact)
    assert all(f"x_{k}" in g and g[f"p_{k}"] == v for k, v in PAGE_CLAIMS.items())
    assert g["x_step_16k_s"].endswith(" s") and g["x_mtbf_h"].endswith(" h") and g["x_eff_8"].endswith("%")
    assert g["backup_8_verdict"] == ("costs more than it saves" if exact["eff_8_backup"] < exact["eff_8"]
                                     else "pays for itself")
    flipped = dict(exact, eff_8_backup=exact["eff_8"] + 0.01)
    assert claims_glue(flipped)["backup_8_verdict"] == "pays for itself"
    t = claims_html(exact, "P", "E")
    assert len(t.rows) == len(PAGE_CLAIMS) and t._repr_html_().count("<tr>") == len(PAGE_CLAIMS) + 1
    assert "the page: P; exact: E" in t._repr_html_()


def test_crossing_is_where_backups_start_to_pay():
    curves = efficiency_curves(shares=(0.02,))
    below, above = crossing_sizes(curves, 0.02)
    i = curves["sizes"].index(above)
    assert curves["sizes"][i - 1] == below
    assert curves["backups"][0.02][i] > curves["plain"][i]
    assert all(b <= a for a, b in zip(curves["plain"][:i], curves["backups"][0.02][:i]))
    fake = {"sizes": [1, 2, 3], "plain": [1, 1, 1], "backups": {0.1: [0, 0, 0]}}
    assert crossing_sizes(fake, 0.1) is None
    assert crossing_text(fake, 0.1) == "nowhere between 1 and 3 GPUs"
    assert crossing_text(curves, 0.02) == f"between {below:,} and {above:,} GPUs"


def test_lost_runs_spread_and_glue():
    m = FailureModel().cluster_mtbf_min(16_384)
    lost = lost_runs(6 * young_daly_min(m), m, range(4))
    assert len(lost) == 4 and all(0 < x < 1 for x in lost) and len(set(lost)) == 4
    g = spread_glue([0.25, 0.31], 0.30)
    assert g == {"lost_rarely_runs": "25% to 31% in 2 seeds", "lost_spread": "5 points"}
    assert spread_glue([0.29, 0.30], 0.30)["lost_spread"] == "1 point"


@pytest.mark.parametrize("mtbf", [5.0, 20.0, 185.6, 1000.0, 1e5])
def test_daly_higher_order_is_closer_to_the_exact_best_than_young_daly(mtbf):
    best, yd, daly = optimal_interval_min(mtbf), young_daly_min(mtbf), daly_higher_order_min(mtbf)
    assert abs(daly - best) < abs(yd - best)
    assert daly == pytest.approx(best, rel=2e-3)


def test_daly_beyond_its_range_and_bad_input():
    assert daly_higher_order_min(0.4, 1.0) == 0.4  # checkpoint longer than 2 M: checkpoint every M
    with pytest.raises(ValueError):
        daly_higher_order_min(0.0)
    with pytest.raises(ValueError):
        daly_higher_order_min(math.inf)


def test_agreement_checks_pass_and_a_wrong_exact_value_fails():
    checks = agreement_checks(n_steps=50_000, n_runs=4, run_days=30)
    assert len(checks) == 6 and all(c.ok for c in checks), [c for c in checks if not c.ok]
    bad = checks[0].__class__(checks[0].what, checks[0].simulated, checks[0].exact + 0.01, 0.002)
    assert not bad.ok
    assert checks_html(checks, "L")._repr_html_().count("<tr>") == 7


def test_live_view_redraws_one_setting():
    comparison, fig = live_view(1024, 30.0, 2.0, 3.0, 0)
    assert comparison.n_gpus == 1024 and comparison.row("Your settings").n_backup == 21
    assert len(fig.frames) == 1 and np.isclose(fig.frames[0].data[-2].x[0], 30.0)


def test_five_ways_table_has_every_row_and_names_both_clusters():
    from lib.straggler.simulate import five_ways

    comparison = five_ways(1024, 30.0, 0.0, 3.0, 0)[0]
    t = five_ways_html(comparison)
    assert len(t.rows) == 5 and [r[0] for r in t.rows] == [r.name for r in comparison.rows]
    assert "1,024 GPUs: MTBF" in t.caption and "1,024 GPUs + 21 backups: MTBF" in t.caption
    assert all(len(c) <= 16 for r in t.rows for c in r[1:])  # numbers stay short enough for the column


def test_run_gaps_are_the_widest_of_the_three_shares():
    from dataclasses import replace

    from lib.straggler.simulate import Comparison, five_ways

    comparison = five_ways(16_384, 60.0, 0.0, 14.0, 0)[0]
    gaps = run_gaps(comparison)
    assert list(gaps) == [r.name for r in comparison.rows]
    rare = comparison.row("Too rarely (6 YD)")
    assert gaps[rare.name] == pytest.approx(max(abs(rare.kept_share - rare.expected_kept),
                                                abs(rare.lost_share - rare.expected_lost)))
    moved = replace(rare, checkpoint_share=rare.expected_checkpoint + 0.2)  # a gap in the checkpoint share
    assert run_gaps(Comparison(16_384, 14.0, 0, (moved,)))[rare.name] == pytest.approx(0.2)
