"""Sharded data parallelism (SDP, ZeRO-3) for one layer: FSDP2's ``fully_shard``, or a hand-written fallback.

Both keep each rank's piece of the layer's TP shard, all-gather the full weights before use and return the
summed gradient to each piece, so a plan's result is the same whichever runs. ``"fsdp2"`` is PyTorch's own
(``torch.distributed.fsdp.fully_shard``: per-parameter DTensor shards, re-gathered for backward, gradients
reduce-scattered). ``"manual"`` is one flat piece gathered with ``all_gather`` and summed back with
``all_reduce`` (same traffic as FSDP2's all-gather + all-gather + reduce-scatter, and no collective older gloo
builds lack). ``"auto"`` picks FSDP2 when this torch has it and the backend can reduce-scatter, which
``probe_fsdp2`` checks once per process with a real two-element collective.
Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.utils.checkpoint

from .memory import mark_gathered, region

SDP_IMPLS = ("auto", "fsdp2", "manual")
_PROBED: dict = {}


def probe_fsdp2() -> bool:
    """True if ``fully_shard`` imports and the default group has what FSDP2 calls: ``all_gather_into_tensor``
    and a summing ``reduce_scatter_tensor`` (gloo has no PREMUL_SUM, so there FSDP2 must also be able to force
    plain sums). Collective: every rank must call it; the answer is cached per process."""
    if "ok" not in _PROBED:
        try:
            from torch.distributed.fsdp import FSDPModule, fully_shard  # noqa: F401  (torch >= 2.6)

            gloo = dist.get_backend() == "gloo"
            if gloo and not hasattr(FSDPModule, "set_force_sum_reduction_for_comms"):
                raise NotImplementedError("this FSDP2 would reduce with PREMUL_SUM, which gloo lacks")
            ws = dist.get_world_size()
            dev = "cuda" if dist.get_backend() == "nccl" else "cpu"
            out = torch.empty(1, device=dev)
            rs = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor  # renamed in 2.12
            rs(out, torch.ones(ws, device=dev))
            gathered = torch.empty(ws, device=dev)
            ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # renamed too;
            ag(gathered, out)  # the old name warns (FutureWarning) in every spawned rank
            _PROBED["ok"] = bool(gathered.sum().item() == ws * ws)
        except (ImportError, RuntimeError, NotImplementedError, AttributeError, ValueError):
            _PROBED["ok"] = False
    return _PROBED["ok"]


def resolve_sdp_impl(impl: str) -> str:
    """``"fsdp2"`` or ``"manual"`` for a requested ``impl``; a clear error for anything else or an impossible
    request (collective when ``impl`` is ``"auto"`` or ``"fsdp2"``)."""
    if impl not in SDP_IMPLS:
        raise ValueError(f"sdp_impl must be one of {SDP_IMPLS}; got {impl!r}")
    if impl == "manual":
        return impl
    ok = probe_fsdp2()
    if impl == "fsdp2" and not ok:
        raise ValueError(f"sdp_impl='fsdp2' needs torch.distributed.fsdp.fully_shard (torch >= 2.6) and a backend "
                         f"with reduce_scatter_tensor; this is torch {torch.__version__} on "
                         f"{dist.get_backend()}. Use sdp_impl='manual' or 'auto'.")
    return "fsdp2" if ok else "manual"


class GatherShard(torch.autograd.Function):
    """Hand-written SDP: all-gather a flat parameter piece forward; all-reduce, keep own chunk backward."""

    @staticmethod
    def forward(ctx, piece, group, n, index):
        ctx.group, ctx.n, ctx.index = group, n, index
        piece = piece.detach().contiguous()
        with region("comm"):
            out = [torch.empty_like(piece) for _ in range(n)]
        dist.all_gather(out, piece, group=group)
        full = torch.cat(out)
        mark_gathered([full])
        return full

    @staticmethod
    def backward(ctx, g):
        with region("comm"):
            g = g.contiguous().clone()
        dist.all_reduce(g, group=ctx.group)
        k = g.numel() // ctx.n
        return g[ctx.index * k:(ctx.index + 1) * k].clone(), None, None, None


class ManualShard:
    """One flat piece (``index`` of ``n``, zero-padded) of the weights ``shard``; ``run(x)`` gathers them.

    Between a micro-batch's forward and its backward, autograd keeps the gathered weights (like FSDP2 with
    ``reshard_after_forward=False``), so with several micro-batches in flight this fallback holds more than
    ZeRO-3's memory; with ``ckpt`` only the piece is kept and the gather is redone in backward."""

    def __init__(self, shard: dict, names, fn, group, n: int, index: int, dev, ckpt: bool):
        self.fn, self.group, self.n, self.index, self.ckpt = fn, group, n, index, ckpt
        self.shapes = [(k, shard[k].shape) for k in names]
        flat = torch.cat([shard[k].reshape(-1) for k in names])
        flat = torch.cat([flat, flat.new_zeros((-flat.numel()) % n)])
        self.piece = torch.nn.Parameter(flat.chunk(n)[index].clone().to(dev))
        self.params = [self.piece]

    def weights(self) -> dict:
        flat = GatherShard.apply(self.piece, self.group, self.n, self.index)
        out, off = {}, 0
        for k, shape in self.shapes:
            out[k] = flat[off:off + shape.numel()].view(shape)
            off += shape.numel()
        return out

    def _run(self, x):
        return self.fn(x, self.weights())

    def run(self, x):
        if self.ckpt:  # recompute, gather included, during backward
            return torch.utils.checkpoint.checkpoint(self._run, x, use_reentrant=False)
        return self._run(x)

    def full(self) -> dict:
        with torch.no_grad():
            return {k: v.detach().clone() for k, v in self.weights().items()}


