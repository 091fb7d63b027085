"""Switchable terms of the simulator: the mechanisms that could make splitting the optimizer's work pay.

The write-up's A result (the best RL placement beats every hand placement by about 7 %, all four runs keeping
the embedding and the output head away from the transformer body) is explained there by the optimizer step:
with the 39M embedding and head parameters on other GPUs, the AdamW updates run in parallel. The simulator's
base model (every term below switched off) gives that idea only 1.7 %. Each term here is one physically
argued effect that a real step on four T4s may have and the base model leaves out; each can be switched on
alone, and with every term off (``Mechanisms()``, the default) the simulator gives exactly its earlier numbers.

Terms (the constants next to them say where their values come from):

- ``adamw_impl``: the kernel sequence of the optimizer step. ``"foreach"`` (base): PyTorch's default
  multi-tensor AdamW, ~80 bytes of memory traffic per fp32 parameter in 8 launches per device.
  ``"foreach+clip"``: the same after ``clip_grad_norm_`` (a ``_foreach_norm`` read and a ``_foreach_mul_``
  rewrite of every gradient, +12 bytes per parameter, +2 launches) whose global norm is one number for all
  devices, so no device can start its update before every device's backward has finished (no overlap with a
  straggling device's backward). ``"fused"``: ``fused=True``, one kernel, ~28 bytes (read p, g, m, v; write p,
  m, v). ``"for-loop"``: ``foreach=False``, the same 80 bytes in 8 launches *per parameter tensor*, each issued
  by the host.
- ``adamw_overlap``: whether the devices' optimizer steps overlap (base: yes, the host issues them
  asynchronously). Off, each device's step waits for the previous device's to finish (a host synchronisation
  per device, as a ``.item()`` or a blocking copy inside the step would cause).
- ``adamw_bw_efficiency``: the fraction of the datasheet memory bandwidth the optimizer's elementwise kernels
  reach (None, base: the device's ``mem_bw_efficiency``).
- ``zero_grad``: ``"none"`` (base: ``zero_grad(set_to_none=True)``, PyTorch 2's default: no memset, the
  backward allocates fresh gradients) or ``"memset"`` (``set_to_none=False``: every gradient is zeroed at the
  start of the step, 4 bytes per parameter on its device).
- ``embedding_grad_zero``: the embedding's backward builds a dense vocabulary x width gradient, zero-filled
  before the scatter (``embedding_dense_backward``): +4 bytes per embedding parameter on its device.
- ``grad_alloc_host_s``: host time to allocate one gradient tensor through the caching allocator during
  backward (per parameter tensor).
- ``copy_blocks_host``: a GPU-to-GPU copy without peer access is staged through host memory, and the host
  waits for it (``cudaMemcpy`` through a pageable bounce buffer) instead of running ahead.
- ``power_boost``: T4s are capped at 70 W and run below their boost clock under sustained load. A device busy
  a fraction u of the step runs its compute ``1 - power_boost * (1 - u)`` times as long as at full load (the
  calibration of ``flops_efficiency`` is at u = 1, the single GPU). Two passes: the first measures each
  device's busy fraction, the second applies the factors.

``PRESETS`` names the combinations the book reports; :func:`describe` says in words what is on. Used in:
Part I, chapters 1 and 3, and ``lib.placement.calibration``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields, replace

ADAMW_IMPLS = ("foreach", "foreach+clip", "fused", "for-loop")
#: (bytes of memory traffic per fp32 parameter, kernel launches per device, launches per parameter tensor)
ADAMW_COSTS: dict[str, tuple[int, int, int]] = {
    "foreach": (80, 8, 0),
    "foreach+clip": (92, 10, 0),
    "fused": (28, 1, 0),
    "for-loop": (80, 0, 8),
}
ZERO_GRADS = ("none", "memset")
#: Parameter tensors of one node of each op type in ``lib/gpt.py`` (weights and biases), for per-tensor costs.
PARAM_TENSORS: dict[str, int] = {"embedding": 2, "layernorm": 2, "attention": 4, "add": 0, "mlp": 4,
                                 "head": 1, "loss": 0}


@dataclass(frozen=True)
class Mechanisms:
    """Which of the optional terms are on (all off: the base simulator). See the module docstring."""

    adamw_impl: str = "foreach"
    adamw_overlap: bool = True
    adamw_bw_efficiency: float | None = None
    zero_grad: str = "none"
    embedding_grad_zero: bool = False
    grad_alloc_host_s: float = 0.0
    copy_blocks_host: bool = False
    power_boost: float = 0.0

    def __post_init__(self):
        if self.adamw_impl not in ADAMW_IMPLS:
            raise ValueError(f"adamw_impl must be one of {ADAMW_IMPLS}; got {self.adamw_impl!r}")
        if self.zero_grad not in ZERO_GRADS:
            raise ValueError(f"zero_grad must be one of {ZERO_GRADS}; got {self.zero_grad!r}")
        for name in ("adamw_overlap", "embedding_grad_zero", "copy_blocks_host"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false; got {getattr(self, name)!r}")
        e = self.adamw_bw_efficiency
        if e is not None and (isinstance(e, bool) or not isinstance(e, numbers.Real) or not 0 < e <= 1):
            raise ValueError(f"adamw_bw_efficiency must be None or in (0, 1]; got {e!r}")
        for name, hi in (("grad_alloc_host_s", 1e-2), ("power_boost", 0.9)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or not 0 <= v <= hi:
                raise ValueError(f"{name} must be a number in [0, {hi}]; got {v!r}")

    @property
    def is_base(self) -> bool:
        return self == Mechanisms()

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Mechanisms":
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown mechanism {sorted(unknown)}; allowed: {sorted(names)}")
        return cls(**d)


#: One setting per mechanism, each alone (the calibration table's columns), with a physical value:
#: the clip adds the norm pass; "for-loop" is foreach=False; 0.55 of the datasheet bandwidth is what
#: unfused elementwise kernels reach on GDDR6 at small sizes (estimate); 2 us per gradient allocation
#: (estimate of one caching-allocator call); power_boost 0.25 = 1 - 1.2 GHz / 1.59 GHz (a T4 at its 70 W
#: cap under fp32 GEMMs, estimate; NVIDIA's datasheet gives the 1.59 GHz boost clock).
SINGLE_TERMS: dict[str, Mechanisms] = {
    "AdamW after clip_grad_norm_": Mechanisms(adamw_impl="foreach+clip"),
    "fused AdamW": Mechanisms(adamw_impl="fused"),
    "for-loop AdamW": Mechanisms(adamw_impl="for-loop"),
    "optimizer steps do not overlap": Mechanisms(adamw_overlap=False),
    "optimizer at 0.55 of peak bandwidth": Mechanisms(adamw_bw_efficiency=0.55),
    "gradients zeroed by memset": Mechanisms(zero_grad="memset"),
    "embedding gradient zero-filled": Mechanisms(embedding_grad_zero=True),
    "gradient allocation 2 us each": Mechanisms(grad_alloc_host_s=2e-6),
    "copies block the host": Mechanisms(copy_blocks_host=True),
    "power-limited clocks (0.25)": Mechanisms(power_boost=0.25),
}

PRESETS: dict[str, Mechanisms] = {"base": Mechanisms()}


def preset(name: str) -> Mechanisms:
    """A named combination (``PRESETS``); ValueError naming the allowed names otherwise."""
    if name not in PRESETS:
        raise ValueError(f"mechanisms must be one of {sorted(PRESETS)}; got {name!r}")
    return PRESETS[name]


def describe(m: Mechanisms) -> str:
    """The terms that are on, in words ("base model" when none)."""
    base = Mechanisms()
    on = [f"{f.name}={getattr(m, f.name)!r}" for f in fields(m) if getattr(m, f.name) != getattr(base, f.name)]
    return "base model" if not on else ", ".join(on)


def with_terms(m: Mechanisms, *others: Mechanisms) -> Mechanisms:
    """``m`` with every non-base field of ``others`` switched on too."""
    base = Mechanisms()
    changes = {}
    for o in others:
        for f in fields(o):
            if getattr(o, f.name) != getattr(base, f.name):
                changes[f.name] = getattr(o, f.name)
    return replace(m, **changes)
