"""The worked example of Part II (BERT-Huge-32, 8 GPUs, 8 GB, vldb2023): chapter 5's whole-model rows, chapter 6's
layer by hand, chapter 7's fair comparison and per-stage memory, and the figures that draw them."""

import math

import numpy as np
import pytest

from lib.galvatron.search import dp_readable, figures, report
from lib.galvatron.search.cost import layer_memory_mb, layer_time_s, other_memory_mb
from lib.galvatron.search.engine import search
from lib.galvatron.search.profiles import load_model, published_cluster
from lib.galvatron.search.strategies import Strategy, generate

BERT, C8 = load_model("bert-huge-32"), published_cluster(8)


def test_layer_by_hand_is_the_cost_models_layer_to_a_hundredth_of_a_ms():
    dp = Strategy.from_shape(1, 1, 8)
    for B in (8, 16, 32):
        h = report.layer_by_hand(BERT.layer_types[0], dp, B, C8, BERT.extra_overhead_ms, "vldb2023")
        assert abs(h["total_ms"] - h["code_ms"]) < 0.01
        assert abs(h["mem_mb"] - layer_memory_mb(BERT.layer_types[0], dp, B)) < 1e-9
    h = report.layer_by_hand(BERT.layer_types[0], dp, 16, C8, BERT.extra_overhead_ms, "vldb2023")
    # the shape: 4.58 + [max(29.0, 9.17) + 0.3 x 9.17] + 4.17 = 40.5, x 1.1 = 44.56
    assert round(h["fwd_ms"], 2) == 4.58 and round(h["comm_ms"], 1) == 29.0 and round(h["bwd_ms"], 2) == 9.17
    assert round(h["sum_ms"], 1) == 40.5 and round(h["total_ms"], 2) == 44.56
    with pytest.raises(ValueError, match="plain DP shapes"):
        report.layer_by_hand(BERT.layer_types[0], Strategy.from_shape(1, 8, 1), 16, C8, 100.0)


def test_whole_model_rows_divide_a_pipelines_memory_by_its_degree():
    rows = {r["kind"]: r for r in report.whole_model_rows(BERT, C8, 16, "vldb2023")}
    L = BERT.n_layers
    for r in rows.values():
        s = r["strategy"]
        assert math.isclose(r["layers_mb"], layer_memory_mb(BERT.layer_types[0], s, 16) * L / s.pp)
        assert math.isclose(r["peak_mb"], r["layers_mb"] + other_memory_mb(BERT, s, 16))
        assert math.isclose(r["throughput"], 16 / r["iter_ms"] * 1e3)
    assert rows["PP"]["layers_per_gpu"] == L // 8 and rows["DP"]["layers_per_gpu"] == L
    # per GPU, PP holds about as little as SDP and under half of DP (the 7.25 / 7.5 / 15.9 GB)
    assert rows["PP"]["layers_mb"] < rows["SDP"]["layers_mb"] < 0.5 * rows["DP"]["layers_mb"]
    # the smallest-batch SDP row is what the search's SDP baseline finds at 8 GB
    sdp8 = next(r for r in report.whole_model_rows(BERT, C8, 8, "vldb2023") if r["kind"] == "SDP")
    base = search(BERT, C8, 8, space="sdp", uniform=True, rules="vldb2023")
    assert math.isclose(sdp8["throughput"], base.throughput, rel_tol=1e-9)
    with pytest.raises(ValueError, match="kind must be one of"):
        report.pure_shape("ZeRO", 8)


def test_fair_rows_compare_with_the_better_of_plain_and_checkpointed():
    table = {("m", 8, "galvatron"): 10.0, ("m", 8, "dp"): 8.0, ("m", 8, "sdp+ckpt"): 20.0,
             ("m", 16, "galvatron"): 12.0, ("m", 16, "dp"): 0.0, ("m", 16, "sdp+ckpt"): 6.0}
    rows = report.fair_rows(table, ["m"], [8, 16], ["galvatron", "dp", "sdp+ckpt"])
    assert rows[0]["best"] == 20.0 and round(rows[0]["gain_pct"]) == -50
    assert rows[1]["best_ckpt"] == "sdp+ckpt" and round(rows[1]["gain_pct"]) == 100
    text = repr(report.fair_table(rows, "x"))
    assert "nothing (-50%)" in text and "+100%" in text
    g = report.fair_glue(rows)
    assert (g["fair_n"], g["fair_n_lose"], g["fair_n_win"], g["fair_n_ckpt"]) == ("2", "1", "1", "2")


def test_stage_memory_adds_up_to_the_plans_peak_and_fits():
    res = search(BERT, C8, 8, rules="vldb2023")
    st = figures.stage_memory(res.plan, BERT, "vldb2023")
    assert len(st) == res.plan.pp_deg == 2 and sum(x["layers"] for x in st) == BERT.n_layers
    assert st[0]["other_mb"] > 0 and st[1]["other_mb"] == 0
    assert all(x["total_mb"] <= 8 * 1024 for x in st)
    assert abs(st[0]["total_mb"] - res.plan.est_mem_mb_per_device) < 32   # the search rounds per layer up
    fig = figures.stage_memory_figure({"8 GB": res.plan}, BERT, {"8 GB": 8.0}, "t", "vldb2023", 10.0)
    assert tuple(fig.layout.yaxis.range) == (0, 10.0)
    budget = [t for t in fig.data if t.name == "budget"][0]
    assert list(budget.y) == [8.0, 8.0]


