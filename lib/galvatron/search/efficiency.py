"""Compute efficiency of a GPU as a function of the matrix shapes it multiplies.

Large-model matmuls reach a fraction of the datasheet peak that grows with the matrices' size: wider
layers have higher arithmetic intensity (Megatron-LM's README on its H100 weak-scaling table: MFU grows from
41% for the smallest model to 47-48% for the largest, "because larger GEMMs have higher arithmetic
intensity"), and the memory-bound work around them (norms, activations, residuals: bytes in proportion to
``h`` per token against FLOPs in proportion to ``h^2``) weighs less. We model the achieved fraction of one
Transformer layer's FLOPs as

    eff(h) = peak_fraction * h / (h + knee),    h = the model's hidden size

with two constants per GPU type, ``peak_fraction`` and ``knee``, stored in ``data/hardware/gpus/<gpu>.json``
with the published runs they were fitted to (``fit`` below; the runs are listed in the file, and every other
run is held out). With ``shaped=False`` (the previous rule) the efficiency is the flat ``flat_fraction`` (0.7,
an uncalibrated assumption of ``data/hardware/``). Used in: ``cost.py`` (``step_estimate``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

GPU_DIR = Path(__file__).resolve().parents[3] / "data" / "hardware" / "gpus"


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type: datasheet figures and the two fitted efficiency constants (see the module docstring)."""

    name: str
    peak_flops: dict                  # dtype -> dense FLOP/s
    usable_mem_bytes: float
    nvlink_bw: float                  # bytes/s per direction per GPU, datasheet
    link_efficiency: float            # achievable fraction of NVLink and port bandwidth
    nvlink_latency_s: float
    port_latency_s: float
    flat_fraction: float              # the previous flat efficiency
    peak_fraction: float
    knee: float
    fitted_to: tuple = field(default_factory=tuple)
    attention_fraction: float = 0.5   # fused attention kernel's fraction of peak, quoted (not fitted)
    sms: int = 108                    # streaming multiprocessors (quantization.py), datasheet
    gemm_tile: tuple = (128, 128)     # output tile of one thread block (quantization.py)
    quantized: tuple = ()             # (peak_fraction, knee) fitted with wave quantization on; () = none

    def __post_init__(self):
        for f in ("usable_mem_bytes", "nvlink_bw", "peak_fraction", "flat_fraction"):
            if not getattr(self, f) > 0:
                raise ValueError(f"GpuSpec.{f} must be > 0; got {getattr(self, f)!r} ({self.name})")
        if not 0 < self.link_efficiency <= 1 or self.peak_fraction > 1:
            raise ValueError(f"GpuSpec {self.name}: link_efficiency and peak_fraction must be in (0, 1]")
        if not 0 < self.attention_fraction <= 1:
            raise ValueError(f"GpuSpec.attention_fraction must be in (0, 1]; got {self.attention_fraction!r} "
                             f"({self.name})")
        if isinstance(self.sms, bool) or not isinstance(self.sms, int) or self.sms < 1:
            raise ValueError(f"GpuSpec.sms must be an integer >= 1; got {self.sms!r} ({self.name})")
        if (not isinstance(self.gemm_tile, tuple) or len(self.gemm_tile) != 2
                or not all(isinstance(t, int) and t >= 1 for t in self.gemm_tile)):
            raise ValueError(f"GpuSpec.gemm_tile must be two integers >= 1; got {self.gemm_tile!r} ({self.name})")
        if self.knee < 0:
            raise ValueError(f"GpuSpec.knee must be >= 0; got {self.knee!r} ({self.name})")

    def flops(self, dtype: str) -> float:
        if dtype not in self.peak_flops:
            raise ValueError(f"GPU {self.name} has no {dtype} figure; it has {sorted(self.peak_flops)}")
        return float(self.peak_flops[dtype])


def gpu_names(data_dir=None) -> list[str]:
    return sorted(p.stem for p in Path(data_dir or GPU_DIR).glob("*.json"))


