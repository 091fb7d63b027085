"""What chapter 8 prints (lib/galvatron/runtime/stage/report.py): plans checked, tables, verdicts, the figure."""

import os

import pytest

from lib.galvatron.runtime import report
from lib.galvatron.runtime.grid import Layout
from lib.galvatron.runtime.model import ModelConfig
from lib.galvatron.runtime.plan import RunPlan


def _row(name, plan, measured, est, est0, mem=30.0, rss=380.0, cuda=None):
    return {"name": name, "plan": plan, "measured_s": measured, "est_s": est, "est_no_overlap_s": est0,
            "err": est / measured - 1, "err_no_overlap": est0 / measured - 1, "est_mem_mb": mem,
            "peak_rss_mb": rss, "peak_cuda_mb": cuda}


ROWS = [_row("galvatron", "A", 0.10, 0.09, 0.085), _row("dp", "A", 0.10, 0.09, 0.085),
        _row("sdp", "B", 0.08, 0.05, 0.05), _row("tp", "C", 0.12, 0.11, 0.11)]


def test_device_label_says_where_and_agrees_in_number():
    assert report.device_label("cpu", 2, None, "x86_64", 2) == "cpu with gloo, 2 ranks on x86_64 (2 cores)"
    assert report.device_label("cpu", 1, None, None, 1) == "cpu with gloo, 1 rank (1 core)"
    assert report.device_label("cuda", 8, "NVIDIA H200") == "cuda with NCCL, 8 x NVIDIA H200"


def test_model_text_is_one_short_line():
    text = report.model_text(ModelConfig(d_model=128, n_layer=4, n_head=4, seq_len=64), 16)
    assert "\n" not in text and len(text) <= 88 and "4 layers" in text and "global batch 16" in text


def test_transitions_slice_for_the_papers_example_and_gather_otherwise():
    t = report.transition_rows()
    verdicts = dict(t.rows)
    assert verdicts["TP4 -> DP4"] == "slice only (no communication)"
    assert verdicts["DP4 -> TP4"] == "all-gather in rank groups [0, 1, 2, 3]"
    assert verdicts["TP2* x DP2 -> TP2 x DP2*"] == "all-gather in rank groups [0, 2], [1, 3]"
    same = report.transition_rows({"same": (Layout(2, 2), Layout(2, 2))})
    assert same.rows[0][1].startswith("slice only")


@pytest.mark.parametrize("world, layers, heads", [(2, 4, 4), (4, 4, 4), (4, 2, 2), (1, 3, 1)])
def test_check_plans_are_valid_distinct_and_cover_every_pure_strategy(world, layers, heads):
    plans = report.check_plans(world, layers, heads, 8)
    for p in plans:
        p.validate(heads, layers, world)
    assert len(set(plans)) == len(plans)
    assert RunPlan.uniform(world, layers, 1, 1, False, True, 8, 1) in plans  # plain DP
    if world > 1:
        assert RunPlan.uniform(world, layers, 1, 1, True, True, 8, 1) in plans  # SDP
    if world > 1 and heads % world == 0:
        assert any(len({s.tp for s in p.layers}) > 1 for p in plans)  # the mixed plan


def test_check_summary_takes_the_worst_rank_and_refuses_short_reports():
    plans = report.check_plans(2, 4, 4, 8)[:2]
    ranks = [{"checks": [{"param_err": 1e-7, "loss_err": 0.0, "sdp_impl": None},
                         {"param_err": 2e-7, "loss_err": 1e-8, "sdp_impl": "fsdp2"}]},
             {"checks": [{"param_err": 3e-7, "loss_err": 0.0, "sdp_impl": None},
                         {"param_err": 1e-7, "loss_err": 0.0, "sdp_impl": "fsdp2"}]}]
    s = report.summarise_checks(ranks, plans)
    assert s.param_err == (3e-7, 2e-7) and s.worst_loss == 1e-8 and s.sdp_impls == ("fsdp2",)
    assert s.ok() and not s.ok(1e-7)
    assert report.checks_glue(s) == {"n_checked": "2", "worst_param_err": "3.0e-07",
                                     "sdp_ran_as": "FSDP2's fully_shard"}
    assert report.checks_table(s, "L")._repr_html_().count("<tr>") == 3
    with pytest.raises(ValueError):
        report.summarise_checks([{"checks": ranks[0]["checks"][:1]}], plans)
    none = report.summarise_checks([{"checks": [dict(c, sdp_impl=None) for c in ranks[0]["checks"]]}], plans)
    assert report.checks_glue(none)["sdp_ran_as"].startswith("nothing")


