"""The chapter's figures (lib/straggler/figures.py): the step view's sample, the day rows, frames and page size."""

import numpy as np
import pytest

from lib.straggler.model import FailureModel, StepModel
from lib.straggler.figures import (day_rows, efficiency_figure, interval_choices, interval_figure, step_view_draw,
                                   step_view_figure, timeline_figure)
from lib.straggler.simulate import FailureGaps, simulate_run


@pytest.mark.parametrize("n, b", [(8, 0), (8, 1), (16_384, 0), (16_384, 328), (1_000_000, 0)])
def test_step_view_shows_every_slow_gpu_and_the_slowest_healthy(n, b):
    m = StepModel()
    for seed in range(20):
        d = step_view_draw(n, b, np.random.default_rng(seed))
        assert d["shown"] == min(192, n + b)
        positions = np.concatenate([np.asarray(d[k][0]) for k in ("healthy", "slowest_healthy", "waited", "covered")])
        assert sorted(positions.tolist()) == list(range(d["shown"]))
        assert len(d["waited"][1]) + len(d["covered"][1]) == d["n_slow"]
        assert len(d["covered"][1]) == min(d["n_slow"], b)
        h = d["slowest_healthy"][1][0]
        assert np.all(np.asarray(d["healthy"][1]) <= h) and h >= m.compute_s
        assert np.all(np.asarray(d["waited"][1]) >= m.slow_factor * m.compute_s)
        if len(d["covered"][1]) and len(d["waited"][1]):
            assert max(d["waited"][1]) <= min(d["covered"][1])  # backups cover the slowest
        assert d["step_s"] == pytest.approx(max([h, *d["waited"][1]]) + m.sync_s)


def test_step_view_at_16384_usually_has_a_slow_gpu():
    n_slow = [step_view_draw(16_384, 0, np.random.default_rng(s))["n_slow"] for s in range(400)]
    assert np.mean(np.array(n_slow) > 0) == pytest.approx(0.8057, abs=0.06)


def test_day_rows_cover_the_whole_run():
    fm = FailureModel()
    mtbf = fm.cluster_mtbf_min(16_384)
    run = simulate_run(19.27, mtbf, FailureGaps(np.random.default_rng(1)), 14 * 1440, record=True)
    rows = day_rows(run)
    hours = sum(p[2] for k in ("kept", "lost", "restart") for p in rows[k])
    assert hours * 60 == pytest.approx(run.run_min)
    assert all(1 <= p[0] <= 14 and 0 <= p[1] < 24 and p[1] + p[2] <= 24 + 1e-9
               for k in ("kept", "lost", "restart") for p in rows[k])
    assert sum(p[2] for p in rows["restart"]) * 60 == pytest.approx(5.0 * run.failures)
    # every completed checkpoint is drawn once; interrupted and final partial writes are not
    assert len(rows["checkpoints"]) == pytest.approx(run.checkpoint_min, abs=run.failures + 1)


def _check_frames(fig, n_frames):
    assert len(fig.frames) == n_frames
    n_traces = len(fig.data)
    assert all(len(f.data) == n_traces for f in fig.frames)
    assert len(fig.layout.sliders[0].steps) == n_frames


def test_figures_build_with_frames_and_fit_the_page_budget():
    figs = [step_view_figure(), efficiency_figure(), timeline_figure(), interval_figure()]
    _check_frames(figs[0], 10)
    _check_frames(figs[1], 5)
    n_intervals = len(interval_choices(19.266))
    _check_frames(figs[2], n_intervals)
    _check_frames(figs[3], n_intervals)
    total = sum(len(f.to_json()) for f in figs)
    assert total < 2_000_000, total


def test_interval_figure_starts_on_the_readers_setting():
    fig = interval_figure(active_min=120.0, intervals_min=interval_choices(19.266, extra=(120.0, 7.0)))
    labels = [s.label for s in fig.layout.sliders[0].steps]
    assert labels[fig.layout.sliders[0].active] == "120.0 min" and "7.0 min" in labels


