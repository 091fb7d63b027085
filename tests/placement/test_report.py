"""lib.placement.report: the tables and numbers of Part I's pages (their verdict sentences are hand-written)."""

import math

import numpy as np
import pytest

from lib.gpt import gpt_graph, preset
from lib.placement import baselines
from lib.placement import report as R
from lib.placement.evaluate import Entry, HeadToHead, Selection
from lib.placement.reinforce_run import RunResult
from lib.placement.sim_env import SimPlacementEnv

NAMES = ["embed"] + [f"block{b}.{p}" for b in range(2) for p in ("attn", "mlp")] + ["ln_f", "head", "loss"]


def test_plural_and_words():
    assert R.plural(1, "node") == "1 node"
    assert R.plural(0, "node") == "0 nodes"
    assert R.plural(2, "micro-batch", "micro-batches") == "2 micro-batches"
    assert R.join_words([]) == "none" and R.join_words(["a"]) == "a"
    assert R.join_words(["a", "b", "c"]) == "a, b and c"
    assert R.devices_text([1, 0, 1]) == "GPUs 0 and 1" and R.devices_text([3]) == "GPU 3"
    assert R.sci(4.0 ** 40) == "1.2 × 10²⁴" and R.sci(9.96) == "1.0 × 10¹"
    assert R.ms(0.2301) == "230.1 ms" and R.ms(10.0, oom=True) == "out of memory"


def test_table_html_escapes_and_checks_widths():
    t = R.table(("a", "b"), [("<x>", 1)], caption="c & d")
    html = t._repr_html_()
    assert "&lt;x&gt;" in html and "<caption>c &amp; d</caption>" in html and html.count("<tr>") == 2
    assert t.column("b") == ["1"]
    assert "<x>" in repr(t)
    with pytest.raises(ValueError, match="2 cells"):
        R.table(("a", "b"), [("only one",)])


def test_layout_of():
    # embedding on 2 with one body node, the other body nodes and the head on 1
    lay = R.layout_of([2, 2, 1, 1, 1, 1, 1, 1], NAMES)
    assert (lay.embed, lay.head, lay.body_count) == (2, 1, ((1, 3), (2, 1)))
    assert not lay.embed_apart and not lay.head_apart
    assert lay.text() == ("the embedding on GPU 2 with 1 of the 4 body nodes, "
                          "the head on GPU 1 with 3 of the 4 body nodes")
    assert not hasattr(lay, "claim")  # retired: chapters write what a layout means by hand
    both = R.layout_of([3, 0, 0, 0, 0, 2, 2, 2], NAMES)
    assert both.embed_apart and both.head_apart and both.body_on(0) == 4 and both.n_body == 4
    one = R.layout_of([3, 0, 0, 0, 0, 0, 0, 0], NAMES)
    assert one.embed_apart and not one.head_apart
    same = R.layout_of([1, 0, 0, 0, 0, 1, 1, 1], NAMES)
    assert same.text().startswith("the embedding and the head on GPU 1")
    assert R.layout_of([0] * 8, NAMES).text() == "everything on GPU 0"


def test_entry_names():
    e = Entry("rl", "top4", (0,), "pick", (0.1,), False)
    assert R.entry_name(e) == "the RL pick (top4)"
    assert R.entry_name(Entry("fixed", "2-stage pipeline", (0,), "fixed", (0.1,), False)) == "2-stage pipeline"


def run(records, env=None, cfg=None):
    env = env or {"n_micro": 1, "mem_cap": None, "describe": "sim"}
    cfg = cfg or {"baseline": "moving_average"}
    return RunResult(None, {"env": env, "config": cfg}, tuple(records), ((( 0,) * 8, 0.2),), (0,) * 8, False)


def rec(u, identical=False, oom=(False, False), mean=0.3):
    return {"update": u, "identical": identical, "oom": list(oom), "mean_step_s": mean,
            "placements": [[0, 0, 1], [0, 1, 1]], "step_s": [mean, mean]}


def test_collapse_update_and_settings():
    a = run([rec(0), rec(1, True)])
    never = run([rec(0)])
    assert R.collapse_update(a) == 1 and R.collapse_update(never) is None and R.collapse_text(never) == "never"
    for retired in ("compare_collapse", "collapse_within_text", "compare_medians", "explained_verdict",
                    "favourite_values", "phase_values", "cap_two_gpu_text"):
        assert not hasattr(R, retired), retired
    c = run([rec(0)], env={"n_micro": 4, "mem_cap": 0.24}, cfg={"baseline": "leave_one_out"})
    assert R.settings_text(c) == "4 micro-batches, memory cap 0.24, leave-one-out baseline"
    assert R.settings_text(a) == "1 micro-batch, no memory cap, moving-average baseline"
    np.testing.assert_allclose(R.same_as_previous(a), [0.5, 0.5])