def load_gpu(name: str, data_dir=None) -> GpuSpec:
    """``data/hardware/gpus/<name>.json`` as a GpuSpec; ValueError listing the known names."""
    root = Path(data_dir or GPU_DIR)
    path = root / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"unknown gpu {name!r}; known: {gpu_names(root)}")
    with open(path) as f:
        d = json.load(f)
    e = d["efficiency"]
    return GpuSpec(name=d["name"], peak_flops={k: float(v) for k, v in d["peak_flops"].items()},
                   usable_mem_bytes=float(d["usable_mem_bytes"]), nvlink_bw=float(d["nvlink_bw_bytes_per_s"]),
                   link_efficiency=float(d["link_efficiency"]), nvlink_latency_s=float(d["nvlink_latency_s"]),
                   port_latency_s=float(d["port_latency_s"]), flat_fraction=float(d["flat_flops_efficiency"]),
                   peak_fraction=float(e["peak_fraction"]), knee=float(e["knee"]),
                   fitted_to=tuple(e["fitted_to"]), attention_fraction=float(d["attention_fraction"]),
                   sms=int(d["sms"]), gemm_tile=tuple(int(t) for t in d["gemm_tile"]),
                   quantized=_quantized(d))


def _quantized(d: dict) -> tuple:
    q = d.get("efficiency_wave_quantized")
    return () if q is None else (float(q["peak_fraction"]), float(q["knee"]))


def efficiency(gpu: GpuSpec, width: float, shaped: bool = True, quantized: bool = False) -> float:
    """Achieved fraction of peak for a layer of hidden size ``width``. ``quantized``: the constants fitted
    with wave quantization on (``efficiency_wave_quantized`` of the GPU's file; the plain ones if it has
    none), the rate before each GEMM's quantization factor (``quantization.py``)."""
    if not shaped:
        return gpu.flat_fraction
    p, k = gpu.quantized if quantized and gpu.quantized else (gpu.peak_fraction, gpu.knee)
    return p * width / (width + k)


#: The fit's bounds. A GEMM cannot run at the datasheet's peak: the largest bf16 GEMMs reach roughly 70-80%
#: of it, and a layer adds memory-bound work, so a peak fraction above 0.9 would mean the model charges too
#: much elsewhere (the grid's upper edge is a diagnostic, not a value to accept; tests check a fit is inside).
PEAK_BOUNDS = (0.30, 0.90)
KNEE_BOUNDS = (0.0, 6000.0)


def fit(objective) -> tuple[float, float, float]:
    """(peak_fraction, knee, objective value) minimising ``objective(peak_fraction, knee)``: a coarse grid
    (peak fraction over ``PEAK_BOUNDS`` in steps of 0.02, knee over ``KNEE_BOUNDS`` in steps of 250), then a
    fine one around its best (steps of 0.002 and 25), never past the bounds. Deterministic."""
    lo, hi = PEAK_BOUNDS
    p0, k0, _ = _grid(objective, np.round(np.arange(lo, hi + 1e-4, 0.02), 3),
                      np.arange(KNEE_BOUNDS[0], KNEE_BOUNDS[1] + 0.1, 250.0))
    peaks = np.round(np.arange(max(lo, p0 - 0.02), min(hi, p0 + 0.02) + 1e-9, 0.002), 3)
    knees = np.arange(max(KNEE_BOUNDS[0], k0 - 250), min(KNEE_BOUNDS[1], k0 + 250) + 0.1, 25.0)
    return _grid(objective, peaks, knees)


def at_edge(peak_fraction: float, knee: float) -> list[str]:
    """The bounds of the fit a fitted pair sits on (empty when it is inside)."""
    out = []
    if peak_fraction <= PEAK_BOUNDS[0] + 1e-9 or peak_fraction >= PEAK_BOUNDS[1] - 1e-9:
        out.append(f"peak_fraction {peak_fraction} on {PEAK_BOUNDS}")
    if knee <= KNEE_BOUNDS[0] + 1e-9 or knee >= KNEE_BOUNDS[1] - 1e-9:
        out.append(f"knee {knee} on {KNEE_BOUNDS}")
    return out


def _grid(objective, peaks, knees):
    best = None
    for k in knees:
        for p in peaks:
            v = objective(float(p), float(k))
            if best is None or v < best[2] - 1e-12:
                best = (float(p), float(k), float(v))
    return best
