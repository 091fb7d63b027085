"""Tests for lib/graph.py: edges, co-location grouping (against the spec and a brute-force reading of the rule),
expansion, batch rescaling, JSON round trip and the memory estimate."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.graph import (OP_TYPES, STATE_BYTES_PER_PARAM, Graph, Node, colocate, crossing_edges, expand,
                       peak_memory_estimate)
from lib.gpt import gpt_graph, node_names, preset


def toy_graph(inputs: list[tuple[int, ...]], batch: int = 2) -> Graph:
    nodes = tuple(
        Node(i, f"n{i}", OP_TYPES[i % len(OP_TYPES)], (batch, 3), params=10 * i, fwd_flops=1.0 * batch,
             bwd_flops=2.0 * batch, fwd_bytes=40.0 * i + 24 * batch, bwd_bytes=80.0 * i + 24 * batch,
             out_bytes=12 * batch, saved_bytes=4 * batch * i, transient_bytes=8 * batch, inputs=ins,
             fwd_weight_bytes=40.0 * i, bwd_weight_bytes=80.0 * i)
        for i, ins in enumerate(inputs))
    return Graph("toy", nodes, batch=batch, seq=3)


def brute_groups(graph: Graph) -> set[frozenset]:
    """Connected components of the undirected 'single-consumer' edges, found by flood fill."""
    adj = {i: set() for i in range(graph.n_nodes)}
    for i in range(graph.n_nodes):
        cons = [n.index for n in graph.nodes if i in n.inputs]
        if len(cons) == 1:
            adj[i].add(cons[0])
            adj[cons[0]].add(i)
    seen, comps = set(), set()
    for s in range(graph.n_nodes):
        if s in seen:
            continue
        stack, comp = [s], set()
        while stack:
            v = stack.pop()
            if v not in comp:
                comp.add(v)
                stack.extend(adj[v] - comp)
        seen |= comp
        comps.add(frozenset(comp))
    return comps


def test_colocate_49m_gives_the_seeds_13_groups():
    cfg = preset("49m")
    g = gpt_graph(cfg)
    names = node_names(cfg)
    groups = colocate(g)
    assert len(groups) == 13
    named = [tuple(names[i] for i in grp) for grp in groups]
    expected = [("embed",)]
    for l in range(6):
        expected.append((f"block{l}.ln1", f"block{l}.attn", f"block{l}.add1"))
        tail = ("ln_f", "head", "loss") if l == 5 else ()
        expected.append((f"block{l}.ln2", f"block{l}.mlp", f"block{l}.add2") + tail)
    assert named == expected


@pytest.mark.parametrize("name,n_groups", [("ci", 5), ("163m", 25)])
def test_colocate_other_presets(name, n_groups):
    g = gpt_graph(preset(name))
    assert len(colocate(g)) == n_groups == 1 + 2 * preset(name).n_layer
    assert {frozenset(x) for x in colocate(g)} == brute_groups(g)


@st.composite
def dags(draw):
    n = draw(st.integers(1, 12))
    inputs = [()]
    for i in range(1, n):
        k = draw(st.integers(0, min(3, i)))
        inputs.append(tuple(sorted(draw(st.sets(st.integers(0, i - 1), min_size=k, max_size=k)))))
    return toy_graph(inputs)


@settings(max_examples=60, deadline=None)
@given(dags())
def test_colocate_matches_brute_force_on_random_dags(g):
    groups = colocate(g)
    assert {frozenset(x) for x in groups} == brute_groups(g)
    assert sorted(i for grp in groups for i in grp) == list(range(g.n_nodes))
    assert [grp[0] for grp in groups] == sorted(grp[0] for grp in groups)
    assert all(list(grp) == sorted(grp) for grp in groups)


def test_edges_and_consumers_agree():
    g = gpt_graph(preset("ci"))
    edges = g.edges()
    for i in range(g.n_nodes):
        assert g.consumers(i) == tuple(c for p, c in edges if p == i)
    # residual edges: every add reads the branch and the residual stream
    for n in g.nodes:
        if n.op == "add":
            assert len(n.inputs) == 2
    assert g.consumers(g.n_nodes - 1) == ()
    with pytest.raises(ValueError, match="out of range"):
        g.consumers(g.n_nodes)


def test_expand_round_trip_and_errors():
    g = gpt_graph(preset("49m"))
    groups = colocate(g)
    rng = np.random.default_rng(0)
    gp = rng.integers(0, 4, len(groups))
    p = expand(gp, groups, g.n_nodes)
    assert len(p) == 40
    for d, grp in zip(gp, groups):
        assert all(p[i] == d for i in grp)
    with pytest.raises(ValueError, match="13 groups"):
        expand(gp[:-1], groups, g.n_nodes)
    with pytest.raises(ValueError, match="in no group"):
        expand([0, 1], [(0,), (1,)], 3)
    with pytest.raises(ValueError, match="more than one group"):
        expand([0, 1], [(0, 1), (1,)], 2)


def test_node_validation():
    with pytest.raises(ValueError, match="not one of"):
        Node(0, "x", "conv", (1,), 0, 0, 0, 0, 0, 0, 0, 0, ())
    with pytest.raises(ValueError, match="earlier nodes"):
        Node(1, "x", "add", (1,), 0, 0, 0, 0, 0, 0, 0, 0, (1,))


def test_with_batch_equals_building_for_that_batch():
    from dataclasses import replace
    cfg = preset("49m")
    full = gpt_graph(cfg)
    for b in (1, 4, 8):
        direct = gpt_graph(replace(cfg, batch_size=b))
        scaled = full.with_batch(b)
        assert scaled.batch == b
        for x, y in zip(direct.nodes, scaled.nodes):
            assert x.out_shape == y.out_shape and x.out_bytes == y.out_bytes
            assert x.saved_bytes == y.saved_bytes and x.transient_bytes == y.transient_bytes
            for f in ("fwd_flops", "bwd_flops", "fwd_bytes", "bwd_bytes"):
                assert getattr(x, f) == pytest.approx(getattr(y, f), rel=1e-12)
    assert full.with_batch(16) == full
    with pytest.raises(ValueError, match="positive integer"):
        full.with_batch(0)


def test_json_round_trip():
    g = gpt_graph(preset("ci"))
    again = Graph.from_dict(json.loads(json.dumps(g.to_dict())))
    assert again == g


def test_crossing_edges_and_memory_estimate():
    g = gpt_graph(preset("49m"))
    one = (0,) * g.n_nodes
    assert crossing_edges(g, one) == ()
    # single device: states + every saved activation + the largest (output + transient)
    expected = (STATE_BYTES_PER_PARAM * g.params + sum(n.saved_bytes for n in g.nodes)
                + max(n.out_bytes + n.transient_bytes for n in g.nodes))
    assert peak_memory_estimate(g, one, 1) == (expected,)
    # moving only the loss off the head's device copies the 823 MB logits
    p = (0,) * (g.n_nodes - 1) + (1,)
    assert crossing_edges(g, p) == ((g.n_nodes - 2, g.n_nodes - 1),)
    mem = peak_memory_estimate(g, p, 2)
    loss = g.nodes[-1]
    assert mem[1] == loss.saved_bytes + 823_410_688 + loss.out_bytes + loss.transient_bytes
    with pytest.raises(ValueError, match="divide the batch"):
        peak_memory_estimate(g, one, 1, n_micro=3)
    with pytest.raises(ValueError, match="39 entries"):
        crossing_edges(g, one[:-1])
