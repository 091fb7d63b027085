"""lib.placement.figures: the figures of Part I, drawn from run logs and results."""

import numpy as np

from lib.gpt import gpt_graph, preset
from lib.graph import colocate
from lib.placement import figures as F
from lib.placement.evaluate import Entry, HeadToHead
from lib.placement.reinforce_run import RunResult
from lib.placement.sim_env import SimPlacementEnv
from lib.viz import title_margin


def rec(u, step_s, oom, best):
    return {"update": u, "step_s": list(step_s), "oom": list(oom), "mean_step_s": float(np.mean(step_s)),
            "best_step_s": best, "identical": False, "entropy": 1.0, "placements": [[0, 1]] * len(step_s)}


def run(records):
    return RunResult(None, {}, tuple(records), (), None, False)


def test_learning_curves_leave_the_oom_charge_out_and_show_its_share():
    r = run([rec(0, [0.2, 10.0], [False, True], 0.2), rec(1, [10.0, 10.0], [True, True], 0.2),
             rec(2, [0.18, 0.2], [False, False], 0.18)])
    fig = F.learning_curves({"C": r}, title="t")
    mean = next(t for t in fig.data if t.name == "C: sample mean")
    assert mean.y[0] == 200.0 and np.isnan(mean.y[1]) and abs(mean.y[2] - 190.0) < 1e-9
    assert fig.layout.yaxis.type != "log"  # linear, in ms
    share = next(t for t in fig.data if t.name == "C: share out of memory")
    assert list(share.y) == [0.5, 1.0, 0.0]
    plain = F.learning_curves({"A": run([rec(0, [0.2, 0.3], [False, False], 0.2)])})
    assert not any("out of memory" in (t.name or "") for t in plain.data)  # no panel without OOM


def test_head_to_head_is_a_zoomed_dot_plot_with_oom_marked():
    e = lambda side, label, role, xs, oom=False: Entry(side, label, (0, 0), role, tuple(xs), oom)
    h = HeadToHead((e("rl", "top1", "pick", [0.220, 0.221, 0.222]),
                    e("single_gpu", "single GPU 0", "pick", [10.0, 10.0], True),
                    e("fixed", "2-stage pipeline", "fixed", [0.223, 0.224, 0.222])), (), 4, 8, 10, "src")
    fig = F.head_to_head_figure(h, {"rl": 205.0}, title="A")
    lo, hi = fig.layout.xaxis.range
    assert 195 < lo < 205 and hi < 300  # zoomed: not from zero, not out to the 10 s charge
    oom = next(t for t in fig.data if t.name == "out of memory")
    assert list(oom.text) == ["out of memory"] and oom.x[0] < hi
    assert all(t.type == "scatter" for t in fig.data)  # dots and whiskers, no bars
    assert any(t.name == "the write-up (quoted)" for t in fig.data)
    assert fig.layout.legend.x > 1  # the house layout: legend right of the plot


def test_chapter_one_figures_draw():
    g = gpt_graph(preset("ci"))
    sim = SimPlacementEnv(g, "4xT4-pcie")
    long_title = "A title that is long enough to wrap onto a second line in the house layout, surely it is"
    fig = F.params_figure(g, long_title)
    assert fig.layout.margin.t == title_margin(long_title)
    assert F.groups_figure(g, colocate(g), "g").data[0].type == "heatmap"
    shown = {"one": (0,) * g.n_nodes, "two": (0,) * (g.n_nodes - 2) + (1, 1)}
    mem = F.memory_figure(sim, shown, 3.0, "cap", "m")
    assert len(mem.data[0].x) == 3  # one bar per device used: 1 + 2
    tl = F.timeline_figure(sim.trace(shown["two"]), "t")
    assert {t.name for t in tl.data} >= {"forward", "backward", "copy"}
    hist = F.random_placements_figure({"a": [200, 210], "b": [230, 240]}, {"q": 220}, "r")
    assert len(hist.data) == 2


def test_device_strips_are_categorical_and_features_are_labelled():
    from lib.gpt import gpt_graph, preset
    from lib.placement import figures as F
    from lib.placement.placer import PlacerInputs

    fig = F.placement_strip({"a": (0, 1, 2, 3)}, ["w", "x", "y", "z"], 4, "t")
    hm = fig.data[0]
    assert list(hm.colorbar.ticktext) == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    colours = [c for _, c in hm.colorscale]
    assert all(colours[2 * i] == colours[2 * i + 1] for i in range(4))  # flat bands, no gradient
    assert len(set(colours)) == 4
    g = gpt_graph(preset("ci"))
    inputs = PlacerInputs.from_graph(g)
    f = F.features_figure(inputs, [n.name for n in g.nodes], "t")
    assert f.data[0].showscale and list(f.data[0].y) == F.feature_labels(inputs)
    assert f.data[0].y[0].startswith("op: ") and "feeds item +1" in f.data[0].y


def test_collapse_groups_figure_has_no_legend_to_sit_on_its_title():
    from lib.placement import collapse_groups as CG

    study = CG.read_study("data/runs/collapse_groups.json")
    fig = F.collapse_groups_figure(study, "a title")
    assert fig.layout.showlegend is False
    assert len(fig.data) >= 2  # the median and the seeds are still drawn (the prose names them)


def test_gpus_and_phases_never_share_a_colour():
    from lib.placement.evaluate import PhaseTiming

    strip = F.placement_strip({"a": (0, 1, 2, 3)}, n_devices=4)
    device_colours = {c for _, c in strip.data[0].colorscale}
    pt = PhaseTiming(("x",), ({"forward": 0.1, "backward": 0.2, "optimizer": 0.01},), 1, "test")
    phase_colours = {t.marker.color for t in F.phase_figure(pt).data}
    assert len(device_colours) == 4 and len(phase_colours) == 3
    assert not device_colours & phase_colours and not device_colours & set(F.PHASE_COLOURS.values())
