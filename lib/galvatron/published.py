"""Published training runs as data: pydantic models of the schema of ``data/published_runs/`` (see its
README and ``/shared/specs/published_runs.md``), and their conversion to a ``layout.Job`` and
``layout.ParallelConfig``.

A field the source does not state is ``null``. ``validate`` fills a null config field (``zero``, ``recompute``,
``sequence_parallel``, ``vp``, ``micro_batch``) by searching it alone for the fastest setting that fits
(``fills.py``); the documented defaults below (``DEFAULTS``) are the starting point of that search and the
fill of every other null field, and ``filled(run)`` lists them:

=================== ==================================================================================
``vp``              1: plain 1F1B (no interleaving)
``micro_batch``     1 sequence, the smallest (Megatron-LM has no default ``--micro-batch-size``: a run
                    states one; ``validate.estimate_run(fill="planner")`` tries the planner's choice)
``sequence_parallel`` on whenever tp > 1 (Megatron-LM's recommendation with TP since Korthikanti et al.)
``zero``            0: plain data parallel
``recompute``       ``none`` (Megatron-LM's default)
``cp``              1
``tp_comm_overlap`` false: TP communication overlapped with the GEMMs only where the source states it
                    (Megatron-core's ``--tp-comm-overlap``); an optional field beyond the spec's schema
``kv_heads``        ``heads`` (multi-head attention); ``ffn``: 4 x hidden; ``gated_mlp``: false
``dropout``         true (Megatron-LM's GPT default, 0.1); an optional field beyond the spec's schema
``gpus_per_node``   8; ``fabric_gb_s_per_gpu``: 25 (A100: HDR InfiniBand) or 50 (H100: NDR), or the line
                    rate of the stated ``fabric``'s NICs per GPU
``fabric``          none: collectives at ``fabric_gb_s_per_gpu`` times the GPU type's link efficiency. A
                    named fabric (``data/hardware/fabrics/fabrics.json``) prices them at its published
                    achieved bandwidth by nodes spanned (``search/fabrics.py``); an optional field beyond
                    the spec's schema
``stack``           ``megatron-lm`` (``stacks.DEFAULT_STACK``; the stacks are ``data/stacks/*.json``);
                    an optional field beyond the spec's schema
=================== ==================================================================================

Used in: ``lib/galvatron/validate.py``.
"""

from __future__ import annotations

import json
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lib.cli_errors import UserError
from .model_limits import HF_FIELDS, LIMITS  # re-exported: the one set of size bounds
from .search.fabrics import port_for

#: the port of a run that states neither: its GPU type's default fabric's line rate per GPU (fabrics.json)
FABRIC_DEFAULT = {g: port_for(g) for g in ("a100-sxm-80gb", "h100-sxm-80gb")}
DEFAULTS = {"vp": 1, "micro_batch": 1, "sequence_parallel": "tp > 1", "zero": 0, "recompute": "none", "cp": 1,
            "kv_heads": "heads", "ffn": "4 x hidden", "gated_mlp": False, "dropout": True, "gpus_per_node": 8,
            "fabric_gb_s_per_gpu": FABRIC_DEFAULT}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _at_most(name: str, **kw):
    return Field(ge=1, le=LIMITS[name], **kw)


class ModelShape(_Strict):
    layers: int = _at_most("layers")
    hidden: int = _at_most("hidden")
    heads: int = _at_most("heads")
    kv_heads: Optional[int] = _at_most("kv_heads", default=None)
    ffn: Optional[int] = _at_most("ffn", default=None)
    gated_mlp: Optional[bool] = None
    dropout: Optional[bool] = None
    vocab: int = _at_most("vocab")
    seq_len: int = _at_most("seq_len")


class Cluster(_Strict):
    gpu: Literal["a100-sxm-80gb", "h100-sxm-80gb"]
    gpus: int = _at_most("gpus")
    gpus_per_node: Optional[int] = _at_most("gpus_per_node", default=None)
    fabric_gb_s_per_gpu: Optional[float] = Field(default=None, gt=0)
    fabric: Optional[str] = None       # data/hardware/fabrics/fabrics.json; null: none stated


class Config(_Strict):
    tp: int = Field(ge=1)
    pp: int = Field(ge=1)
    dp: int = Field(ge=1)
    cp: Optional[int] = Field(default=None, ge=1)
    vp: Optional[int] = Field(default=None, ge=1)
    micro_batch: Optional[int] = Field(default=None, ge=1)
    sequence_parallel: Optional[bool] = None
    zero: Optional[Literal[0, 1, 2, 3]] = None
    recompute: Optional[Literal["none", "selective", "op", "full"]] = None
    tp_comm_overlap: Optional[bool] = None

    def ranks(self) -> int:
        """tp x pp x dp x cp (cp null: 1), the GPUs the configuration needs."""
        return self.tp * self.pp * self.dp * (self.cp or 1)


