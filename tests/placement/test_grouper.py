"""The hierarchical placer: the grouper's log-probabilities are part of the policy gradient."""

import pytest
import torch

from lib.gpt import gpt_graph, preset
from lib.placement.grouper import HierarchicalPlacer


@pytest.fixture(scope="module")
def graph():
    return gpt_graph(preset("ci"))


def _policy(graph, seed=0):
    torch.manual_seed(seed)
    return HierarchicalPlacer(graph, n_devices=4, n_groups=5, hidden=16, op_embed=4, dev_embed=4)


def test_samples_are_node_placements_with_joint_log_probabilities(graph):
    pol = _policy(graph)
    s = pol.sample(3, torch.Generator().manual_seed(0))
    assert s.actions.shape == (3, len(graph.nodes)) and int(s.actions.max()) < 4
    for k in range(3):
        groups = pol.last_groups[k].tolist()
        assert len(set(groups)) <= 5
        # every node of a group sits on one device
        for g in set(groups):
            assert len({int(s.actions[k, i]) for i in range(len(groups)) if groups[i] == g}) == 1
        rows = pol.last_rows[k].tolist()
        assert pol.log_prob_of(groups, rows).item() == pytest.approx(s.log_prob[k].item(), abs=1e-5)


def test_the_grouper_gets_a_gradient_from_the_policy_loss(graph):
    pol = _policy(graph, seed=1)
    s = pol.sample(4, torch.Generator().manual_seed(2))
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    (adv * s.log_prob).mean().backward()
    g_grouper = sum(float(p.grad.abs().sum()) for p in pol.grouper.parameters())
    g_placer = sum(float(p.grad.abs().sum()) for p in pol.placer.parameters() if p.grad is not None)
    assert g_grouper > 0 and g_placer > 0


def test_greedy_is_a_node_placement(graph):
    pol = _policy(graph)
    fav = pol.greedy()
    assert len(fav) == len(graph.nodes) and all(0 <= d < 4 for d in fav)


def test_bad_group_count(graph):
    with pytest.raises(ValueError, match="n_groups 0"):
        HierarchicalPlacer(graph, 4, n_groups=0)
