"""The runtime's own description of a layer-wise hybrid plan, and its checks against a model and a world.

Built from the search's ``Plan`` (``from_search_plan``) or from a Galvatron plan JSON
(``from_galvatron_dict``: ``pp_deg``, ``tp_sizes_enc``, ``tp_consecutive_flags``, ``dp_types_enc``,
``global_bsz``, ``chunks``, optional ``pp_division`` and ``checkpoint``). Every rank runs the same checks
before any collective, so a bad plan fails everywhere with the same message and no rank waits for another.
Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

from dataclasses import dataclass

GALVATRON_FIELDS = ("pp_deg", "tp_sizes_enc", "tp_consecutive_flags", "dp_types_enc", "global_bsz", "chunks")


@dataclass(frozen=True)
class LayerStrategy:
    """One layer inside its stage: ``tp`` x ``dp`` ranks, ``sdp`` = shard the DP dimension (ZeRO-3)."""

    tp: int
    dp: int
    sdp: bool = False
    consecutive: bool = True  # TP on consecutive ranks (the inner level)
    ckpt: bool = False        # activation checkpointing: keep the input, recompute the block in backward

    def to_dict(self) -> dict:
        return {"tp": self.tp, "dp": self.dp, "sdp": self.sdp, "consecutive": self.consecutive, "ckpt": self.ckpt}

    @classmethod
    def from_dict(cls, d: dict) -> "LayerStrategy":
        if not isinstance(d, dict) or "tp" not in d or "dp" not in d:
            raise ValueError(f"a layer must be an object with 'tp' and 'dp' (and optionally 'sdp', "
                             f"'consecutive', 'ckpt'); got {d!r}")
        try:
            return cls(int(d["tp"]), int(d["dp"]), bool(d.get("sdp", False)), bool(d.get("consecutive", True)),
                       bool(d.get("ckpt", False)))
        except (TypeError, ValueError):
            raise ValueError(f"a layer's tp and dp must be integers; got {d!r}") from None

    def label(self) -> str:
        """Printed like the artifact: ``2*-1`` (TP2 consecutive), ``1-2f`` (SDP2)."""
        t, d = str(self.tp), str(self.dp)
        if self.tp > 1 and self.dp > 1:
            t, d = (t + "*", d) if self.consecutive else (t, d + "*")
        return f"{t}-{d}{'f' if self.sdp and self.dp > 1 else ''}{'-c' if self.ckpt else ''}"


@dataclass(frozen=True)
class RunPlan:
    """What the runtime executes: ``pp`` stages of ``world_size/pp`` ranks, one strategy per layer."""

    world_size: int
    pp: int
    layers: tuple
    global_bsz: int
    chunks: int = 1
    pp_division: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "layers", tuple(self.layers))
        div = tuple(self.pp_division) or _even_division(len(self.layers), self.pp)
        object.__setattr__(self, "pp_division", div)

    @property
    def stage_size(self) -> int:
        return self.world_size // self.pp

    def stage_layers(self, stage: int) -> range:
        start = sum(self.pp_division[:stage])
        return range(start, start + self.pp_division[stage])

    def label(self) -> str:
        body = ",".join(s.label() for s in self.layers)
        return f"pp{self.pp}[{body}] B={self.global_bsz} m={self.chunks}"

    def to_dict(self) -> dict:
        return {"world_size": self.world_size, "pp": self.pp, "layers": [s.to_dict() for s in self.layers],
                "global_bsz": self.global_bsz, "chunks": self.chunks, "pp_division": list(self.pp_division)}

    @classmethod
    def from_dict(cls, d: dict) -> "RunPlan":
        missing = [k for k in ("world_size", "pp", "layers", "global_bsz") if k not in d]
        if missing:
            raise ValueError(f"run plan is missing fields {missing}; has {sorted(d)}")
        if not isinstance(d["layers"], list) or not d["layers"]:
            raise ValueError(f"run plan 'layers' must be a non-empty list of layer objects; got {d['layers']!r}")
        return cls(int(d["world_size"]), int(d["pp"]), tuple(LayerStrategy.from_dict(x) for x in d["layers"]),
                   int(d["global_bsz"]), int(d.get("chunks", 1)), tuple(d.get("pp_division", ())))

    @classmethod
    def uniform(cls, world_size: int, n_layer: int, pp=1, tp=1, sdp=False, consecutive=True,
                global_bsz=8, chunks=1) -> "RunPlan":
        """The same strategy on every layer (the pure and 3-D baselines)."""
        s = LayerStrategy(tp, world_size // (pp * tp), sdp, consecutive)
        return cls(world_size, pp, (s,) * n_layer, global_bsz, chunks)

    def validate(self, n_head: int, n_layer: int, world_size: int | None = None) -> None:
        """Raise ``ValueError`` naming the bad value if this plan cannot run on the model and the world."""
        if world_size is not None and world_size != self.world_size:
            raise ValueError(f"plan is for world size {self.world_size}, but {world_size} ranks are running")
        if self.pp < 1 or self.world_size % self.pp:
            raise ValueError(f"pp_deg={self.pp} must divide the world size {self.world_size}")
        if len(self.layers) != n_layer:
            raise ValueError(f"plan has {len(self.layers)} layers; the model has {n_layer}")
        if len(self.pp_division) != self.pp or sum(self.pp_division) != n_layer or min(self.pp_division) < 1:
            raise ValueError(f"pp_division={list(self.pp_division)} must be {self.pp} positive counts "
                             f"summing to {n_layer}")
        S = self.stage_size
        for i, s in enumerate(self.layers):
            if s.tp * s.dp != S:
                raise ValueError(f"layer {i}: tp={s.tp} x dp={s.dp} != {S} ranks per stage "
                                 f"(world {self.world_size} / pp {self.pp})")
            if s.tp & (s.tp - 1):
                raise ValueError(f"layer {i}: tp={s.tp} must be a power of two")
            if n_head % s.tp:
                raise ValueError(f"layer {i}: tp={s.tp} does not divide the head count {n_head}")
        if self.chunks < 1 or self.global_bsz % self.chunks:
            raise ValueError(f"chunks={self.chunks} must divide global_bsz={self.global_bsz}")
        if (self.global_bsz // self.chunks) % S:
            raise ValueError(f"micro-batch {self.global_bsz // self.chunks} (global_bsz {self.global_bsz} / "
                             f"chunks {self.chunks}) must be a multiple of the {S} ranks per stage")


def _even_division(n_layer: int, pp: int) -> tuple:
    if pp < 1:
        raise ValueError(f"pp_deg must be >= 1; got {pp}")
    base, extra = divmod(n_layer, pp)
    return tuple(base + (1 if s < extra else 0) for s in range(pp))


def _int_list(v) -> list[int]:
    if isinstance(v, str):
        return [int(x) for x in v.replace(" ", "").split(",") if x]
    return [int(x) for x in v]


def from_galvatron_dict(d: dict, world_size: int | None = None) -> RunPlan:
    """A Galvatron plan JSON (spec §3.5) as a ``RunPlan``; ``world_size`` is read from the dict if present."""
    missing = [k for k in GALVATRON_FIELDS if k not in d]
    if missing:
        raise ValueError(f"plan JSON is missing fields {missing}; required: {list(GALVATRON_FIELDS)}")
    world = d.get("world_size", d.get("n_gpus", world_size))
    if world is None:
        raise ValueError("plan JSON has no world_size and none was given")
    pp, tps = int(d["pp_deg"]), _int_list(d["tp_sizes_enc"])
    flags, sdps = _int_list(d["tp_consecutive_flags"]), _int_list(d["dp_types_enc"])
    ckpts = _int_list(d.get("checkpoint") or [0] * len(tps))
    if not (len(tps) == len(flags) == len(sdps) == len(ckpts)):
        raise ValueError(f"per-layer lists differ in length: tp_sizes_enc {len(tps)}, "
                         f"tp_consecutive_flags {len(flags)}, dp_types_enc {len(sdps)}")
    world = int(world)
    if pp < 1 or world % pp or any(t < 1 or (world // pp) % t for t in tps):
        raise ValueError(f"pp_deg={pp} and tp_sizes_enc={tps} do not fit world size {world}")
    layers = tuple(LayerStrategy(t, world // (pp * t), bool(s), bool(c), bool(k))
                   for t, s, c, k in zip(tps, sdps, flags, ckpts))
    div = d.get("pp_division") or ()
    return RunPlan(world, pp, layers, int(d["global_bsz"]), int(d["chunks"]), tuple(_int_list(div)))


def from_search_plan(plan, world_size: int | None = None) -> RunPlan:
    """Adapter from ``lib.galvatron.search.engine.Plan`` (or anything with its ``to_dict``) to a ``RunPlan``."""
    d = plan.to_dict() if hasattr(plan, "to_dict") else dict(plan)
    return from_galvatron_dict(d, world_size)


def load_plan(d: dict, world_size: int | None = None) -> RunPlan:
    """Either format: a ``RunPlan`` dict (has ``layers``) or a Galvatron plan JSON."""
    if not isinstance(d, dict):
        raise ValueError(f"a plan must be a JSON object; got {type(d).__name__}")
    return RunPlan.from_dict(d) if "layers" in d else from_galvatron_dict(d, world_size)