def test_oom_share():
    r = run([rec(0, oom=(True, True)), rec(1, oom=(True, False)), rec(2)])
    assert R.oom_share(r, first=1) == 1.0 and R.oom_share(r, last=2) == 0.25


def h2h(rl_s, other_s, fav_round=None, single_round=(0.2, 0.2, 0.21, 0.2)):
    rl = Entry("rl", "top1", (0, 0, 0, 1, 1, 1, 1, 1), "pick", tuple(rl_s), False)
    gpu = Entry("single_gpu", "single GPU 0", (0,) * 8, "pick", tuple(other_s), False)
    sel = [Selection("single_gpu", "single GPU 0", (0,) * 8, tuple(single_round), False)]
    if fav_round is not None:
        sel.append(Selection("rl", "favourite", (1,) * 8, tuple(fav_round), False))
    return HeadToHead((rl, gpu), tuple(sel), 4, 8, 10, "sim (n_micro=4)")


def test_outcome_follows_the_two_standard_error_rule():
    assert h2h([0.30, 0.31, 0.30], [0.20, 0.21, 0.20]).outcome() == "loss"
    assert h2h([0.20, 0.21, 0.20], [0.30, 0.31, 0.30]).outcome() == "win"
    tie = h2h([0.20, 0.26, 0.20], [0.21, 0.25, 0.21])
    assert abs(tie.gap_se) < 2 and tie.outcome() == "tie"


def test_gap_table_names_each_evaluations_own_settings():
    t = R.gap_table({"A": h2h([0.2] * 3, [0.3] * 3), "B": h2h([0.3] * 3, [0.2] * 3)})
    assert t.column("timed on") == ["sim (n_micro=4)"] * 2
    assert t.column("gap (positive: RL faster)") == ["+100.0 ms", "-100.0 ms"]


def test_favourite_against_single_gpu():
    h = h2h([0.2] * 3, [0.3] * 3, fav_round=(0.18, 0.181, 0.179, 0.18))
    f = R.favourite_vs_single(h, (1,) * 8)
    assert f.verdict() == "beats" and f.gap_s == pytest.approx(0.0225, abs=1e-6)
    slow = R.favourite_vs_single(h2h([0.2] * 3, [0.3] * 3, fav_round=(0.3, 0.31, 0.3, 0.3)), (1,) * 8)
    assert slow.verdict() == "is slower than"
    # relabelled on the judged machine, the favourite is found by its name; a placement under no name is not
    assert R.favourite_vs_single(h, (2,) * 8).favourite_label == "favourite"
    top1 = (0, 0, 0, 1, 1, 1, 1, 1)
    assert R.favourite_vs_single(h, (3,) * 8, [("top1", top1)]).favourite_label == "favourite"
    import dataclasses

    no_fav = dataclasses.replace(h, selection=tuple(s for s in h.selection if s.label != "favourite"))
    assert R.favourite_vs_single(no_fav, (2,) * 8) is None


def test_head_to_head_table_names_sides_in_words():
    t = R.head_to_head_table(h2h([0.2] * 3, [0.3] * 3), NAMES)
    assert t.column("entry") == ["top1", "single GPU 0"]  # fastest first
    assert t.column("side") == ["RL", "single GPU"]  # never the code names rl, single_gpu
    assert t.column("where it puts things")[1] == "everything on GPU 0"


def test_one_node_moves_find_the_logits_wall():
    g = gpt_graph(preset("ci"))
    env = SimPlacementEnv(g, "4xT4-pcie")
    names = [n.name for n in g.nodes]
    head, loss = names.index("head"), names.index("loss")
    m = R.one_node_moves(env, (0,) * g.n_nodes, {"head alone": [head], "head + loss": [head, loss]})
    assert m.jumps_s["head alone"] > m.jumps_s["head + loss"]  # moving the pair avoids the copy
    assert m.best_s[head] > 0 and m.other == 1
    assert all(m.best_s[names.index(n)] < 0 for n in m.helping(names))


