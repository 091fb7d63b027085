"""Named parameter sets for batch reruns, checked against the parameters each chapter declares.

A set is a YAML file ``params/<name>.yaml``::

    description: one line saying what machine it is for
    parameters:            # given to every chosen chapter that declares the parameter
      device: cuda
    chapters:              # per-chapter values; the chapter must declare each of them
      book/galvatron/04_from_plan_to_run: {world_size: 4}

A parameter that no chapter of the book declares, or a per-chapter value its chapter does not declare, is an error
before anything runs, naming the set, the parameter and the chapter. Used in: ``python -m lib.rerun``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from lib.cli_errors import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARAMS_DIR = os.path.join(ROOT, "params")
#: Parameters the runner itself fills in when a chapter declares them and the set leaves them unset.
RUNNER_PARAMETERS = ("runs_dir",)
_KEYS = {"description", "parameters", "chapters"}


@dataclass(frozen=True)
class ParamSet:
    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    chapters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "parameters": dict(self.parameters),
                "chapters": {k: dict(v) for k, v in self.chapters.items()}}


def available(params_dir: str = PARAMS_DIR) -> list[str]:
    return sorted(f[:-5] for f in os.listdir(params_dir) if f.endswith(".yaml")) if os.path.isdir(params_dir) else []


def load(name_or_path: str, params_dir: str = PARAMS_DIR) -> ParamSet:
    """Read a set by name (``params/<name>.yaml``) or by path; refuse unknown names and malformed files: bad
    UTF-8 or YAML, an unknown key, a field of the wrong type (:func:`file_model`), each one line naming the
    file (and the field)."""
    path = name_or_path if name_or_path.endswith((".yaml", ".yml")) else os.path.join(params_dir, f"{name_or_path}.yaml")
    if not os.path.exists(path):
        raise UserError(f"--params: no parameter set {name_or_path!r}; available: {', '.join(available(params_dir))}")
    name = os.path.splitext(os.path.basename(path))[0]
    data = read_yaml(path, "--params")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: a parameter set is a mapping with keys {sorted(_KEYS)}; got {type(data).__name__}")
    unknown = set(data) - _KEYS
    if unknown:
        raise UserError(f"{path}: unknown key {sorted(unknown, key=str)[0]!r}; allowed: {sorted(_KEYS)}")
    from lib.readback import parse

    m = parse(file_model(), data, f"--params {path}")
    return ParamSet(name, m.description, dict(m.parameters or {}),
                    {_chapter_key(k): dict(v) for k, v in (m.chapters or {}).items()})


def read_yaml(path: str, what: str = ""):
    """The parsed YAML of ``path`` (safe types only); bad UTF-8 or YAML is one line naming the file."""
    import yaml

    from lib.readback import read_text

    text = read_text(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UserError(f"{what} {path}: not valid YAML ({' '.join(str(e).split())[:200]})".strip()) from None
    except RecursionError:
        raise UserError(f"{what} {path}: YAML nested too deeply".strip()) from None


@lru_cache(maxsize=1)
def file_model():
    """The pydantic model of a parameter-set file, strict: ``description`` a string; ``parameters`` a mapping
    of names to JSON values (what papermill passes and ``params.json`` records: no YAML dates or sets);
    ``chapters`` a mapping of chapter to such a mapping; no other key. Whether each value suits its chapter is
    :func:`resolve`'s check."""
    from typing import Annotated

    from pydantic import AfterValidator, BaseModel, ConfigDict, JsonValue, StrictStr

    Values = Annotated[dict[StrictStr, JsonValue], AfterValidator(_finite)]

    class ParamSetFile(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        description: StrictStr = ""
        parameters: Values | None = None
        chapters: dict[StrictStr, Values] | None = None

    return ParamSetFile


def _finite(values: dict) -> dict:
    """``values`` if every number in it is finite (``params.json`` is strict JSON: no NaN, no infinity)."""
    import math

    def walk(v, where):
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{where} = {v} is not finite; allowed: a finite number")
        for k, x in (v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()):
            walk(x, f"{where}[{k!r}]")

    for k, v in values.items():
        walk(v, k)
    return values


def _chapter_key(path: str) -> str:
    """``book/x/y`` whether given as ``book/x/y``, ``book/x/y.ipynb`` or ``book/x/y.md``."""
    for ext in (".ipynb", ".md"):
        if path.endswith(ext):
            return path[: -len(ext)]
    return path


def book_chapters(root: str = ROOT) -> list[str]:
    """Every chapter of the table of contents that is a notebook, as ``book/<part>/<name>``, in reading order."""
    toc = read_yaml(os.path.join(root, "_toc.yml"), "table of contents") or {}
    files = [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", []) if "file" in c]
    return [f for f in files if os.path.exists(os.path.join(root, f + ".ipynb"))]


def declared(chapter: str, root: str = ROOT) -> dict[str, str]:
    """The parameters a chapter's ``parameters`` cell declares, with their default source text."""
    import papermill

    return {k: v["default"] for k, v in papermill.inspect_notebook(os.path.join(root, chapter + ".ipynb")).items()}


def resolve(pset: ParamSet, chapters: list[str], root: str = ROOT) -> dict[str, dict]:
    """The parameters each chapter gets; ``ValueError`` naming set, parameter and chapter on any mismatch."""
    known = book_chapters(root)
    for c in list(chapters) + list(pset.chapters):
        if c not in known:
            raise UserError(f"{pset.name}: no chapter {c!r}; chapters: {', '.join(known)}")
    decl = {c: declared(c, root) for c in known}
    for p in pset.parameters:
        if not any(p in d for d in decl.values()):
            raise UserError(f"{pset.name}: parameter {p!r} is declared by no chapter of the book")
    out = {}
    for c in chapters:
        given = {k: v for k, v in pset.parameters.items() if k in decl[c]}
        for k, v in pset.chapters.get(c, {}).items():
            if k not in decl[c]:
                raise UserError(f"{pset.name}: chapter {c} declares no parameter {k!r}; "
                                 f"it declares: {', '.join(sorted(decl[c]))}")
            given[k] = v
        for k, v in given.items():
            check_type(pset.name, c, k, v, decl[c][k])
        out[c] = given
    return out


def _kind(v) -> str:
    return "true/false" if isinstance(v, bool) else "an integer" if isinstance(v, int) else "a number" \
        if isinstance(v, float) else "a string" if isinstance(v, str) else "a list" \
        if isinstance(v, (list, tuple)) else "a mapping" if isinstance(v, dict) else type(v).__name__


def check_type(set_name: str, chapter: str, name: str, value, default_source: str) -> None:
    """``value`` has the type of the chapter's default for ``name`` (a float takes an integer too; a default of
    ``None`` or one that is not a literal takes anything); a :class:`UserError` naming set, chapter, parameter."""
    import ast
    import math

    try:
        default = ast.literal_eval(default_source)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return
    if default is None:
        return
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    elif isinstance(default, (list, tuple)):
        ok = isinstance(value, (list, tuple))
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise UserError(f"{set_name}: chapter {chapter}: parameter {name} = {value!r} is {_kind(value)}; allowed: "
                        f"{_kind(default)} (its default is {default_source})")
