"""The runtime's own description of a layer-wise hybrid plan, and its checks against a model and a world.

Built from the search's ``Plan`` (``from_search_plan``) or from a Galvatron plan JSON
(``from_galvatron_dict``: ``pp_deg``, ``tp_sizes_enc``, ``tp_consecutive_flags``, ``dp_types_enc``,
``global_bsz``, ``chunks``, optional ``pp_division`` and ``checkpoint``). Every rank runs the same checks
before any collective, so a bad plan fails everywhere with the same message and no rank waits for another.
Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from lib.cli_errors import UserError
from lib.galvatron.search.plan import check_counts

GALVATRON_FIELDS = ("pp_deg", "tp_sizes_enc", "tp_consecutive_flags", "dp_types_enc", "global_bsz", "chunks")

# Upper bounds, and why: a plan beyond them is a typo, not a run this runtime can start.
MAX_RANKS = 65536      # more ranks than any cluster this runtime is started on; also bounds pp and tp
MAX_LAYERS = 4096      # one strategy per layer; deeper than any model in the book by far
MAX_GLOBAL_BSZ = 1 << 20  # samples per iteration; the reference check materialises the whole batch
ALLOWED = {
    "world_size": f"an integer in [1, {MAX_RANKS}] (ranks; larger is no cluster this runtime starts)",
    "n_gpus": f"an integer in [1, {MAX_RANKS}] (ranks; larger is no cluster this runtime starts)",
    "pp": f"an integer in [1, {MAX_RANKS}] (pipeline stages, at most the ranks)",
    "pp_deg": f"an integer in [1, {MAX_RANKS}] (pipeline stages, at most the ranks)",
    "tp": f"an integer in [1, {MAX_RANKS}] (tensor-parallel ranks, at most the ranks)",
    "dp": f"an integer in [1, {MAX_RANKS}] (data-parallel ranks, at most the ranks)",
    "tp_sizes_enc": f"integers in [1, {MAX_RANKS}], a list or a comma-separated string, one per layer "
                    f"(at most {MAX_LAYERS} layers)",
    "tp_consecutive_flags": "0 or 1 per layer, a list or a comma-separated string",
    "dp_types_enc": "0 or 1 per layer, a list or a comma-separated string",
    "checkpoint": "0 or 1 per layer, a list or a comma-separated string",
    "pp_division": f"positive integers (layers per stage), a list or a comma-separated string",
    "global_bsz": f"an integer in [1, {MAX_GLOBAL_BSZ}] (samples per iteration)",
    "chunks": f"an integer in [1, {MAX_GLOBAL_BSZ}] (micro-batches, at most global_bsz)",
    "layers": f"a non-empty list of at most {MAX_LAYERS} layer objects {{tp, dp, sdp, consecutive, ckpt}}",
    "sdp": "true or false", "consecutive": "true or false", "ckpt": "true or false",
}

_Ranks = Annotated[StrictInt, Field(ge=1, le=MAX_RANKS)]
_Count = Annotated[StrictInt, Field(ge=1, le=MAX_GLOBAL_BSZ)]
_Flag = Annotated[StrictInt, Field(ge=0, le=1)]


def _split_csv(v):
    """Galvatron writes per-layer lists as ``"2,2,1"``; each piece must be an integer literal, not ``1.5``."""
    if not isinstance(v, str):
        return v
    pieces = [x.strip() for x in v.split(",")]
    for i, x in enumerate(pieces):
        if x == "":
            raise ValueError(f"entry {i + 1} of {v[:60]!r} is empty; per-layer entries are integers, one per "
                             f"layer, as a list or a comma-separated string")
        if not re.fullmatch(r"[+-]?[0-9]{1,12}", x):
            raise UserError(f"{x!r} in {v[:60]!r} is not an integer; per-layer entries are integers, as a "
                             f"list or a comma-separated string")
    return [int(x) for x in pieces]


def _per_layer(item):
    return Annotated[list[item], BeforeValidator(_split_csv), Field(max_length=MAX_LAYERS)]


class GalvatronPlanModel(BaseModel):
    """Galvatron's native plan JSON (spec 3.5), strictly typed; other keys (``model``, ``est_*``...) pass."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    pp_deg: _Ranks
    tp_sizes_enc: Annotated[_per_layer(_Ranks), Field(min_length=1)]
    tp_consecutive_flags: _per_layer(_Flag)
    dp_types_enc: _per_layer(_Flag)
    global_bsz: _Count
    chunks: _Count
    # Optional by absence only: an explicit null is refused like any other non-integer (defaults are unchecked).
    world_size: _Ranks = None
    n_gpus: _Ranks = None
    checkpoint: _per_layer(_Flag) = None
    pp_division: _per_layer(Annotated[StrictInt, Field(ge=1, le=MAX_LAYERS)]) = None


class LayerModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tp: _Ranks
    dp: _Ranks
    sdp: StrictBool = False
    consecutive: StrictBool = True
    ckpt: StrictBool = False


