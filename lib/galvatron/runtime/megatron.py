"""A plan in Megatron-LM's terms: the command-line settings that reproduce it there, and what has none.

Megatron-LM applies one tensor-parallel degree, one data-parallel degree and one recompute rule to every
layer, puts TP on consecutive ranks, and runs a 1F1B pipeline schedule. A Galvatron plan may choose per layer;
where it does, Megatron has no equivalent, and ``megatron_settings`` says so instead of guessing. Flags as in
Megatron-LM's ``megatron/training/arguments.py`` (``--tensor-model-parallel-size``,
``--pipeline-model-parallel-size``, ``--decoder-first/last-pipeline-num-layers``, ``--use-torch-fsdp2``,
``--use-distributed-optimizer``, ``--recompute-granularity/-method/-num-layers``, ``--micro-batch-size``,
``--global-batch-size``).

Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

from dataclasses import dataclass

from lib.html_table import HTMLTable


@dataclass(frozen=True)
class MegatronSettings:
    """``flags``: Megatron-LM arguments that reproduce what they can of the plan; ``none``: what of the plan
    has no Megatron-LM equivalent; ``notes``: differences that remain even where flags exist."""

    flags: tuple
    none: tuple
    notes: tuple

    @property
    def exact(self) -> bool:
        return not self.none


def _search_plan(plan):
    from .memory_report import search_plan_of

    return search_plan_of(plan)


def megatron_settings(plan) -> MegatronSettings:
    """Map ``plan`` (a search ``Plan`` or a ``RunPlan``) onto Megatron-LM's settings."""
    p = _search_plan(plan)
    W, pp, L = p.world_size, p.pp_deg, p.n_layers
    flags, none, notes = [], [], []
    tps = sorted(set(p.tp_sizes_enc))
    stage = W // pp
    if len(tps) == 1:
        tp = tps[0]
        flags.append(f"--tensor-model-parallel-size {tp}")
    else:
        tp = None
        none.append(f"per-layer TP degrees ({', '.join(map(str, tps))}): Megatron uses one for every layer")
    strided = [i for i, (t, c) in enumerate(zip(p.tp_sizes_enc, p.tp_consecutive_flags))
               if not c and 1 < t < stage]
    if strided:
        none.append(f"TP on strided ranks ({len(strided)} of {L} layers): Megatron keeps TP on consecutive "
                    f"ranks")
    flags.append(f"--pipeline-model-parallel-size {pp}")
    div = p.stage_sizes()
    if pp > 1 and len(set(div)) > 1:
        if len(set(div[1:-1])) <= 1:  # Megatron splits what the first and last stage leave evenly
            flags += [f"--decoder-first-pipeline-num-layers {div[0]}",
                      f"--decoder-last-pipeline-num-layers {div[-1]}"]
        else:
            none.append(f"layers per stage {list(div)}: Megatron sets only the first and last stage's count")
    sharded = [bool(d) and W // (pp * t) > 1 for t, d in zip(p.tp_sizes_enc, p.dp_types_enc)]
    has_dp = [W // (pp * t) > 1 for t in p.tp_sizes_enc]
    if any(sharded):
        if all(s for s, h in zip(sharded, has_dp) if h):
            flags.append("--use-torch-fsdp2")
            if pp > 1:
                none.append("SDP with a pipeline: Megatron's --use-torch-fsdp2 does not work with PP")
        else:
            none.append(f"per-layer SDP ({sum(sharded)} of {L} layers sharded): Megatron shards all or none")
        notes.append("--use-distributed-optimizer shards only the optimizer states (ZeRO-1), not the "
                     "parameters and gradients that SDP shards")
    ck = list(p.checkpoint)
    if all(ck):
        flags += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    elif any(ck):
        starts = [sum(div[:s]) for s in range(pp)]
        per_stage = [ck[a:a + n] for a, n in zip(starts, div)]
        k = sum(per_stage[0])
        if all(sum(c) == k and all(c[:k]) for c in per_stage):
            flags += ["--recompute-granularity full", "--recompute-method block", f"--recompute-num-layers {k}"]
        else:
            none.append(f"per-layer recompute ({sum(ck)} of {L} layers): Megatron recomputes the first k "
                        f"layers of every stage")
    if tp is not None:
        dp = W // (pp * tp)
        if p.global_bsz % (p.chunks * dp) == 0:
            flags += [f"--global-batch-size {p.global_bsz}",
                      f"--micro-batch-size {p.global_bsz // (p.chunks * dp)}"]
        else:
            none.append(f"micro-batch {p.global_bsz}/({p.chunks} x dp {dp}) is not a whole number of samples")
    if pp > 1:
        notes.append("Megatron's pipeline runs 1F1B (at most pp micro-batches' activations in flight); the "
                     "book's runtime and the cost model run GPipe (all of them)")
    return MegatronSettings(tuple(flags), tuple(none), tuple(notes))


COLUMNS = ("--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--use-torch-fsdp2",
           "--recompute-method", "--micro-batch-size")
HEADS = ("TP size", "PP size", "FSDP2", "recompute", "micro-batch")  # short names of COLUMNS


def megatron_table(plans: dict, caption: str = "") -> HTMLTable:
    """One row per named plan: the value of each of Megatron-LM's main flags ("-" where the plan has none to
    give, "yes" for a switch), and what of the plan has no equivalent ("none": all of it maps)."""
    rows = []
    for name, plan in plans.items():
        m = megatron_settings(plan)
        vals = dict((f.split(" ", 1) + [""])[:2] for f in m.flags)
        cells = []
        for c in COLUMNS:
            v = vals.get(c)
            if c == "--recompute-method" and v:
                v = f"{v}, {vals['--recompute-num-layers']} layer(s)"
            cells.append("-" if v is None else (v or "yes"))
        rows.append((name, *cells, "; ".join(m.none) or "none"))
    key = "; ".join(f"{h} {c}" for h, c in zip(HEADS, COLUMNS))
    return HTMLTable(("plan", *HEADS, "no Megatron-LM equivalent"), tuple(rows),
                     (caption + "; " if caption else "") + "columns: " + key, nowrap=(1, 2, 3, 4, 5), left=(0, 6))


__all__ = ["MegatronSettings", "megatron_settings", "megatron_table", "COLUMNS", "HEADS"]