class Measured(_Strict):
    tokens_per_s_per_gpu: float = Field(gt=0)
    basis: Optional[str] = None
    tflops_per_gpu: Optional[float] = Field(default=None, gt=0)
    tflops_convention: Optional[str] = None
    # the peak memory per GPU the source measured (GB), and what it counts (allocated, reserved, ...); an
    # optional field beyond the spec's schema: validate sets the memory model's estimate beside it
    peak_memory_gb: Optional[float] = Field(default=None, gt=0)
    memory_basis: Optional[str] = None


class Run(_Strict):
    name: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    assumed: list[str] = Field(default_factory=list)
    stack: Optional[str] = None           # data/stacks/<stack>.json; null: stacks.DEFAULT_STACK
    model: ModelShape
    cluster: Cluster
    global_batch: int = _at_most("global_batch")
    precision: Literal["bf16", "fp16"]
    config: Config
    measured: Measured


class OutOfMemory(_Strict):
    """A layout the source reports running out of memory: the run it names (``like``: same model, cluster,
    precision and stack) under its own ``config`` and ``global_batch``, with no measurement."""
    name: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    like: str = Field(min_length=1)
    global_batch: int = _at_most("global_batch")
    config: Config


class RunsFile(_Strict):
    source: str = Field(min_length=1)
    runs: list[Run] = Field(min_length=1)
    out_of_memory: list[OutOfMemory] = Field(default_factory=list)


def _describe(e: ValidationError, runs_raw) -> tuple[str, str]:
    err = e.errors()[0]
    loc = list(err["loc"])
    run = ""
    if len(loc) >= 2 and loc[0] == "runs" and isinstance(loc[1], int):
        i = loc[1]
        raw = runs_raw[i] if isinstance(runs_raw, list) and i < len(runs_raw) else None
        name = raw.get("name") if isinstance(raw, dict) else None
        run = f"run {name!r}" if name else f"run #{i}"
        loc = loc[2:]
    field = ".".join(str(x) for x in loc) or "(top level)"
    value = f"{_short(err['input'])}: " if err["type"] not in ("missing", "extra_forbidden") else ""
    why = ""
    if err["type"] == "less_than_equal" and loc and loc[-1] in LIMITS:
        why = " (far beyond any published run; larger is a typo)"
    return run, f"field {field}: {value}{err['msg']}{why}"


def _short(v) -> str:
    text = json.dumps(v) if isinstance(v, (int, float, str, bool)) or v is None else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def check_shape(path: str, run: Run) -> None:
    """The model's heads split its hidden size and its key-value heads split its heads (what ``to_shape``
    needs); a :class:`UserError` naming the file, the run and the field otherwise."""
    m = run.model
    if m.hidden % m.heads:
        raise UserError(f"{path}: run {run.name!r}: field model.heads: {m.heads} does not divide model.hidden "
                        f"{m.hidden}; allowed: a divisor of hidden (each head is hidden / heads wide)")
    kv = m.kv_heads or m.heads
    if m.heads % kv:
        raise UserError(f"{path}: run {run.name!r}: field model.kv_heads: {kv} does not divide model.heads "
                        f"{m.heads}; allowed: a divisor of heads (grouped-query attention)")


def check_config(path: str, run: Run) -> None:
    """The run's configuration against its model and batch (``layout.check_layout``, with the embedding's and
    the head's chunks allowed as the most lenient rules allow them); a :class:`UserError` naming the file, the
    run and the field, as ``validate`` names a configuration its rules refuse."""
    from .search.layout import LayoutError, check_layout

    if run.config.ranks() != run.cluster.gpus:
        return  # the GPU count's own line comes from load_runs
    try:
        check_layout(to_job(run, gpu=False), to_config(run), spare_chunks=2)
    except LayoutError as e:
        raise UserError(f"{path}: run {run.name!r}: field config: {e}") from None


def check_fabric(path: str, run: Run) -> None:
    """UserError naming the run and field ``cluster.fabric`` where it names no fabric of fabrics.json."""
    from .search.fabrics import fabric_names

    f = run.cluster.fabric
    if f is not None and f not in fabric_names():
        raise UserError(f"{path}: run {run.name!r}: field cluster.fabric: {f!r} is not a fabric of "
                         f"data/hardware/fabrics/fabrics.json; known: {', '.join(fabric_names())}")


