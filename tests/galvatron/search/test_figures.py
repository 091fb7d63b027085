"""lib/galvatron/search/figures.py: the DP table shown in 03_the_search fills up layer by layer and agrees with the
search's own DP; the 'four ways' costs are the cost model's totals; figures use the house layout."""

import math

import numpy as np
import pytest

from lib.galvatron.search.cost import layer_time_s
from lib.galvatron.search.dynamic_program import brute_force, dp_solve, dp_tables
from lib.galvatron.search.figures import (dp_table_frames, dp_table_full, mem_time_figure, overlap_figure, pure_costs,
                                          pure_costs_figure, term_rows, terms_figure)
from lib.galvatron.search.profiles import load_model, published_cluster
from lib.galvatron.search.report import demo_instance
from lib.viz import TITLE_CHARS


def _random_instance(rng, L=4, S=3):
    t = rng.uniform(1, 10, size=(L, S))
    m = rng.integers(1, 12, size=(L, S)).astype(float)
    r = rng.uniform(0, 2, size=(L, S, S))
    r[0] = 0
    budget = int(m.min(axis=1).sum() + rng.integers(0, 15))
    return t, m, r, budget


@pytest.mark.parametrize("seed", range(20))
def test_full_table_agrees_with_the_search_dp_inside_its_windows(seed):
    t, m, r, budget = _random_instance(np.random.default_rng(seed))
    full = dp_table_full(t, m, r, budget)
    fs, lo = dp_tables(t, m, r, budget)
    for i, f in enumerate(fs):
        window = full[i, lo[i]:lo[i] + f.shape[0]]
        assert np.array_equal(np.isfinite(window), np.isfinite(f))
        assert np.allclose(window[np.isfinite(f)], f[np.isfinite(f)])
    best = brute_force(t, m, r, budget)
    assert math.isclose(full[-1, budget].min(), best.cost_s)
    assert math.isclose(full[-1, budget].min(), dp_solve(t, m, r, budget, shortcut=False).cost_s)


def test_full_table_is_monotone_in_memory():
    t, m, r, budget = _random_instance(np.random.default_rng(99), L=5, S=4)
    full = np.where(np.isfinite(dp_table_full(t, m, r, budget)), dp_table_full(t, m, r, budget), 1e300)
    assert np.all(np.diff(full, axis=1) <= 1e-12)  # more memory never makes a plan slower


def _demo():
    cluster = published_cluster(8)
    strats, t, m, r, budget = demo_instance(load_model("bert-huge-32").with_layers(4), cluster,
                                            ("1-1-8", "1-1-8f", "1-2*-4", "1-4*-2f"), 16)
    return strats, dp_table_full(t, m, r, budget), budget


def test_frame_k_shows_layers_up_to_k_and_only_those():
    strats, table, budget = _demo()
    L, S = table.shape[0], len(strats)
    fig = dp_table_frames(table, [s.code for s in strats], "f(v, s) in ms")
    assert len(fig.frames) == L
    for k, fr in enumerate(fig.frames):
        z = np.array(fr.data[0].z, dtype=float)
        assert z.shape[0] == L * S and z.shape[1] > 1             # a table, not a single column
        for i in range(L):
            rows = z[i * S:(i + 1) * S]
            if i <= k:
                assert np.isfinite(rows).any(), f"frame {k}: layer {i} is empty"
            else:
                assert not np.isfinite(rows).any(), f"frame {k}: layer {i} is already filled"
    # every frame keeps the same memory axis, which reaches the budget
    xs = {tuple(np.asarray(fr.data[0].x)) for fr in fig.frames}
    assert len(xs) == 1 and max(next(iter(xs))) == budget
    # the star sits on the answer in the last frame only
    assert all(len(fr.data[1].x) == 0 for fr in fig.frames[:-1]) and list(fig.frames[-1].data[1].x) == [budget]


def test_frames_keep_the_colour_scale_and_thin_wide_tables():
    strats, table, budget = _demo()
    fig = dp_table_frames(table, [s.code for s in strats], "t", max_cols=50)
    assert len(fig.frames[0].data[0].x) <= 50
    assert {(fr.data[0].zmin, fr.data[0].zmax) for fr in fig.frames} == {(fig.frames[0].data[0].zmin,
                                                                            fig.frames[0].data[0].zmax)}


def test_pure_costs_time_is_the_cost_models_total_with_the_overhead():
    model, cluster = load_model("bert-huge-32"), published_cluster(8)
    layer = model.layer_types[0]
    rows = pure_costs(layer, 8, 16, cluster, 4, model.extra_overhead_ms)
    by = {r["kind"]: r for r in rows}
    assert math.isclose(by["DP"]["time_s"], layer_time_s(layer, by["DP"]["strategy"], 16, cluster, 1,
                                                         model.extra_overhead_ms))
    without = {r["kind"]: r for r in pure_costs(layer, 8, 16, cluster, 4)}
    assert math.isclose(by["DP"]["time_s"] - without["DP"]["time_s"], by["DP"]["overhead_ms"] / 1e3)
    assert by["DP"]["overhead_ms"] > 0 and by["TP"]["overhead_ms"] == 0  # only data-parallel shapes pay it


def _legend_right(fig):
    return fig.layout.legend.x > 1 and fig.layout.legend.xanchor == "left"


def test_figures_use_the_house_layout():
    model, cluster = load_model("bert-huge-32"), published_cluster(8)
    layer = model.layer_types[0]
    from lib.galvatron.search.strategies import generate
    rows = term_rows(layer, generate(8), 16, cluster, lambda pp: 1 if pp == 1 else 4, model.extra_overhead_ms)
    long_title = "Where one layer's time goes " * 4
    for fig in (terms_figure(rows, long_title), mem_time_figure(rows, "m"), overlap_figure(),
                pure_costs_figure(pure_costs(layer, 8, 16, cluster, 4), "p")):
        assert _legend_right(fig)
        assert all(len(line) <= TITLE_CHARS for line in (fig.layout.title.text or "").split("<br>"))


def test_overlap_figure_names_compute_c_and_all_reduce_g():
    fig = overlap_figure(100.0)
    assert "G" in fig.layout.xaxis.title.text and "all-reduce" in fig.layout.xaxis.title.text
    assert "C = 100" in fig.layout.title.text
