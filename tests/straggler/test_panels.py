"""The chapter's linked figures (lib/straggler/panels.py): the GPU slider and backups toggle of the step, the
five-ways buttons that change every panel of one figure (two weeks, where the time goes, the row's goodput), the
stacked interval figure over a GPUs x interval grid, and where the page's quoted values may appear."""

import json

import numpy as np
import pytest

from lib import viz
from lib.straggler.figures import page_marks
from lib.straggler.model import FailureModel, checkpoint_shares, young_daly_min
from lib.straggler.panels import (PANEL_SIZES, chapter_panels, five_ways_figure, five_ways_panels,
                                  interval_panel_figure, step_panel_figure, step_panel_groups, time_shares)


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
        bars = [v for tr in frame.data if tr.type == "bar" for v in tr.y if v is not None]
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


def _panel_states(fig, panel: list[int]) -> list[str]:
    """Per button, the JSON of the traces its frame draws in one panel (what the button shows there)."""
    frames = {f.name: f for f in fig.frames}
    out = []
    for b in fig.layout.updatemenus[0].buttons:
        frame = frames[b.args[0][0]]
        out.append(json.dumps([frame.data[i].to_plotly_json() for i in panel], sort_keys=True))
    return out


def unchanged(fig) -> list[tuple[str, str, str]]:
    """(panel, button, other button) wherever two buttons draw the same traces in a panel."""
    buttons = [b.label for b in fig.layout.updatemenus[0].buttons]
    out = []
    for name, panel in five_ways_panels(fig).items():
        states = _panel_states(fig, panel)
        out += [(name, buttons[i], buttons[j]) for i in range(len(states)) for j in range(i)
                if states[i] == states[j]]
    return out


def test_five_ways_buttons_change_every_panel(panels):
    fig, comparison = panels["five_ways"], panels["comparison"]
    assert not fig.layout.sliders
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == [r.name for r in comparison.rows] == [f.name for f in fig.frames]
    assert [b.method for b in buttons] == ["animate"] * 5
    assert [list(b.args[0]) for b in buttons] == [[r.name] for r in comparison.rows]
    groups = five_ways_panels(fig)
    assert sorted(groups) == ["breakdown", "days", "interval"] and all(groups.values())
    for frame in fig.frames:  # animate replaces traces by index: every frame draws every trace, on its panel
        assert [tr.xaxis for tr in frame.data] == [tr.xaxis for tr in fig.data]
    assert unchanged(fig) == []


def test_a_button_that_leaves_a_panel_unchanged_is_caught():
    fig, _ = five_ways_figure()
    panel = five_ways_panels(fig)["interval"]
    first, second = fig.frames[0], fig.frames[1]
    second.data = tuple(first.data[i] if i in panel else tr for i, tr in enumerate(second.data))
    assert unchanged(fig) == [("interval", fig.frames[1].name, fig.frames[0].name)]


def test_five_ways_buttons_apply_each_rows_settings(panels):
    fig, comparison = panels["five_ways"], panels["comparison"]
    failure = FailureModel()
    groups = five_ways_panels(fig)
    for frame, row in zip(fig.frames, comparison.rows):
        text = frame.layout.title.text.replace("<br>", " ")
        assert f"every {row.interval_min:.1f} min" in text and f"{row.goodput:.1%} goodput" in text
        days = [frame.data[i] for i in groups["days"]]
        restart_h = sum(days[2].x)  # the restarts drawn: one per failure of this row's run
        assert restart_h * 60 == pytest.approx(failure.restart_min * row.failures, abs=failure.restart_min)
        mid = [frame.data[i] for i in groups["interval"]]
        m = failure.cluster_mtbf_min(row.n_gpus, row.n_backup)  # the row's backups fail too
        kept = checkpoint_shares(np.array(mid[0].x), m)["kept"]
        assert np.allclose(mid[0].y, kept, atol=1e-4)
        line = next(tr for tr in mid if tr.name == "this row's interval")
        assert list(line.x) == [row.interval_min] * 2
        low = [frame.data[i] for i in groups["breakdown"]]
        assert list(low[0].x) == pytest.approx([row.expected_kept, row.expected_checkpoint, row.expected_lost,
                                                row.step_efficiency, row.expected_goodput], abs=1e-5)
        assert list(low[1].x)[-1] == pytest.approx(row.goodput, abs=1e-5)
    assert "328 backups" in fig.frames[3].layout.title.text.replace("<br>", " ")


