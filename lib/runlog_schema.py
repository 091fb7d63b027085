"""What the records of Part I's run logs must hold, checked before a figure or an evaluation trusts them.

:func:`lib.runlog.read` checks a log's shape (a header, whole JSON lines, increasing updates); this checks its
fields: a REINFORCE update has its placements, one per sample, each a device of the run's own machine
(``header.model.n_devices``) for every node (``header.model.n_nodes``), and step times that are finite and not
negative; a head-to-head record has its entries and selections with such times and devices, a phase timing
one row of finite, non-negative phase times per label; the header of such a log has its environment and model
(``PlacementHeader``). A missing field, a wrong type
or an impossible value is one :class:`lib.cli_errors.UserError` naming the file, the line and the field (exit 2
through every CLI). Used in: ``python -m lib.placement evaluate`` and ``figures``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from lib.cli_errors import UserError
from lib.readback import parse

_Time = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]  # strict: true is not 1.0
_Count = Annotated[StrictInt, Field(ge=1)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ModelInfo(_Open):
    n_nodes: _Count
    n_devices: _Count


class PlacementModel(ModelInfo):
    """The model signature a REINFORCE or evaluation log's header carries (``reinforce.model_signature``): what
    ``evaluate`` rebuilds the graph and the groups from. ``groups`` is null for a run without co-location."""

    graph: StrictStr
    groups: list[list[Annotated[StrictInt, Field(ge=0)]]] | None


class Header(_Open):
    kind: Literal["header"]
    config: dict
    env: Any = None
    seed: StrictInt | None = None
    run_kind: StrictStr | None = None
    model: ModelInfo | None = None


class PlacementHeader(Header):
    """The header of Part I's logs (``run_kind`` reinforce or evaluate): the environment and the model are what
    ``evaluate`` and ``figures`` read, so they are required (a header without them was a ``KeyError``)."""

    env: dict
    model: PlacementModel


class UpdateRecord(_Open):
    kind: Literal["update"]
    update: Annotated[StrictInt, Field(ge=0)]
    placements: Annotated[list[list[Annotated[StrictInt, Field(ge=0)]]], Field(min_length=1)]
    step_s: Annotated[list[_Time], Field(min_length=1)]
    mean_step_s: _Time
    favourite: list[Annotated[StrictInt, Field(ge=0)]]
    oom: list[StrictBool] | None = None
    stop: StrictBool = False


class Entry(_Open):
    side: StrictStr
    label: StrictStr
    placement: list[Annotated[StrictInt, Field(ge=0)]]
    role: StrictStr
    confirm_s: list[_Time]
    oom: StrictBool


class Selection(_Open):
    side: StrictStr
    label: StrictStr
    placement: list[Annotated[StrictInt, Field(ge=0)]]
    round_s: list[_Time]
    oom: StrictBool


class HeadToHeadRecord(_Open):
    kind: Literal["head_to_head"]
    entries: Annotated[list[Entry], Field(min_length=1)]
    selection: list[Selection]
    rounds_select: _Count
    rounds_confirm: _Count
    steps_per_round: _Count
    source: StrictStr


class PhaseTimingRecord(_Open):
    kind: Literal["phase_timing"]
    labels: Annotated[list[StrictStr], Field(min_length=1)]
    phase_s: Annotated[list[dict[StrictStr, _Time]], Field(min_length=1)]
    n_steps: _Count
    source: StrictStr


#: The record kinds each kind of log holds.
KINDS = {"reinforce": {"update"}, "evaluate": {"head_to_head", "phase_timing"}}


def _devices(where: str, placement: list, model: ModelInfo | None) -> None:
    if model is None:
        return
    if len(placement) != model.n_nodes:
        raise UserError(f"{where}: {len(placement)} devices for {model.n_nodes} nodes; allowed: one device per "
                        f"node of the header's model")
    bad = [d for d in placement if d >= model.n_devices]
    if bad:
        raise UserError(f"{where}: device {bad[0]} does not exist; allowed: 0..{model.n_devices - 1} (the "
                        f"header's machine has {model.n_devices})")


def _groups(where: str, model: PlacementModel) -> None:
    """Co-location groups (when not null) split the model's nodes: each node in exactly one group."""
    if model.groups is None:
        return
    nodes = sorted(n for g in model.groups for n in g)
    # the count first: a header's n_nodes may be huge (1e12 from a fuzzer), and range(n_nodes) is then built
    # only where the groups already hold that many nodes
    if len(nodes) != model.n_nodes or nodes != list(range(len(nodes))) or not all(model.groups):
        raise UserError(f"{where}: the groups hold nodes {_short(nodes)}; allowed: non-empty groups that hold "
                        f"each of the {model.n_nodes} nodes (0..{model.n_nodes - 1}) exactly once")


def _short(xs: list) -> str:
    return str(xs) if len(xs) <= 12 else f"[{', '.join(map(str, xs[:12]))}, ...] ({len(xs)} in all)"


def check_records(path: str, header: dict, records: list[dict]) -> None:
    """Every record of a checked log (``lib.runlog.read``) against its schema; a ``UserError`` otherwise."""
    h = parse(Header, header, f"run log {path}: line 1 (header)")
    if h.run_kind in KINDS:
        h = parse(PlacementHeader, header, f"run log {path}: line 1 (header)")
        _groups(f"run log {path}: line 1 (header): model.groups", h.model)
    for i, r in enumerate(records, start=2):
        where = f"run log {path}: line {i}"
        kind = r.get("kind")
        if not isinstance(kind, str):
            raise UserError(f"{where}: " + ("missing field kind" if kind is None else f"kind: {kind!r} is not a "
                                            f"string") + f"; allowed: one of {sorted(KINDS[h.run_kind])}"
                            if h.run_kind in KINDS else f"{where}: missing field kind")
        if h.run_kind in KINDS and kind not in KINDS[h.run_kind]:
            raise UserError(f"{where}: kind: {kind!r} is not a record of a {h.run_kind} log; allowed: "
                            f"{sorted(KINDS[h.run_kind])}")
        if h.run_kind == "reinforce" and kind == "update":
            u = parse(UpdateRecord, r, where)
            if len(u.step_s) != len(u.placements):
                raise UserError(f"{where}: step_s has {len(u.step_s)} times for {len(u.placements)} placements; "
                                f"allowed: one time per placement")
            for j, p in enumerate(u.placements):
                _devices(f"{where}: placements[{j}]", p, h.model)
            _devices(f"{where}: favourite", u.favourite, h.model)
        elif h.run_kind == "evaluate" and kind == "head_to_head":
            hh = parse(HeadToHeadRecord, r, where)
            for name, rows in (("entries", hh.entries), ("selection", hh.selection)):
                for j, e in enumerate(rows):
                    _devices(f"{where}: {name}[{j}].placement", e.placement, h.model)
        elif h.run_kind == "evaluate" and kind == "phase_timing":
            ph = parse(PhaseTimingRecord, r, where)
            if len(ph.phase_s) != len(ph.labels):
                raise UserError(f"{where}: phase_s has {len(ph.phase_s)} rows for {len(ph.labels)} labels; "
                                f"allowed: one row per label")


def check_log(path: str) -> tuple[dict, list[dict]]:
    """``(header, records)`` of a log whose shape and fields are both checked."""
    from lib import runlog

    header, records = runlog.read(path)
    check_records(path, header, records)
    return header, records
