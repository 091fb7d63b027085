"""Collectives at scale as data: the achieved bus bandwidth of GPU fabrics from published nccl-tests runs
(``data/hardware/fabrics/fabrics.json``, every point with its source).

``port_fraction(fabric, nodes)``: a NIC's achieved all-reduce bus bandwidth over its line rate when a
collective spans ``nodes`` nodes, piecewise linear in log2(nodes) between the published points and flat
beyond them (at one node the fabric is not used: 1); two-node figures of NCCL's tree algorithm exceed the
line rate and are capped at 1. ``fraction_points(fabric, "gather")``: the same for all-gather and
reduce-scatter, from the fabric's ``gather_points`` where its source measured them apart (otherwise its
all-reduce points). ``nvlink_allreduce_bw(gpu)``: the bus bandwidth of an all-reduce over one 8-GPU node
(bytes/s). ``fabric_for(gpu)``: the fabric a job on that GPU type is priced on when it states none (the
file says why each default).

``port_gb_s_per_gpu(fabric)``: the line rate of a node's NICs shared by its GPUs; ``port_for(gpu, fabric)``:
that of the stated fabric, else of the GPU type's default one (the port of a job that states none).

``shortfall(fabric)``: what the points lose below the line rate is, as the file says: ``"bandwidth"`` (the
default; the fractions above apply to every message) or ``"latency"`` (points of one ``message_bytes(fabric)``
message, whose loss ``cost.latency_network`` turns into a per-step ring latency: the port then runs at the
fewest-nodes fraction). ``busbw_points(fabric, kind)``: the points as published, nccl-tests' bus bandwidth of
one rank in bytes/s. ``rules.fabric_reading`` may override the file's reading (a what-if).

Used by ``cost.network_of`` for a job that states its fabric (``Job.fabric``, a runs file's
``cluster.fabric``, ``plan --fabric``), and for every job under ``rules.measured_collectives`` (a candidate:
off in every preset), which also prices an inter-node all-reduce's latency as NCCL's tree does
(2 ceil(log2 nodes) hops, not the ring's 2 (nodes - 1)); ``collectives.group_s`` reads the fields this sets
on its ``Network``.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

FABRICS = Path(__file__).resolve().parents[3] / "data" / "hardware" / "fabrics" / "fabrics.json"


@lru_cache(maxsize=4)
def _load(path: str = str(FABRICS)) -> dict:
    with open(path) as f:
        return json.load(f)


def fabric_names() -> list[str]:
    return sorted(_load()["fabrics"])


def _fabric(fabric: str) -> dict:
    fabs = _load()["fabrics"]
    if fabric not in fabs:
        raise ValueError(f"unknown fabric {fabric!r}; known: {fabric_names()}")
    return fabs[fabric]


def _points(fabric: str, kind: str) -> tuple:
    """(the fabric's entry, its points of ``kind``): ``all-reduce`` (its ``points``) or ``gather`` (its
    ``gather_points`` where it has them, else its ``points``)."""
    if kind not in ("all-reduce", "gather"):
        raise ValueError(f"kind must be 'all-reduce' or 'gather'; got {kind!r}")
    f = _fabric(fabric)
    return f, (f.get("gather_points") if kind == "gather" else None) or f["points"]


def _nics(f: dict) -> int:
    """NICs of one node (``nics_per_node``; one per GPU where the file does not say)."""
    return int(f.get("nics_per_node", f.get("gpus_per_node", 8)))


def fraction_points(fabric: str, kind: str = "all-reduce") -> tuple:
    """((nodes, fraction of line rate), ...) of ``fabric``, sorted by nodes, each fraction capped at 1.
    ``kind``: ``all-reduce`` (its ``points``) or ``gather`` (its ``gather_points`` where it has them)."""
    f, pts = _points(fabric, kind)
    line = float(f["line_rate_gb_s_per_nic"])
    return tuple(sorted((int(p["nodes"]), min(1.0, float(p["busbw_gb_s_per_nic"]) / line)) for p in pts))


def port_gb_s_per_gpu(fabric: str) -> float:
    """GB/s per GPU between nodes: the line rate of a node's NICs (``nics_per_node``) shared by its GPUs
    (``gpus_per_node``, 8 where the file does not say; one NIC per GPU where it does not say either). A job
    on fewer GPUs than a node still runs on the node's hardware."""
    f = _fabric(fabric)
    return float(f["line_rate_gb_s_per_nic"]) * _nics(f) / int(f.get("gpus_per_node", 8))


