"""lib/galvatron/search/parallelism_figures.py: the pictures of chapter 5 say what the cost model says."""

import pytest

from lib.galvatron.search import parallelism_figures as pf


@pytest.mark.parametrize("n", [2, 4, 8])
def test_holdings_split_what_each_parallelism_splits(n):
    for kind in pf.KINDS:
        cols, grid = pf.holdings(kind, n)
        assert len(cols) == 2 * n and len(grid) == n
    model = lambda kind: [row[:n] for row in pf.holdings(kind, n)[1]]
    batch = lambda kind: [row[n:] for row in pf.holdings(kind, n)[1]]
    # DP: whole model everywhere, one part of the batch each; TP and PP the other way round
    assert all(v == pf.HELD for row in model("dp") for v in row)
    for kind in ("dp", "sdp"):
        assert [sum(r) for r in batch(kind)] == [pf.HELD] * n
    for kind in ("tp", "pp"):
        assert all(v == pf.HELD for row in batch(kind) for v in row)
        assert [row.count(pf.HELD) for row in model(kind)] == [1] * n
    # SDP keeps 1/n of the states and gathers the rest; every part is kept by exactly one GPU
    for k in range(n):
        assert [row[k] for row in model("sdp")].count(pf.HELD) == 1
    assert all(row.count(pf.GATHERED) == n - 1 for row in model("sdp"))


def test_sdp_communicates_half_as_much_again_as_dp():
    # chapter 5's prose: SDP's traffic is 1.5 x DP's (an extra all-gather)
    assert pf.comm_units(pf.timeline("sdp")) == pytest.approx(1.5 * pf.comm_units(pf.timeline("dp")))


def test_dp_all_reduce_overlaps_the_backward_pass_and_tp_does_not():
    dp = pf.timeline("dp")
    ar = [e for e in dp if e.what == "comm"]
    bwd = {e.gpu: e for e in dp if e.what == "bwd"}
    assert all(bwd[e.gpu].start < e.start < bwd[e.gpu].end for e in ar)
    tp = pf.timeline("tp")
    # TP's all-reduces sit between compute bars: the compute ends later than the compute alone would take
    work = sum(e.dur for e in tp if e.what in ("fwd", "bwd") and e.gpu == 0)
    assert pf.compute_end(tp) > work
    assert pf.idle_fraction(dp) == pf.idle_fraction(tp) == 0


@pytest.mark.parametrize("p, m", [(2, 1), (4, 4), (4, 8), (8, 3)])
def test_pipeline_bubble_is_gpipes(p, m):
    ev = pf.timeline("pp", p, m)
    assert pf.idle_fraction(ev) == pytest.approx((p - 1) / (m + p - 1))
    for g in range(p):  # no GPU does two things at once
        mine = sorted((e for e in ev if e.gpu == g), key=lambda e: e.start)
        assert all(a.end <= b.start + 1e-9 for a, b in zip(mine, mine[1:]))
    # a stage's forward of micro-batch j starts after the previous stage finished it
    fwd = {(e.gpu, e.label): e for e in ev if e.what == "fwd"}
    assert all(fwd[(g, lab)].start >= fwd[(g - 1, lab)].end - 1e-9 for g, lab in fwd if g > 0)


def test_bad_input_names_the_value():
    with pytest.raises(ValueError, match="'zero'"):
        pf.timeline("zero")
    with pytest.raises(ValueError, match="n_gpus"):
        pf.holdings("dp", 1)


def test_figures_build_without_a_legend():
    for kind in pf.KINDS:
        fig = pf.parallelism_figure(kind)
        assert fig.layout.title.text.startswith(kind.upper().split()[0])
        assert not any(t.showlegend for t in fig.data if t.showlegend is not None)