def test_cap_helpers_and_tables():
    g = gpt_graph(preset("49m"))
    hand = baselines.all_baselines(g, 4)
    capped = SimPlacementEnv(g, "4xT4-pcie", mem_cap=0.24)
    fits = R.cap_fits(hand, capped)
    assert not fits["single GPU 0"] and fits["4-way layer split"]  # the write-up's facts of experiment C
    t = R.cap_table(hand, capped)
    assert t.column("placement") == list(hand) and "out of memory" in t.rows[0][1]
    assert [k for k, p in hand.items() if len(set(p)) == 2 and fits[k]] == ["2-stage pipeline"]


def test_report_card_rows_and_values():
    card = R.report_card(n_random=20)
    assert len(card.rows) == 10 and all(len(r) == 3 for r in card.rows)
    assert abs(card.values["single_ms"] - 230) < 0.2 * 230
    assert card.values["c_single_oom"] and card.values["c_split_oom"] and not card.values["c_four_oom"]
    assert not hasattr(card, "glue_values")


def test_one_random_sample_for_every_page():
    """The report card's random means are the random section's: the same placements, drawn once."""
    g = gpt_graph(preset("49m"))
    from lib.graph import colocate

    env = SimPlacementEnv(g, "4xT4-pcie")
    nodes, groups = R.random_means_ms(env, g, colocate(g), n=30, seed=5)
    card = R.report_card(n_random=30, seed=5)
    assert card.values["rand40_ms"] == pytest.approx(nodes.mean()) and card.values["rand13_ms"] == pytest.approx(groups.mean())
    a, b = R.random_placements(40, 13, 30, 5)
    assert a.shape == (30, 40) and b.shape == (30, 13) and not np.array_equal(a, R.random_placements(40, 13, 30, 6)[0])


def test_best_of_many_flatters():
    g = gpt_graph(preset("ci"))
    r = R.best_of_many(g, "4xT4-pcie", "two GPUs", (0,) * (g.n_nodes // 2) + (1,) * (g.n_nodes - g.n_nodes // 2),
                       200, seed=0)
    curve = r.best_so_far_minus_truth_ms
    assert np.all(np.diff(curve) <= 0) and r.flattery_ms == pytest.approx(-curve[-1])
    assert r.flattery_ms > 0 and r.sd_ms > 0
    t = R.best_of_many_table([r], "src")
    assert t.rows[0][2].startswith("-")


def test_collapse_study_text_and_tables():
    study = {"max_updates": 60, "seeds": [0, 1, 2], "profile": "p", "rows": [
        {"factor": "defaults", "value": "x", "changes": {}, "collapse": [15, None, 8]},
        {"factor": "hidden size", "value": "64", "changes": {"hidden": 64}, "collapse": [None, None, 40]}]}
    assert R.study_dates_text([15, None, 8], 60) == "seeds 0-2: 15, none by 60, 8"
    from lib.placement.collapse_study import summary

    rows = summary(study)
    assert rows[0]["median"] == 15 and rows[1]["median"] == 60 and rows[1]["collapsed"] == 1
    assert R.study_median_text(rows[0], 60) == "15" and R.study_median_text(rows[1], 60) == "> 60"
    t = R.sensitivity_table(study)
    assert t.column("median") == ["15", "> 60"] and "none by" not in t.rows[0][1] and "> 60" in t.rows[0][1]
    assert len(R.placer_choices_table().rows) == len(R.PLACER_CHOICES) >= 8


def test_memory_decides_names_the_part_that_tips_a_placement_over_the_cap():
    from lib.placement import baselines
    from lib.placement.sim_env import SimPlacementEnv

    g = gpt_graph(preset("49m"))
    capped = SimPlacementEnv(g, "4xT4-pcie", mem_cap=0.24)
    hand = baselines.all_baselines(g, 4)
    single = R.memory_decides(capped, hand["single GPU 0"])
    four = R.memory_decides(capped, hand["4-way layer split"])
    assert not single["fits"] and four["fits"] and four["deciding"] == []
    assert single["peak"] > single["cap"] and sum(single["parts"].values()) == single["peak"]
    for part in single["deciding"]:  # leaving that part (and its overhead share) out makes it fit
        assert single["peak"] - single["parts"][part] * capped.alloc_overhead <= single["cap"] or \
            part == "allocator overhead"
    t = R.memory_decides_table(capped, {"single": hand["single GPU 0"], "four": hand["4-way layer split"]})
    assert t.column("verdict") == ["out of memory", "fits"] and t.rows[1][-1] == "-"
