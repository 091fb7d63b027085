"""The real executor: one timed training step of the GPT with every node on its own device.

``TorchPlacementEnv.measure(placement)`` moves node ``i``'s parameters to ``devices[placement[i]]``, then runs
forward, backward and an AdamW step; activations are copied (``.to(device)``) on every edge that crosses
devices, and autograd copies their gradients back. Optimizer state lives on each parameter's device (one AdamW
per device, rebuilt when the placement changes; its state is created in the first warm-up step). The step
time is the median of ``timed`` steps after ``warmup`` steps (the write-up's 2 + 5), every device synchronised
before and after each step; with ``sync_phases`` also between forward, backward and optimizer (the write-up's
per-phase table, what ``evaluate.phase_timing`` switches on), which costs a multi-device step its overlap.
Weights keep training from measurement to measurement; timings do not depend on them.

Micro-batches (experiment B): the batch is split into ``n_micro`` equal micro-batches; all their forwards are
issued, then one backward over all of them, GPipe's fill and drain. The overlap between devices comes from
asynchronous CUDA execution: the host enqueues micro-batch 2 on the first device while the next device still
works on micro-batch 1. Each micro-batch's loss is divided by ``n_micro``, so the gradients are those of the
full-batch mean loss.

Optimizer (``optimizer``): ``"adamw"``, one AdamW per device over its nodes' parameters (the write-up's set-up),
or ``"sharded"``, the human baseline of chapter 4: AdamW's state and update dealt over *all* devices whatever the
placement (``lib.placement.sharded_adamw``: gradients to each shard's owner, the update there, parameters back).
The memory accounting does not model sharded state yet, so ``"sharded"`` refuses a ``mem_cap``.

Memory cap (experiment C): ``mem_cap`` is a fraction of each card, imposed on CUDA with
``torch.cuda.set_per_process_memory_fraction``. An out-of-memory error is caught, everything the step
allocated is freed and the placement is charged ``OOM_PENALTY_S``. On CPU the devices are *logical*: all are
``cpu``, so a crossing edge is a ``clone`` instead of a transfer, but the code path is the same. There, peak
memory is the simulator's accounted estimate (``lib.placement.memory``: ``peak_memory_estimate`` times
``ALLOC_OVERHEAD``; not a measurement), and with a ``mem_cap`` an injected budget check raises the same
``torch.cuda.OutOfMemoryError`` in the middle of the forward pass when a device's running total, accounted the
same way, exceeds ``mem_cap x cpu_capacity_bytes`` (a T4's usable memory from ``data/hardware/4xT4-pcie.json``
by default). So on CPU this executor and the simulator give the same out-of-memory verdicts, and the recovery
path is testable without a GPU. After an OOM the optimizer state, gradients and cached batches are dropped, young
garbage is collected (a full ``gc.collect()`` every 50 OOMs) and ``torch.cuda.empty_cache()`` runs.
Used in: Part I, chapters 1-3.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Sequence

import torch

from lib import hardware
from lib.book import measured
from lib.graph import peak_memory_estimate
from lib.gpt import GPTConfig, build_model, preset, random_batch
from lib.placement.env import PHASES, TIMED_STEPS, WARMUP_STEPS, Measurement, check_mem_cap, validate_placement
from lib.placement.memory import ALLOC_OVERHEAD, accounted_peak_bytes, cap_bytes, check_alloc_overhead, with_overhead
from lib.placement.sharded_adamw import ShardedAdamW

#: Capacity of one logical CPU "card" for ``mem_cap``: the memory PyTorch sees on a T4 (14.75 GiB), read from
#: the hardware profile the simulator uses, so that a ``mem_cap`` means the same bytes in both executors.
T4_VISIBLE_BYTES: int = hardware.load("4xT4-pcie").devices[0].usable_mem_bytes
#: The executor's optimizers (see the module doc).
OPTIMIZERS = ("adamw", "sharded")


def _indexed(d: torch.device) -> torch.device:
    """``cuda`` as ``cuda:<current>``, so that device comparisons (is this edge crossing?) are exact."""
    if d.type == "cuda" and d.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return d


class TorchPlacementEnv:
    """Implements :class:`lib.placement.env.PlacementEnv` by running real training steps with torch.

    cfg: a :class:`GPTConfig` or a preset name. devices: torch devices (``cuda:i``) or, on CPU, a list of
    ``cpu`` entries, one per logical device. lr: AdamW's learning rate. cpu_capacity_bytes: the logical card
    size on CPU that ``mem_cap`` is a fraction of. alloc_overhead: the allocator factor on the accounted
    memory on CPU (``lib.placement.memory.ALLOC_OVERHEAD``, as in the simulator).
    """

    def __init__(self, cfg: GPTConfig | str, devices: Sequence, n_micro: int = 1, mem_cap: float | None = None,
                 warmup: int = WARMUP_STEPS, timed: int = TIMED_STEPS, seed: int = 0, lr: float = 3e-4,
                 cpu_capacity_bytes: int = T4_VISIBLE_BYTES, alloc_overhead: float = ALLOC_OVERHEAD,
                 sync_phases: bool = False, optimizer: str = "adamw"):
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer {optimizer!r}: must be one of {OPTIMIZERS}")
        if optimizer == "sharded" and mem_cap is not None:
            raise ValueError("optimizer 'sharded' with a mem_cap: the memory accounting does not model sharded "
                             "optimizer state yet; use optimizer 'adamw' or no mem_cap")
        self.optimizer = optimizer
        self.cfg = preset(cfg) if isinstance(cfg, str) else cfg
        if not isinstance(self.cfg, GPTConfig):
            raise ValueError(f"cfg must be a GPTConfig or a preset name; got {cfg!r}")
        self.devices = [_indexed(torch.device(d)) for d in devices]
        if not self.devices:
            raise ValueError("devices is empty; give at least one torch device")
        kinds = {d.type for d in self.devices}
        if not kinds <= {"cpu", "cuda"} or len(kinds) > 1:
            raise ValueError(f"devices must be all 'cpu' (logical) or all 'cuda'; got {self.devices}")
        if mem_cap is not None and kinds == {"cuda"} and len(set(self.devices)) < len(self.devices):
            raise ValueError(f"mem_cap with logical devices that share a GPU ({self.devices}) would cap them "
                             "together, not each; give distinct GPUs")
        if int(n_micro) != n_micro or n_micro < 1 or self.cfg.batch_size % n_micro:
            raise ValueError(f"n_micro={n_micro!r} must be a positive divisor of the batch size {self.cfg.batch_size}")
        mem_cap = check_mem_cap(mem_cap)
        if warmup < 0 or timed < 1:
            raise ValueError(f"need warmup >= 0 and timed >= 1; got warmup={warmup}, timed={timed}")
        self.n_micro, self.mem_cap, self.warmup, self.timed, self.lr = int(n_micro), mem_cap, warmup, timed, lr
        self.sync_phases = bool(sync_phases)
        self.alloc_overhead = check_alloc_overhead(alloc_overhead)
        self.cuda = kinds == {"cuda"}
        self.model = build_model(self.cfg, seed)
        self.graph = self.model.graph
        self.n_nodes, self.n_devices = self.graph.n_nodes, len(self.devices)
        self.idx, self.targets = random_batch(self.cfg, seed)
        self.budget_bytes = None if (self.cuda or mem_cap is None) else cap_bytes(cpu_capacity_bytes, mem_cap)
        if self.cuda:
            for d in sorted({d.index or 0 for d in self.devices}):
                torch.cuda.set_per_process_memory_fraction(1.0 if mem_cap is None else mem_cap, d)
        self.placement: tuple[int, ...] | None = None
        self.opts: list[torch.optim.Optimizer] = []
        self.last_loss: float | None = None
        self.n_oom = 0

    # --- the protocol ---------------------------------------------------------------------------------------

    def describe(self) -> str:
        if self.cuda:
            names = sorted({torch.cuda.get_device_name(d) for d in self.devices})
            where = f"{', '.join(str(d) for d in self.devices)} ({', '.join(names)})"
        else:
            where = f"cpu ({self.n_devices} logical devices; copies are clones, memory is an estimate)"
        extra = f", batch {self.cfg.batch_size}x{self.cfg.block_size}"
        extra += f", {self.n_micro} micro-batches" if self.n_micro > 1 else ""
        extra += f", memory cap {self.mem_cap:g}" if self.mem_cap is not None else ""
        extra += ", sharded AdamW" if self.optimizer == "sharded" else ""
        return measured(where) + f" [GPT {self.cfg.name}{extra}]"

    def measure(self, placement: Sequence[int]) -> Measurement:
        """Time one training step under ``placement``; an out-of-memory placement is charged ``OOM_PENALTY_S``."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        try:
            result = self._measure(p)
        except torch.cuda.OutOfMemoryError:
            result = None  # the traceback, and the activations its frames hold, die at the end of this block
        if result is None:
            self.n_oom += 1
            peaks = self._peaks(p)
            self._free()
            return Measurement.out_of_memory(self.n_devices, self.describe(), peaks)
        return result

    # --- also used by the tests -----------------------------------------------------------------------------

    def place(self, placement: Sequence[int]) -> None:
        """Move every node's parameters to its device and give each device a fresh AdamW over its parameters
        (or one sharded AdamW over all devices, with ``optimizer="sharded"``)."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        self.opts = []
        self.model.place([self.devices[d] for d in p])
        on: dict[int, list] = {}
        for d, mod in zip(p, self.model.nodes):
            on.setdefault(d, []).extend(mod.parameters())
        if self.optimizer == "sharded":
            self.opts = [ShardedAdamW(self.model.parameters(), self.devices, lr=self.lr)]
        else:
            self.opts = [torch.optim.AdamW(ps, lr=self.lr) for _, ps in sorted(on.items()) if ps]
        first, last = self.devices[p[0]], self.devices[p[-1]]
        self._micro = list(zip(self.idx.to(first).chunk(self.n_micro), self.targets.to(last).chunk(self.n_micro)))
        self._fixed = self._fixed_bytes(p) if self.budget_bytes is not None else None
        self.placement = p

    def forward_backward(self, placement: Sequence[int]) -> float:
        """One forward and backward pass (no optimizer step) under ``placement``; returns the full-batch loss and
        leaves the gradients in ``.grad`` (for correctness tests)."""
        self.place(placement)
        for o in self.opts:
            o.zero_grad(set_to_none=True)
        losses = self._forward()
        torch.autograd.backward(losses)
        return float(sum(x.detach().cpu() for x in losses))

    def train_step(self, placement: Sequence[int]) -> float:
        """One full training step (untimed); returns the loss before the update."""
        if self.placement != tuple(placement):
            self.place(placement)
        return self._step()[0]

    def estimated_peak_bytes(self, placement: Sequence[int]) -> tuple[int, ...]:
        """Per-device accounted peak of one step under ``placement`` (what a CPU measurement reports), in bytes."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        return accounted_peak_bytes(self.graph, p, self.n_devices, self.n_micro, self.alloc_overhead)

    def estimated_oom(self, placement: Sequence[int]) -> bool:
        """Whether the CPU budget check rejects ``placement`` (some device's accounted peak is over the budget),
        without running it. False without a cap. On CUDA the real allocator decides: ValueError."""
        if self.cuda:
            raise ValueError("estimated_oom is the CPU budget check's verdict; on CUDA devices call measure()")
        if self.budget_bytes is None:
            return False
        return max(self.estimated_peak_bytes(placement)) > self.budget_bytes

    # --- internals -----------------------------------------------------------------------------------------

    def _measure(self, p: tuple[int, ...]) -> Measurement:
        self.place(p)
        if self.cuda:
            for d in self._cuda_ids():
                torch.cuda.reset_peak_memory_stats(d)
        for _ in range(self.warmup):
            self._step()
        runs = [self._step() for _ in range(self.timed)]
        samples = tuple(sum(r[1].values()) for r in runs)
        phase_s = {ph: statistics.median(r[1][ph] for r in runs) for ph in PHASES}
        return Measurement(step_s=statistics.median(samples), oom=False, peak_mem_bytes=self._peaks(p),
                           phase_s=phase_s, source=self.describe(), samples_s=samples)

    def _forward(self) -> list:
        devs = [self.devices[d] for d in self.placement]
        self._running = [0] * self.n_devices
        self.model.after_node = self._check_budget if self.budget_bytes is not None else None
        return [self.model(idx, tgt, devs, self.placement) / self.n_micro for idx, tgt in self._micro]

    def set_sync_phases(self, flag: bool) -> None:
        """Switch the per-phase barriers on or off (see ``lib.placement.env.phases_synchronised``)."""
        self.sync_phases = bool(flag)

    def _step(self) -> tuple[float, dict]:
        """One step; every device is synchronised before and after it, and between phases only with
        ``sync_phases`` (otherwise a phase's time is the host's, and the last phase absorbs the wait)."""
        mark = self._sync if self.sync_phases else time.perf_counter
        t = [self._sync()]
        losses = self._forward()
        t.append(mark())
        torch.autograd.backward(losses)
        t.append(mark())
        for o in self.opts:
            o.step()
        for o in self.opts:
            o.zero_grad(set_to_none=True)
        t.append(self._sync())
        self.last_loss = float(sum(x.detach().cpu() for x in losses))
        return self.last_loss, {ph: t[k + 1] - t[k] for k, ph in enumerate(PHASES)}

    def _sync(self) -> float:
        if self.cuda:
            for d in self._cuda_ids():
                torch.cuda.synchronize(d)
        return time.perf_counter()

    def _cuda_ids(self) -> list[int]:
        return sorted({d.index or 0 for d in self.devices})

    def _check_budget(self, i: int) -> None:
        """The injected CPU memory check: states + copies + largest transient + saved activations so far, times
        the allocator overhead (the simulator's accounting, so both give the same verdicts)."""
        d = self.placement[i]
        self._running[d] += self.graph.nodes[i].saved_bytes // self.n_micro
        used = with_overhead(self._fixed[d] + self._running[d], self.alloc_overhead)
        if used > self.budget_bytes:
            raise torch.cuda.OutOfMemoryError(
                f"simulated out of memory on logical device {d}: {used} bytes > budget {self.budget_bytes} "
                f"(mem_cap {self.mem_cap}, allocator overhead {self.alloc_overhead:g})")

    def _fixed_bytes(self, p: tuple[int, ...]) -> list[int]:
        """Per device: ``peak_memory_estimate`` minus the saved activations (the overhead is applied later)."""
        est = peak_memory_estimate(self.graph, p, self.n_devices, self.n_micro)
        saved = [0] * self.n_devices
        for n in self.graph.nodes:
            saved[p[n.index]] += n.saved_bytes
        return [e - s for e, s in zip(est, saved)]

    def _peaks(self, p: tuple[int, ...]) -> tuple[int, ...]:
        """Per logical device: ``max_memory_allocated`` of its card on CUDA (logical devices sharing a card
        report the card's peak), the accounted estimate on CPU."""
        if self.cuda:
            return tuple(int(torch.cuda.max_memory_allocated(d)) for d in self.devices)
        return accounted_peak_bytes(self.graph, p, self.n_devices, self.n_micro, self.alloc_overhead)

    def _free(self) -> None:
        """After an out-of-memory error: drop optimizer state, gradients and cached batches, then the cache."""
        self.opts, self._micro, self.placement = [], [], None
        self.model.after_node = None
        for prm in self.model.parameters():
            prm.grad = None
        gc.collect(1)  # the failed step's garbage is young; a full pass (~0.1 s with torch loaded) every 50 OOMs
        if self.n_oom % 50 == 0:
            gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
