"""The hierarchical placer of Mirhoseini et al. (2018): a grouper learns the co-location groups.

Chapter 3 groups nodes by a fixed rule (``lib.graph.colocation_groups``). The 2018 paper learns them instead:
a *grouper*, a feed-forward network over each node's features (the placer's own: op type, output shape,
adjacency), gives every node a softmax over ``n_groups`` groups and samples one; the *placer* (``Placer``, the
seq2seq of chapter 2) then places the groups. Both are one policy: a placement's log-probability is the
grouper's (the sum over nodes) plus the placer's (the sum over groups), and one policy gradient trains both.

Per sample, the groups are whatever the grouper drew: the placer reads the features of each non-empty group
(``PlacerInputs.from_graph`` over those groups, in group-index order) in rows 0..m-1 and zeros in the rest, and
places all ``n_groups`` rows (an empty group's device places nothing, as in the 2018 code, which places every
group). ``sample(k)`` therefore decodes K times, one grouping each. Used in: Part I, chapter 4.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from lib.placement.placer import Placer, PlacerInputs, Samples


class HierarchicalPlacer(nn.Module):
    """Grouper + placer, with the placer's interface: ``sample(k, generator)``, ``greedy()``, per-node actions.

    ``last_groups`` holds the group of every node of each sample of the latest ``sample`` call, (K, n_nodes), and
    ``last_rows`` the device of each of the placer's rows, (K, n_groups).
    """

    def __init__(self, graph, n_devices: int, n_groups: int = 16, grouper_hidden: int = 64, **placer_kwargs):
        super().__init__()
        if isinstance(n_groups, bool) or not isinstance(n_groups, int) or n_groups < 1:
            raise ValueError(f"n_groups {n_groups!r}: must be an integer >= 1")
        self.graph = graph
        nodes = PlacerInputs.from_graph(graph)
        self.n_nodes, self.n_groups = nodes.n_items, int(n_groups)
        feats = np.concatenate([nodes.op_mix, nodes.numeric], axis=1)
        self.register_buffer("node_feats", torch.tensor(feats, dtype=torch.float32), persistent=False)
        self.grouper = nn.Sequential(nn.Linear(feats.shape[1], grouper_hidden), nn.ReLU(),
                                     nn.Linear(grouper_hidden, self.n_groups))
        self._blank = PlacerInputs(nodes.op_types, np.zeros((self.n_groups, nodes.op_mix.shape[1])),
                                   np.zeros((self.n_groups, nodes.numeric.shape[1])), ("",) * self.n_groups)
        self.placer = Placer(self._blank, n_devices, **placer_kwargs)
        self.n_devices = self.placer.n_devices
        self.last_groups = self.last_rows = None

    def group_logits(self) -> torch.Tensor:
        return self.grouper(self.node_feats)  # (n_nodes, n_groups)

    def group_inputs(self, assignment) -> tuple[torch.Tensor, torch.Tensor]:
        """The placer's (op_mix, numeric) rows for one grouping (node -> group index)."""
        a = [int(g) for g in assignment]
        used = sorted(set(a))
        groups = [tuple(i for i in range(self.n_nodes) if a[i] == g) for g in used]
        feats = PlacerInputs.from_graph(self.graph, groups)
        op_mix = np.zeros_like(self._blank.op_mix)
        numeric = np.zeros_like(self._blank.numeric)
        op_mix[: len(used)], numeric[: len(used)] = feats.op_mix, feats.numeric
        return torch.tensor(op_mix, dtype=torch.float32), torch.tensor(numeric, dtype=torch.float32)

    def _with_groups(self, assignment):
        self.placer.op_mix, self.placer.numeric = self.group_inputs(assignment)
        return sorted(set(int(g) for g in assignment))

    def node_devices(self, assignment, row_devices) -> tuple[int, ...]:
        """Per-node devices: node i goes where the placer put its group's row."""
        row_of = {g: r for r, g in enumerate(sorted(set(int(g) for g in assignment)))}
        return tuple(int(row_devices[row_of[int(g)]]) for g in assignment)

    def sample(self, k: int, generator: torch.Generator | None = None) -> Samples:
        if k < 1:
            raise ValueError(f"k (samples per update) must be >= 1; got {k}")
        logp_nodes = torch.log_softmax(self.group_logits(), dim=-1)
        probs = logp_nodes.exp().detach()
        actions, logps, ents, groups, rows = [], [], [], [], []
        for _ in range(k):
            g = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (n_nodes,)
            g_logp = logp_nodes.gather(1, g.unsqueeze(1)).sum()
            g_ent = -(logp_nodes.exp() * logp_nodes).sum()
            self._with_groups(g.tolist())
            s = self.placer.sample(1, generator)
            actions.append(self.node_devices(g.tolist(), s.actions[0].tolist()))
            logps.append(g_logp + s.log_prob[0])
            ents.append(g_ent + s.entropy[0])
            groups.append(g.tolist())
            rows.append(s.actions[0].tolist())
        self.last_groups, self.last_rows = torch.tensor(groups), torch.tensor(rows)
        return Samples(actions=torch.tensor(actions, dtype=torch.long), log_prob=torch.stack(logps),
                       entropy=torch.stack(ents))

    def log_prob_of(self, assignment, row_devices) -> torch.Tensor:
        """log π(groups) + log π(devices | groups) of one grouping and its rows' devices (for checks)."""
        logp_nodes = torch.log_softmax(self.group_logits(), dim=-1)
        g = torch.as_tensor(list(assignment), dtype=torch.long)
        self._with_groups(g.tolist())
        return logp_nodes.gather(1, g.unsqueeze(1)).sum() + self.placer.evaluate([list(row_devices)]).log_prob[0]

    def evaluate_latent(self, groups, rows) -> Samples:
        """Joint log-probabilities and entropies of K given groupings (K, n_nodes) and row devices (K, n_groups)
        under the current weights (PPO re-scores a batch with this)."""
        logp_nodes = torch.log_softmax(self.group_logits(), dim=-1)
        g_ent = -(logp_nodes.exp() * logp_nodes).sum()
        logps, ents = [], []
        for g, r in zip(torch.as_tensor(groups).tolist(), torch.as_tensor(rows).tolist()):
            self._with_groups(g)
            s = self.placer.evaluate([r])
            logps.append(logp_nodes.gather(1, torch.tensor(g).unsqueeze(1)).sum() + s.log_prob[0])
            ents.append(g_ent + s.entropy[0])
        return Samples(actions=torch.tensor([self.node_devices(g, r) for g, r in
                                             zip(torch.as_tensor(groups).tolist(), torch.as_tensor(rows).tolist())]),
                       log_prob=torch.stack(logps), entropy=torch.stack(ents))

    @torch.no_grad()
    def greedy(self) -> tuple[int, ...]:
        g = self.group_logits().argmax(dim=-1).tolist()
        self._with_groups(g)
        return self.node_devices(g, self.placer.greedy())