def test_five_ways_static_page_is_the_default_button(panels):
    fig = panels["five_ways"]
    menu = fig.layout.updatemenus[0]
    active = menu.active
    assert menu.buttons[active].label == "Your settings" == fig.frames[active].name
    drawn = [tr.to_plotly_json() for tr in fig.data]
    assert drawn == [tr.to_plotly_json() for tr in fig.frames[active].data]
    assert fig.layout.title.text == fig.frames[active].layout.title.text


def _marks(frame, fig) -> dict:
    page = frame.data[five_ways_panels(fig)["breakdown"][-1]]
    return dict(zip(page.y, page.x))


def test_five_ways_quoted_marks_only_where_they_apply(panels):
    fig = panels["five_ways"]
    lost = "thrown away<br>+ restarts"
    expected = [{"writing": 0.23, "step efficiency": 0.71}, {"time kept": 0.875, "step efficiency": 0.71},
                {lost: 0.29, "step efficiency": 0.71}, {"step efficiency": 0.90}, {"step efficiency": 0.71}]
    assert [_marks(f, fig) for f in fig.frames] == expected
    bar = five_ways_panels(fig)["breakdown"][0]
    for frame in fig.frames:  # every mark lies within about a point of the exact bar beside it
        exact = dict(zip(frame.data[bar].y, frame.data[bar].x))
        assert all(abs(v - exact[label]) < 0.011 for label, v in _marks(frame, fig).items())
    other, _ = five_ways_figure(n_gpus=1_000, days=2.0)
    assert all(_marks(f, other) == {} for f in other.frames)  # the page quotes nothing at 1,000 GPUs
    small, _ = five_ways_figure(n_gpus=8, days=2.0)
    assert [_marks(f, small) for f in small.frames] == [{"step efficiency": 0.975}] * 3 + [
        {"step efficiency": 0.87}, {"step efficiency": 0.975}]


def test_five_ways_axes_are_fixed_and_hold_every_value(panels):
    fig = panels["five_ways"]
    lay = fig.layout
    assert list(lay.xaxis.range) == [0, 24] and list(lay.yaxis2.range) == [0, 1]
    assert list(lay.xaxis3.range) == [0, 1]
    assert all(set(f.layout.to_plotly_json()) == {"title"} for f in fig.frames)  # no frame moves an axis
    # the three panels are stacked, top to bottom, without overlapping
    d1, d2, d3 = lay.yaxis.domain, lay.yaxis2.domain, lay.yaxis3.domain
    assert d3[0] == 0 and d3[1] < d2[0] < d2[1] < d1[0] < d1[1] == 1
    # each panel has its legend, right of the plot and top-aligned with its panel
    for legend, d in ((lay.legend, d1), (lay.legend2, d2), (lay.legend3, d3)):
        assert legend.x >= 1 and legend.y == pytest.approx(d[1])
    assert {tr.legend for tr in fig.data} == {"legend", "legend2", "legend3"}


def test_five_ways_for_a_small_cluster():
    fig, comparison = five_ways_figure(n_gpus=8, days=2.0)
    assert len(fig.frames) == 5 and "0 failures" in fig.frames[0].layout.title.text
    assert list(fig.layout.yaxis.range) == [2.5, 0.5]


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
    with_mark = [s.label for s, f in zip(fig.layout.sliders[0].steps, fig.frames)
                 if any(v is not None for v in f.data[-1].y)]
    assert with_mark == ["16,384"]
    assert len({tuple(tr.name for tr in f.data) for f in fig.frames}) == 1  # one legend in every frame