def interpolate(points: tuple, nodes: int) -> float:
    """The fraction at ``nodes`` from ``points`` (see the module docstring): 1 at one node."""
    if nodes <= 1 or not points:
        return 1.0
    if nodes <= points[0][0]:
        return points[0][1]
    if nodes >= points[-1][0]:
        return points[-1][1]
    for (n0, f0), (n1, f1) in zip(points, points[1:]):
        if n0 <= nodes <= n1:
            t = (math.log2(nodes) - math.log2(n0)) / (math.log2(n1) - math.log2(n0))
            return f0 + t * (f1 - f0)
    raise AssertionError("unreachable")


def shortfall(fabric: str) -> str:
    """What a fabric's points lose below the line rate is read as: ``"bandwidth"`` (the default: the achieved
    fraction by nodes applies to every message) or ``"latency"`` (the points are of one message size, the
    fabric's ``message_bytes``, small enough per ring step that the loss is per-step latency: see
    ``collectives.latency_from_points``). The file says why for each fabric that states it."""
    kind = _fabric(fabric).get("shortfall", "bandwidth")
    if kind not in ("bandwidth", "latency"):
        raise ValueError(f"fabric {fabric!r}: field shortfall: {kind!r}; allowed: 'bandwidth', 'latency'")
    return kind


def message_bytes(fabric: str) -> float:
    """The message size (bytes) every point of ``fabric`` was measured at; ValueError where it states none."""
    f = _fabric(fabric)
    if not f.get("message_bytes"):
        raise ValueError(f"fabric {fabric!r}: field message_bytes: missing; a fabric read by latency states it")
    return float(f["message_bytes"])


def busbw_points(fabric: str, kind: str = "all-reduce") -> tuple:
    """((nodes, bus bandwidth in bytes/s), ...) as the source published it: nccl-tests' busbw of one rank,
    which for a collective over every GPU of the nodes is the NIC figure times the node's NICs. ``kind`` as
    in ``fraction_points``, uncapped."""
    f, pts = _points(fabric, kind)
    return tuple(sorted((int(p["nodes"]), float(p["busbw_gb_s_per_nic"]) * _nics(f) * 1e9) for p in pts))


def port_fraction(fabric: str, nodes: int) -> float:
    return interpolate(fraction_points(fabric), nodes)


def nvlink_allreduce_bw(gpu: str) -> float:
    """Bytes/s: the published all-reduce bus bandwidth of one 8-GPU node of ``gpu``."""
    nv = _load()["nvlink"]
    if gpu not in nv:
        raise ValueError(f"no published NVLink all-reduce figure for gpu {gpu!r}; known: {sorted(nv)}")
    return float(nv[gpu]["allreduce_busbw_gb_s"]) * 1e9


def fabric_for(gpu: str) -> str:
    d = _load()["default_fabric"]
    if gpu not in d:
        raise ValueError(f"no default fabric for gpu {gpu!r}; known: {sorted(k for k in d if k != 'source')}")
    return d[gpu]


def port_for(gpu: str, fabric: str | None = None) -> float:
    """GB/s per GPU between nodes for a job on ``gpu``: the line rate per GPU of ``fabric``, or of the GPU
    type's default fabric (``fabric_for``) where none is stated."""
    return port_gb_s_per_gpu(fabric or fabric_for(gpu))
