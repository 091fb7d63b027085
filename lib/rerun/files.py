"""The files a rerun writes and reads back -- ``params.json``, ``summary.json``, the notebooks ``--book-from``
stages -- as pydantic models: a missing or mistyped field is one line naming the file and the field (exit 2).
Used in: ``lib.rerun.execute`` (resume), ``lib.rerun.replay`` (``--book-from``), ``python -m lib.rerun``.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from lib.readback import load, parse, read_json

_Strict = ConfigDict(extra="allow", strict=True)


class SetModel(BaseModel):
    model_config = _Strict
    name: StrictStr
    description: StrictStr = ""
    parameters: dict[str, Any] = {}
    chapters: dict[str, dict[str, Any]] = {}


class RunModel(BaseModel):
    model_config = _Strict
    set_name: StrictStr
    started_utc: StrictStr
    commit: StrictStr
    host: StrictStr
    python: StrictStr
    torch: StrictStr | None
    devices: list[StrictStr]


class ParamsFile(BaseModel):
    """``params.json``: the set, the chapters in order, each chapter's parameters, where it ran."""

    model_config = _Strict
    set: SetModel
    chapters: Annotated[list[StrictStr], Field(min_length=1)]
    parameters: dict[str, dict[str, Any]]
    run: RunModel


class ChapterRow(BaseModel):
    model_config = _Strict
    chapter: StrictStr
    status: Literal["ok", "failed"]
    wall_s: Annotated[float, Field(ge=0, allow_inf_nan=False, strict=False)]
    provenance: StrictStr
    devices: list[StrictStr] = []
    error: StrictStr | None = None


class SummaryFile(BaseModel):
    """``summary.json``: the chapters done (or failed) so far, and those pending."""

    model_config = _Strict
    run: RunModel
    chapters: list[ChapterRow]
    failed: list[StrictStr]
    pending: list[StrictStr]


class Cell(BaseModel):
    model_config = ConfigDict(extra="allow")
    cell_type: Literal["markdown", "code", "raw"]
    source: StrictStr | list[StrictStr]
    metadata: dict = {}


class Notebook(BaseModel):
    """The part of nbformat 4 that staging a replayed chapter touches."""

    model_config = ConfigDict(extra="allow")
    cells: list[Cell]
    metadata: dict
    nbformat: Literal[4]


def read_params(run_dir: str) -> ParamsFile:
    p = load(os.path.join(run_dir, "params.json"), ParamsFile)
    missing = [c for c in p.chapters if c not in p.parameters]
    if missing:
        raise parse_error(os.path.join(run_dir, "params.json"), f"parameters: no entry for chapter {missing[0]}")
    return p


def read_summary(run_dir: str) -> SummaryFile:
    return load(os.path.join(run_dir, "summary.json"), SummaryFile)


def read_notebook(path: str) -> dict:
    """The notebook's JSON, checked to be one (``cells`` of known types, ``metadata``, nbformat 4)."""
    data = read_json(path)
    parse(Notebook, data, path)
    return data


def parse_error(path: str, what: str):
    from lib.cli_errors import UserError

    return UserError(f"{path}: {what}")
