"""Build the book from a rerun's executed notebooks, without executing them again.

The book's sources are staged in a scratch folder with every chapter of the rerun replaced by its executed
notebook, a note under its title saying where it ran (devices, date, commit, parameter set), and the execution
setting turned off. A chapter the rerun did not include is executed at build time with its defaults and says
so. A rerun with a failed chapter is refused (resume it first). Used in: ``make book-from RUN=runs/...``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from lib import atomic
from lib.book import RUNLOGS_DIR, runlogs_zip_name, zip_runlogs
from lib.cli_errors import UserError
from lib.rerun.execute import read_summary
from lib.rerun.files import read_notebook
from lib.rerun.params import ROOT, book_chapters

# A local build's run logs (``book/<part>/runlogs/``) are left behind: the replayed pages offer the rerun's.
_IGNORE = shutil.ignore_patterns(".git", ".venv", "_build", "runs", RUNLOGS_DIR, "__pycache__", "*.pyc",
                                 ".ipynb_checkpoints", ".hypothesis")


def note(run: dict, set_info: dict, runlogs: str | None = None) -> str:
    """The Markdown note shown under a replayed chapter's title (with a download of its run logs, if any)."""
    devices = ", ".join(run.get("devices") or ["cpu"])
    desc = f" ({set_info['description']})" if set_info.get("description") else ""
    logs = f" The run logs behind its figures: {{download}}`{runlogs}`." if runlogs else ""
    return (":::{note}\n"
            f"This page shows a batch rerun: executed on {devices}, started {run['started_utc']} UTC, from commit "
            f"`{run['commit']}`, with the parameter set `{set_info['name']}`{desc}. Its numbers are as that run "
            f"printed them.{logs}\n:::")


def _zip_runlogs(run_dir: str, chapter: str, dest_dir: str) -> str | None:
    """Zip ``run_dir/runlogs/<part>/<name>/`` where the staged chapter's page links its run logs
    (``runlogs/<name>.zip`` beside it); return that link, or None when the rerun kept no logs for it."""
    logs = os.path.join(run_dir, "runlogs", chapter.removeprefix("book/"))
    if not os.path.isdir(logs) or not any(files for _, _, files in os.walk(logs)):
        return None
    name = runlogs_zip_name(chapter)
    zip_runlogs(logs, os.path.join(dest_dir, name))
    return name


def _links_runlogs(nb: dict, chapter: str) -> bool:
    """Does the chapter's page link its run logs (``{download}`runlogs/<name>.zip```)?"""
    name = runlogs_zip_name(chapter)
    return any(name in ("".join(c["source"]) if isinstance(c["source"], list) else c["source"])
               for c in nb["cells"] if c["cell_type"] == "markdown")


def _insert_after_title(nb: dict, text: str) -> None:
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown" and src.lstrip().startswith("# "):
            nb["cells"].insert(i + 1, {"cell_type": "markdown", "id": "replay-note", "metadata": {}, "source": text})
            return
    nb["cells"].insert(0, {"cell_type": "markdown", "id": "replay-note", "metadata": {}, "source": text})


def stage(run_dir: str, dest: str, root: str = ROOT) -> list[str]:
    """Copy the book into ``dest`` with the rerun's notebooks; return the chapters taken from the rerun."""
    from lib.rerun.files import read_params

    summary = read_summary(run_dir)
    params = read_params(run_dir).model_dump()
    failed = [r["chapter"] for r in summary["chapters"] if r["status"] != "ok"]
    if failed or summary.get("pending"):
        raise UserError(f"RUN={run_dir}: chapters failed or not run yet ({', '.join(failed + summary['pending'])}); "
                         f"resume it with python -m lib.rerun --resume {run_dir}")
    if os.path.exists(dest):
        shutil.rmtree(dest)
    shutil.copytree(root, dest, ignore=_IGNORE)
    taken = []
    for chapter in book_chapters(root):
        target = os.path.join(dest, chapter + ".ipynb")
        executed = os.path.join(run_dir, chapter + ".ipynb")
        if os.path.exists(executed):
            nb = read_notebook(executed)
            runlogs = _zip_runlogs(run_dir, chapter, os.path.dirname(target))
            if runlogs is None and _links_runlogs(nb, chapter):
                raise UserError(f"RUN={run_dir}: {chapter} links its run logs, but the rerun kept none under "
                                 f"runlogs/{chapter.removeprefix('book/')}/; rerun that chapter")
            _insert_after_title(nb, note(params["run"], params["set"], runlogs))
            taken.append(chapter)
        else:
            nb = read_notebook(target)
            nb["metadata"].setdefault("mystnb", {})["execution_mode"] = "force"
            _insert_after_title(nb, ":::{note}\nThis page was not part of the rerun: it was executed when the book "
                                    "was built, with its default parameters.\n:::")
        atomic.write_text(target, json.dumps(nb, indent=1, ensure_ascii=False))
    config = os.path.join(dest, "_config.yml")
    with open(config, encoding="utf-8") as f:
        text = f.read()
    if "execute_notebooks: force" not in text:
        raise UserError(f"{config}: expected 'execute_notebooks: force' to turn off for the replay")
    atomic.write_text(config, text.replace("execute_notebooks: force", 'execute_notebooks: "off"'))
    return taken


def book_from(run_dir: str, out_dir: str | None = None, root: str = ROOT, strict: bool = True) -> str:
    """Build ``out_dir``/_build/html from ``run_dir`` without executing the rerun's chapters; return the HTML path."""
    out_dir = os.path.abspath(out_dir or root)
    staging = os.path.join(out_dir, "_build", "replay-src")
    stage(run_dir, staging, root)
    jb = os.path.join(os.path.dirname(sys.executable), "jupyter-book")
    cmd = [jb if os.path.exists(jb) else "jupyter-book", "build", staging, "--all", "--path-output", out_dir]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    subprocess.run(cmd, check=True)
    return os.path.join(out_dir, "_build", "html")
