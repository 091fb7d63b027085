"""Run a layer-wise hybrid plan on ``torch.distributed``: DP, SDP (ZeRO-3), Megatron TP, GPipe PP.

``StageRunner`` holds this rank's piece of the model: for every layer of its stage, the TP shard of that
layer, either replicated over the layer's DP group (DP: gradients all-reduced, overlapped with the backward of
the last micro-batch) or cut in ``dp`` flat pieces (SDP: parameters all-gathered before use, gradients summed
back into the piece). Between layers whose strategies differ, activations go through Slice-Gather
(``tp.transition``). Embedding and head are replicated over their stage. Every process group comes from one
``GroupPool`` built before the first step.

SDP uses FSDP2's ``fully_shard`` where this torch and backend support it (``sdp_impl="auto"``), else a
hand-written ZeRO-3 with the same result (``lib.galvatron.runtime.sdp``); the same code runs on gloo and NCCL.
Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.utils.checkpoint

from .grid import GroupPool, Layout, RankGrid, atoms_layout
from .model import (BLOCK_PARAMS, ModelConfig, block_forward, embed_forward, head_loss_sum, init_params,
                       make_batch, tp_shard)
from .memory import region
from .plan import RunPlan
from .sdp import make_shard, resolve_sdp_impl
from .tp import transition


class _Layer:
    """This rank's share of one block: a TP shard, replicated (DP) or cut into DP pieces (SDP, see ``sdp``)."""

    def __init__(self, full_block: dict, lay: Layout, sdp: bool, j: int, pool: GroupPool, n_head: int, dev,
                 ckpt: bool = False, sdp_impl: str = "manual"):
        self.lay, self.n_head_local, self.ckpt = lay, n_head // lay.tp, ckpt
        self.tp_group = pool.get(lay.tp_group(j))
        self.dp_members = lay.dp_group(j)
        self.dp_group = pool.get(self.dp_members)
        self.sdp = sdp and lay.dp > 1
        shard = tp_shard(full_block, lay.tp_rank(j), lay.tp)
        if self.sdp:
            self.shard = make_shard(sdp_impl, shard, BLOCK_PARAMS, self._block, self.dp_group, lay.dp,
                                    self.dp_members.index(j), dev, ckpt)
            self.params = self.shard.params
        else:
            self.p = {k: torch.nn.Parameter(v.clone().contiguous().to(dev)) for k, v in shard.items()}
            self.params = [self.p[k] for k in BLOCK_PARAMS]

    def _block(self, x, w: dict):
        return block_forward(x, w, self.n_head_local, self.tp_group)

    def _run(self, x):
        return self._block(x, self.p)

    def forward(self, x):
        if self.sdp:
            return self.shard.run(x)
        if self.ckpt:  # recompute (TP all-reduces included) during backward, same on every rank
            return torch.utils.checkpoint.checkpoint(self._run, x, use_reentrant=False)
        return self._run(x)

    def full_shard(self) -> dict:
        """This rank's TP shard as tensors (gathers SDP pieces; collective over the DP group)."""
        if self.sdp:
            return self.shard.full()
        return {k: v.detach().clone() for k, v in self.p.items()}


class GradSync:
    """All-reduce (sum) of replicated gradients, one bucket per layer, launched as soon as a bucket's last
    gradient is final (during the last micro-batch's backward) so it overlaps the rest of the backward."""

    def __init__(self, buckets: list, overlap: bool):
        self.buckets = [(ps, g) for ps, g in buckets if g is not None and ps]
        self.overlap, self.armed, self.pending, self.count = overlap, False, [], {}
        if overlap:
            for b, (ps, _) in enumerate(self.buckets):
                for p in ps:
                    p.register_post_accumulate_grad_hook(lambda p, b=b: self._ready(b))

    def arm(self):
        self.armed, self.pending, self.count = True, [], {}

    def _ready(self, b):
        if not self.armed:
            return
        self.count[b] = self.count.get(b, 0) + 1
        if self.count[b] == len(self.buckets[b][0]):
            self._launch(b, async_op=True)

    def _launch(self, b, async_op):
        ps, g = self.buckets[b]
        with region("comm"):  # the bucket: a second copy of these gradients until ``finish``
            flat = torch.cat([p.grad.reshape(-1) for p in ps])
        work = dist.all_reduce(flat, group=g, async_op=async_op)
        self.pending.append((work, flat, ps))

    def finish(self):
        if not self.overlap or len(self.pending) != len(self.buckets):
            done = {id(ps) for _, _, ps in self.pending}
            for b, (ps, _) in enumerate(self.buckets):
                if id(ps) not in done:
                    self._launch(b, async_op=False)
        for work, flat, ps in self.pending:
            if work is not None:
                work.wait()
            off = 0
            for p in ps:
                n = p.numel()
                p.grad.copy_(flat[off:off + n].view_as(p))
                off += n
        self.armed, self.pending = False, []


