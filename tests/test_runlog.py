"""Run logs: header first, one whole line per record, a damaged log refused (file and line), an explicit
repair of a truncated last line, atomic rewrite, one writer per run."""

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib import runlog

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def test_truncated_last_line_is_refused_unless_repaired(tmp_path):
    """Issue 18, run logs: a truncated last line is no longer silently ignored; repair keeps every record."""
    path = str(tmp_path / "run.jsonl")
    log = runlog.RunLog.create(path, runlog.make_header({}, "e", 0))
    log.append({"kind": "update", "update": 0})
    with open(path, "a") as f:
        f.write('{"kind": "update", "upd')  # a crash mid-write
    with pytest.raises(runlog.RunLogError, match=r"run\.jsonl.*line 3 is truncated.*--repair"):
        runlog.read(path)
    with pytest.raises(runlog.RunLogError, match="--repair"):  # nothing glues onto a torn line
        log.append({"kind": "update", "update": 1})
    assert len(runlog.read(path, repair=True)[1]) == 1 and runlog.scan(path).torn_line == 3
    assert runlog.repair(path) == 1 and runlog.repair(path) == 0
    log.append({"kind": "update", "update": 1})
    assert [r["update"] for r in runlog.read(path)[1]] == [0, 1]


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"kind": "header"}\n{"kind": "update", "update": 0}')
    log = runlog.RunLog(str(path))
    log.append({"kind": "update", "update": 1})
    assert [r["update"] for r in runlog.read(str(path))[1]] == [0, 1]


def test_interleaved_writers_are_refused_naming_file_and_line(tmp_path):
    """Issue 18, finding 1: a log with updates 0,0,1,1 (two writers) is refused, not read as 4 updates."""
    path = tmp_path / "run.jsonl"
    path.write_text('{"kind": "header"}\n' + "".join(f'{{"kind": "update", "update": {u}}}\n'
                                                    for u in (0, 0, 1, 1)))
    with pytest.raises(runlog.RunLogError, match=r"run\.jsonl.*line 3 has update 0 after update 0"):
        runlog.read(str(path))
    second = tmp_path / "second.jsonl"
    second.write_text('{"kind": "header"}\n{"kind": "update", "update": 0}\n{"kind": "header"}\n')
    with pytest.raises(runlog.RunLogError, match="line 3 is a second header"):
        runlog.read(str(second))
    scalar = tmp_path / "scalar.jsonl"
    scalar.write_text('{"kind": "header"}\n3\n')
    with pytest.raises(runlog.RunLogError, match="line 2 is not a JSON object"):
        runlog.read(str(scalar))


def test_one_writer_per_run(tmp_path):
    """Issue 18, finding 1: the writer lock refuses a second process at once, naming the run."""
    path = str(tmp_path / "same.jsonl")
    holder = ("import sys, time; from lib import runlog\n"
              "with runlog.writer_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(30)\n")
    p = subprocess.Popen([sys.executable, "-c", holder, path], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(runlog.RunLogBusy, match=r"run 'same' .*another process"):
            with runlog.writer_lock(path):
                pass
    finally:
        p.kill()
        p.wait(timeout=10)
    with runlog.writer_lock(path):  # a killed holder leaves no stale lock
        with pytest.raises(runlog.RunLogBusy):  # and the lock is per process, not re-entrant across opens
            with runlog.writer_lock(path):
                pass


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


def _log_text(n=5):
    lines = [runlog._dumps({"kind": "header", "config": {}})]
    lines += [runlog._dumps({"kind": "update", "update": i, "x": [i, 0.5]}) for i in range(n)]
    return lines


@settings(max_examples=30, deadline=None)
@given(cut=st.integers(0, 10_000))
def test_a_log_cut_anywhere_reads_as_a_prefix_or_is_refused(tmp_path_factory, cut):
    """Issue 18: a log truncated at any byte never reads as anything but a prefix of its records; a torn
    line is refused unless repair=True, and repair keeps every complete record."""
    lines = _log_text()
    text = "".join(lines)
    cut = cut % (len(text) + 1)
    path = str(tmp_path_factory.mktemp("cut") / "run.jsonl")
    with open(path, "w") as f:
        f.write(text[:cut])
    whole = [json.loads(l) for l in lines[1:]]
    if cut < len(lines[0]) - 1:  # inside the header: not a run log
        with pytest.raises(runlog.RunLogError, match="run.jsonl"):
            runlog.read(path, repair=True)
        return
    s = runlog.scan(path)
    assert s.records == whole[: len(s.records)]
    if s.torn_line is None:
        assert runlog.read(path)[1] == s.records
    else:
        with pytest.raises(runlog.RunLogError, match=f"line {s.torn_line} is truncated"):
            runlog.read(path)
        runlog.repair(path)
        assert runlog.read(path)[1] == s.records


@settings(max_examples=20, deadline=None)
@given(i=st.integers(1, 5), j=st.integers(1, 6))
def test_a_repeated_record_anywhere_is_refused(tmp_path_factory, i, j):
    """Issue 18, finding 1: a record written twice (as two writers do) is refused, naming the line."""
    lines = _log_text()
    lines.insert(j, lines[i])
    path = tmp_path_factory.mktemp("dup") / "run.jsonl"
    path.write_text("".join(lines))
    with pytest.raises(runlog.RunLogError, match=r"run\.jsonl.*line \d+ has update \d+ after update \d+"):
        runlog.read(str(path))
