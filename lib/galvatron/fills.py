"""Honest fills: a field a published run leaves null is filled by searching that field alone for the fastest
setting that fits in memory, since a run that trained did fit.

The fields searched are the run's own choices (``SEARCHED``): ZeRO stage, recompute, sequence parallelism, the
interleaving ``vp`` and the micro-batch. Each null one is tried over its values with every other field held
(stated fields as stated, other null fields at their current fill), starting from the documented defaults of
``published.py``; the pass goes over the fields in the order of ``SEARCHED`` twice, so that a field filled
later can change an earlier one's best value. A setting that fits beats one that does not; among those that
fit the higher tokens/s/GPU wins (a tie keeps the current value); where nothing fits, the smallest peak.
Stated fields are never changed; fields outside the config (``kv_heads``, ``ffn``, the fabric ...) keep their
documented defaults.

Used in: ``validate.estimate_run`` (``fill="search"``, the default of ``validate``).
"""

from __future__ import annotations

from dataclasses import replace

from .search.activations import RECOMPUTE
from .search.cost import step_estimate
from .search.layout import LayoutError
from .search.rules import stack_allows

#: The config fields filled by search, in the order each pass tries them.
SEARCHED = ("zero", "recompute", "sequence_parallel", "vp", "micro_batch")
PASSES = 2
MICRO_BATCHES = (1, 2, 4, 8)
VP_DEGREES = (1, 2, 4, 8)


def candidates(field: str, cfg, job, rules=None) -> list:
    """The values ``field`` may take for layout ``cfg`` of ``job``, within what the run's stack could do
    (``rules``' stack limits, ``rules.stack_allows``: a 2021 stack is not filled with ZeRO-2)."""
    values = _values(field, cfg, job)
    if rules is None or field == "micro_batch":     # no stack limits the micro-batch
        return values
    return [v for v in values if stack_allows(rules, field, v)]


def _values(field: str, cfg, job) -> list:
    """The values ``field`` may take for layout ``cfg`` of ``job``, whatever the stack."""
    if field == "zero":
        return [0, 1, 2, 3]
    if field == "recompute":
        return list(RECOMPUTE)
    if field == "sequence_parallel":
        return [False, True] if cfg.tp > 1 else [False]
    if field == "vp":
        return [v for v in VP_DEGREES if cfg.pp > 1 and cfg.pp * v <= job.shape.n_layers + 2] or [1]
    if field == "micro_batch":
        local = job.global_batch // cfg.dp
        return [mb for mb in MICRO_BATCHES if local % mb == 0 and local // mb >= cfg.pp] or [1]
    raise ValueError(f"field must be one of {SEARCHED}; got {field!r}")


def _key(est) -> tuple:
    return (est["fits"], est["tokens_per_s_per_gpu"] if est["fits"] else -est["peak_bytes"])


def fill_by_search(job, cfg, null_fields, rules) -> tuple:
    """(config, its ``step_estimate``, {field: value filled}) for layout ``cfg`` of ``job`` whose
    ``null_fields`` the source does not state (see the module docstring)."""
    null = [f for f in SEARCHED if f in set(null_fields)]
    est = step_estimate(job, cfg, rules)
    for _ in range(PASSES if null else 0):
        for field in null:
            for value in candidates(field, cfg, job, rules):
                if value == getattr(cfg, field):
                    continue
                trial = replace(cfg, **{field: value})
                try:
                    e = step_estimate(job, trial, rules)
                except LayoutError:
                    continue
                if _key(e) > _key(est):
                    cfg, est = trial, e
    return cfg, est, {f: getattr(cfg, f) for f in null}
