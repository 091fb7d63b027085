"""Tests for lib/closing/figures.py and report.py: one frame per cluster size, every stage in every frame."""

from dataclasses import replace

import pytest

from lib.closing.exercises import run_of
from lib.closing.figures import slider_figure
from lib.closing.report import glue_texts
from lib.closing.run import Job


def test_slider_has_a_frame_per_size_and_every_stage_moves():
    runs = [run_of(replace(Job(), n_gpus=n)) for n in (1024, 16_384)]
    fig = slider_figure(runs, 1024)
    assert [f.name for f in fig.frames] == ["1,024", "16,384"]
    a, b = fig.frames
    for ta, tb in zip(a.data, b.data):
        assert list(ta.y) != list(tb.y), ta.name   # step, interval, efficiencies, kept, goodput all move
    assert fig.layout.sliders[0].active == 0
    with pytest.raises(ValueError, match="active_gpus"):
        slider_figure(runs, 512)


def test_glue_texts_quote_the_stages():
    r = run_of(Job())
    g = glue_texts(r)
    assert g["goodput_backup"] == f"{r.goodput_backup:.1%}" and g["n_gpus"] == "1,024 GPUs"
    assert g["llama3_effective"] == "90%"