def test_plan_figure_draws_each_stage_on_its_own_axes():
    res = search(BERT, C8, 8, rules="vldb2023")
    fig = figures.plan_figure(res.plan, BERT, "t", 5000.0, 2000.0)
    axes = {t.xaxis for t in fig.data}
    assert axes == {"x", "x2"} and len(fig.data) == BERT.n_layers
    widest = figures.stage_widest_mb(res.plan, BERT)
    assert max(max(t.x) for t in fig.data) == pytest.approx(widest)
    assert tuple(fig.layout.xaxis.range) == (0, 5000.0) and tuple(fig.layout.xaxis2.range) == (0, 5000.0)


def test_transition_heatmap_blanks_pairs_of_different_pipeline_degrees():
    strats = generate(8)
    fig = figures.transition_figure(BERT.layer_types[0], strats, 16, C8)
    z = np.array(fig.data[0].z, dtype=float)
    for i, a in enumerate(strats):
        for j, b in enumerate(strats):
            assert np.isnan(z[i, j]) == (a.pp != b.pp)


def test_search_time_curve_marks_the_searches_that_found_no_plan():
    times, fits, tried = report.time_searches(BERT, C8, [8, 32, 64], [8], "vldb2023")
    assert fits["8 GB"] == [True, True, False]  # 64 layers of BERT do not fit 8 GB at any batch
    # a deeper model fits fewer batch sizes: the search tries fewer candidates (one DP each)
    assert tried["8 GB"][0] > tried["8 GB"][1] >= tried["8 GB"][2] >= 1
    for fig in (figures.lines_figure([8, 32, 64], times, "layers", "s", "t", feasible=fits),
                figures.search_effort_figure([8, 32, 64], times, tried, fits, "t")):
        crosses = [t for t in fig.data if t.marker.symbol == "x"]
        assert len(crosses) >= 1 and all(list(c.x) == [64] for c in crosses)


def test_dp_table_figure_draws_the_backtracking_path_in_the_last_frame():
    strats, t, m, r, budget = report.demo_instance(BERT.with_layers(3), C8, ("1-1-8", "1-1-8f", "1-2*-4"), 16)
    table = figures.dp_table_full(t, m, r, budget)
    cells = dp_readable.path(t.tolist(), m.tolist(), r.tolist(), budget)
    fig = figures.dp_table_frames(table, [s.code for s in strats], "f", path=cells)
    trail = fig.frames[-1].data[2]
    assert list(trail.x) == [v for _, _, v in cells] and len(fig.frames[0].data[2].x) == 0
    # every cell on the path holds a finite value of the table
    assert all(np.isfinite(table[i, v, s]) for i, s, v in cells)


def test_scatter_labels_are_placed_apart():
    from lib.galvatron.search.cost import default_chunks

    rows = figures.term_rows(BERT.layer_types[0], generate(8), 16, C8, lambda pp: default_chunks(16, pp, 8),
                             BERT.extra_overhead_ms, "vldb2023", BERT)
    fig = figures.mem_time_figure(rows, "t", 8)
    notes = [a for a in fig.layout.annotations if a.text in {r["strategy"].code for r in rows}]
    assert sorted(a.text for a in notes) == sorted(r["strategy"].code for r in rows)
    xs, ys = [r["peak_mb"] / 1024 for r in rows], [r["iter_ms"] / 1e3 for r in rows]
    offs = figures._label_offsets(xs, ys, [r["strategy"].code for r in rows])
    # two points closer than a label's height get labels in different places
    near = [(i, j) for i in range(len(xs)) for j in range(i) if abs(xs[i] - xs[j]) < 0.05 and abs(ys[i] - ys[j]) < 0.05]
    assert near and all(offs[i] != offs[j] for i, j in near)


def test_memory_time_figure_draws_the_budget_against_layers_plus_other_memory():
    # chapter 6: a layout whose layers fit 8 GB but whose layers + "other" do not must not look as if it fits
    from lib.galvatron.search.cost import default_chunks, other_memory_mb

    rows = figures.term_rows(BERT.layer_types[0], generate(8), 16, C8, lambda pp: default_chunks(16, pp, 8),
                             BERT.extra_overhead_ms, "vldb2023", BERT)
    for r in rows:
        assert r["other_mb"] == other_memory_mb(BERT, r["strategy"], 16) > 0
        assert r["peak_mb"] == r["model_mb"] + r["other_mb"]
    hidden = [r for r in rows if r["model_mb"] <= 8 * 1024 < r["peak_mb"]]
    assert hidden, "the worked example has layouts that fit only without the other memory"
    fig = figures.mem_time_figure(rows, "t", 8)
    dots = {code: (x, colour) for t in fig.data if t.mode == "markers"
            for code, x, colour in zip(t.text, t.x, t.marker.color)}
    for r in hidden:
        x, colour = dots[r["strategy"].code]
        assert x == r["peak_mb"] / 1024 > 8 and colour == "white"
