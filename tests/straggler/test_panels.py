"""The chapter's linked figures (lib/straggler/panels.py): the GPU slider and backups toggle of the step, the
five-ways buttons of the run, the stacked interval figure over a GPUs x interval grid, and where the page's
quoted values may appear."""

import numpy as np
import pytest

from lib import viz
from lib.straggler.figures import page_marks
from lib.straggler.model import FailureModel, checkpoint_shares
from lib.straggler.panels import (PANEL_SIZES, chapter_panels, interval_panel_figure, run_panel_figure,
                                  step_panel_figure, step_panel_groups, time_shares)


@pytest.fixture(scope="module")
def panels():
    return chapter_panels()


def test_step_panel_has_a_gpu_slider_and_a_backups_toggle(panels):
    fig = panels["step"]
    assert [s.label for s in fig.layout.sliders[0].steps] == [f"{n:,}" for n in PANEL_SIZES]
    assert all(len(f.data) == len(fig.data) == 16 for f in fig.frames)
    plain, backup = step_panel_groups()
    off, on = (b.args[0]["visible"] for b in fig.layout.updatemenus[0].buttons)
    assert [i for i, v in enumerate(off) if not v] == sorted(backup)
    assert [i for i, v in enumerate(on) if not v] == sorted(plain)
    assert [tr.visible for tr in fig.data] == off  # the reader set no backups: the toggle starts without
    assert "1,000" in [s.label for s in step_panel_figure(n_gpus=1_000).layout.sliders[0].steps]


def test_step_view_rescales_per_size(panels):
    fig = panels["step"]
    for frame in fig.frames:
        lo, hi = frame.layout.yaxis.range
        bars = [v for tr in frame.data if tr.type == "bar" for v in tr.y]
        assert lo < min(bars) and max(bars) < hi
    small, big = fig.frames[0].layout.yaxis.range, fig.frames[-2].layout.yaxis.range  # 8 and 16,384 GPUs
    assert small[1] - small[0] < 0.1 < big[1] - big[0]


def test_page_marks_only_where_they_apply():
    assert {k for k, _ in page_marks(0.10)} == {(8, 0), (16_384, 0)}  # no 2% figures at 10% backups
    assert {k for k, _ in page_marks(0.02)} == {(8, 0), (16_384, 0), (8, 1), (16_384, 328)}
    ten = step_panel_figure(backup_share=0.10)
    assert all(len(f.data[15].x) == 0 for f in ten.frames)
    two = step_panel_figure(backup_share=0.02)
    assert all(sorted(f.data[15].x) == [8, 16_384] for f in two.frames)


def test_run_panel_buttons_apply_each_rows_settings(panels):
    fig, comparison = panels["run"], panels["comparison"]
    assert not fig.layout.sliders
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == [r.name for r in comparison.rows] == [f.name for f in fig.frames]
    assert [list(b.args[0]) for b in buttons] == [[r.name] for r in comparison.rows]
    for frame, row in zip(fig.frames, comparison.rows):
        text = frame.layout.title.text.replace("<br>", " ")
        assert f"every {row.interval_min:.1f} min" in text and f"{row.goodput:.1%} goodput" in text
    assert "328 backups" in fig.frames[3].layout.title.text.replace("<br>", " ")


def test_time_shares_sum_to_one_and_keep_the_exact_kept_share():
    m = FailureModel().cluster_mtbf_min(16_384)
    grid = np.geomspace(0.5, 960, 50)
    sh = time_shares(grid, m)
    assert np.allclose(sum(sh.values()), 1.0)
    assert np.allclose(sh["kept"], checkpoint_shares(grid, m)["kept"])
    assert all(np.all(v >= -1e-12) for v in sh.values())
    assert sh["writing"][0] > 0.5 and sh["thrown"][-1] > 0.5  # the trade-off is drawn, not asserted


def test_interval_panel_over_gpus_and_page_mark_only_at_16384(panels):
    fig = panels["interval"]
    assert [s.label for s in fig.layout.sliders[0].steps] == [f"{n:,}" for n in PANEL_SIZES]
    assert sum(1 for tr in fig.data if tr.stackgroup) == 4
    with_mark = [s.label for s, f in zip(fig.layout.sliders[0].steps, fig.frames) if len(f.data[-1].x)]
    assert with_mark == ["16,384"]


def test_panels_follow_the_house_layout_and_fit_the_page_budget(panels):
    figs = [panels["step"], panels["run"], panels["interval"]]
    for fig in figs:
        assert fig.layout.legend.x >= 1 and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
        titles = [f.layout.title.text for f in fig.frames]
        assert all(len(line) <= viz.TITLE_CHARS for t in titles for line in t.split("<br>"))
    assert sum(len(f.to_json()) for f in figs) < 1_000_000


def test_run_panel_for_a_small_cluster():
    fig, comparison = run_panel_figure(n_gpus=8, days=2.0)
    assert len(fig.frames) == 5 and "0 failures" in fig.frames[0].layout.title.text


def test_interval_panel_reader_size_is_added():
    fig = interval_panel_figure(n_gpus=2_000)
    labels = [s.label for s in fig.layout.sliders[0].steps]
    assert "2,000" in labels and labels[fig.layout.sliders[0].active] == "2,000"


def test_toggle_labels_say_the_share_as_the_prose_does():
    labels = [b.label for b in step_panel_figure(backup_share=0.02).layout.updatemenus[0].buttons]
    assert labels == ["without backups", "with 2% backups"]
    assert [b.label for b in step_panel_figure(backup_share=0.005).layout.updatemenus[0].buttons][1] == \
        "with 0.5% backups"


def test_single_slider_efficiency_figure_drops_the_backup_marks_away_from_2_percent():
    from lib.straggler.figures import BACKUP_SHARES, efficiency_figure

    fig = efficiency_figure()
    counts = {f.name: len(f.data[3].x) for f in fig.frames}
    assert counts == {f"{s:.1%}": (4 if s == 0.02 else 2) for s in BACKUP_SHARES}
