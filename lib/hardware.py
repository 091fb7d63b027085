"""Devices and links as data: datasheet figures with a cited source for each, loaded from ``data/hardware``.

A :class:`HardwareProfile` is a machine: ``n_devices`` identical or different :class:`Device` s and a
topology that says, for every ordered pair of devices, which :class:`Link` a copy takes and which
*channels* it occupies. Two copies that need a common channel wait for each other (first come, first served),
which is how contention is described:

- ``"shared-bus"``: every copy passes one shared channel (PCIe through one host bridge, no peer-to-peer);
- ``"all-to-all"``: one private channel per ordered pair (NVLink wired directly between every two GPUs);
- ``"switch"``: a copy occupies the sender's outgoing and the receiver's incoming port (NVSwitch);
- ``"none"``: a single device.

Datasheet figures are peaks. What a program reaches is ``peak × efficiency``; every efficiency in the JSON
files is either an estimate with its reason or a calibration constant, marked as such in ``calibration``.
Torch-free. Used in: Part I, chapter 1 (the simulator), Part II (Galvatron's cost model).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from lib.cli_errors import UserError

#: Where the profiles live: ``data/hardware/<name>.json``.
DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "hardware"
TOPOLOGIES = ("none", "shared-bus", "all-to-all", "switch")


@dataclass(frozen=True)
class Device:
    """One accelerator (or a CPU socket).

    peak_flops: dtype ("fp32", "fp16", "bf16") -> peak FLOP/s from the datasheet (dense, no sparsity).
    mem_bw_bytes_per_s: peak memory bandwidth; mem_bytes: memory on the datasheet.
    usable_mem_bytes: what a program can allocate (what PyTorch reports as total capacity); a memory cap is
        a fraction of this.
    launch_overhead_s: fixed cost of one kernel launch; flops_efficiency and mem_bw_efficiency: the
        achievable fractions of peak compute and bandwidth (see the profile's ``calibration``).
    """

    name: str
    peak_flops: Mapping[str, float]
    mem_bw_bytes_per_s: float
    mem_bytes: int
    usable_mem_bytes: int
    launch_overhead_s: float = 5e-6
    flops_efficiency: float = 0.7
    mem_bw_efficiency: float = 0.8

    def __post_init__(self):
        if not self.peak_flops:
            raise ValueError(f"device {self.name!r} needs at least one peak_flops entry")
        for k, v in self.peak_flops.items():
            if not v > 0:
                raise ValueError(f"device {self.name!r}: peak_flops[{k!r}] must be > 0; got {v!r}")
        for attr in ("mem_bw_bytes_per_s", "mem_bytes", "usable_mem_bytes"):
            if not getattr(self, attr) > 0:
                raise ValueError(f"device {self.name!r}: {attr} must be > 0; got {getattr(self, attr)!r}")
        if self.usable_mem_bytes > self.mem_bytes:
            raise ValueError(f"device {self.name!r}: usable_mem_bytes {self.usable_mem_bytes} > mem_bytes {self.mem_bytes}")
        for attr in ("flops_efficiency", "mem_bw_efficiency"):
            v = getattr(self, attr)
            if not 0 < v <= 1:
                raise ValueError(f"device {self.name!r}: {attr} must be in (0, 1]; got {v!r}")
        if self.launch_overhead_s < 0:
            raise ValueError(f"device {self.name!r}: launch_overhead_s must be >= 0; got {self.launch_overhead_s!r}")
        object.__setattr__(self, "peak_flops", dict(self.peak_flops))

    def achievable_flops(self, dtype: str = "fp32") -> float:
        """FLOP/s a real kernel reaches: peak × flops_efficiency. ValueError for a dtype without a figure."""
        if dtype not in self.peak_flops:
            raise ValueError(f"device {self.name!r} has no {dtype!r} figure; known: {sorted(self.peak_flops)}")
        return self.peak_flops[dtype] * self.flops_efficiency

    @property
    def achievable_mem_bw_bytes_per_s(self) -> float:
        return self.mem_bw_bytes_per_s * self.mem_bw_efficiency

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "peak_flops": dict(self.peak_flops),
            "mem_bw_bytes_per_s": self.mem_bw_bytes_per_s,
            "mem_bytes": int(self.mem_bytes),
            "usable_mem_bytes": int(self.usable_mem_bytes),
            "launch_overhead_s": self.launch_overhead_s,
            "flops_efficiency": self.flops_efficiency,
            "mem_bw_efficiency": self.mem_bw_efficiency,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Device":
        return cls(
            name=str(d["name"]),
            peak_flops={str(k): float(v) for k, v in d["peak_flops"].items()},
            mem_bw_bytes_per_s=float(d["mem_bw_bytes_per_s"]),
            mem_bytes=int(d["mem_bytes"]),
            usable_mem_bytes=int(d.get("usable_mem_bytes", d["mem_bytes"])),
            launch_overhead_s=float(d.get("launch_overhead_s", 5e-6)),
            flops_efficiency=float(d.get("flops_efficiency", 0.7)),
            mem_bw_efficiency=float(d.get("mem_bw_efficiency", 0.8)),
        )


@dataclass(frozen=True)
class Link:
    """The path of a copy from one device to another.

    peak_bw_bytes_per_s: one direction, from the datasheet; efficiency: achievable fraction of it;
    latency_s: fixed cost per copy; channels: the shared resources the copy occupies while it runs.
    """

    peak_bw_bytes_per_s: float
    latency_s: float
    efficiency: float = 1.0
    channels: tuple[str, ...] = ()

    @property
    def bw_bytes_per_s(self) -> float:
        """Achievable bandwidth of one copy: peak × efficiency."""
        return self.peak_bw_bytes_per_s * self.efficiency

    def copy_s(self, n_bytes: float) -> float:
        """Time of one copy of ``n_bytes`` on an otherwise idle link: latency + bytes / bandwidth."""
        return self.latency_s + n_bytes / self.bw_bytes_per_s


@dataclass(frozen=True)
class HardwareProfile:
    """A machine: devices, the topology joining them, and a source for every figure.

    topology: {"kind": one of TOPOLOGIES, "peak_bw_bytes_per_s", "latency_s", "efficiency"} (one link type).
    host_launch_s: host (CPU) time to issue one kernel from eager PyTorch; the host issues every device's work.
    sources: figure -> citation. calibration: constant -> {"value", "reason"} for every number that is not a
    datasheet figure.
    """

    name: str
    devices: tuple[Device, ...]
    topology: Mapping[str, Any]
    description: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)
    calibration: Mapping[str, Any] = field(default_factory=dict)
    host_launch_s: float = 1e-5

    def __post_init__(self):
        if not self.host_launch_s >= 0:
            raise ValueError(f"profile {self.name!r}: host_launch_s must be >= 0; got {self.host_launch_s!r}")
        if not self.devices:
            raise ValueError(f"profile {self.name!r} needs at least one device")
        object.__setattr__(self, "devices", tuple(self.devices))
        kind = self.topology.get("kind")
        if kind not in TOPOLOGIES:
            raise ValueError(f"profile {self.name!r}: topology kind must be one of {TOPOLOGIES}; got {kind!r}")
        if kind == "none" and len(self.devices) > 1:
            raise ValueError(f"profile {self.name!r}: topology 'none' allows one device; got {len(self.devices)}")
        if kind != "none":
            if not float(self.topology.get("peak_bw_bytes_per_s", 0)) > 0:
                raise ValueError(f"profile {self.name!r}: topology needs peak_bw_bytes_per_s > 0")
            eff = float(self.topology.get("efficiency", 1.0))
            if not 0 < eff <= 1:
                raise ValueError(f"profile {self.name!r}: link efficiency must be in (0, 1]; got {eff!r}")
            if float(self.topology.get("latency_s", 0)) < 0:
                raise ValueError(f"profile {self.name!r}: link latency_s must be >= 0")
        object.__setattr__(self, "topology", dict(self.topology))
        object.__setattr__(self, "sources", dict(self.sources))
        object.__setattr__(self, "calibration", dict(self.calibration))

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    def link(self, i: int, j: int) -> Link:
        """The link a copy from device ``i`` to device ``j`` takes (ValueError for i == j or out of range)."""
        n = self.n_devices
        for k in (i, j):
            if not (isinstance(k, int) and 0 <= k < n):
                raise ValueError(f"device index {k!r} out of range: profile {self.name!r} has devices 0..{n - 1}")
        if i == j:
            raise ValueError(f"no link from device {i} to itself: a copy needs two different devices")
        kind = self.topology["kind"]
        if kind == "shared-bus":
            channels = ("bus",)
        elif kind == "all-to-all":
            channels = (f"{i}->{j}",)
        else:  # switch
            channels = (f"out{i}", f"in{j}")
        return Link(
            peak_bw_bytes_per_s=float(self.topology["peak_bw_bytes_per_s"]),
            latency_s=float(self.topology.get("latency_s", 0.0)),
            efficiency=float(self.topology.get("efficiency", 1.0)),
            channels=channels,
        )

    def channel_names(self) -> tuple[str, ...]:
        """Every channel some link occupies, in a fixed order."""
        names: list[str] = []
        for i in range(self.n_devices):
            for j in range(self.n_devices):
                if i != j:
                    for c in self.link(i, j).channels:
                        if c not in names:
                            names.append(c)
        return tuple(names)

    def replace(self, **changes) -> "HardwareProfile":
        """A copy with some fields changed (e.g. a faster topology for a what-if)."""
        d = self.to_dict()
        d.update(changes)
        if "devices" in changes:
            d["devices"] = [x.to_dict() if isinstance(x, Device) else x for x in changes["devices"]]
        return HardwareProfile.from_dict(d)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "devices": [d.to_dict() for d in self.devices],
            "topology": dict(self.topology),
            "sources": dict(self.sources),
            "calibration": dict(self.calibration),
            "host_launch_s": self.host_launch_s,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "HardwareProfile":
        """Build from JSON. ``devices`` may be a list, or ``device`` + ``n_devices`` for identical devices."""
        if "devices" in d:
            devices = tuple(Device.from_dict(x) for x in d["devices"])
        else:
            n = int(d["n_devices"])
            if n < 1:
                raise ValueError(f"n_devices must be >= 1; got {n}")
            dev = Device.from_dict(d["device"])
            devices = (dev,) * n
        return cls(
            name=str(d["name"]),
            devices=devices,
            topology=dict(d.get("topology", {"kind": "none"})),
            description=str(d.get("description", "")),
            sources=dict(d.get("sources", {})),
            calibration=dict(d.get("calibration", {})),
            host_launch_s=float(d.get("host_launch_s", 1e-5)),
        )


def names(data_dir: str | os.PathLike | None = None) -> list[str]:
    """The known profile names (the JSON files in ``data/hardware``), sorted."""
    root = Path(data_dir) if data_dir else DATA_DIR
    return sorted(p.stem for p in root.glob("*.json"))


def load(name: str, data_dir: str | os.PathLike | None = None) -> HardwareProfile:
    """Load ``data/hardware/<name>.json``. ValueError listing the known names for an unknown one."""
    known = names(data_dir)
    if name not in known:
        raise UserError(f"unknown hardware profile {name!r}; known profiles: {known}")
    root = Path(data_dir) if data_dir else DATA_DIR
    with open(root / f"{name}.json") as f:
        d = json.load(f)
    prof = HardwareProfile.from_dict(d)
    if prof.name != name:
        raise UserError(f"{root / (name + '.json')} declares name {prof.name!r}; the file name says {name!r}")
    return prof


# ----------------------------------------------------------------------------------------- multi-node clusters
#: Multi-node cluster profiles: ``data/hardware/clusters/<name>.json`` (a node profile plus the fabric).
CLUSTER_DIR = DATA_DIR / "clusters"


@dataclass(frozen=True)
class MultiNodeProfile:
    """``n_nodes`` copies of a node profile (its devices and the links inside a node) joined by a fabric.

    fabric: one link per GPU between nodes (its own network port; ``peak_bw_bytes_per_s`` one direction,
    ``latency_s``, ``efficiency``). A copy between two nodes occupies the sender's outgoing and the receiver's
    incoming port. GPU ``i`` sits on node ``i // gpus_per_node``. storage_bw_bytes_per_s: what the cluster's
    storage absorbs when every GPU writes its share of a checkpoint. Every figure has a source in ``sources``;
    the node's figures keep theirs in the node profile. Used in: book/closing/01_one_run.
    """

    name: str
    node: HardwareProfile
    n_nodes: int
    max_nodes: int
    fabric: Mapping[str, Any]
    storage_bw_bytes_per_s: float
    description: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)
    calibration: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        for attr in ("n_nodes", "max_nodes"):
            v = getattr(self, attr)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"cluster {self.name!r}: {attr} must be an integer >= 1; got {v!r}")
        if self.n_nodes > self.max_nodes:
            raise ValueError(f"cluster {self.name!r}: n_nodes must be in 1..{self.max_nodes} (max_nodes); "
                             f"got {self.n_nodes}")
        if self.node.n_devices < 2:
            raise ValueError(f"cluster {self.name!r}: its node profile {self.node.name!r} needs >= 2 devices")
        for key in ("peak_bw_bytes_per_s", "latency_s", "efficiency"):
            if key not in self.fabric:
                raise ValueError(f"cluster {self.name!r}: fabric.{key} is missing")
        if not float(self.fabric["peak_bw_bytes_per_s"]) > 0:
            raise ValueError(f"cluster {self.name!r}: fabric.peak_bw_bytes_per_s must be > 0; "
                             f"got {self.fabric['peak_bw_bytes_per_s']!r}")
        if not float(self.fabric["latency_s"]) >= 0:
            raise ValueError(f"cluster {self.name!r}: fabric.latency_s must be >= 0; got {self.fabric['latency_s']!r}")
        if not 0 < float(self.fabric["efficiency"]) <= 1:
            raise ValueError(f"cluster {self.name!r}: fabric.efficiency must be in (0, 1]; "
                             f"got {self.fabric['efficiency']!r}")
        if not self.storage_bw_bytes_per_s > 0:
            raise ValueError(f"cluster {self.name!r}: storage_bw_bytes_per_s must be > 0; "
                             f"got {self.storage_bw_bytes_per_s!r}")
        object.__setattr__(self, "fabric", dict(self.fabric))
        object.__setattr__(self, "sources", dict(self.sources))
        object.__setattr__(self, "calibration", dict(self.calibration))

    @property
    def gpus_per_node(self) -> int:
        return self.node.n_devices

    @property
    def n_gpus(self) -> int:
        return self.n_nodes * self.gpus_per_node

    @property
    def device(self) -> Device:
        return self.node.devices[0]

    def node_of(self, i: int) -> int:
        if not (isinstance(i, int) and 0 <= i < self.n_gpus):
            raise ValueError(f"GPU index {i!r} out of range: cluster {self.name!r} has GPUs 0..{self.n_gpus - 1}")
        return i // self.gpus_per_node

    def fabric_link(self) -> Link:
        """The link of one GPU's network port (no channels: use ``link(i, j)`` for a placed copy)."""
        return Link(float(self.fabric["peak_bw_bytes_per_s"]), float(self.fabric["latency_s"]),
                    float(self.fabric["efficiency"]))

    def link(self, i: int, j: int) -> Link:
        """The link a copy from GPU ``i`` to GPU ``j`` takes: the node's own (NVLink) inside a node, the fabric
        between nodes."""
        a, b = self.node_of(i), self.node_of(j)
        g = self.gpus_per_node
        if a == b:
            inner = self.node.link(i % g, j % g)
            return Link(inner.peak_bw_bytes_per_s, inner.latency_s, inner.efficiency,
                        tuple(f"n{a}:{c}" for c in inner.channels))
        f = self.fabric_link()
        return Link(f.peak_bw_bytes_per_s, f.latency_s, f.efficiency, (f"nic{i}:out", f"nic{j}:in"))

    def with_nodes(self, n_nodes: int) -> "MultiNodeProfile":
        """The same cluster with ``n_nodes`` nodes (1..max_nodes)."""
        from dataclasses import replace as _replace

        return _replace(self, n_nodes=n_nodes)

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "node": self.node.name,
                "n_nodes": self.n_nodes, "max_nodes": self.max_nodes, "fabric": dict(self.fabric),
                "storage_bw_bytes_per_s": self.storage_bw_bytes_per_s, "sources": dict(self.sources),
                "calibration": dict(self.calibration)}


