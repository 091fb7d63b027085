"""Software stacks as data: what the stack that trained a run does, in ``data/stacks/<name>.json``, one file per
stack, each value with its source (or the runs it was chosen on). A stack sets the cost rules' stack fields
(``search/rules.STACK_FIELDS``); a run's ``stack`` names one, and null means ``DEFAULT_STACK``, Megatron-LM.

File form: ``{"name", "aliases"?, "family"?, "family_source"?, "description", "fields": {FIELD: {"value",
"source", "chosen_on"?}}, "quoted_mfu"?: [{"gpu", "mfu", "what", "source"}]}``. ``aliases``: other names the
stack answers to, in a run's ``stack`` and ``plan --stack`` (``resolve_stack``). ``family``: the stack whose kernels this
one runs (``family_source`` says why); ``quoted_mfu``: MFUs a source quotes without a layout to price, which
``plausibility.best_published_mfu`` counts for the family.

Used in: ``validate.run_rules``, ``published.load_runs`` (the names a run may give), ``plan.py``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from .search.rules import STACK_FIELDS, STACK_NUMBERS, CostRules

STACK_DIR = Path(__file__).resolve().parents[2] / "data" / "stacks"
DEFAULT_STACK = "megatron-lm"


def stack_names(root=None) -> list[str]:
    """The stacks of ``data/stacks/`` (file names without ``.json``), sorted."""
    return sorted(p.stem for p in Path(root or STACK_DIR).glob("*.json"))


def stack_aliases() -> dict[str, str]:
    """{alias: stack name}: the other names a stack file answers to (its optional ``aliases``: "megatron" and
    "nemo" for ``megatron-lm``, "torchtitan" for ``fsdp``, ...)."""
    return {a: name for name in stack_names() for a in _read(name).get("aliases", [])}


def _read(name: str) -> dict:
    """``data/stacks/<name>.json`` as stored (unchecked: ``load_stack`` checks it)."""
    with open(STACK_DIR / f"{name}.json") as f:
        return json.load(f)


def resolve_stack(name: str | None) -> str:
    """The stack ``name`` stands for: itself, the stack an alias names, or ``DEFAULT_STACK`` for None; case,
    surrounding spaces and underscores for hyphens do not matter. ValueError listing the stacks and their
    aliases."""
    if name is None:
        return DEFAULT_STACK
    names = stack_names()
    if name in names:
        return name
    key = name.strip().lower().replace("_", "-")      # "Megatron-LM", "NeMo", "megatron_lm" read as written
    aliases = stack_aliases()
    if key in names or key in aliases:
        return aliases.get(key, key)
    also = ", ".join(f"{a} ({n})" for a, n in sorted(aliases.items()))
    raise ValueError(f"unknown stack {name!r}; allowed: {', '.join(names)}; or an alias: {also}")


@lru_cache(maxsize=None)
def load_stack(name: str | None = None) -> dict:
    """``data/stacks/<name>.json`` (``None``: the default stack) checked: every field one of
    ``STACK_FIELDS`` with a boolean ``value`` or one of ``STACK_NUMBERS`` with a whole number >= 0, each with a
    ``source``. ValueError naming the stack and field."""
    name = resolve_stack(name)
    d = _read(name)
    fields = d.get("fields")
    if not isinstance(fields, dict):
        raise ValueError(f"stack {name!r}: field fields: must be an object")
    for k, v in fields.items():
        if k not in STACK_FIELDS + STACK_NUMBERS:
            raise ValueError(f"stack {name!r}: field fields.{k}: not a stack field; allowed: "
                             f"{STACK_FIELDS + STACK_NUMBERS}")
        if k in STACK_NUMBERS:
            val = v.get("value") if isinstance(v, dict) else None
            if isinstance(val, bool) or not isinstance(val, int) or val < 0 or not v.get("source"):
                raise ValueError(f"stack {name!r}: field fields.{k}: needs a whole number >= 0 as value and a "
                                 f"source; got {val!r}")
        elif not isinstance(v, dict) or not isinstance(v.get("value"), bool) or not v.get("source"):
            raise ValueError(f"stack {name!r}: field fields.{k}: needs a boolean value and a source")
        chosen = v.get("chosen_on", [])
        if not (isinstance(chosen, list) and all(isinstance(r, str) for r in chosen)):
            raise ValueError(f"stack {name!r}: field fields.{k}.chosen_on: must be a list of run names")
    fam = d.get("family")
    if fam is not None and (fam not in stack_names() or fam == name or not d.get("family_source")):
        raise ValueError(f"stack {name!r}: field family: {fam!r} must be another stack of data/stacks/, with "
                         "a family_source")
    aliases = d.get("aliases", [])
    if not (isinstance(aliases, list) and all(isinstance(a, str) and a == a.lower() and a not in stack_names()
                                              for a in aliases)):
        raise ValueError(f"stack {name!r}: field aliases: must be a list of lower-case names that are not "
                         "themselves stacks")
    for i, q in enumerate(d.get("quoted_mfu", [])):
        if not (isinstance(q, dict) and isinstance(q.get("mfu"), float) and 0 < q["mfu"] < 1
                and q.get("gpu") and q.get("what") and q.get("source")):
            raise ValueError(f"stack {name!r}: field quoted_mfu[{i}]: needs gpu, mfu in (0, 1), what and source")
    return d


def stack_family(name: str | None = None) -> str:
    """The stack whose kernels ``name`` runs (its file's optional ``family``; itself where absent): a stack of
    another year shares its family's kernels, and so the best MFU published for them
    (``plausibility.best_published_mfu``)."""
    d = load_stack(name)
    return d.get("family", d["name"])


def chosen_on() -> dict:
    """{run name: "chose <stack>'s <field>"} for every run a stack field was chosen on (its ``chosen_on``): such
    runs judged the choice, so they are reported apart from the held-out runs."""
    out = {}
    for name in stack_names():
        for field, v in load_stack(name)["fields"].items():
            for run in v.get("chosen_on", []):
                out[run] = f"chose {name}'s {field}"
    return out


def stack_rules(rules: CostRules, name: str | None = None) -> CostRules:
    """``rules`` with the stack fields ``name`` sets (the default stack's where ``name`` is None)."""
    values = {k: v["value"] for k, v in load_stack(name)["fields"].items()}
    changes = {k: v for k, v in values.items() if getattr(rules, k) != v}
    return replace(rules, **changes) if changes else rules
