"""lib/galvatron/search/report.py: the values the Galvatron chapters glue into their hand-written prose follow the
results they describe, tables fit, and the memory split matches the cost model."""

import ast
import math
from types import SimpleNamespace

import pytest

from lib.galvatron.search import report
from lib.galvatron.search.cost import layer_memory_mb
from lib.galvatron.search.figures import pure_costs, term_rows
from lib.galvatron.search.plan import Plan
from lib.galvatron.search.profiles import load_model, published_cluster
from lib.galvatron.search.strategies import Strategy, generate


def test_plans_text():
    assert report.plans_text(22, 32) == "22³² ≈ " + report.plans_text(22, 32).split("≈ ")[1]
    mant, exp = report.plans_text(10, 3).split("≈ ")[1].split(" × 10")
    assert mant == "1.0" and exp == "³"                       # 10^3, not 10.0 x 10^2


def test_sci_and_complexity_glue_are_not_python_literals():
    assert report.sci(3.2e7) == "3.2 × 10⁷" and report.sci(0.05) == "5.0 × 10⁻²"
    g = report.complexity(32, 8192, 11)
    assert g["cx_ratio"] == "11"
    for k in ("cx_L", "cx_E", "cx_ours", "cx_paper"):  # myst-nb shows '8,192' as a tuple, '3.2e+07' as a float
        with pytest.raises((ValueError, SyntaxError)):
            ast.literal_eval(g[k])


def test_table_renders_html_and_fixed_width_text():
    t = report.Table(["name", "value"], [["a<b", 1.5], ["c", 10]], caption="cap")
    html = t._repr_html_()
    assert "a&lt;b" in html and "cap" in html and "text-align:right" in html
    lines = repr(t).splitlines()
    assert lines[1].endswith(" 1.50") and lines[2].endswith("10")
    with pytest.raises(ValueError):
        report.Table(["a", "b"], [["only one"]])


def test_sim_label_names_the_profiles_and_fits_the_column():
    label = report.sim_label(published_cluster(8), load_model("bert-huge-32"))
    assert label.startswith("simulated") and "rtx-titan-8" in label and "bert-huge-32" in label
    assert len(label) <= 88 and "/" not in label


def test_four_ways_follows_the_rows():
    model, cluster = load_model("bert-huge-32"), published_cluster(8)
    rows = pure_costs(model.layer_types[0], 8, 16, cluster, 4, model.extra_overhead_ms)
    g = report.four_ways(rows)
    fastest = min(rows, key=lambda r: r["time_s"])
    assert g["fastest_kind"] == fastest["kind"] and g["fastest_ms"] == f"{fastest['time_s'] * 1e3:.1f} ms"
    assert g["dp_overhead_ms"] != "0.0 ms"
    by = {r["kind"]: r for r in rows}
    assert g["tp_ms"] == f"{by['TP']['time_s'] * 1e3:.1f} ms" and g["dp_mb"] == f"{by['DP']['comm_mb']:.1f} MB"
    assert g["quietest_kind"] == min(rows, key=lambda r: r["comm_mb"])["kind"]


def test_code_examples_and_baselines_cover_the_space():
    codes = [r[0] for r in report.code_examples(8).rows]
    assert {"1-1-8", "1-1-8f", "2-2*-2", "1-1-8-c"} <= set(codes)
    rows = {r[0]: int(r[2]) for r in report.baseline_spaces(8).rows}
    assert rows["galvatron"] == len(generate(8))
    assert all(rows[name] == len(generate(8, space=name)) for name in report.BASELINES)


def test_memory_rows_add_up_to_the_cost_model():
    layer = load_model("bert-huge-32").layer_types[0]
    strats = generate(8) + [Strategy.from_shape(1, 1, 8, ckpt=True)]
    for r in report.memory_rows(layer, strats, 16):
        assert math.isclose(r["states_mb"] + r["act_mb"], layer_memory_mb(layer, r["strategy"], 16))
    dp, sdp = report.memory_rows(layer, [Strategy.from_shape(1, 1, 8), Strategy.from_shape(1, 1, 8, sdp=True)], 16)
    assert math.isclose(dp["states_mb"], 4 * layer.param_mb)       # plain DP does not divide model states
    assert math.isclose(sdp["states_mb"], 4 * layer.param_mb * (1 / 8 + 0.025))


def _rows(kappa):
    model, cluster = load_model("bert-huge-32"), published_cluster(8).with_overlap(kappa)
    return term_rows(model.layer_types[0], generate(8), 16, cluster, lambda pp: 1 if pp == 1 else 4,
                     model.extra_overhead_ms)


def test_dp_terms_split_the_overhead_off_the_total():
    g = report.dp_terms(_rows(1.3), 8)
    total, eo, rest = (float(g[k].split()[0]) for k in ("dp_total_ms", "dp_eo_ms", "dp_without_eo_ms"))
    assert eo > 0 and math.isclose(total, eo + rest, abs_tol=0.011)


def test_best_for_layer_names_the_fastest_and_the_lightest():
    rows = _rows(1.3)
    g = report.best_for_layer(rows)
    fastest, light = min(rows, key=lambda r: r["total_ms"]), min(rows, key=lambda r: r["mem_mb"])
    assert g["best_code"] == fastest["strategy"].code and g["light_code"] == light["strategy"].code
    assert float(g["light_mb"].split()[0]) <= float(g["best_mb"].split()[0])


