"""One training job followed through the book's three models: Galvatron's search (or, with ``rules="practice"``, the
practice planner of ``practice_plan.py``) picks a plan and estimates its step (Part II), the straggler model turns
the step into a step efficiency with and without backups (Part III), and the failure model (Part III's
production-calibrated one by default, ``Job.failures``) with a checkpoint cost from the plan's model states gives
the Young-Daly interval and the kept share. Goodput = kept share x step efficiency, measured against the step's
own ideal; ``OneRun.delivered`` = tokens/s per GPU x step efficiency x kept share is absolute, so two steps
compare on it. The chapter's chain starts from Meta's run (``meta_run.py``); any ``PlanEstimate`` runs through
``one_run``. Every number is an estimate from the profiles named in ``Job``; nothing here is measured. Pure
functions; numpy only.

Backups apply to data-parallel replicas only: a tensor- or pipeline-parallel shard holds a part of the model
that no other GPU computes, so the step cannot close without it. A backup is a whole extra replica (tp x pp
GPUs), and dropping the slowest replica drops the slow GPU in it.

Used in: book/closing/01_one_run.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace

from lib import hardware
from lib.galvatron.search.analytic import SHAPES, analytic_profile
from lib.galvatron.search.cost import layer_time_terms
from lib.galvatron.search.engine import search
from lib.galvatron.search.rules import ALL_PRESETS, PRESETS
from lib.galvatron.search.strategies import generate
from lib.straggler import calibration as scal
from lib.straggler import model as sm

from .llama3 import LLAMA3_EFFECTIVE_TRAINING, LLAMA3_TOKENS_PER_STEP  # noqa: F401 (re-export)


def rule_names() -> list[str]:
    """The cost rules a job may name (``lib.galvatron.search.rules.ALL_PRESETS``): the layer-wise search's
    presets, and ``practice`` (priced by its own planner, ``practice_plan.py``)."""
    return sorted(ALL_PRESETS)


#: The failure models a job may name: Part III's production-calibrated model, or the page's.
FAILURE_MODELS = ("production", "page")
#: The GPU type (``data/hardware/gpus/``) of each cluster profile: the failure model's per-type rate (the same
#: table as ``practice_plan.CLUSTER_GPU``, kept here so that this module imports neither the planner nor
#: pydantic: the live widget runs it in a browser).
CLUSTER_GPU = {"h100-cluster": "h100-sxm-80gb"}


@dataclass(frozen=True)
class Job:
    """The job and every input its estimate depends on.

    model: a shape of ``lib.galvatron.search.analytic.SHAPES``; n_gpus: a power of two, whole nodes of the
    cluster profile; tokens_per_gpu: global batch in tokens / GPUs (Llama 3 405B: 16M / 16,384 = 1,024);
    budget_gb: memory per GPU for the search (GiB); storage_bw_gb_per_s: what storage absorbs while a
    checkpoint is written (GB = 1e9 bytes); per_gpu_mtbf_h, restart_min: the failure model; backup_share:
    extra data-parallel replicas as a share of the replicas; jitter, p_slow, slow_factor: the step model of
    Part III; max_tp: the largest tensor-parallel degree searched (8 keeps TP inside a node); rules: the
    search's cost rules, a preset name of ``lib.galvatron.search.rules`` (default ``galvatron2``, Part II's;
    ``practice`` plans with ``practice_plan``); failures: the failure model, ``"production"`` (Part III's
    production-calibrated model: a job of N GPUs fails as N^alpha, ``lib.straggler.predict.mtbf_min``) or
    ``"page"`` (every GPU fails on its own: the cluster's MTBF is per_gpu_mtbf_h / N). Under either,
    per_gpu_mtbf_h is one GPU's rate at the size it was measured at (Llama 3's 16,384 H100s).
    """

    model: str = "llama3-405b"
    n_gpus: int = 16_384
    cluster: str = "h100-cluster"
    tokens_per_gpu: int = 1024
    budget_gb: float = 79.6
    storage_bw_gb_per_s: float = 2000.0
    per_gpu_mtbf_h: float = sm.PER_GPU_MTBF_H
    restart_min: float = 5.0
    backup_share: float = 0.02
    jitter: float = sm.StepModel.jitter  # Part III's step model's defaults, one source
    p_slow: float = sm.StepModel.p_slow
    slow_factor: float = sm.StepModel.slow_factor
    max_tp: int = 8
    rules: str = "galvatron2"
    failures: str = "production"

    def __post_init__(self):
        if self.model not in SHAPES:
            raise ValueError(f"model must be one of {sorted(SHAPES)}; got {self.model!r}")
        if self.cluster not in hardware.cluster_names():
            raise ValueError(f"cluster must be one of {hardware.cluster_names()}; got {self.cluster!r}")
        for f in ("n_gpus", "tokens_per_gpu", "max_tp"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{f} must be an integer >= 1; got {v!r}")
        if not isinstance(self.rules, str) or self.rules not in rule_names():
            raise ValueError(f"rules must be one of {rule_names()}; got {self.rules!r}")
        if self.failures not in FAILURE_MODELS:
            raise ValueError(f"failures must be one of {list(FAILURE_MODELS)}; got {self.failures!r}")
        if self.n_gpus & (self.n_gpus - 1):
            raise ValueError(f"n_gpus must be a power of two (whole nodes); got {self.n_gpus!r}")
        if self.max_tp & (self.max_tp - 1):
            raise ValueError(f"max_tp must be a power of two; got {self.max_tp!r}")
        for f in ("budget_gb", "storage_bw_gb_per_s", "per_gpu_mtbf_h", "jitter"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf):
                raise ValueError(f"{f} must be a finite number > 0; got {v!r}")
        for f, lo, hi in (("restart_min", 0, math.inf), ("backup_share", 0, 1), ("p_slow", 0, 1)):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v < hi):
                raise ValueError(f"{f} must be a number in [{lo}, {hi}); got {v!r}")
        if not (isinstance(self.slow_factor, (int, float)) and 1 <= self.slow_factor < math.inf):
            raise ValueError(f"slow_factor must be a finite number >= 1; got {self.slow_factor!r}")
        tokens = self.tokens_per_gpu * self.n_gpus
        seq = SHAPES[self.model].seq_len
        if tokens % seq:
            raise ValueError(f"tokens_per_gpu x n_gpus must be whole sequences of {seq} tokens; got "
                             f"{self.tokens_per_gpu} x {self.n_gpus}")
        self.node_count()  # the cluster profile refuses a size it cannot hold

    def node_count(self) -> int:
        prof = hardware.load_cluster(self.cluster)
        g = prof.gpus_per_node
        if self.n_gpus % g or not 1 <= self.n_gpus // g <= prof.max_nodes:
            raise ValueError(f"n_gpus must be whole nodes of {g} GPUs, at most {prof.max_nodes * g} "
                             f"({self.cluster}); got {self.n_gpus}")
        return self.n_gpus // g

    @property
    def global_bsz(self) -> int:
        """Sequences per step."""
        return self.tokens_per_gpu * self.n_gpus // SHAPES[self.model].seq_len

    def to_dict(self) -> dict:
        return asdict(self)


def profiles(job: Job):
    """The analytic model and cluster profiles (the embedding split over a node's GPUs) and the hardware."""
    hw = hardware.load_cluster(job.cluster, job.node_count())
    model, cluster = analytic_profile(job.model, hw, embedding_shards=min(hw.gpus_per_node, job.n_gpus))
    return model, cluster, hw


@dataclass(frozen=True)
class PlanEstimate:
    """The searched plan and what the cost model says of it: seconds per step, split into compute and the
    rest (communication and its slowdown), peak memory per GPU, and its degrees."""

    plan: object
    step_s: float
    compute_s: float
    mem_gb: float
    tp: int
    pp: int
    dp: int
    model_state_bytes: float
    search_s: float
    cp: int = 1  # context parallelism (the practice planner's): a replica is tp x cp x pp GPUs

    @property
    def sync_s(self) -> float:
        return max(self.step_s - self.compute_s, 0.0)

    @property
    def replica_gpus(self) -> int:
        """GPUs of one data-parallel replica: tp x cp x pp (the unit a backup replaces)."""
        return self.tp * self.cp * self.pp


def _chunks(job: Job, pp: int) -> int:
    """Micro-batches per step for a pipeline of ``pp``: one sequence each per replica of ``max_tp`` x pp
    GPUs (as Llama 3's 16 per replica on 16,384 GPUs), at least 1."""
    return max(1, job.global_bsz * job.max_tp * pp // job.n_gpus)


def search_plan(job: Job) -> PlanEstimate:
    """Galvatron's search on the job's cluster, one search per pipeline degree with its micro-batch count;
    the plan with the shortest step wins. ValueError when no plan fits the budget. Under ``practice``
    rules: the practice search and ``cost.step_estimate`` (``_practice_estimate``)."""
    if job.rules == "practice":
        return _practice_estimate(job)
    model, cluster, _ = profiles(job)
    B, n = job.global_bsz, job.n_gpus
    t0 = time.perf_counter()
    strats = [s for s in generate(n, ckpt=True, max_tp=job.max_tp) if s.dp <= B and s.pp <= model.n_layers]
    best, notes = None, []
    for pp in sorted({s.pp for s in strats}):
        mine = [s for s in strats if s.pp == pp]
        res = search(model, cluster, job.budget_gb, strategies=mine, batch_sizes=[B], chunks=_chunks(job, pp),
                     rules=job.rules)
        if res.feasible and (best is None or res.plan.est_iter_s < best.plan.est_iter_s):
            best = res
        elif not res.feasible:
            notes.append(res.message)
    if best is None:
        raise ValueError(f"no plan for {job.model} on {n} GPUs fits budget_gb={job.budget_gb}: {notes[0]}")
    plan = best.plan
    strategies, layers = plan.strategies(), model.layers()
    compute = 0.0
    for lt, s in zip(layers, strategies):
        terms = layer_time_terms(lt, s, B, cluster, plan.chunks, model.extra_overhead_ms, PRESETS[job.rules])
        compute += (terms["fwd_ms"] + terms["bwd_ms"]) * terms["bubble_factor"] * terms["total_s"] / terms["total_ms_24"]
    first = strategies[0]
    return PlanEstimate(plan=plan, step_s=plan.est_iter_s, compute_s=compute,
                        mem_gb=plan.est_mem_mb_per_device / 1024, tp=first.tp, pp=plan.pp_deg, dp=first.dp,
                        model_state_bytes=model_state_bytes(job), search_s=time.perf_counter() - t0)


def _practice_estimate(job: Job) -> PlanEstimate:
    """The practice planner's layout (``practice_plan.search``) as a ``PlanEstimate``: T_c its pipeline's
    time, T_sync the rest (exposed sends and data-parallel collectives)."""
    from .practice_plan import search as practice_search

    plan, search_s = practice_search(job)
    c, est = plan.config, plan.terms
    return PlanEstimate(plan=plan, step_s=est["step_s"], compute_s=min(est["pipeline_s"], est["step_s"]),
                        mem_gb=est["peak_bytes"] / 2**30, tp=c.tp, pp=c.pp, dp=c.dp, cp=c.cp,
                        model_state_bytes=model_state_bytes(job), search_s=search_s)


def model_state_bytes(job: Job) -> float:
    """Bytes of one copy of the model states the cost model counts (16 per parameter: weights, gradients, Adam
    moments): what a checkpoint writes."""
    model, _, _ = profiles(job)
    layer_mb = sum(lt.param_mb * n for lt, n in zip(model.layer_types, model.layer_counts))
    emb_mb = model.other_model_states_mb * min(hardware.load_cluster(job.cluster).gpus_per_node, job.n_gpus)
    return (4 * layer_mb + emb_mb) * 2**20


def step_model(job: Job, est: PlanEstimate) -> sm.StepModel:
    """Part III's step model with the plan's compute and communication as T_c and T_sync."""
    return sm.StepModel(compute_s=est.compute_s, jitter=job.jitter, p_slow=job.p_slow,
                        slow_factor=job.slow_factor, sync_s=est.sync_s)


def backup_replicas(job: Job, est: PlanEstimate) -> int:
    """Extra data-parallel replicas: ceil(backup_share x dp) (``lib.straggler.model.backup_count``)."""
    return sm.backup_count(est.dp, job.backup_share)


def step_efficiency(job: Job, est: PlanEstimate, backups: bool) -> float:
    """Step efficiency of the plan's step at the job's GPU count, with or without backup replicas.

    Without: ``lib.straggler.model.step_efficiency(N)``. With b backup replicas of r = tp x pp GPUs: N + b r
    GPUs draw slow GPUs, the step waits for all but the b slowest replicas (each slow GPU sits in its own
    replica: slow GPUs are rare), and the b r GPUs are charged as cost. That is the model's expected step with
    b dropped and the Poisson rate (N + b r) p, so it is computed as ``expected_step_s(N, b)`` with p scaled
    by (N + b r) / (N + b)."""
    step, n = step_model(job, est), job.n_gpus
    if not backups:
        return sm.step_efficiency(n, 0, step)
    b = backup_replicas(job, est)
    extra = b * est.replica_gpus
    scaled = replace(step, p_slow=min(step.p_slow * (n + extra) / (n + b), 1 - 1e-12))
    return step.ideal_step_s / sm.expected_step_s(n, b, scaled) * n / (n + extra)


def checkpoint_min(job: Job, est: PlanEstimate) -> float:
    """Minutes to write one checkpoint: the plan's model-state bytes / storage bandwidth."""
    return est.model_state_bytes / (job.storage_bw_gb_per_s * 1e9) / 60.0


def cluster_mtbf_min(job: Job, n_gpus: int) -> float:
    """Mean minutes between failures of ``n_gpus`` GPUs of the job's cluster under ``job.failures``.

    ``"page"``: per_gpu_mtbf_h x 60 / n_gpus. ``"production"``: Part III's production-calibrated model as
    ``lib.straggler.predict.mtbf_min(gpu, n_gpus, PRODUCTION)`` computes it for a GPU type with a reference
    size (the H100: its rate measured on Llama 3's 16,384 GPUs, a job's rate growing as N^alpha, alpha fitted
    to Kokolis et al.'s MTTFs, ``lib.straggler.calibration``), with per_gpu_mtbf_h as the rate at that size
    (the job's figure still counts): ``calibration.size_law_mtbf_min``, the size law ``predict`` uses too,
    without its pydantic reader; tests/closing/test_run.py checks the two agree. At 16,384 H100s the two models agree; below
    it the production model fails more often."""
    if not isinstance(n_gpus, int) or n_gpus < 1:
        raise ValueError(f"n_gpus must be an integer >= 1; got {n_gpus!r}")
    if job.failures == "page":
        return sm.FailureModel(per_gpu_mtbf_h=job.per_gpu_mtbf_h).cluster_mtbf_min(n_gpus)
    gpu = CLUSTER_GPU.get(job.cluster)
    if gpu not in scal.RATE_REF_GPUS:
        raise ValueError(f"cluster must be one of {sorted(CLUSTER_GPU)} under failures='production'; "
                         f"got {job.cluster!r}")
    return scal.size_law_mtbf_min(job.per_gpu_mtbf_h, gpu, n_gpus)


def failure_stage(job: Job, est: PlanEstimate, backups: bool) -> dict:
    """Cluster MTBF (backup GPUs fail too; ``cluster_mtbf_min``), checkpoint cost, Young-Daly interval and the
    kept share at it, with the job's fixed restart (Part III's production model keeps the restart fixed: a
    restart growing with the job would put Llama 3 below its reported 90%)."""
    fm = sm.FailureModel(per_gpu_mtbf_h=job.per_gpu_mtbf_h, checkpoint_min=checkpoint_min(job, est),
                         restart_min=job.restart_min)
    extra = backup_replicas(job, est) * est.replica_gpus if backups else 0
    mtbf = cluster_mtbf_min(job, job.n_gpus + extra)
    yd = sm.young_daly_min(mtbf, fm.checkpoint_min)
    kept = float(sm.checkpoint_shares(yd, mtbf, fm.checkpoint_min, fm.restart_min)["kept"])
    return {"mtbf_min": mtbf, "checkpoint_min": fm.checkpoint_min, "interval_min": yd, "kept": kept}


@dataclass(frozen=True)
class OneRun:
    """Every stage of the job's estimate (see ``one_run``)."""

    job: Job
    est: PlanEstimate
    eff_no_backup: float
    eff_backup: float
    backup_gpus: int
    fail_no_backup: dict
    fail_backup: dict

    @property
    def goodput_no_backup(self) -> float:
        return self.fail_no_backup["kept"] * self.eff_no_backup

    @property
    def goodput_backup(self) -> float:
        return self.fail_backup["kept"] * self.eff_backup

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Tokens per second per GPU of the step (global batch x sequence / (step x GPUs)), before stragglers
        and failures."""
        return self.job.global_bsz * SHAPES[self.job.model].seq_len / (self.est.step_s * self.job.n_gpus)

    def delivered(self, backups: bool) -> float:
        """Tokens per second per GPU paid for, kept: tokens/s per GPU x step efficiency x kept share (the
        backup GPUs are paid for: the step efficiency with backups charges them). Goodput is measured against
        each step's own ideal; this is absolute, so two steps compare on it."""
        if backups:
            return self.tokens_per_s_per_gpu * self.eff_backup * self.fail_backup["kept"]
        return self.tokens_per_s_per_gpu * self.eff_no_backup * self.fail_no_backup["kept"]

    def stages(self) -> dict:
        """The numbers the chapter's slider draws, one per stage (no backups, then with backups)."""
        return {"step_s": self.est.step_s, "eff_no_backup": self.eff_no_backup, "eff_backup": self.eff_backup,
                "interval_min": self.fail_no_backup["interval_min"], "kept": self.fail_no_backup["kept"],
                "goodput_no_backup": self.goodput_no_backup, "goodput_backup": self.goodput_backup}


def one_run(job: Job, est: PlanEstimate | None = None) -> OneRun:
    """The whole chain for ``job`` (``est``: a plan already searched for it)."""
    est = search_plan(job) if est is None else est
    return OneRun(job, est, step_efficiency(job, est, False), step_efficiency(job, est, True),
                  backup_replicas(job, est) * est.replica_gpus, failure_stage(job, est, False),
                  failure_stage(job, est, True))