def test_verdicts_follow_the_rows():
    g = report.verdict_glue(ROWS, 1.16, drift=1.05)
    assert g["worst_name"] == "sdp" and g["sdp_err"] == "-38%" and g["dp_err"] == "-10%"
    assert g["sdp_verdict"] == "1.60 times its estimate"
    assert g["err_median"] == "10%"  # distinct plans A, B, C: 10%, 37.5%, 8.3%
    assert g["overlap_shift"].startswith("by at most 5.9% (galvatron)")
    assert "kept its speed" in g["drift_text"]
    assert "factor of 2.50" in report.verdict_glue(ROWS, 1.16, drift=2.5)["drift_text"]
    assert g["choice_text"] == ("The searched plan (the same as dp) was not the fastest measured: sdp was, "
                                "and the searched plan took 25% longer")
    fast = [dict(r, measured_s=0.05) if r["plan"] == "A" else r for r in ROWS]
    assert report.verdict_glue(fast, 1.0)["choice_text"] == "The searched plan was also the fastest measured"
    flat = [dict(r, est_s=r["est_no_overlap_s"]) for r in ROWS]
    assert report.verdict_glue(flat, 1.0)["overlap_shift"].startswith("not at all")
    assert "no SDP plan" in report.verdict_glue([r for r in ROWS if r["name"] != "sdp"], 1.0)["sdp_verdict"]
    assert g["rss_vs_est"] == "380-380 MB resident against 30-30 MB estimated per rank"


def test_tables_are_html_with_one_row_per_plan():
    t = report.rows_table(ROWS, "cap")
    h = t._repr_html_()
    assert h.count("<tr>") == len(ROWS) + 1 and "<caption>cap</caption>" in h and "-38%" in h
    cpu = report.memory_table(ROWS, "c")._repr_html_()
    assert "not comparable" in cpu and "process peak resident" in cpu and ">380<" in cpu
    gpu = report.memory_table([_row("x", "D", 1, 1, 1, cuda=12.5)], "c")._repr_html_()
    assert "allocator peak" in gpu and ">12.5<" in gpu and "not comparable" not in gpu


def test_profile_text_lines_fit_the_column():
    class _P:
        def summary(self):
            return "B=16, pp=1, chunks=1: 4x 1-1-2"

    class _L:
        fwd_ms_per_sample, act_mb_per_sample = 0.5, {1: 0.6, 2: 0.36, 4: 0.24}

    class _M:
        layer_types = [_L()]

    class _C:
        allreduce_ms_per_mb, p2p_ms_per_mb, overlap_coe = {"1_2_1": 1.8}, 6.3, 1.16

    out = {"model": _M(), "cluster": _C(), "other_s": 0.00166, "plans": {"galvatron": _P()}, "drift": 1.3}
    text = report.profile_text(out)
    assert all(len(line) <= 88 for line in text.splitlines())
    assert "group of 2: 1.80" in text and "x1.30" in text and "4x 1-1-2" in text and "TP4: 0.240 MB" in text


def test_figure_uses_the_house_layout_with_units():
    from lib import viz

    fig = report.est_vs_measured_figure(ROWS, "A title " * 15)
    assert fig.layout.legend.x >= 1 and fig.layout.legend.xanchor == "left"
    assert fig.layout.margin.t == viz.title_margin("A title " * 15)
    assert "(ms)" in fig.layout.yaxis.title.text and len(fig.data) == 3
    assert fig.data[0].y[2] == pytest.approx(80.0)


def test_relative_name_is_never_absolute(tmp_path):
    root = tmp_path / "repo"
    (root / "data").mkdir(parents=True)
    assert report.relative_name(str(root / "data" / "m.json"), str(root)) == os.path.join("data", "m.json")
    assert report.relative_name("/elsewhere/x.json", str(root)) == "x.json"


def test_the_fsdp2_probe_runs_without_a_deprecation_warning():
    """The probe runs in every spawned rank: a FutureWarning there would reach the chapter's output."""
    import subprocess
    import sys

    code = ("import warnings, torch.distributed as dist\n"
            "from lib.galvatron.runtime.processes import free_port\n"
            "from lib.galvatron.runtime import sdp\n"
            "dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{free_port()}', rank=0, world_size=1)\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    sdp.probe_fsdp2()\n"
            "dist.destroy_process_group()\n"
            "print('WARNINGS', [str(x.message) for x in w if issubclass(x.category, (FutureWarning, DeprecationWarning))],"
            " flush=True)\n"
            # leave without the interpreter's teardown: gloo's threads abort it now and then ('terminate called
            # without an active exception', about 1 run in 50 here), which is not what this test is about
            "import os; os._exit(0)\n")
    from tests import ROOT

    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "WARNINGS []" in r.stdout, r.stdout + r.stderr
    assert "deprecated" not in r.stderr, r.stderr


def test_format_rows_fits_the_column_and_marks_cut_layouts():
    from lib.galvatron.runtime.evaluate import format_rows

    long = [dict(r, plan="pp1[" + ",".join(["1-2f", "2-1"] * 4) + "] B=16 m=1") for r in ROWS]
    text = format_rows(ROWS + long)
    assert "B=16, pp=1, chunks=1: 1x 1-1-2f, 1x 1-2-1" not in text  # 50 characters: cut to fit
    assert "B=16, pp=1, chunks=1: 1x 1-1-2f" in text  # the search's notation, as chapter 8 prints it
    assert all(len(line) <= 88 for line in text.splitlines())
    assert "…" in text and text.splitlines()[-1].startswith("median |error|: ")
