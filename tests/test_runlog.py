"""Run logs: header first, one whole line per record, truncated last lines ignored, atomic rewrite."""

import json

import pytest

from lib import runlog


def test_write_and_read_back(tmp_path):
    path = str(tmp_path / "sub" / "run.jsonl")
    log = runlog.RunLog.create(path, runlog.make_header({"lr": 1e-3}, "simulated: toy", 7, run_kind="x"))
    for i in range(3):
        log.append({"kind": "update", "update": i, "step_s": [0.1 * i, float("inf")]})
    header, records = runlog.read(path)
    assert header["config"] == {"lr": 1e-3} and header["seed"] == 7 and header["env"] == "simulated: toy"
    assert header["lib_version"] and "git_commit" in header and header["run_kind"] == "x"
    assert [r["update"] for r in records] == [0, 1, 2]
    with open(path) as f:
        lines = f.read().splitlines()
    assert len(lines) == 4 and all(json.loads(line) for line in lines)


def test_truncated_last_line_is_ignored_and_repaired_on_append(tmp_path):
    path = str(tmp_path / "run.jsonl")
    log = runlog.RunLog.create(path, runlog.make_header({}, "e", 0))
    log.append({"kind": "update", "update": 0})
    with open(path, "a") as f:
        f.write('{"kind": "update", "upd')  # a crash mid-write
    assert len(runlog.read(path)[1]) == 1
    log.append({"kind": "update", "update": 1})
    assert [r["update"] for r in runlog.read(path)[1]] == [0, 1]


def test_bad_logs(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        runlog.read(str(empty))
    nohead = tmp_path / "nohead.jsonl"
    nohead.write_text('{"kind": "update"}\n')
    with pytest.raises(ValueError, match="header"):
        runlog.read(str(nohead))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"kind": "header"}\n{oops\n{"kind": "update"}\n')
    with pytest.raises(ValueError, match="line 2"):
        runlog.read(str(broken))
    with pytest.raises(FileNotFoundError):
        runlog.read(str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="kind"):
        runlog.RunLog.create(str(tmp_path / "x.jsonl"), {"config": {}})
    log = runlog.RunLog.create(str(tmp_path / "y.jsonl"), runlog.make_header({}, "e", 0))
    with pytest.raises(ValueError, match="first line"):
        log.append({"kind": "header"})


def test_rewrite_is_atomic_replacement(tmp_path):
    path = str(tmp_path / "run.jsonl")
    log = runlog.RunLog.create(path, runlog.make_header({}, "e", 0))
    for i in range(4):
        log.append({"kind": "update", "update": i})
    h, recs = runlog.read(path)
    runlog.rewrite(path, h, recs[:2])
    assert runlog.read(path) == (h, recs[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]  # no temp files left behind