class _Weights(torch.nn.Module):
    """The weights of one layer as a module, so that ``fully_shard`` can own them."""

    def __init__(self, shard: dict, names, fn, ckpt: bool):
        super().__init__()
        self.names, self.fn, self.ckpt = tuple(names), fn, ckpt
        for k in self.names:
            self.register_parameter(k, torch.nn.Parameter(shard[k].clone().contiguous()))

    def _run(self, x):  # inside FSDP2's forward (or its backward re-gather) the attributes are the full weights
        w = {k: getattr(self, k) for k in self.names}
        mark_gathered(w.values())
        return self.fn(x, w)

    def forward(self, x):
        if self.ckpt:
            return torch.utils.checkpoint.checkpoint(self._run, x, use_reentrant=False)
        return self._run(x)


class Fsdp2Shard:
    """The weights ``shard`` under FSDP2 over ``group``: gathered in forward and again for backward, gradients
    reduce-scattered and summed (not averaged: the loss is already normalised by the global token count)."""

    def __init__(self, shard: dict, names, fn, group, dev, ckpt: bool):
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.fsdp import fully_shard

        self.mod = _Weights({k: v.to(dev) for k, v in shard.items()}, names, fn, ckpt)
        mesh = DeviceMesh.from_group(group, device_type=torch.device(dev).type)
        fully_shard(self.mod, mesh=mesh, reshard_after_forward=True)
        self.mod.set_gradient_divide_factor(1.0)  # sum, as DP's all-reduce does
        if hasattr(self.mod, "set_force_sum_reduction_for_comms"):  # else a PREMUL_SUM, which gloo lacks
            self.mod.set_force_sum_reduction_for_comms(True)
        self.params = list(self.mod.parameters())

    def run(self, x):
        return self.mod(x)

    def full(self) -> dict:
        """The full weights (a collective over the SDP group)."""
        with torch.no_grad():
            return {k: getattr(self.mod, k).full_tensor().detach().clone() for k in self.mod.names}


def make_shard(impl: str, shard: dict, names, fn, group, n: int, index: int, dev, ckpt: bool):
    """SDP holder for a resolved ``impl`` (``"fsdp2"`` or ``"manual"``)."""
    if impl == "fsdp2":
        return Fsdp2Shard(shard, names, fn, group, dev, ckpt)
    return ManualShard(shard, names, fn, group, n, index, dev, ckpt)