def test_overlap_gaps_follow_the_data_parallel_strategies():
    ov = report.overlap_gaps(_rows(1.3), _rows(1.0))
    assert len(ov["gap"]) == len(generate(8)) and max(ov["gap"]) > 0
    for s, g in zip(generate(8), ov["gap"]):
        assert (abs(g) < 1e-9) == (s.dp == 1), s.code    # only a DP dimension has an all-reduce to overlap
    assert ov["glue"]["gap_max"] == f"{max(ov['gap']):.1f}%"
    same = report.overlap_gaps(_rows(1.0), _rows(1.0))["glue"]
    assert same["gap_max"] == "0.0%"


def test_demo_instance_budget_binds():
    strats, t, m, r, budget = report.demo_instance(load_model("bert-huge-32").with_layers(3), published_cluster(8),
                                                   ("1-1-8", "1-1-8f", "1-2*-4"), 16)
    import numpy as np
    lo, hi = np.ceil(m).min(axis=1).sum(), np.ceil(m).max(axis=1).sum()
    assert [s.code for s in strats] == ["1-1-8", "1-2*-4", "1-1-8f"] or len(strats) == 3
    assert lo <= budget < hi
    with pytest.raises(ValueError):
        report.demo_instance(load_model("bert-huge-32").with_layers(2), published_cluster(8), ("9-9-9",), 16)


def _plan(codes, bsz=8):
    strats = [next(s for s in generate(8) if s.code == c) for c in codes]
    return Plan.from_strategies(strats, bsz, 1, pp_division=(len(codes),), model="m", est_iter_s=1.0,
                                est_throughput_samples_per_s=float(bsz), est_mem_mb_per_device=1000.0)


def test_plan_kinds_and_kinds_of():
    mixed, single = _plan(["1-4-2*", "1-4-2f*"]), _plan(["1-1-8", "1-1-8"])
    assert report.plan_kinds(mixed) == ["DP", "SDP", "TP"] and report.plan_kinds(single) == ["DP"]
    piped = next(s for s in generate(8) if s.pp == 2 and s.tp == 2)
    assert report.kinds_of(piped)[0] == "PP" and "TP" in report.kinds_of(piped)
    assert "PP" not in report.kinds_of(next(s for s in generate(8) if s.code == "1-1-8"))


def test_plan_line_and_json_fit_the_column():
    p = _plan(["1-4-2*"] * 48)
    assert all(len(line) <= 88 for line in report.plan_line(p, 8, "simulated with x" * 5).splitlines())
    assert all(len(line) <= 88 for line in report.plan_json_excerpt(p).splitlines())
    assert report.plan_json_excerpt(_plan(["1-1-8"])) == _plan(["1-1-8"]).to_json()  # short plans unchanged


def test_gains_and_comparison_glue():
    table = {("m", 8, "galvatron"): 20.0, ("m", 8, "dp"): 10.0, ("m", 8, "sdp"): 0.0, ("m", 8, "tp"): 5.0,
             ("m", 8, "pp"): 0.0, ("m", 8, "dp+tp"): 16.0, ("m", 8, "dp+pp"): 0.0, ("m", 8, "3d"): 0.0}
    g = report.gains(table, ["m"], [8])
    assert g["m"] == (pytest.approx(100.0), pytest.approx(25.0))
    glue = report.comparison_glue(table, {}, g)
    assert glue["gain_pure_max"] == "100%" and glue["n_oom"] == 4 and glue["n_galv_none"] == 0
    missed = {**table, ("m-2", 8, "galvatron"): 0.0}
    glue = report.comparison_glue(missed, {("m-2", 8, "galvatron"): SimpleNamespace(min_budget_gb=8.83)}, g)
    assert glue["n_galv_none"] == 1 and glue["galv_needs_m_2_8"] == "8.8 GB"
    t = report.comparison_table(table, ["m"], [8], ["galvatron", "dp", "sdp"], "x")
    assert t.rows == [["m", "8", "20.00", "10.00", "-"]]


def test_swin_table_and_scaling_on_the_published_profiles():
    from lib.galvatron.search.engine import search

    swin, cluster = load_model("swin-huge-32"), published_cluster(8)
    res = search(swin, cluster, 16)
    table = report.swin_table(res, swin)
    assert [r[0] for r in table.rows] == [lt.name for lt in swin.layer_types]
    tps, kinds = res.plan.tp_sizes_enc, swin.layer_type_index()
    for k, row in enumerate(table.rows):      # the mean TP degree of each layer type follows the plan
        mine = [t for t, kk in zip(tps, kinds) if kk == k]
        assert float(row[-1]) == pytest.approx(sum(mine) / len(mine), abs=0.005)
    assert report.swin_table(SimpleNamespace(feasible=False), swin) is None
    sc = report.scaling(load_model("vit-huge-32").with_layers(4), 8, [16], ["galvatron", "dp", "tp"])
    (n, g, b, which, dt, ratio), = sc["rows"]
    assert n == 16 and g >= b - 1e-9 and which in ("dp", "tp") and dt > 0
    glue = sc["glue"]
    assert glue["n_strat_here"] == str(len(generate(8))) and glue["n_strat_16"] == str(len(generate(16)))
    assert glue["s16_which"] == which and glue["s16_ratio"] == f"{g / b:.2f}×"
    assert glue["growth_16"] == f"{ratio:.1f}×" and glue["s16_ours"] == f"{g:.1f} samples/s"
    assert report.scaling(load_model("vit-huge-32").with_layers(4), 8, [], ["galvatron"])["glue"] == {
        "n_strat_here": str(len(generate(8)))}
