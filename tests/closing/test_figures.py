"""Tests for lib/closing/figures.py and report.py: one frame per cluster size, every stage in every frame, the
quoted marks only where they apply, share axes zoomed; the tables label every row."""

from dataclasses import replace

import pytest

from lib.closing.exercises import run_of
from lib.closing.figures import sensitivity_figure, share_range, slider_figure
from lib.closing.llama3 import llama3_step_s
from lib.closing.meta_run import meta_start
from lib.closing.report import chain_table, glue_texts, sensitivity_glue, sensitivity_table, stage1_table
from lib.closing.run import Job
from lib.closing.sensitivity import sensitivity
from tests.figure_bounds import marks_outside


def _drawn(trace) -> list:
    """The values a trace draws (a quoted mark that does not apply is None, so the legend stays put)."""
    return [v for v in trace.y or () if v is not None]


def test_slider_has_a_frame_per_size_and_every_stage_moves():
    runs = [run_of(replace(Job(), n_gpus=n)) for n in (1024, 16_384)]
    fig = slider_figure(runs, 1024)
    assert [f.name for f in fig.frames] == ["1,024", "16,384"]
    a, b = fig.frames
    assert [t.name for t in a.data] == [t.name for t in b.data]  # one legend in every frame
    for ta, tb in zip(a.data[2:], b.data[2:]):
        assert list(ta.y) != list(tb.y), ta.name   # step, interval, efficiencies, kept, goodput all move
    # Llama 3's marks: none at 1,024 GPUs; its step and its effective training time at 16,384
    assert [_drawn(t) for t in a.data[:2]] == [[], []]
    assert list(b.data[0].y) == [pytest.approx(llama3_step_s())] and list(b.data[1].y) == [0.90]
    for f in fig.frames:
        lo, hi = f.layout.yaxis3.range
        shares = [v for t in f.data[4:] for v in t.y]
        assert hi == 1.0 and 0.3 < lo < min(shares)  # zoomed: not 0-112%
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


def test_stage_ones_table_labels_every_row_and_states_memory_against_the_usable():
    from lib.closing.exercises import CHAPTER_JOB

    start, pick = meta_start(CHAPTER_JOB), run_of(CHAPTER_JOB)
    t = stage1_table(start, pick, 0.159)          # a fixed error, so the range below is 161 x (1 -+ 0.159)
    assert [row[0] for row in t.rows] == ["layout", "tokens/s per GPU", "step time", "against Meta's tokens/s",
                                          "peak memory per GPU"]
    priced, reported, what_if = zip(*(row[1:] for row in t.rows))
    assert all("(estimated" in v for v in (priced[1], priced[2], what_if[1], what_if[2]))
    assert "(quoted)" in reported[0] and reported[1].startswith("151 (from its quoted")
    assert priced[3] == "+0.0%" and what_if[3] == "+6.6%"
    assert " - " not in what_if[1] and "135-187 with the stated error" in what_if[1]
    for v in (priced[4], what_if[4]):  # memory in GiB against the usable, headroom stated
        assert "GiB of 79.6 GiB usable" in v and "fits, " in v and "GiB spare" in v and " GB" not in v


def test_the_chain_table_puts_the_absolute_column_beside_goodput():
    from lib.closing.exercises import CHAPTER_JOB, meta_run_of

    r = meta_run_of(CHAPTER_JOB)
    t = chain_table([("Meta's step", r)])
    assert t.head[-2:] == ("goodput", "tokens/s per GPU x step eff. x kept")
    row = t.rows[0]
    assert row[5] == f"{r.goodput_no_backup:.1%} / {r.goodput_backup:.1%}"
    assert row[6] == f"{r.delivered(False):.0f} / {r.delivered(True):.0f}"
    assert r.delivered(True) == pytest.approx(r.tokens_per_s_per_gpu * r.goodput_backup)


def test_sensitivity_glue_table_and_figure_cover_every_case():
    from lib.closing.exercises import CHAPTER_JOB

    cases = sensitivity(meta_start(CHAPTER_JOB), run_of(Job()))
    g = sensitivity_glue(cases)
    for step in ("meta", "metacomm", "pick"):
        for tail in ("milder", "page", "harsher"):
            assert {f"{step}_{tail}_{q}" for q in ("eff", "eff_b", "gp", "gp_b", "dl_b")} <= set(g)
    assert len(sensitivity_table(cases).rows) == 9
    fig = sensitivity_figure(cases)
    lo, hi = fig.layout.yaxis.range
    assert 0 < lo < min(c.run.goodput_backup for c in cases) and hi == 1
    assert list(fig.data[2].y) == [0.90] * 9 and "quoted" in fig.data[2].name
    with pytest.raises(ValueError, match="at least one case"):
        sensitivity_figure([])