class StageRunner:
    """This rank's stage of ``plan`` for model ``cfg``: forward of one micro-batch, grads, optimizer step."""

    def __init__(self, plan: RunPlan, cfg: ModelConfig, rank: int, seed: int = 0, lr: float = 0.1,
                 optimizer: str = "sgd", overlap: bool = True, device: str = "cpu", pool: GroupPool | None = None,
                 sdp_impl: str = "auto"):
        plan.validate(cfg.n_head, cfg.n_layer, dist.get_world_size())
        opt = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}
        if optimizer not in opt:
            raise ValueError(f"optimizer must be one of {sorted(opt)}; got {optimizer!r}")
        uses_sdp = any(lay.sdp and lay.dp > 1 for lay in plan.layers)
        self.sdp_impl = resolve_sdp_impl(sdp_impl) if uses_sdp else None
        self.plan, self.cfg, self.rank, self.seed, self.dev = plan, cfg, rank, seed, torch.device(device)
        self.grid = RankGrid(plan.world_size, plan.pp)
        self.pool = pool or GroupPool(self.grid, rank)
        self.stage, self.j = self.grid.stage_of(rank), self.grid.index_in_stage(rank)
        self.first, self.last = self.stage == 0, self.stage == plan.pp - 1
        S = self.grid.stage_size
        self.mb = plan.global_bsz // plan.chunks
        self.atom = self.mb // S
        full = init_params(cfg, seed)
        self.layer_ids = list(plan.stage_layers(self.stage))
        self.layers = [_Layer(full["blocks"][i], Layout(plan.layers[i].tp, plan.layers[i].dp,
                                                        plan.layers[i].consecutive),
                              plan.layers[i].sdp, self.j, self.pool, cfg.n_head, self.dev, plan.layers[i].ckpt,
                              self.sdp_impl or "manual")
                       for i in self.layer_ids]
        self.embed = ({k: torch.nn.Parameter(v.clone().to(self.dev)) for k, v in full["embed"].items()}
                      if self.first else {})
        self.head = ({k: torch.nn.Parameter(v.clone().to(self.dev)) for k, v in full["head"].items()}
                     if self.last else {})
        other = list(self.embed.values()) + list(self.head.values())
        buckets = [(other, self.pool.stage_group())]
        buckets += [(L.params, L.dp_group) for L in self.layers if not L.sdp]
        self.sync = GradSync(buckets, overlap)
        self.params = other + [p for L in self.layers for p in L.params]
        # FSDP2's parameters are DTensors; the optimizer's foreach kernels do not mix them with plain tensors,
        # so they get their own parameter group (same update rule).
        sharded = [p for L in self.layers if L.sdp and self.sdp_impl == "fsdp2" for p in L.params]
        ids = {id(p) for p in sharded}
        groups = [{"params": [p for p in self.params if id(p) not in ids]}]
        if sharded:
            groups.append({"params": sharded})
        self.opt = opt[optimizer](groups, lr=lr)
        self.boundary_shape = (self.atom, cfg.seq_len, cfg.d_model)

    def _rows(self, t: torch.Tensor, m: int) -> torch.Tensor:
        """This rank's atom of micro-batch ``m`` (the embedding and head layout)."""
        start = m * self.mb + self.j * self.atom
        return t[start:start + self.atom].to(self.dev)

    def forward_micro(self, m: int, x_in, batch):
        """Stage forward of micro-batch ``m``: returns the boundary activation or, on the last stage, the loss
        share of this rank (already divided by the global token count)."""
        S = self.grid.stage_size
        cur = atoms_layout(S)
        x = embed_forward(self._rows(batch[0], m), self.embed) if self.first else x_in
        for L in self.layers:
            x = transition(x, self.j, cur, L.lay, self.pool, self.atom)
            x = L.forward(x)
            cur = L.lay
        x = transition(x, self.j, cur, atoms_layout(S), self.pool, self.atom)
        if not self.last:
            return x
        tgt = self._rows(batch[1], m)
        return head_loss_sum(x, tgt, self.head) / batch[1].numel()

    def make_batch(self, step: int):
        return make_batch(self.cfg, self.plan.global_bsz, self.seed, step)

    def step_optimizer(self):
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)

    def local_shards(self) -> dict:
        """What this rank holds, as full TP shards per layer id (SDP gathered), plus embed/head."""
        out = {"blocks": {i: L.full_shard() for i, L in zip(self.layer_ids, self.layers)}}
        out["embed"] = {k: v.detach().clone() for k, v in self.embed.items()}
        out["head"] = {k: v.detach().clone() for k, v in self.head.items()}
        return out
