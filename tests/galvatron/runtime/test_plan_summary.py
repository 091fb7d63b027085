"""Chapter 8 prints the plans it runs in the notation of chapters 5-7 (``Plan.summary``), not a second one."""

import pytest

from lib.galvatron.runtime.plan import LayerStrategy, RunPlan, from_search_plan, summary_of_label
from lib.galvatron.search.plan import Plan
from lib.galvatron.search.strategies import Strategy


@pytest.mark.parametrize("shapes, bsz, chunks", [
    ([(1, 1, 2, False, True)] * 2 + [(1, 2, 1, False, True)] * 2, 16, 1),
    ([(1, 2, 2, True, True), (1, 2, 2, False, False), (1, 1, 4, True, True)], 8, 1),
    ([(2, 1, 2, True, True)] * 4, 16, 2),
])
def test_a_run_plan_reads_like_the_search_plan_it_came_from(shapes, bsz, chunks):
    strats = [Strategy.from_shape(pp, tp, dp, sdp=sdp, tp_consec=c) for pp, tp, dp, sdp, c in shapes]
    plan = Plan.from_strategies(strats, bsz, chunks)
    run = from_search_plan(plan)
    assert run.summary() == summary_of_label(run.label()) == plan.summary()


def test_by_hand():
    run = RunPlan(2, 1, (LayerStrategy(1, 2), LayerStrategy(1, 2), LayerStrategy(2, 1), LayerStrategy(1, 2, True)),
                  8, 1)
    assert run.label() == "pp1[1-2,1-2,2-1,1-2f] B=8 m=1"
    assert run.summary() == "B=8, pp=1, chunks=1: 2x 1-1-2, 1x 1-2-1, 1x 1-1-2f"


def test_other_text_is_left_alone():
    assert summary_of_label("dp") == "dp"
