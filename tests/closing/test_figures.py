"""Tests for lib/closing/figures.py and report.py: one frame per cluster size, every stage in every frame, the
quoted marks only where they apply, share axes zoomed; the tables label every row."""

from dataclasses import replace

import pytest

from lib.closing.exercises import run_of
from lib.closing.figures import sensitivity_figure, share_range, slider_figure
from lib.closing.llama3 import llama3_step_s
from lib.closing.report import glue_texts, llama3_table, sensitivity_glue, sensitivity_table
from lib.closing.run import Job
from lib.closing.sensitivity import sensitivity


def test_slider_has_a_frame_per_size_and_every_stage_moves():
    runs = [run_of(replace(Job(), n_gpus=n)) for n in (1024, 16_384)]
    fig = slider_figure(runs, 1024)
    assert [f.name for f in fig.frames] == ["1,024", "16,384"]
    a, b = fig.frames
    for ta, tb in zip(a.data[2:], b.data[2:]):
        assert list(ta.y) != list(tb.y), ta.name   # step, interval, efficiencies, kept, goodput all move
    # Llama 3's marks: none at 1,024 GPUs; its step and its effective training time at 16,384
    assert [len(t.y or ()) for t in a.data[:2]] == [0, 0]
    assert list(b.data[0].y) == [pytest.approx(llama3_step_s())] and list(b.data[1].y) == [0.90]
    lo, hi = fig.layout.yaxis3.range
    shares = [v for f in fig.frames for t in f.data[4:] for v in t.y]
    assert hi == 1.0 and 0.5 < lo < min(shares)  # zoomed: not 0-112%
    assert fig.layout.sliders[0].active == 0
    with pytest.raises(ValueError, match="active_gpus"):
        slider_figure(runs, 512)


def test_glue_texts_quote_the_stages():
    r = run_of(Job())
    g = glue_texts(r)
    assert g["goodput_backup"] == f"{r.goodput_backup:.1%}" and g["n_gpus"] == "16,384 GPUs"
    assert g["llama3_effective"] == "90%" and g["rules"] == "galvatron2"
    assert g["llama3_step_s"] == "6.8 s"


def test_share_range_zooms_below_the_smallest_value():
    assert share_range([0.844, 0.905, 0.95]) == [0.8, 1.0]
    assert share_range([0.01]) == [0.0, 1.0]


def test_the_table_beside_llama3_labels_every_row():
    t = llama3_table(run_of(Job()))
    assert len(t.rows) == 6
    for _, ours, theirs, _ in t.rows[1:]:
        assert "(estimated" in ours  # ours: estimated
        assert "(quoted" in theirs or "(estimated from" in theirs or theirs == "not reported"
    assert "FSDP" in t.rows[1][1] and t.rows[1][2].startswith("TP 8 x PP 16 x DP 128")
    assert t.rows[4][3] == "§3.3.4" and "6.8 s" in t.rows[3][2]


def test_sensitivity_glue_table_and_figure_cover_every_case():
    cases = sensitivity(run_of(Job()))
    g = sensitivity_glue(cases)
    for step in ("plan", "meta"):
        for tail in ("milder", "page", "harsher"):
            assert {f"{step}_{tail}_{q}" for q in ("eff", "eff_b", "gp", "gp_b")} <= set(g)
    assert len(sensitivity_table(cases).rows) == 6
    fig = sensitivity_figure(cases)
    lo, hi = fig.layout.yaxis.range
    assert 0 < lo < min(c.run.goodput_backup for c in cases) and hi == 1
    assert list(fig.data[2].y) == [0.90] * 6 and "quoted" in fig.data[2].name
    with pytest.raises(ValueError, match="at least one case"):
        sensitivity_figure([])


def test_sweep_reuses_a_run_it_is_given(monkeypatch):
    import lib.closing.figures as cf

    done = run_of(Job())
    searched = []
    monkeypatch.setattr(cf, "one_run", lambda job: searched.append(job.n_gpus) or run_of(job))
    runs = cf.sweep(Job(), (1024, 16_384), done=(done,))
    assert runs[1] is done and searched == [1024]


def test_the_table_under_practice_sets_metas_layout_beside_the_plan():
    from lib.closing.exercises import CHAPTER_JOB
    from lib.closing.practice_plan import meta_beside
    from lib.closing.report import meta_glue, model_tflops_per_gpu

    r = run_of(CHAPTER_JOB)
    meta, pub = meta_beside(CHAPTER_JOB)
    t = llama3_table(r, meta, pub)
    assert t.head[2] == "Meta's layout, priced" and len(t.rows) == 8
    rows = {row[0]: row for row in t.rows}
    # the peak memory row: the plan fits, Meta's layout as validate fills it fits too (84 GB of 85.5)
    assert rows["peak memory per GPU"][1] == f"{r.est.plan.terms['peak_gb']:.1f} GB (estimated; fits)"
    assert rows["peak memory per GPU"][2].endswith("(estimated; fits)") and rows["peak memory per GPU"][3] == \
        "not reported"
    assert rows["plan"][2].startswith("TP 8, PP 16, DP 128") and "CP 2, VP 8" in rows["plan"][1]
    assert rows["tokens/s per GPU"][3].startswith("151 (estimated from its quoted")
    assert rows["TFLOP/s per GPU"][3].startswith("400 (quoted")
    for row in t.rows[2:5]:
        assert row[1].endswith("(estimated)") and row[2].endswith("(estimated)")
    # the plan's TFLOP/s are the cost model's own (same convention as Meta's 400)
    assert model_tflops_per_gpu(r) == pytest.approx(r.est.plan.terms["tflops_per_gpu"])
    g = meta_glue(meta, pub)
    assert g["llama3_tokens"] == "151 tokens/s" and g["meta_cfg_error"].startswith("-")
    assert meta_glue(meta, None)["meta_cfg_error"] == "no published run"


def test_the_table_sets_metas_interleaved_layout_beside_as_published():
    from lib.closing.exercises import CHAPTER_JOB
    from lib.closing.practice_plan import meta_beside, meta_interleaved

    r = run_of(CHAPTER_JOB)
    meta, pub = meta_beside(CHAPTER_JOB)
    inter = meta_interleaved(CHAPTER_JOB)
    t = llama3_table(r, meta, pub, inter)
    assert t.head == ("", "this book's plan", "Meta's layout, priced", "Meta's layout interleaved, priced",
                      "Llama 3 405B", "Llama 3's source")
    rows = {row[0]: row for row in t.rows}
    assert len(t.rows) == 8 and all(len(row) == 6 for row in t.rows)
    assert rows["plan"][3].startswith("TP 8, PP 16, DP 128, VP 8") and "section 3.3.2" in rows["plan"][3]
    assert rows["tokens/s per GPU"][3] == f"{inter.terms['tokens_per_s_per_gpu']:.0f} (estimated)"
    assert rows["step time"][3] == f"{inter.terms['step_s']:.1f} s (estimated)"
    # at the ZeRO stage its paper states, interleaved as it describes, it fits in the memory model
    assert "; fits" in rows["peak memory per GPU"][3] and "; fits" in rows["peak memory per GPU"][2]
    assert rows["goodput, no backups / backups"][3] == "not estimated"
    assert rows["tokens/s per GPU"][4].startswith("151 (estimated from its quoted")
