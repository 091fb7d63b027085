"""Published reliability of production training clusters, as data: pydantic models of the schema of
``data/production/`` (spec ``production_reliability.md``) and a reader whose mistakes are one line naming the
file, the observation and the field.

An observation is one published figure about one job size on one cluster. ``null`` means the source does not
say; :mod:`lib.straggler.predict` fills it with the model's documented default and lists what it filled. Two
optional fields go beyond the spec's schema, each needed by one kind only:

- ``cause`` (``cause_share``, required there): the root cause, a label of ``data/production/model/``'s table;
- ``slowdown_at_least`` (``straggler_share``): the share is of jobs slowed by at least this ratio; without it,
  the share is of steps that wait for a slow GPU;
- ``averaged`` (``straggler_slowdown``): ``"jobs"`` (the mean slowdown of jobs, the default) or
  ``"gpu_hours"`` (the slowdown that wastes the published share of GPU-hours, 1 / (1 - waste)).

Used in: ``python -m lib.straggler production`` and book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import json
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lib.cli_errors import UserError

KINDS = ("interruptions", "mttf_hours", "ettr", "cause_share", "straggler_share", "straggler_slowdown")
Kind = Literal["interruptions", "mttf_hours", "ettr", "cause_share", "straggler_share", "straggler_slowdown"]
#: Kinds whose value is a share in [0, 1]; their error is a difference, the others' a ratio minus one.
SHARE_KINDS = frozenset({"ettr", "cause_share", "straggler_share"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Cluster(_Strict):
    gpu: str = Field(min_length=1)
    gpus: Optional[int] = Field(default=None, ge=1)


class Job(_Strict):
    gpus: Optional[int] = Field(default=None, ge=1)
    days: Optional[float] = Field(default=None, gt=0)
    checkpoint_min: Optional[float] = Field(default=None, ge=0)
    checkpoint_interval_min: Optional[float] = Field(default=None, gt=0)
    restart_min: Optional[float] = Field(default=None, ge=0)


class Observation(_Strict):
    name: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    assumed: list[str] = Field(default_factory=list)
    kind: Kind
    cause: Optional[str] = Field(default=None, min_length=1)
    slowdown_at_least: Optional[float] = Field(default=None, ge=1)
    averaged: Optional[Literal["jobs", "gpu_hours"]] = None
    cluster: Cluster
    job: Job
    value: float = Field(allow_inf_nan=False)
    unit: str = Field(min_length=1)

    @model_validator(mode="after")
    def _kind_rules(self):
        k, v = self.kind, self.value
        if k in SHARE_KINDS and not 0 <= v <= 1:
            raise ValueError(f"value {v:g} is not a share; a {k} must be in [0, 1]")
        if k == "straggler_slowdown" and v < 1:
            raise ValueError(f"value {v:g} is below 1; a straggler_slowdown is a ratio >= 1")
        if k in ("interruptions", "mttf_hours") and v <= 0:
            raise ValueError(f"value {v:g} must be > 0 for {k}")
        if k == "interruptions" and self.job.days is None:
            raise ValueError("job.days is null; interruptions are counted over job.days, which must be stated")
        if (k == "cause_share") != (self.cause is not None):
            raise ValueError("cause must be given for a cause_share and only for it")
        if self.slowdown_at_least is not None and k != "straggler_share":
            raise ValueError("slowdown_at_least belongs to a straggler_share only")
        if self.averaged is not None and k != "straggler_slowdown":
            raise ValueError("averaged belongs to a straggler_slowdown only")
        if self.job.gpus and self.cluster.gpus and self.job.gpus > self.cluster.gpus:
            raise ValueError(f"job.gpus {self.job.gpus} exceeds cluster.gpus {self.cluster.gpus}")
        return self


class ObservationsFile(_Strict):
    source: str = Field(min_length=1)
    observations: list[Observation] = Field(min_length=1)


def _describe(e: ValidationError, raw) -> str:
    """``observation 'NAME': field F: what is wrong`` for the first error (``(top level)`` outside one)."""
    err = e.errors()[0]
    loc = list(err["loc"])
    where = ""
    obs = raw.get("observations") if isinstance(raw, dict) else None
    if len(loc) >= 2 and loc[0] == "observations" and isinstance(loc[1], int):
        i = loc[1]
        item = obs[i] if isinstance(obs, list) and i < len(obs) else None
        name = item.get("name") if isinstance(item, dict) else None
        where = f"observation {name!r}: " if isinstance(name, str) and name else f"observation #{i}: "
        loc = loc[2:]
    field = ".".join(str(x) for x in loc) or ("(the observation)" if where else "(top level)")
    if err["type"] == "value_error":
        return f"{where}field {field}: {err.get('ctx', {}).get('error', err['msg'])}"
    got = err.get("input")
    shown = "" if err["type"] == "missing" else f" (got {json.dumps(got)[:60] if _jsonable(got) else repr(got)[:60]})"
    return f"{where}field {field}: {err['msg']}{shown}"


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def load(path: str) -> ObservationsFile:
    """An observations file, checked; :class:`UserError` ``FILE: observation NAME: field F: what is wrong``."""
    with open(path, encoding="utf-8") as f:
        try:
            raw = json.load(f)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        except UnicodeDecodeError as e:
            raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        parsed = ObservationsFile.model_validate(raw)
    except ValidationError as e:
        raise UserError(f"{path}: {_describe(e, raw)}") from None
    names = [o.name for o in parsed.observations]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"{path}: observation {dup[0]!r}: field name: appears more than once; names are unique")
    return parsed


def load_many(paths) -> list[tuple[str, Observation]]:
    """``(path, observation)`` for every observation of every file, in order; a name twice across files is a
    mistake too (the report is keyed by name)."""
    out, seen = [], {}
    for path in paths:
        for o in load(path).observations:
            if o.name in seen:
                raise UserError(f"{path}: observation {o.name!r}: field name: also in {seen[o.name]}; "
                                f"names are unique across files")
            seen[o.name] = path
            out.append((path, o))
    return out
