"""A chapter whose ``runs_dir`` points at existing run logs (say, a GPU run copied into data/runs/) draws them
instead of training again: the batch-rerun and replay route by which a run made elsewhere reaches the book."""

import json
import os

import pytest

from tests import ROOT

CHAPTER = os.path.join(ROOT, "book", "placement", "02_the_placer.ipynb")
SMALL = {"preset": "ci", "n_iters": 6, "k": 4}


def _run(out, runs_dir, tmp_path):
    import papermill

    papermill.execute_notebook(CHAPTER, str(tmp_path / out), parameters=SMALL | {"runs_dir": str(runs_dir)},
                               kernel_name="python3", cwd=os.path.dirname(CHAPTER), progress_bar=False)


@pytest.mark.timeout(600)
def test_existing_run_logs_are_drawn_not_retrained(tmp_path, monkeypatch):
    monkeypatch.setenv("CI", "true")
    runs = tmp_path / "runs"
    runs.mkdir()
    _run("first.ipynb", runs, tmp_path)
    logs = sorted(p for p in os.listdir(runs) if p.endswith(".jsonl"))
    assert logs, "the chapter wrote no run log into runs_dir"
    before = {p: (runs / p).read_bytes() for p in logs}
    mtimes = {p: os.stat(runs / p).st_mtime_ns for p in logs}
    _run("second.ipynb", runs, tmp_path)
    assert {p: (runs / p).read_bytes() for p in logs} == before  # read back, not trained again
    assert {p: os.stat(runs / p).st_mtime_ns for p in logs} == mtimes
    first, second = (json.loads((tmp_path / f).read_text()) for f in ("first.ipynb", "second.ipynb"))

    def texts(nb):  # per cell: how a kernel splits one print into stream chunks depends on timing
        out = ["".join("".join(o.get("text", "")) for o in c.get("outputs", []) if o.get("output_type") == "stream")
               for c in nb["cells"]]
        return [t for t in out if t]

    assert texts(first) and texts(first) == texts(second)  # the same figures' numbers, drawn from the same logs
