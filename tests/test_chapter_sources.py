"""Chapters are authored as MyST Markdown (book/**/*.md) and paired with committed, stripped .ipynb files.

Every .md has its .ipynb twin with the same cells (type, source, metadata) and notebook metadata, so nobody edits
one and forgets the other; and the check itself catches a drifted pair.
"""

import json
import os
import shutil

import pytest

from tools import chapters

ROOT = chapters.ROOT
MDS = chapters.markdown_chapters()


def test_there_are_markdown_chapters():
    assert len(MDS) >= 8, f"expected every chapter as .md under book/; found {len(MDS)}"


def test_every_chapter_is_a_pair():
    assert chapters.unpaired() == []


@pytest.mark.parametrize("path", MDS, ids=[os.path.relpath(p, ROOT) for p in MDS])
def test_pair_is_in_sync(path):
    assert chapters.differences(path) == []


@pytest.mark.parametrize("path", MDS, ids=[os.path.relpath(p, ROOT) for p in MDS])
def test_markdown_carries_the_full_jupytext_header(path):
    """Without format_name: myst a .md page is not a notebook to myst-nb (and the .md is also excluded)."""
    head = open(path, encoding="utf-8").read().split("---")[1]
    assert "format_name: myst" in head and "kernelspec:" in head and "execution_timeout" in head


def _copy_pair(tmp_path, name="01_the_one_slow_gpu"):
    src = os.path.join(ROOT, "book", "stragglers", name)
    os.makedirs(tmp_path / "book" / "x")
    md, nb = tmp_path / "book" / "x" / f"{name}.md", tmp_path / "book" / "x" / f"{name}.ipynb"
    shutil.copy(src + ".md", md)
    shutil.copy(src + ".ipynb", nb)
    return md, nb


def test_an_edited_markdown_is_caught_and_sync_repairs_it(tmp_path, monkeypatch):
    md, nb = _copy_pair(tmp_path)
    monkeypatch.setattr(chapters, "ROOT", str(tmp_path))
    assert chapters.differences(str(md)) == []
    md.write_text(md.read_text().replace("# The one slow GPU", "# The one slow GPU, edited", 1))
    problems = chapters.differences(str(md))
    assert problems and "source" in problems[0] and "make chapters" in problems[0]
    kept_before = [c["outputs"] for c in json.loads(nb.read_text())["cells"]
                   if "keep_output" in c["metadata"].get("tags", [])]
    ids_before = [c["id"] for c in json.loads(nb.read_text())["cells"]]
    chapters.sync(str(md))
    assert chapters.differences(str(md)) == []
    after = json.loads(nb.read_text())["cells"]
    assert [c["outputs"] for c in after if "keep_output" in c["metadata"].get("tags", [])] == kept_before
    assert [c["id"] for c in after] == ids_before  # cell ids survive an edit of the text


def test_an_edited_notebook_and_a_lone_file_are_caught(tmp_path, monkeypatch):
    md, nb = _copy_pair(tmp_path)
    monkeypatch.setattr(chapters, "ROOT", str(tmp_path))
    data = json.loads(nb.read_text())
    data["cells"][2]["metadata"]["tags"] = ["remove-input"]
    nb.write_text(json.dumps(data))
    assert any("cell 2" in p for p in chapters.differences(str(md)))
    (tmp_path / "book" / "x" / "lone.ipynb").write_text(json.dumps(data))
    assert chapters.unpaired(str(tmp_path)) == ["book/x/lone.ipynb has no .md twin"]


def test_sync_strips_outputs_of_cells_that_are_not_oracles(tmp_path, monkeypatch):
    md, nb = _copy_pair(tmp_path)
    data = json.loads(nb.read_text())
    plain = next(c for c in data["cells"] if c["cell_type"] == "code" and "keep_output" not in c["metadata"].get("tags", []))
    plain["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "stray\n"}]
    nb.write_text(json.dumps(data))
    chapters.sync(str(md))
    from tools.check_stripped import stray_outputs

    assert stray_outputs(json.loads(nb.read_text())) == []
