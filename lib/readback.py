"""Reading back the files the tools wrote (or a user handed them): one layer, one-line errors.

Every file a tool reads back -- run logs, node profiles, plans, parameter sets, a rerun's ``params.json`` and
``summary.json``, notebooks given to ``--book-from`` -- comes through here: :func:`read_json` names the file
when it is missing, unreadable, not UTF-8, truncated or not JSON; :func:`parse` checks the parsed value against
a pydantic model and names the file, the record and the field. Both raise :class:`lib.cli_errors.UserError`
(exit 2, one line). The models of each file live beside the code that writes it. Used in: ``lib.rerun``,
``lib.galvatron``, ``lib.placement``'s CLI, ``lib.runlog``.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from lib.cli_errors import UserError, describe_validation_error

M = TypeVar("M")


def read_text(path: str, what: str = "") -> str:
    """The file's text; a missing or unreadable file is an ``OSError`` naming it, bad UTF-8 a ``UserError``."""
    head = f"{what} {path}" if what else str(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except IsADirectoryError:
        raise UserError(f"{head}: is a folder; allowed: a file") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{head}: not UTF-8 text (byte {e.start}); allowed: a JSON/YAML text file") from None


def loads(text: str, source: str) -> Any:
    """``json.loads(text)``; an error names ``source``, the line and column, and says when the text was cut."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        cut = " (the file ends early: truncated?)" if e.pos >= len(text.rstrip()) else ""
        raise UserError(f"{source}: not valid JSON{cut}: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise UserError(f"{source}: JSON nested too deeply") from None


def read_json(path: str, what: str = "") -> Any:
    """The parsed JSON of ``path``, every failure one line naming it (``what``: the flag that gave it)."""
    return loads(read_text(path, what), f"{what} {path}" if what else str(path))


def parse(model: type[M], data: Any, source: str, allowed: dict | None = None) -> M:
    """``data`` validated by the pydantic ``model``; a ``UserError`` naming ``source`` and the field."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise UserError(describe_validation_error(e, source, allowed)) from None


def load(path: str, model: type[M], what: str = "") -> M:
    """``path``'s JSON validated by ``model``."""
    return parse(model, read_json(path, what), f"{what} {path}" if what else str(path))