class RunPlanModel(BaseModel):
    """The runtime's own plan form (``RunPlan.to_dict``), strictly typed; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")
    world_size: _Ranks
    pp: _Ranks
    layers: Annotated[list[LayerModel], Field(min_length=1, max_length=MAX_LAYERS)]
    global_bsz: _Count
    chunks: _Count = 1
    pp_division: _per_layer(Annotated[StrictInt, Field(ge=1, le=MAX_LAYERS)]) = []


def validated(d, source: str = "plan") -> dict:
    """``d`` checked against the schema of its form (``layers`` present: ours; else Galvatron's) and returned
    with per-layer strings decoded; a ``ValueError`` of one line naming ``source`` and the field otherwise."""
    from lib.cli_errors import describe_validation_error

    if not isinstance(d, dict):
        raise UserError(f"{source}: a plan must be a JSON object; got {type(d).__name__}")
    model = RunPlanModel if "layers" in d else GalvatronPlanModel
    try:
        m = model.model_validate(d)
    except ValidationError as e:
        raise UserError(describe_validation_error(e, source, ALLOWED)) from None
    v = m.model_dump(exclude_none=True)
    check_counts(v, source)  # the same check as the search's reader (``plan``): one rule for both tools
    return v


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
        if not isinstance(d, dict):
            raise UserError(f"a layer must be an object with 'tp' and 'dp' (and optionally 'sdp', "
                             f"'consecutive', 'ckpt'); got {d!r}")
        try:
            m = LayerModel.model_validate(d)
        except ValidationError as e:
            from lib.cli_errors import describe_validation_error

            raise UserError(describe_validation_error(e, "layer", ALLOWED)) from None
        return cls(m.tp, m.dp, m.sdp, m.consecutive, m.ckpt)

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
        """The plan's identity in run logs and results: ``pp1[1-2,2*-1] B=16 m=1`` (one tp-dp code per layer).
        What a reader sees is :meth:`summary`, in the strategy codes of chapters 5 to 7."""
        body = ",".join(s.label() for s in self.layers)
        return f"pp{self.pp}[{body}] B={self.global_bsz} m={self.chunks}"

    def summary(self) -> str:
        """The plan as the search prints it (``Plan.summary``): ``B=16, pp=1, chunks=1: 2x 1-1-2, 2x 1-2-1``."""
        return summary_of_label(self.label())

    def to_dict(self) -> dict:
        return {"world_size": self.world_size, "pp": self.pp, "layers": [s.to_dict() for s in self.layers],
                "global_bsz": self.global_bsz, "chunks": self.chunks, "pp_division": list(self.pp_division)}

    @classmethod
    def from_dict(cls, d: dict, source: str = "plan") -> "RunPlan":
        """Strictly typed (``RunPlanModel``): 1.5, ``true`` or ``"2"`` for an integer is a ``ValueError``."""
        if isinstance(d, dict) and "layers" not in d:
            raise UserError(f"{source}: missing field layers")
        v = validated(d, source)
        return cls(v["world_size"], v["pp"], tuple(LayerStrategy(**x) for x in v["layers"]), v["global_bsz"],
                   v["chunks"], tuple(v["pp_division"]))

    @classmethod
    def uniform(cls, world_size: int, n_layer: int, pp=1, tp=1, sdp=False, consecutive=True,
                global_bsz=8, chunks=1) -> "RunPlan":
        """The same strategy on every layer (the pure and 3-D baselines)."""
        s = LayerStrategy(tp, world_size // (pp * tp), sdp, consecutive)
        return cls(world_size, pp, (s,) * n_layer, global_bsz, chunks)

    def validate(self, n_head: int, n_layer: int, world_size: int | None = None) -> None:
        """Raise ``ValueError`` naming the bad value if this plan cannot run on the model and the world."""
        if world_size is not None and world_size != self.world_size:
            raise UserError(f"plan is for world size {self.world_size}, but {world_size} ranks are running")
        if len(self.layers) != n_layer:
            raise UserError(f"plan has {len(self.layers)} layers; the model has {n_layer}")
        self.check_runnable()
        for i, s in enumerate(self.layers):
            if n_head % s.tp:
                raise UserError(f"layer {i}: tp={s.tp} does not divide the head count {n_head}")

    def check_runnable(self) -> None:
        """What this runtime needs of any plan, whatever the model: stages that split the ranks and the layers,
        tp x dp the ranks of a stage, tp a power of two, chunks that divide the batch into micro-batches each a
        multiple of a stage's ranks. ``validate`` and ``plan --print-torchrun`` both check it."""
        if self.pp < 1 or self.world_size % self.pp:
            raise UserError(f"pp_deg={self.pp} must divide the world size {self.world_size}")
        n_layer = len(self.layers)
        if len(self.pp_division) != self.pp or sum(self.pp_division) != n_layer or min(self.pp_division) < 1:
            raise UserError(f"pp_division={list(self.pp_division)} must be {self.pp} positive counts "
                             f"summing to {n_layer}")
        S = self.stage_size
        for i, s in enumerate(self.layers):
            if s.tp * s.dp != S:
                raise UserError(f"layer {i}: tp={s.tp} x dp={s.dp} != {S} ranks per stage "
                                 f"(world {self.world_size} / pp {self.pp})")
            if s.tp & (s.tp - 1):
                raise UserError(f"layer {i}: tp={s.tp} must be a power of two")
        if self.chunks < 1 or self.global_bsz % self.chunks:
            raise UserError(f"chunks={self.chunks} must divide global_bsz={self.global_bsz}")
        if (self.global_bsz // self.chunks) % S:
            raise UserError(f"micro-batch {self.global_bsz // self.chunks} (global_bsz {self.global_bsz} / "
                             f"chunks {self.chunks}) must be a multiple of the {S} ranks per stage")


def _even_division(n_layer: int, pp: int) -> tuple:
    if pp < 1:
        raise UserError(f"pp_deg must be >= 1; got {pp}")
    base, extra = divmod(n_layer, pp)
    return tuple(base + (1 if s < extra else 0) for s in range(pp))


def from_galvatron_dict(d: dict, world_size: int | None = None, source: str = "plan") -> RunPlan:
    """A Galvatron plan JSON (spec §3.5) as a ``RunPlan``; ``world_size`` is read from the dict if present.
    Strictly typed (``GalvatronPlanModel``): ``pp_deg: 2.5``, ``true`` or ``"2"`` is a ``ValueError``."""
    if isinstance(d, dict):
        missing = [k for k in GALVATRON_FIELDS if k not in d]
        if missing:
            raise UserError(f"{source}: missing fields {missing}; a Galvatron plan needs {list(GALVATRON_FIELDS)}")
    v = validated(d, source)
    world = v.get("world_size", v.get("n_gpus", world_size))
    if world is None:
        raise UserError(f"{source}: no world_size in the plan and none was given")
    pp, tps, flags, sdps = v["pp_deg"], v["tp_sizes_enc"], v["tp_consecutive_flags"], v["dp_types_enc"]
    ckpts = v.get("checkpoint") or [0] * len(tps)
    if not (len(tps) == len(flags) == len(sdps) == len(ckpts)):
        raise UserError(f"{source}: per-layer lists differ in length: tp_sizes_enc {len(tps)}, "
                         f"tp_consecutive_flags {len(flags)}, dp_types_enc {len(sdps)}, checkpoint {len(ckpts)}; "
                         f"each must have one entry per layer")
    if world % pp or any((world // pp) % t for t in tps):
        raise UserError(f"{source}: pp_deg={pp} and tp_sizes_enc={tps} do not fit world size {world}; "
                         f"pp_deg x tp must divide it")
    layers = tuple(LayerStrategy(t, world // (pp * t), bool(s), bool(c), bool(k))
                   for t, s, c, k in zip(tps, sdps, flags, ckpts))
    return RunPlan(world, pp, layers, v["global_bsz"], v["chunks"], tuple(v.get("pp_division") or ()))


def from_search_plan(plan, world_size: int | None = None) -> RunPlan:
    """Adapter from ``lib.galvatron.search.engine.Plan`` (or anything with its ``to_dict``) to a ``RunPlan``."""
    d = plan.to_dict() if hasattr(plan, "to_dict") else dict(plan)
    return from_galvatron_dict(d, world_size)


def load_plan(d: dict, world_size: int | None = None, source: str = "plan") -> RunPlan:
    """Either format: a ``RunPlan`` dict (has ``layers``) or a Galvatron plan JSON; ``source`` (a file name)
    starts every error message."""
    if not isinstance(d, dict):
        raise UserError(f"{source}: a plan must be a JSON object; got {type(d).__name__}")
    return RunPlan.from_dict(d, source) if "layers" in d else from_galvatron_dict(d, world_size, source)


_LABEL = re.compile(r"pp(\d+)\[([^\]]*)\] B=(\d+) m=(\d+)")


def summary_of_label(label: str) -> str:
    """A plan's ``RunPlan.label`` (as run logs and results keep it) in the search's notation (``Plan.summary``):
    each layer's full strategy code ``pp-tp-dp`` (chapter 5), runs of equal layers counted, e.g.
    ``pp1[1-2,1-2,2-1] B=8 m=1`` -> ``B=8, pp=1, chunks=1: 2x 1-1-2, 1x 1-2-1``. Anything else is returned as
    it is."""
    m = _LABEL.fullmatch(label.strip()) if isinstance(label, str) else None
    if m is None:
        return label
    pp, body, bsz, chunks = m.groups()
    runs: list[list] = []
    for code in (f"{pp}-{c}" for c in body.split(",") if c):
        if runs and runs[-1][1] == code:
            runs[-1][0] += 1
        else:
            runs.append([1, code])
    return f"B={bsz}, pp={pp}, chunks={chunks}: " + ", ".join(f"{n}x {c}" for n, c in runs)
