"""Sharded AdamW by hand: the model stays on one device, its optimizer's state and update are split over all.

The write-up's winning placements spread the model over GPUs, and with it the AdamW step: each GPU updates only
the parameters it holds. Its closing caveat asks whether a sharded optimizer would win as much without moving
the model. This is that human baseline, ZeRO stage 1 written out: the parameters are dealt to ``devices`` in
balanced shards (largest first, each to the least loaded device: ``shard_assignment``); each shard's owner holds
a master copy and the AdamW moments. A step copies each shard's gradients to its owner, runs AdamW there, and
copies the updated parameters back to the model's device. The arithmetic is plain AdamW's, parameter by
parameter, so the updated parameters equal ``torch.optim.AdamW``'s (tested on CPU logical devices).
Used in: Part I, chapter 4 ("Then break it"), as the executor's ``optimizer="sharded"``.
"""

from __future__ import annotations

from typing import Sequence

import torch


def shard_assignment(numels: Sequence[int], n_devices: int) -> tuple[int, ...]:
    """Owner device of each parameter: largest first, each to the device with the fewest elements so far
    (ties to the lower index). Deterministic; every device gets a shard when there are enough parameters."""
    if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
        raise ValueError(f"n_devices {n_devices!r}: must be an integer >= 1")
    load = [0] * n_devices
    owner = [0] * len(numels)
    for i in sorted(range(len(numels)), key=lambda i: (-int(numels[i]), i)):
        d = min(range(n_devices), key=lambda j: (load[j], j))
        owner[i] = d
        load[d] += int(numels[i])
    return tuple(owner)


class ShardedAdamW:
    """AdamW over ``params`` (all on one device) with state and update on ``devices``; ``step()``, ``zero_grad()``.

    ``owners[i]`` is parameter i's device index (``shard_assignment`` of the sizes by default)."""

    def __init__(self, params, devices: Sequence, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, owners: Sequence[int] | None = None):
        self.params = [p for p in params if p.requires_grad]
        self.devices = [torch.device(d) for d in devices]
        if not self.devices:
            raise ValueError("devices is empty; give at least one torch device")
        self.owners = tuple(owners) if owners is not None else shard_assignment(
            [p.numel() for p in self.params], len(self.devices))
        if len(self.owners) != len(self.params) or not all(0 <= o < len(self.devices) for o in self.owners):
            raise ValueError(f"owners: need one device index in 0..{len(self.devices) - 1} per parameter")
        self.masters: list[list[torch.Tensor]] = [[] for _ in self.devices]
        self.index: list[list[int]] = [[] for _ in self.devices]
        for i, (p, o) in enumerate(zip(self.params, self.owners)):
            self.masters[o].append(p.detach().to(self.devices[o], copy=True).requires_grad_())
            self.index[o].append(i)
        self.opts = [torch.optim.AdamW(m, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay) if m else None
                     for m in self.masters]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        for d, opt in enumerate(self.opts):
            if opt is None:
                continue
            for m, i in zip(self.masters[d], self.index[d]):  # gradients to the shard's owner
                g = self.params[i].grad
                m.grad = None if g is None else g.to(self.devices[d], copy=True)
            opt.step()  # AdamW on the owner
            for m, i in zip(self.masters[d], self.index[d]):  # updated parameters back to the model's device
                self.params[i].copy_(m.to(self.params[i].device))

    def state_bytes(self) -> list[int]:
        """Bytes of master copies and moments held on each device (after the first step)."""
        out = []
        for d, opt in enumerate(self.opts):
            n = sum(m.numel() * m.element_size() for m in self.masters[d])
            if opt is not None:
                n += sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                         if torch.is_tensor(t) and t.ndim > 0)
            out.append(n)
        return out