def test_all_chapter_frames_within_the_10_s_budget():
    import time

    from lib.straggler import model as straggler
    from lib.straggler.figures import chapter_figures

    straggler.expected_max_s.cache_clear()
    t = time.perf_counter()
    figs = chapter_figures()
    assert time.perf_counter() - t < 10.0
    assert set(figs) == {"step_view", "efficiency", "timeline", "interval"}
    assert sum(len(f.to_json()) for f in figs.values()) < 2_000_000


def test_chapter_notebook_keeps_its_oracles_and_opens_with_title_and_parameters():
    import json
    import os

    from tests import ROOT

    path = "book/stragglers/01_the_one_slow_gpu.ipynb"
    with open(os.path.join(ROOT, path)) as f:
        committed = json.load(f)
    oracles = [c for c in committed["cells"] if "keep_output" in c.get("metadata", {}).get("tags", [])]
    assert oracles and all(c["outputs"] for c in oracles), "run: python tools/refresh_oracles.py " + path
    title, params = committed["cells"][1:3]  # after the Colab cell: the title, then the parameters
    assert title["cell_type"] == "markdown" and "".join(title["source"]).startswith("# ")
    assert "parameters" in params["metadata"]["tags"]


def test_figures_follow_the_house_layout_titles_wrap_and_fit_and_axes_have_titles():
    from lib import viz

    for fig in (step_view_figure(), efficiency_figure(), timeline_figure(), interval_figure()):
        lg = fig.layout.legend
        assert lg.x >= 1 and lg.xanchor == "left" and lg.orientation == "v"  # right of the plot, never on the title
        titles = [f.layout.title.text for f in fig.frames if f.layout.title.text]
        assert len(titles) == len(fig.frames)
        assert all(len(line) <= viz.TITLE_CHARS for t in titles for line in t.split("<br>"))
        longest = max(titles, key=lambda t: t.count("<br>"))
        assert fig.layout.margin.t >= viz.title_margin(longest.replace("<br>", " "))
        assert fig.layout.margin.t < viz.title_margin(longest.replace("<br>", " ")) + 30  # no empty band above
        assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text


def test_axes_name_their_units():
    assert "(s)" in step_view_figure().layout.yaxis.title.text
    assert "%" in efficiency_figure().layout.yaxis.title.text
    assert "(h)" in timeline_figure().layout.xaxis.title.text
    assert "(min)" in interval_figure().layout.xaxis.title.text


def test_frame_titles_agree_in_number():
    small = step_view_figure(sizes=(8,), backup_share=0.02)
    labels = [s.label for s in small.layout.sliders[0].steps]
    assert labels == ["8 GPUs", "8 GPUs + 1 backup"]
    fig = timeline_figure(n_gpus=8, intervals_min=[60.0], days=2)  # 8 GPUs fail about once in 260 days
    assert "0 failures" in fig.frames[0].layout.title.text


@pytest.mark.parametrize("n_gpus", [8, 16_384])
def test_every_slider_figure_keeps_its_marks_inside_its_axes(n_gpus):
    # the widget's static twin (interval_figure) and the benchmark's figures, in every frame
    from lib.straggler.figures import chapter_figures
    from tests.figure_bounds import marks_outside

    for name, fig in chapter_figures(n_gpus=n_gpus, days=2.0).items():
        assert marks_outside(fig) == [], name


def test_the_step_view_shows_one_cluster_without_and_with_backups():
    import numpy as np

    from lib.straggler.figures import step_view_pair

    plain, backed = step_view_pair(65_536, 1_311, np.random.default_rng(0))
    for key in ("healthy", "slowest_healthy"):
        assert [list(map(float, a)) for a in plain[key]] == [list(map(float, a)) for a in backed[key]]
    slow = {(int(x), float(y)) for part in ("waited", "covered") for x, y in zip(*backed[part])}
    assert {(int(x), float(y)) for x, y in zip(*plain["waited"])} <= slow
    assert backed["n_slow"] >= plain["n_slow"] > 0 and len(backed["waited"][1]) == 0  # 1,311 backups cover all
    assert backed["step_s"] <= plain["step_s"]
