"""The plan: a layer-wise hybrid-parallel plan as a frozen dataclass, and its JSON form.

The fields are those of the published Galvatron plan (spec section 3.5: ``pp_deg``, ``tp_sizes_enc``,
``tp_consecutive_flags``, ``dp_types_enc``, ``global_bsz``, ``chunks``) plus Galvatron-2's ``checkpoint`` and
``pp_division``, the GPU count and our estimates. ``cost.py`` estimates a plan; ``runtime/plan.py`` runs it.

Used in: book/galvatron/03_the_search.ipynb, 04_from_plan_to_run.ipynb.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from lib.cli_errors import UserError, check_int

from .strategies import Strategy, check_power_of_two

PLAN_FIELDS = ("pp_deg", "tp_sizes_enc", "tp_consecutive_flags", "dp_types_enc", "global_bsz", "chunks")
# Upper bounds, and why (the same as the runtime's plan schema): beyond them a plan JSON holds a typo.
MAX_GPUS, MAX_GLOBAL_BSZ = 65536, 1 << 20


def check_counts(d: dict, source: str = "plan") -> None:
    """What a plan's counts must agree on, whichever tool reads it (``plan`` through ``Plan.from_dict``, ``run``
    through ``runtime.plan.validated``): at most ``global_bsz`` micro-batches (``chunks``), each of at least one
    sample; ``world_size`` and ``n_gpus``, when both are given, the same GPU count. ``d``'s fields are already
    integers (or absent); a :class:`UserError` naming ``source`` and the field otherwise."""
    chunks, bsz = d.get("chunks"), d.get("global_bsz")
    if isinstance(chunks, int) and isinstance(bsz, int) and chunks > bsz:
        raise UserError(f"{source}: chunks: {chunks} micro-batches of a global_bsz of {bsz} samples; allowed: "
                        f"chunks in [1, global_bsz] (each micro-batch holds at least one sample)")
    ws, ng = d.get("world_size"), d.get("n_gpus")
    if ws is not None and ng is not None and ws != ng:
        raise UserError(f"{source}: world_size {ws} and n_gpus {ng} disagree; allowed: the same GPU count in "
                        f"both, or only one of them")


def _enc(x) -> str:
    return ",".join(str(int(v)) for v in x)


def _dec(x, name) -> tuple:
    """A per-layer field: ``"2,2,1"`` or ``[2, 2, 1]``; ``1.5``, ``true`` or ``"2"`` in a list is refused, not
    truncated by ``int()``."""
    allowed = "a comma-separated string or a list of integers"
    if isinstance(x, str):
        pieces = [v.strip() for v in x.split(",")]
        empty = [i for i, v in enumerate(pieces) if v == ""]
        if empty:  # as the runtime's reader says it: "2,,1" and "" are refused, not read as fewer layers
            raise UserError(f"plan: {name}: entry {empty[0]} of {x!r} is empty; {name} must be {allowed}")
        bad = [v for v in pieces if not re.fullmatch(r"[+-]?[0-9]{1,12}", v)]
        if bad:
            raise UserError(f"plan: {name}: {bad[0]!r} is not an integer; {name} must be {allowed}")
        return tuple(int(v) for v in pieces)
    if not isinstance(x, (list, tuple)):
        raise UserError(f"plan: {name}: {x!r} is not {allowed}")
    for i, v in enumerate(x):
        check_int(f"plan: {name}[{i}]", v)
    return tuple(x)


def _int(d: dict, name: str, hi: int, why: str) -> int:
    return check_int(f"plan: {name}", d[name], 1, hi, why)


def _est(d: dict, name: str):
    v = d.get(name)
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
        raise UserError(f"plan: {name}: {v!r} is not a finite number; an estimate is a finite number or absent")
    return v


@dataclass(frozen=True)
class Plan:
    """A layer-wise hybrid-parallel plan in the published format (spec 3.5), plus our estimates.

    Per-layer tuples have one entry per layer; ``pp_division`` gives layers per stage; ``world_size`` is the
    GPU count. ``est_*`` are cost-model estimates (None when the plan was not estimated).
    """

    pp_deg: int
    tp_sizes_enc: tuple
    tp_consecutive_flags: tuple
    dp_types_enc: tuple
    global_bsz: int
    chunks: int
    world_size: int
    pp_division: tuple = ()
    checkpoint: tuple = ()
    model: str = ""
    est_iter_s: float | None = None
    est_throughput_samples_per_s: float | None = None
    est_mem_mb_per_device: float | None = None

    def __post_init__(self):
        n = len(self.tp_sizes_enc)
        check_power_of_two(self.world_size, "world_size")
        check_power_of_two(self.pp_deg, "pp_deg")
        if n == 0:
            raise UserError("a plan needs at least one layer; tp_sizes_enc is empty")
        for name in ("tp_consecutive_flags", "dp_types_enc") + (("checkpoint",) if self.checkpoint else ()):
            if len(getattr(self, name)) != n:
                raise UserError(f"{name} has {len(getattr(self, name))} entries; tp_sizes_enc has {n} layers")
            if any(v not in (0, 1) for v in getattr(self, name)):
                raise UserError(f"{name} entries must be 0 or 1; got {getattr(self, name)}")
        for t in self.tp_sizes_enc:
            check_power_of_two(int(t), "tp size")
            if self.pp_deg * t > self.world_size:
                raise UserError(f"pp_deg {self.pp_deg} x tp {t} exceeds world_size {self.world_size}")
            if self.global_bsz % (self.world_size // (self.pp_deg * t)):
                raise UserError(f"global_bsz {self.global_bsz} is not divisible by the data-parallel degree "
                                 f"{self.world_size // (self.pp_deg * t)} of a tp={t} layer")
        if self.global_bsz < 1 or self.chunks < 1:
            raise UserError(f"global_bsz and chunks must be >= 1; got {self.global_bsz}, {self.chunks}")
        if self.pp_division:
            if len(self.pp_division) != self.pp_deg or sum(self.pp_division) != n or min(self.pp_division) < 1:
                raise UserError(f"pp_division {self.pp_division} must have pp_deg={self.pp_deg} positive entries "
                                 f"summing to the {n} layers")
        elif n % self.pp_deg:
            raise UserError(f"{n} layers do not split evenly into pp_deg={self.pp_deg}; give pp_division")
        else:  # normalise: the even division and no checkpointing are written out explicitly
            object.__setattr__(self, "pp_division", (n // self.pp_deg,) * self.pp_deg)
        if not self.checkpoint:
            object.__setattr__(self, "checkpoint", (0,) * n)

    @property
    def n_layers(self) -> int:
        return len(self.tp_sizes_enc)

    def stage_sizes(self) -> tuple:
        return self.pp_division or (self.n_layers // self.pp_deg,) * self.pp_deg

    def strategies(self) -> list[Strategy]:
        ck = self.checkpoint or (0,) * self.n_layers
        return [Strategy.from_shape(self.pp_deg, t, self.world_size // (self.pp_deg * t), bool(d), bool(c), bool(k))
                for t, c, d, k in zip(self.tp_sizes_enc, self.tp_consecutive_flags, self.dp_types_enc, ck)]

    def to_dict(self) -> dict:
        d = {"pp_deg": self.pp_deg, "tp_sizes_enc": _enc(self.tp_sizes_enc),
             "tp_consecutive_flags": _enc(self.tp_consecutive_flags), "dp_types_enc": _enc(self.dp_types_enc),
             "global_bsz": self.global_bsz, "chunks": self.chunks,
             "checkpoint": _enc(self.checkpoint or (0,) * self.n_layers),
             "pp_division": _enc(self.stage_sizes()), "world_size": self.world_size, "model": self.model}
        for k in ("est_iter_s", "est_throughput_samples_per_s", "est_mem_mb_per_device"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d

    @classmethod
    def from_dict(cls, d: dict, world_size: int | None = None) -> "Plan":
        """Read the published format. ``world_size`` (if given) must match the plan's."""
        if not isinstance(d, dict):
            raise UserError(f"a plan must be a JSON object; got {type(d).__name__}")
        missing = [k for k in PLAN_FIELDS if k not in d]
        if missing:
            raise UserError(f"plan is missing field(s) {missing}; required: {list(PLAN_FIELDS)}")
        ws = d.get("world_size", d.get("n_gpus", world_size))  # as the runtime reads it: n_gpus is the count too
        if ws is None:
            raise UserError("plan: no world_size (nor n_gpus), the GPU count the plan is for; allowed: a "
                            "world_size field in the plan (the runtime takes the count from the ranks it runs on)")
        ws = check_int("plan: world_size", ws, 1, MAX_GPUS, "GPUs; larger is no cluster the book models")
        if "n_gpus" in d:
            check_int("plan: n_gpus", d["n_gpus"], 1, MAX_GPUS, "GPUs; larger is no cluster the book models")
        if world_size is not None and ws != int(world_size):
            raise UserError(f"plan was made for world_size={ws}; this run has world_size={world_size}")
        gb = _int(d, "global_bsz", MAX_GLOBAL_BSZ, "samples per iteration")
        check_counts({"world_size": ws, "n_gpus": d.get("n_gpus"), "global_bsz": gb,
                      "chunks": _int(d, "chunks", MAX_GLOBAL_BSZ, "micro-batches, at most global_bsz")})
        tp = _dec(d["tp_sizes_enc"], "tp_sizes_enc")
        ck = _dec(d["checkpoint"], "checkpoint") if "checkpoint" in d else ()
        div = _dec(d["pp_division"], "pp_division") if "pp_division" in d else ()
        return cls(pp_deg=_int(d, "pp_deg", MAX_GPUS, "pipeline stages, at most the GPUs"), tp_sizes_enc=tp,
                   tp_consecutive_flags=_dec(d["tp_consecutive_flags"], "tp_consecutive_flags"),
                   dp_types_enc=_dec(d["dp_types_enc"], "dp_types_enc"),
                   global_bsz=_int(d, "global_bsz", MAX_GLOBAL_BSZ, "samples per iteration"),
                   chunks=_int(d, "chunks", MAX_GLOBAL_BSZ, "micro-batches, at most global_bsz"), world_size=ws,
                   pp_division=div, checkpoint=ck, model=str(d.get("model", "")),
                   est_iter_s=_est(d, "est_iter_s"),
                   est_throughput_samples_per_s=_est(d, "est_throughput_samples_per_s"),
                   est_mem_mb_per_device=_est(d, "est_mem_mb_per_device"))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_json(cls, text: str, world_size: int | None = None) -> "Plan":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError(f"plan is not valid JSON: {e}") from None
        return cls.from_dict(d, world_size)

    @classmethod
    def from_strategies(cls, strategies: list[Strategy], global_bsz: int, chunks: int, pp_division=(),
                        model: str = "", **est) -> "Plan":
        s0 = strategies[0]
        return cls(pp_deg=s0.pp, tp_sizes_enc=tuple(s.tp for s in strategies),
                   tp_consecutive_flags=tuple(int(s.tp_consec) for s in strategies),
                   dp_types_enc=tuple(int(s.sdp) for s in strategies), global_bsz=int(global_bsz),
                   chunks=int(chunks), world_size=s0.n_gpus, pp_division=tuple(pp_division),
                   checkpoint=tuple(int(s.ckpt) for s in strategies), model=model, **est)

    def to_torchrun(self, plan_path: str = "plan.json", nnodes: int = 1, device: str = "cpu",
                    master_addr: str = "HOST", master_port: int = 29500, run_args: tuple = ()) -> str:
        """The shell command that runs this plan with the book's runtime (``python -m lib.galvatron run``)
        once it is saved to ``plan_path`` (``to_json``): ``world_size / nnodes`` ranks per node; with
        ``nnodes`` > 1, the node's rank is left as ``$NODE_RANK`` for each node to set. ``run_args``: more
        flags of ``run`` (``("--steps", "10")``). The runtime reads the model's layer count from the plan."""
        import shlex

        nnodes = check_int("to_torchrun: nnodes", nnodes, 1, self.world_size, "nodes, at most the GPUs")
        if self.world_size % nnodes:
            raise UserError(f"to_torchrun: nnodes {nnodes} does not divide world_size {self.world_size}")
        if device not in ("cpu", "cuda"):
            raise UserError(f"to_torchrun: device {device!r} is not allowed; use 'cpu' or 'cuda'")
        cmd = ["torchrun"]
        if nnodes > 1:
            cmd += ["--nnodes", str(nnodes), "--node-rank", "$NODE_RANK"]
        cmd += ["--nproc-per-node", str(self.world_size // nnodes)]
        if nnodes > 1:
            cmd += ["--master-addr", master_addr, "--master-port", str(master_port)]
        cmd += ["-m", "lib.galvatron", "run", "--plan", plan_path]
        if device == "cuda":
            cmd += ["--device", "cuda"]
        cmd += [str(a) for a in run_args]
        return " ".join(a if a == "$NODE_RANK" else shlex.quote(a) for a in cmd)

    def summary(self) -> str:
        names = [s.code for s in self.strategies()]
        runs, prev, n = [], None, 0
        for x in names + [None]:
            if x == prev:
                n += 1
                continue
            if prev is not None:
                runs.append(f"{n}x {prev}")
            prev, n = x, 1
        return f"B={self.global_bsz}, pp={self.pp_deg}, chunks={self.chunks}: " + ", ".join(runs)