def test_sweep_reuses_a_run_it_is_given(monkeypatch):
    import lib.closing.figures as cf

    done = run_of(Job())
    searched = []
    monkeypatch.setattr(cf, "one_run", lambda job: searched.append(job.n_gpus) or run_of(job))
    runs = cf.sweep(Job(), (1024, 16_384), done=(done,))
    assert runs[1] is done and searched == [1024]


def test_metas_glue_states_memory_in_gib_with_headroom_and_its_error():
    from dataclasses import replace as dc_replace

    from lib.closing.exercises import CHAPTER_JOB
    from lib.closing.report import meta_glue, model_tflops_per_gpu

    r, start = run_of(CHAPTER_JOB), meta_start(CHAPTER_JOB)
    g = meta_glue(start)
    peak = start.priced.terms["peak_bytes"] / 2**30
    assert g["meta_cfg_peak"] == f"{peak:.1f} GiB" and g["meta_cfg_headroom"] == f"{79.6 - peak:.1f} GiB"
    assert g["llama3_tokens"] == "151 tokens/s" and g["meta_cfg_error"] == "+0.0%"
    assert g["llama3_step"] == f"{start.reported_step_s:.2f} s"
    assert meta_glue(dc_replace(start, reported_tokens_s=None))["meta_cfg_error"] == "no published run"
    # the plan's TFLOP/s are the cost model's own (same convention as Meta's 400)
    assert model_tflops_per_gpu(r) == pytest.approx(r.est.plan.terms["tflops_per_gpu"])


def _chapter_sweep(sizes=(256, 1024, 4096, 8192, 16_384), **job):
    from lib.closing.exercises import CHAPTER_JOB

    return [run_of(replace(CHAPTER_JOB, n_gpus=n, **job)) for n in sizes]


def test_every_mark_lies_inside_its_axes_in_every_frame():
    runs = _chapter_sweep()
    for active in (None, 256):  # the figure as first drawn on either end, and every frame
        fig = slider_figure(runs, active)
        assert marks_outside(fig) == []
    # Llama 3's steps (6.8 s; 12.6 s at 8,192) stand above the plan's: their frames' step axes make room
    fig = slider_figure(runs)
    top = {f.name: f.layout.yaxis.range[1] for f in fig.frames}
    assert top["16,384"] > llama3_step_s() > max(r.est.step_s for r in runs)
    # the check catches a mark above its axis and a frame that keeps the last frame's range
    fig.frames[-1].layout.yaxis.range = [0, 5.0]
    assert any("6.754 outside" in p for p in marks_outside(fig))
    fig.frames[0].layout.yaxis = {}
    assert any("others keep the last one" in p for p in marks_outside(fig))
    # the chapter's other figure, stage 2's sensitivity (no slider), on its zoomed share axis
    from lib.closing.exercises import CHAPTER_JOB

    chapter = sensitivity(meta_start(CHAPTER_JOB), run_of(CHAPTER_JOB))
    assert marks_outside(sensitivity_figure(chapter)) == []


def test_the_smallest_bar_keeps_room_for_its_label():
    # at 256 GPUs a backup doubles the single replica: goodput with backups falls near 47%
    runs = _chapter_sweep()
    fig = slider_figure(runs)
    for f in fig.frames:
        lo, hi = f.layout.yaxis3.range
        smallest = min(v for t in f.data[4:] for v in t.y)
        assert (smallest - lo) / (hi - lo) >= 0.1, (f.name, smallest, lo)
    assert min(fig.frames[0].data[5].y) < 0.55  # the 256-GPU frame does hold the short bar


def test_categories_keep_their_order_and_slots_in_every_frame():
    fig = slider_figure(_chapter_sweep())
    for ax, cats in (("xaxis", ["step"]), ("xaxis2", ["Young–Daly"]),
                     ("xaxis3", ["step efficiency", "kept share", "goodput"])):
        axis = fig.layout[ax]
        assert list(axis.categoryarray) == cats and list(axis.range) == [-0.5, len(cats) - 0.5]
        assert all(ax not in f.layout.to_plotly_json() for f in fig.frames)  # no frame moves a category axis


def test_llama3_steps_only_beside_a_plan_of_the_batch_they_were_measured_at():
    # Table 4: 16M tokens a step on 8,192 and on 16,384 GPUs. The chapter's plan trains 1,024 tokens per GPU,
    # 8M on 8,192 GPUs: Meta's 8,192-GPU step is not set beside it.
    plain = slider_figure(_chapter_sweep((8192, 16_384)))
    assert [len(_drawn(f.data[0])) for f in plain.frames] == [0, 1]
    # at 2,048 tokens per GPU the plan on 8,192 GPUs trains Meta's 16M, and 16,384 GPUs would train 32M
    doubled = slider_figure(_chapter_sweep((8192, 16_384), tokens_per_gpu=2048))
    assert [_drawn(f.data[0]) for f in doubled.frames] == [[pytest.approx(llama3_step_s(8192))], []]
    assert marks_outside(doubled) == []
