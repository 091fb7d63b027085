"""Communication as small autograd functions: Megatron's f/g and Slice-Gather (SDP lives in ``sdp``).

Only collectives that gloo has are used: ``all_reduce`` and the list form of ``all_gather``. A ``group`` of
``None`` means a single rank, and every function is then the identity. Used in:
book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .grid import Layout
from .memory import region


def _all_reduce(x: torch.Tensor, group) -> torch.Tensor:
    if group is None:
        return x
    with region("comm"):
        x = x.contiguous().clone()
    dist.all_reduce(x, group=group)
    return x


def _all_gather(x: torch.Tensor, group, n: int) -> list[torch.Tensor]:
    x = x.contiguous()
    with region("comm"):
        out = [torch.empty_like(x) for _ in range(n)]
    dist.all_gather(out, x, group=group)
    return out


class CopyToTP(torch.autograd.Function):
    """Megatron ``f``: identity forward, all-reduce of the input gradient over the TP group backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, g):
        return _all_reduce(g, ctx.group), None


class ReduceFromTP(torch.autograd.Function):
    """Megatron ``g``: all-reduce of partial sums forward, identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce(x, group)

    @staticmethod
    def backward(ctx, g):
        return g, None


def _covers(families: list, src: Layout, dst: Layout, S: int):
    """First group family (a function j -> members) whose members' src atoms cover each rank's dst atoms."""
    for fam in families:
        if all(set(dst.atoms(j)) <= {a for k in fam(j) for a in src.atoms(k)} for j in range(S)):
            return fam
    raise AssertionError("the whole stage always covers")  # pragma: no cover


def plan_transition(src: Layout, dst: Layout, S: int):
    """How to move from ``src`` to ``dst``: a family of groups (``j -> members``); singleton groups = slice.

    Slice (no communication) when every rank already holds its new atoms; else all-gather inside the new
    layout's TP groups (the paper's Slice-Gather); else inside the whole stage.
    """
    return _covers([lambda j: (j,), dst.tp_group, lambda j: tuple(range(S))], src, dst, S)


def _gather_slice(x, j, src: Layout, dst: Layout, members, group, atom: int):
    """Rows of ``dst.atoms(j)`` assembled from the ``src`` pieces held by ``members`` (``atom`` rows each)."""
    pieces = [x] if len(members) == 1 else _all_gather(x, group, len(members))
    with region("comm"):
        return _assemble(pieces, j, src, dst, members, atom)


def _assemble(pieces, j, src: Layout, dst: Layout, members, atom: int):
    out = []
    for a in dst.atoms(j):
        for k, p in zip(members, pieces):
            held = src.atoms(k)
            if a in held:
                i = held.index(a)
                out.append(p[i * atom:(i + 1) * atom])
                break
    return torch.cat(out) if len(out) > 1 else out[0].clone()


class Transition(torch.autograd.Function):
    """Slice-Gather between two layouts of the same stage (batch along dim 0); the backward is the mirror."""

    @staticmethod
    def forward(ctx, x, j, src, dst, pool, atom):
        S = src.size
        fam_f, fam_b = plan_transition(src, dst, S), plan_transition(dst, src, S)
        ctx.args = (j, src, dst, pool, atom, fam_b)
        m = fam_f(j)
        return _gather_slice(x.detach(), j, src, dst, m, pool.get(m), atom)

    @staticmethod
    def backward(ctx, g):
        j, src, dst, pool, atom, fam_b = ctx.args
        m = fam_b(j)
        return _gather_slice(g.contiguous(), j, dst, src, m, pool.get(m), atom), None, None, None, None, None


def transition(x, j: int, src: Layout, dst: Layout, pool, atom: int):
    """Move activation ``x`` (this rank's rows in ``src``) to ``dst``; identity when the layouts agree."""
    if src == dst:
        return x
    return Transition.apply(x, j, src, dst, pool, atom)


def shard_rows(w: torch.Tensor, t: int, T: int, parts: int = 1) -> torch.Tensor:
    """Rows of TP rank ``t`` of ``T`` for a weight made of ``parts`` stacked blocks (3 for q, k, v)."""
    blocks = w.chunk(parts, dim=0)
    return torch.cat([b.chunk(T, dim=0)[t] for b in blocks], dim=0)


def shard_cols(w: torch.Tensor, t: int, T: int) -> torch.Tensor:
    return w.chunk(T, dim=1)[t]