def test_panels_follow_the_house_layout_and_fit_the_page_budget(panels):
    figs = [panels["step"], panels["five_ways"], panels["interval"]]
    for fig in figs:
        assert fig.layout.legend.x >= 1 and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
        titles = [f.layout.title.text for f in fig.frames]
        assert all(len(line) <= viz.TITLE_CHARS for t in titles for line in t.split("<br>"))
    assert sum(len(f.to_json()) for f in figs) < 1_000_000


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


def test_five_ways_reader_settings_of_their_own():
    yd = young_daly_min(FailureModel().cluster_mtbf_min(16_384))
    ten, _ = five_ways_figure(backup_share=0.10, days=2.0)
    assert _marks(ten.frames[-1], ten) == {}  # the page quotes nothing for 16,384 + 1,639 GPUs
    assert "1,639 backups" in ten.frames[-1].layout.title.text.replace("<br>", " ")
    # a reader who picks the backup row's settings gets the same three panels as that row, and the check says so
    same, _ = five_ways_figure(interval_min=yd, backup_share=0.02, days=2.0)
    row, yours = "Young-Daly + 2% backups", "Your settings"
    assert sorted(unchanged(same)) == [(p, yours, row) for p in ("breakdown", "days", "interval")]


@pytest.mark.parametrize("n_gpus", [8, 1_000, 16_384])
def test_every_mark_lies_inside_its_axes_in_every_state(n_gpus):
    from tests.figure_bounds import marks_outside

    figs = chapter_panels(n_gpus=n_gpus, days=2.0)
    for name in ("step", "five_ways", "interval"):
        assert marks_outside(figs[name]) == [], name


def test_young_daly_stays_on_the_interval_axis_at_8_gpus():
    # on 8 GPUs the cluster fails every ~260 days and Young-Daly is ~14.5 h, at the edge of the 16 h axis that
    # suits 16,384 GPUs; plotly's animate keeps the first frame's axis, so each frame carries a range of its own
    fig = interval_panel_figure(n_gpus=16_384)
    frames = {f.name: f for f in fig.frames}
    for label in ("8", "16,384"):
        frame = frames[label]
        lo, hi = frame.layout.xaxis.range
        yd = next(tr for tr in frame.data if tr.name == "Young-Daly").x[0]
        assert lo < np.log10(yd) < hi - 0.15  # a sixth of a decade clear of the edge
    assert frames["8"].layout.xaxis.range[1] > frames["16,384"].layout.xaxis.range[1]
    # the five ways fix one interval axis for all buttons: it holds the 8-GPU "too rarely" row (6 YD, ~87 h)
    small, comparison = five_ways_figure(n_gpus=8, days=2.0)
    hi = small.layout.xaxis2.range[1]
    assert 10 ** hi >= max(r.interval_min for r in comparison.rows)


def _bars(trace) -> list:
    """The (GPU, time) bars a trace draws (a step without slow GPUs draws one None, to keep its legend entry)."""
    return [(x, y) for x, y in zip(trace.x, trace.y) if y is not None]


def test_both_buttons_show_the_same_cluster():
    fig = step_panel_figure(backup_share=0.02)
    for frame in fig.frames:
        d = frame.data  # 0-3 without backups, 4-8 with (step_panel_groups)
        for plain, backed in ((0, 4), (1, 5)):  # the healthy GPUs and the slowest of them: the same draw
            assert list(d[plain].x) == list(d[backed].x) and list(d[plain].y) == list(d[backed].y)
        slow_plain = set(_bars(d[2]))
        slow_backed = set(_bars(d[6])) | set(_bars(d[7]))
        assert slow_plain <= slow_backed  # the backups cover some of the same slow GPUs
        assert len({tr.name for tr in d}) == len({tr.name for tr in fig.data})  # every legend entry, always
    big = {f.name: f for f in fig.frames}["16,384"].data
    assert not _bars(big[6]) and len(_bars(big[7])) >= len(_bars(big[2])) > 0  # 328 backups cover them
    # a reader's own size leaves the other sizes' draws as they were
    other = {f.name: f for f in step_panel_figure(n_gpus=1_000, backup_share=0.02).frames}["16,384"].data
    assert [list(tr.y) for tr in other[:9]] == [list(tr.y) for tr in big[:9]]