def cluster_names(data_dir: str | os.PathLike | None = None) -> list[str]:
    """The known multi-node cluster profiles (``data/hardware/clusters/*.json``), sorted."""
    root = Path(data_dir) if data_dir else CLUSTER_DIR
    return sorted(p.stem for p in root.glob("*.json"))


def load_cluster(name: str, n_nodes: int = 1, data_dir: str | os.PathLike | None = None) -> MultiNodeProfile:
    """Load ``data/hardware/clusters/<name>.json`` with ``n_nodes`` nodes; its node is a profile of
    ``data/hardware``. ValueError listing the known names for an unknown one."""
    known = cluster_names(data_dir)
    if name not in known:
        raise UserError(f"unknown cluster profile {name!r}; known cluster profiles: {known}")
    root = Path(data_dir) if data_dir else CLUSTER_DIR
    with open(root / f"{name}.json") as f:
        d = json.load(f)
    if d.get("name") != name:
        raise UserError(f"{root / (name + '.json')} declares name {d.get('name')!r}; the file name says {name!r}")
    for key in ("node", "max_nodes", "fabric", "storage_bw_bytes_per_s"):
        if key not in d:
            raise UserError(f"cluster profile {name!r}: field {key!r} is missing")
    return MultiNodeProfile(name=name, node=load(str(d["node"]), root.parent if data_dir else None),
                            n_nodes=n_nodes, max_nodes=d["max_nodes"], fabric=d["fabric"],
                            storage_bw_bytes_per_s=float(d["storage_bw_bytes_per_s"]),
                            description=str(d.get("description", "")), sources=d.get("sources", {}),
                            calibration=d.get("calibration", {}))
