"""lib.book: provenance labels and the run-mode choice."""

import pytest

from lib import book


def test_labels_name_their_source():
    assert book.measured("cuda:0 (NVIDIA H200)") == "measured on cuda:0 (NVIDIA H200)"
    assert "4xT4-pcie" in book.simulated("4xT4-pcie") and book.simulated("x").startswith("simulated")
    assert book.simulated("straggler", kind="model") == "simulated with model straggler"
    assert book.quoted("the seed").startswith("quoted")


@pytest.mark.parametrize(
    "mode,n,need,want", [("auto", 0, 2, "sim"), ("auto", 1, 2, "sim"), ("auto", 4, 2, "real"), ("sim", 8, 2, "sim"), ("real", 2, 2, "real")]
)
def test_resolve_mode(mode, n, need, want):
    assert book.resolve_mode(mode, n, need) == want


def test_resolve_mode_errors():
    with pytest.raises(ValueError, match="mode must be one of"):
        book.resolve_mode("gpu", 1, 1)
    with pytest.raises(ValueError, match="needs at least 2"):
        book.resolve_mode("real", 1, 2)


def test_glue_outside_a_book_build_returns_the_value():
    assert book.glue("x", 3.5) == 3.5


def test_glued_text_displays_without_quotes(monkeypatch):
    import sys
    import types

    seen = {}
    fake = types.ModuleType("myst_nb")
    fake.glue = lambda name, value, display=True: seen.update({name: value})
    monkeypatch.setitem(sys.modules, "myst_nb", fake)
    assert book.glue("err", "30%") == "30%"
    assert repr(seen["err"]) == "30%" and seen["err"] == "30%"
    book.glue("n", 3)
    assert seen["n"] == 3 and repr(seen["n"]) == "3"


def test_zip_runlogs_archives_every_log_and_refuses_an_empty_folder(tmp_path):
    import zipfile

    runs = tmp_path / "runs"
    (runs / "sub").mkdir(parents=True)
    (runs / "a.jsonl").write_text('{"update": 0}\n')
    (runs / "sub" / "b.jsonl").write_text('{"update": 1}\n')
    (runs / "a.jsonl.lock").write_text("")
    dest = tmp_path / "out" / "ch.zip"
    assert book.zip_runlogs(str(runs), str(dest)) == 2
    with zipfile.ZipFile(dest) as z:
        assert z.namelist() == ["a.jsonl", "sub/b.jsonl"]
        assert z.read("sub/b.jsonl") == b'{"update": 1}\n'
    assert [p.name for p in dest.parent.iterdir()] == ["ch.zip"]  # no temporary file left beside it
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="empty"):
        book.zip_runlogs(str(empty), str(tmp_path / "x.zip"))
    assert not (tmp_path / "x.zip").exists()


def test_offer_runlogs_writes_where_the_page_links(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "r.jsonl").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    assert book.offer_runlogs(str(runs), "book/placement/02_the_placer") == "runlogs/02_the_placer.zip"
    assert (tmp_path / "runlogs" / "02_the_placer.zip").is_file()


@pytest.mark.parametrize("text", ["32,768", "65,536", "2,667", "0.50", "1e3", "1_000", "30%", "2.5 GB",
                                  "3", "-0.25", "1.2 × 10⁴²", "(a note)", "'quoted'", "[1, 2]"])
def test_glued_text_reads_back_as_itself_in_myst_nb(text):
    # myst-nb's {glue:text} role: literal_eval of the glued text/plain, then str(); "32,768" once became
    # "(32, 768)" on chapter 9's page
    from myst_nb.core.variables import format_plain_text

    assert format_plain_text(repr(book._Text(text)), "") == text


def test_ambiguous_text_is_quoted_and_plain_text_is_not():
    assert repr(book._Text("32,768")) == "'32,768'"
    assert repr(book._Text("30%")) == "30%"
    assert not book.reads_back_as_itself("32,768") and book.reads_back_as_itself("2.5 GB")


def test_signed_pct_never_prints_a_negative_zero():
    from lib.book import signed_pct

    assert signed_pct(0.047) == "+4.7%" and signed_pct(-0.2) == "-20.0%"
    assert signed_pct(-0.0003) == "+0.0%" and signed_pct(0.0004) == "+0.0%" and signed_pct(-0.0006) == "-0.1%"