def load_runs(path: str) -> RunsFile:
    """A runs file, checked; UserError ``FILE: run NAME: field F: what is wrong`` on a bad one."""
    with open(path) as f:
        try:
            raw = json.load(f)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    try:
        rf = RunsFile.model_validate(raw)
    except ValidationError as e:
        run, what = _describe(e, raw.get("runs") if isinstance(raw, dict) else None)
        raise UserError(f"{path}: {run + ': ' if run else ''}{what}") from None
    for r in rf.runs:  # before any estimate: a tool's progress bar never comes before the line
        check_fabric(path, r)
        check_shape(path, r)
        check_config(path, r)
    names = [r.name for r in rf.runs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"{path}: run {dup[0]!r}: field name: appears more than once")
    from .stacks import resolve_stack

    for i, r in enumerate(rf.runs):
        if r.stack is not None:
            try:
                name = resolve_stack(r.stack)
            except ValueError as e:
                raise UserError(f"{path}: run {r.name!r}: field stack: {e} (data/stacks/)") from None
            if name != r.stack:        # an alias: the run carries the stack's own name from here on
                rf.runs[i] = r = r.model_copy(update={"stack": name})
        if r.config.ranks() != r.cluster.gpus:
            raise UserError(f"{path}: run {r.name!r}: field config: tp x pp x dp x cp = {r.config.ranks()} but "
                             f"cluster.gpus = {r.cluster.gpus}")
    by_name = {r.name: r for r in rf.runs}
    for o in rf.out_of_memory:
        if o.like not in by_name:
            raise UserError(f"{path}: out_of_memory {o.name!r}: field like: {o.like!r} names no run of the file")
        gpus = by_name[o.like].cluster.gpus
        if o.config.ranks() != gpus:
            raise UserError(f"{path}: out_of_memory {o.name!r}: field config: tp x pp x dp x cp = "
                             f"{o.config.ranks()} but the cluster of {o.like!r} has {gpus} GPUs")
    for run in out_of_memory_runs(rf):
        check_config(path, run)
    return rf


def out_of_memory_runs(rf: RunsFile) -> list[Run]:
    """The file's ``out_of_memory`` layouts as Runs to price: each the run it is ``like`` with its own name,
    quote, config and global batch (the measurement is that run's, and means nothing here)."""
    by_name = {r.name: r for r in rf.runs}
    return [by_name[o.like].model_copy(update={"name": o.name, "quote": o.quote, "config": o.config,
                                               "global_batch": o.global_batch}) for o in rf.out_of_memory]


def filled(run: Run) -> list[str]:
    """The fields of ``run`` that are null and get the planner's default, as ``field=value`` strings."""
    out = []
    job_cfg = to_config(run)
    for f in ("cp", "vp", "micro_batch", "sequence_parallel", "zero", "recompute"):
        if getattr(run.config, f) is None:
            out.append(f"{f}={getattr(job_cfg, f)}")
    job = to_job(run, gpu=False)
    values = {"kv_heads": job.shape.n_kv_heads, "ffn": job.shape.ffn, "gated_mlp": job.shape.gated_mlp,
              "dropout": job.dropout, "gpus_per_node": job.gpus_per_node, "fabric_gb_s_per_gpu": job.port_gb_s}
    for f in ("kv_heads", "ffn", "gated_mlp", "dropout"):
        if getattr(run.model, f) is None:
            out.append(f"{f}={values[f]}")
    for f in ("gpus_per_node", "fabric_gb_s_per_gpu"):
        # a stated fabric gives the port its line rate: not a default
        if getattr(run.cluster, f) is None and not (f == "fabric_gb_s_per_gpu" and run.cluster.fabric):
            out.append(f"{f}={values[f]}")
    return out


def to_shape(run: Run):
    from .search.analytic import run_shape

    m = run.model
    kv = m.kv_heads or m.heads
    if m.hidden % m.heads or m.heads % kv:
        raise UserError(f"run {run.name!r}: field model: hidden must divide by heads and heads by kv_heads")
    return run_shape(run.name, m.model_dump())


def to_job(run: Run, gpu=None, global_batch: int | None = None):
    """The run's ``layout.Job`` (``gpu``: a GpuSpec instead of the stored one of its GPU type)."""
    from .search.efficiency import load_gpu
    from .search.layout import Job

    c = run.cluster
    return Job(shape=to_shape(run), gpu=load_gpu(c.gpu) if gpu is None else gpu, n_gpus=c.gpus,
               gpus_per_node=c.gpus_per_node or 8, port_gb_s=port_gb_s(c),
               global_batch=global_batch or run.global_batch, dtype=run.precision,
               dropout=run.model.dropout is not False, fabric=c.fabric or "")


def port_gb_s(c: Cluster) -> float:
    """GB/s per GPU between nodes: as stated, else the stated fabric's line rate per GPU, else the default."""
    return c.fabric_gb_s_per_gpu or port_for(c.gpu, c.fabric)


def to_config(run: Run):
    from .search.layout import ParallelConfig

    c = run.config
    sp = c.sequence_parallel if c.sequence_parallel is not None else c.tp > 1
    return ParallelConfig(tp=c.tp, pp=c.pp, dp=c.dp, cp=c.cp or 1, vp=c.vp or 1, micro_batch=c.micro_batch or 1,
                          sequence_parallel=sp, zero=c.zero if c.zero is not None else 0,
                          recompute=c.recompute or "none")
