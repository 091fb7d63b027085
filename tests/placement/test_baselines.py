"""Tests for lib/placement/baselines.py: the write-up's hand-made placements, read from node names independently,
and the balanced pipeline cut against brute force."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.gpt import gpt_graph, preset
from lib.graph import Graph, colocate
from lib.placement.baselines import (HUMAN_PAIRS, all_baselines, balanced_cuts, fixed_baselines, human_split,
                                     human_two_gpu, layer_split, pipeline, single_device, single_devices)
from lib.placement.env import validate_placement

G49 = gpt_graph(preset("49m"))


def block(name):
    return int(name[5:name.index(".")]) if name.startswith("block") else None


def test_single_device():
    assert single_device(G49, 2, 4) == (2,) * 40
    assert [p for _, p in single_devices(G49, 4)] == [(d,) * 40 for d in range(4)]
    with pytest.raises(ValueError, match="out of range"):
        single_device(G49, 4, 4)


def test_human_split_is_blocks_1_to_3_then_4_to_6_and_the_head():
    p = human_split(G49, 1, 3, 4)
    for n in G49.nodes:
        b = block(n.name)
        want = 1 if n.name == "embed" or (b is not None and b < 3) else 3
        assert p[n.index] == want, n.name
    assert p.count(1) == 1 + 3 * 6 and p.count(3) == 3 * 6 + 3
    assert [lbl for lbl, _ in human_two_gpu(G49, 4)] == [f"human 2-GPU split on {a},{b}" for a, b in HUMAN_PAIRS]
    assert len(human_two_gpu(G49, 2)) == 1


def test_four_way_layer_split():
    p = layer_split(G49, (0, 1, 2, 3), 4)
    per_device = {d: sorted({block(n.name) for n in G49.nodes if p[n.index] == d} - {None}) for d in range(4)}
    assert per_device == {0: [0, 1], 1: [2, 3], 2: [4], 3: [5]}
    assert p[0] == 0 and p[-3:] == (3, 3, 3)
    with pytest.raises(ValueError, match="distinct"):
        layer_split(G49, (0, 0), 4)
    with pytest.raises(ValueError, match="1..6 devices"):
        layer_split(G49, tuple(range(7)))


def brute_min_max(costs, k):
    best = float("inf")
    for cuts in itertools.combinations(range(1, len(costs)), k - 1):
        bounds = (0,) + cuts + (len(costs),)
        best = min(best, max(sum(costs[a:b]) for a, b in zip(bounds, bounds[1:])))
    return best


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=9), st.integers(1, 4))
def test_balanced_cuts_is_optimal(costs, k):
    if k > len(costs):
        with pytest.raises(ValueError):
            balanced_cuts(costs, k)
        return
    stage = balanced_cuts(costs, k)
    assert list(stage) == sorted(stage) and set(stage) == set(range(k))  # contiguous, every stage used
    worst = max(sum(c for c, s in zip(costs, stage) if s == j) for j in range(k))
    assert worst == brute_min_max(costs, k)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_pipeline_cuts_only_between_groups(k):
    devs = tuple(range(k))
    p = pipeline(G49, devs, 4)
    assert list(p) == sorted(p) and set(p) == set(devs)
    for g in colocate(G49):
        assert len({p[i] for i in g}) == 1
    assert p[-1] == p[-2]  # head and loss together: the logits never cross


def test_fixed_and_all_baselines_are_valid_placements():
    labels = [lbl for lbl, _ in fixed_baselines(G49, 4)]
    assert labels == ["4-way layer split", "2-stage pipeline", "4-stage pipeline"]
    assert [lbl for lbl, _ in fixed_baselines(G49, 2)] == ["2-stage pipeline"]
    everything = all_baselines(G49, 4)
    assert len(everything) == 4 + 3 + 3
    for p in everything.values():
        validate_placement(p, 40, 4)
    ci = gpt_graph(preset("ci"))
    for p in all_baselines(ci, 4).values():
        validate_placement(p, ci.n_nodes, 4)


def test_non_gpt_graph_is_rejected():
    g = Graph("empty", gpt_graph(preset("ci")).nodes[:1], batch=4, seq=16)
    with pytest.raises(ValueError, match="no 'block<i>.' nodes"):
        layer_split(g, (0, 1))
