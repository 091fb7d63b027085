"""A papermill ``-p`` parameter reaches a chapter: the batch route readers use for GPU-scale reruns."""

import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAPTER = os.path.join(ROOT, "book", "stragglers", "01_the_one_slow_gpu.ipynb")


def _texts(nb):
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            yield "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))


@pytest.mark.timeout(300)
def test_papermill_parameter_reaches_the_chapter(tmp_path, monkeypatch):
    papermill = pytest.importorskip("papermill")
    monkeypatch.setenv("CI", "true")
    out = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        CHAPTER, str(out), parameters={"n_gpus": 1024, "days": 2.0}, kernel_name="python3",
        cwd=os.path.dirname(CHAPTER), progress_bar=False,
    )
    nb = json.loads(out.read_text())
    injected = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert len(injected) == 1 and "n_gpus = 1024" in "".join(injected[0]["source"])
    texts = "\n".join(_texts(nb))
    # the chapter computed with the injected cluster size, not its default 16,384
    assert "cluster of 1,024 GPUs" in texts
    assert "cluster of 16,384 GPUs" not in texts
