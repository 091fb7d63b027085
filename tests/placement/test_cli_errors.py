"""``python -m lib.placement`` as a hostile user runs it (issue 18): one line and exit 2 for every mistake,
one writer per run, damaged logs and checkpoints refused naming the file, ``--repair`` for a truncated log."""

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib import runlog
from lib.placement import cli
from tests.cli_helpers import assert_one_line, call_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = ["--preset", "ci", "--n-iters", "3", "--k", "2", "--hidden", "8", "--quiet"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def call(argv):
    """``cli.main(argv)`` in-process: (exit status, stdout, stderr lines)."""
    return call_main(cli.main, argv)


def run(args, timeout=120):
    return subprocess.run([sys.executable, "-m", "lib.placement", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_finding5_unknown_preset_is_one_line_not_a_traceback():
    """Issue 18, finding 5: ``train --preset nope`` printed 24 lines (a traceback); now one line, exit 2."""
    p = run(["train", "--preset", "nope"])
    assert p.returncode == 2 and p.stderr.splitlines() == [p.stderr.strip()], p.stderr
    assert p.stderr.startswith("error: --preset: unknown GPT preset 'nope'; allowed: 163m, 49m, ci")
    debug = run(["train", "--preset", "nope", "--debug"])  # --debug: the traceback, for a bug report
    assert "Traceback" in debug.stderr and debug.returncode != 0


@pytest.mark.parametrize("flag, value, words", [
    ("--lr", "inf", ["--lr", "not finite", "(0, 1]"]),  # was "probability tensor contains either inf, nan..."
    ("--lr", "nan", ["--lr", "not finite"]),
    ("--lr", "0", ["--lr", "out of range"]),
    ("--k", "1.5", ["--k", "invalid int"]),
    ("--n-iters", "1000000000", ["--n-iters", "100000"]),
    ("--n-micro", "3", ["--n-micro", "does not divide", "1, 2, 4"]),
    ("--mem-cap", "1.5", ["--mem-cap", "(0, 1]"]),
    ("--entropy", "-inf", ["--entropy"]),
    ("--seed", "-1", ["--seed"]),
    ("--profile", "nope", ["--profile", "unknown hardware profile"]),
    ("--device", "cuda", ["--device", "invalid choice"]),
    ("--node-profile", "/nonexistent.json", ["--node-profile", "/nonexistent.json"]),
    ("--name", "a/b", ["--name"]),
])
def test_misleading_messages_now_name_the_flag(tmp_path, flag, value, words):
    """Issue 18, finding 5: every numeric flag is checked up front, the message names it and its range."""
    rc, _, err = call(["train", *SMALL, "--out", str(tmp_path), "--preset", "ci", flag, value])
    assert_one_line(rc, err, *words)
    assert os.listdir(tmp_path) == []  # nothing written, not even a lock


#: flag -> (where the value lands, attribute, parse); everything else about the run is fixed and small
TRAIN_FLAGS = {"--n-iters": ("cfg", "n_iters", int), "--k": ("cfg", "k", int), "--lr": ("cfg", "lr", float),
               "--entropy": ("cfg", "entropy", float), "--hidden": ("cfg", "hidden", int),
               "--seed": ("cfg", "seed", int), "--n-micro": ("spec", "n_micro", int),
               "--mem-cap": ("spec", "mem_cap", float), "--env-seed": ("spec", "env_seed", int),
               "--threads": (None, None, int)}

VALUES = st.one_of(
    st.integers(-2**70, 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "nan", "-nan", "inf", "-inf", "1e999", "1.5", "true", "x", "0x10", "2.0", "1", "4", "0",
                     "1e-300", "-0.0"]),
)


@settings(max_examples=30, deadline=None)
@given(flag=st.sampled_from(sorted(TRAIN_FLAGS)), value=st.one_of(st.none(), VALUES))
def test_fuzzed_train_flags_give_one_line_or_the_exact_value(tmp_path_factory, flag, value):
    """Issue 18: hypothesis-generated values (types, ranges, NaN, inf, huge, missing) for every numeric flag:
    exit 2 with one line naming the flag, or the run starts with exactly that value (training is stubbed)."""
    out = str(tmp_path_factory.mktemp("fuzz"))
    seen = {}

    def fake_train_run(spec, cfg, *args, **kwargs):
        seen.update(spec=spec, cfg=cfg)
        return SimpleNamespace(path="x.jsonl", n_updates=0, top=(), favourite=None, stopped_early=False)

    argv = ["train", *SMALL, "--out", out, flag] + ([] if value is None else [value])
    with mock.patch.object(cli, "train_run", fake_train_run):
        rc, stdout, err = call(argv)
    if rc == 0:
        where, attr, parse = TRAIN_FLAGS[flag]
        assert err == [] and json.loads(stdout)["updates"] == 0
        if where is not None:
            got = getattr(seen[where], attr)
            assert type(got) is parse and got == parse(value)
            assert got == got and abs(got) != float("inf")  # never NaN or inf
    else:
        assert_one_line(rc, err, flag)


@settings(max_examples=20, deadline=None)
@given(flag=st.sampled_from(["--rounds-select", "--rounds-confirm", "--steps-per-round", "--seed"]),
       value=st.one_of(st.none(), VALUES))
def test_fuzzed_evaluate_flags(tmp_path_factory, flag, value):
    out = str(tmp_path_factory.mktemp("fuzz"))
    rc, _, err = call(["evaluate", "--run", "nope", "--out", out, flag] + ([] if value is None else [value]))
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: ")
    assert flag in err[0] or "no run log 'nope'" in err[0]  # a valid value: the next mistake, the missing run


@pytest.mark.parametrize("text, words", [("not json", "not valid JSON"), ("[1]", "a JSON list"),
                                         ("{}", "not a gpu_check report")])
def test_a_node_profile_that_is_not_a_report_is_one_line(tmp_path, text, words):
    bad = tmp_path / "report.json"
    bad.write_text(text)
    rc, _, err = call(["train", *SMALL, "--out", str(tmp_path / "out"), "--node-profile", str(bad)])
    assert_one_line(rc, err, "report.json", words)


def test_unwritable_missing_or_not_a_folder_out(tmp_path):
    """Issue 18: a read-only or missing output folder: one line, or (missing) the folder is made and the run
    is whole."""
    if os.geteuid() == 0:  # root writes anywhere but sysfs
        ro = "/sys"
    else:
        ro = str(tmp_path / "ro")
        os.mkdir(ro, 0o555)
    rc, _, err = call(["train", *SMALL, "--out", ro, "--name", "r"])
    assert_one_line(rc, err, ro)
    afile = tmp_path / "afile"
    afile.write_text("")
    rc, _, err = call(["train", *SMALL, "--out", str(afile)])
    assert_one_line(rc, err, str(afile), "not a folder")
    rc, _, err = call(["figures", "--out", str(tmp_path / "nope")])
    assert_one_line(rc, err, "--out")
    missing = tmp_path / "new" / "deeper"
    rc, _, err = call(["train", *SMALL, "--out", str(missing), "--name", "r"])
    assert rc == 0 and err == []
    assert [r["update"] for r in runlog.read(str(missing / "r.jsonl"))[1]] == [0, 1, 2]


def test_finding1_two_concurrent_trainings_on_one_run(tmp_path):
    """Issue 18, finding 1: two ``train`` on one run name both exited 0 and interleaved updates 0,0,1,1...
    Now exactly one trains; the other exits 2 at once with one line naming the run; the log is intact."""
    out = str(tmp_path / "conc")
    args = ["train", "--preset", "ci", "--seed", "11", "--noise", "--env-seed", "5", "--colocate", "--out", out,
            "--hidden", "64", "--quiet", "--n-iters", "120", "--name", "same"]  # a small placer: timings as before
    # the command, with A asking for 400 updates (n_iters may change on resume) so that it is surely
    # still writing (~8 s) when B, started once A has logged its first update, reaches the lock (~1.5 s)
    a_args = [*args[:-4], "--n-iters", "400", *args[-2:]]
    a = subprocess.Popen([sys.executable, "-m", "lib.placement", *a_args], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    log = os.path.join(out, "same.jsonl")
    deadline = time.time() + 60
    while time.time() < deadline and a.poll() is None:  # B starts while A is writing
        if os.path.exists(log) and len(runlog.scan(log).records) >= 1:
            break
        time.sleep(0.05)
    b = run(args)
    a_out, a_err = a.communicate(timeout=120)
    codes = sorted([a.returncode, b.returncode])
    assert codes == [0, 2], (a.returncode, a_err, b.returncode, b.stderr)
    loser = b.stderr if b.returncode == 2 else a_err
    assert loser.splitlines() == [loser.strip()] and "run 'same'" in loser and "another process" in loser
    assert a.returncode == 0, "A held the lock from before its first update"
    assert json.loads(a_out.strip().splitlines()[-1])["updates"] == 400
    header, recs = runlog.read(log)
    assert [r["update"] for r in recs] == list(range(400))


def _small_run(out, n="3"):
    args = ["train", *SMALL, "--out", out, "--name", "r", "--n-iters", n]
    rc, _, err = call(args)
    assert rc == 0, err
    return args, os.path.join(out, "r.jsonl")


def test_truncated_log_refused_without_repair_and_repaired_with_it(tmp_path):
    """Issue 18, run logs: evaluate and figures refuse a truncated log (naming file and line, saying to pass
    --repair); ``train --repair`` drops the torn line and keeps every complete record."""
    out = str(tmp_path)
    args, log = _small_run(out)
    with open(log, "a") as f:
        f.write('{"kind":"update","update":3,"plac')  # torn last line
    for cmd in (["evaluate", "--run", "r", "--out", out, "--rounds-select", "1", "--rounds-confirm", "2",
                 "--steps-per-round", "1"], ["figures", "--out", out]):
        rc, _, err = call(cmd)
        assert_one_line(rc, err, "r.jsonl", "line 5 is truncated", "--repair")
    before = runlog.read(log, repair=True)[1]
    rc, _, err = call(args + ["--repair"])
    assert rc == 0 and err == []
    assert runlog.read(log)[1] == before and len(before) == 3
    assert call(["figures", "--out", out])[0] == 0


def test_torn_line_inside_the_checkpointed_records_is_not_resumed(tmp_path):
    """Records the checkpoint counts on are gone: no resume, with or without --repair (say what to do)."""
    args, log = _small_run(str(tmp_path))
    text = open(log).read()
    open(log, "w").write(text[: len(text) - 40])  # the last complete record, cut
    rc, _, err = call(args)
    assert_one_line(rc, err, "r.jsonl", "checkpoint is at update 3", "--no-resume")
    rc, _, err = call(args + ["--repair"])
    assert_one_line(rc, err, "checkpoint is at update 3")
    assert len(runlog.read(log)[1]) == 2  # --repair kept every complete record


def test_interleaved_log_refused_by_resume_evaluate_and_figures(tmp_path):
    """Issue 18, finding 1: a log with updates 0,0,1,1 (what two writers left) is refused everywhere."""
    out = str(tmp_path)
    args, log = _small_run(out, "2")
    header, recs = runlog.read(log)
    runlog.rewrite(log, header, [recs[0], recs[0], recs[1], recs[1]])
    for cmd in (args, ["evaluate", "--run", "r", "--out", out], ["figures", "--out", out]):
        rc, _, err = call(cmd)
        assert_one_line(rc, err, "r.jsonl", "line 3 has update 0 after update 0")


def test_damaged_checkpoint_names_the_file(tmp_path):
    args, log = _small_run(str(tmp_path))
    with open(log + ".ckpt.pt", "wb") as f:
        f.write(b"not a checkpoint")
    rc, _, err = call(args[:-1] + ["5"])
    assert_one_line(rc, err, "r.jsonl.ckpt.pt", "damaged checkpoint", "--no-resume")
    rc, _, err = call(args[:-1] + ["5", "--no-resume"])  # starting over is the way out
    assert rc == 0 and len(runlog.read(log)[1]) == 5


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume_matches_an_uninterrupted_run(tmp_path):
    """Issue 18 (keep crash recovery): SIGKILLs in a row, one of them leaving a half-written line as a kill
    mid-append does, and the resumed run's records equal an uninterrupted run's; no --repair needed for that."""
    import random
    import signal

    base = ["train", "--preset", "ci", "--seed", "3", "--noise", "--env-seed", "5", "--colocate", "--quiet",
            "--k", "4", "--hidden", "8", "--n-iters", "40"]
    whole = str(tmp_path / "whole")
    assert run(base + ["--out", whole, "--name", "r"]).returncode == 0
    killed = str(tmp_path / "killed")
    log = os.path.join(killed, "r.jsonl")
    rng = random.Random(18)
    for i in range(3):
        p = subprocess.Popen([sys.executable, "-m", "lib.placement", *base, "--out", killed, "--name", "r"],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        target = 6 * (i + 1) + rng.randrange(6)
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            if os.path.exists(log) and len(runlog.scan(log).records) >= target:
                break
            time.sleep(0.005)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        if i == 1:  # what a kill in the middle of an append leaves behind
            with open(log, "a") as f:
                f.write('{"kind":"update","update":99999,"placements":[[0,1')
    p = run(base + ["--out", killed, "--name", "r"])
    assert p.returncode == 0, p.stderr
    assert runlog.read(log)[1] == runlog.read(os.path.join(whole, "r.jsonl"))[1]


@pytest.mark.parametrize("field, value", [("n_micro", 2.5), ("n_micro", "2"), ("n_micro", True), ("env_seed", -1),
                                          ("mem_cap", float("nan")), ("mem_cap", 1.5), ("noise", "yes"),
                                          ("preset", 49)])
def test_env_specs_are_not_coerced(field, value):
    """Issue 18: a run config read back from a log's header is validated with exact types, not int()-ed."""
    from lib.placement.experiment import EnvSpec

    with pytest.raises(ValueError, match=field):
        EnvSpec.from_dict({**EnvSpec().to_dict(), field: value})


@pytest.mark.parametrize("field, value", [("lr", float("inf")), ("lr", float("nan")), ("n_iters", 2.5),
                                          ("k", "8"), ("hidden", True), ("entropy", float("inf")),
                                          ("grad_clip", 0.0), ("seed", 1.0)])
def test_train_configs_are_not_coerced(field, value):
    from lib.placement.reinforce import TrainConfig

    with pytest.raises(ValueError, match=field):
        TrainConfig.from_dict({**TrainConfig().to_dict(), field: value})


def test_a_log_whose_header_config_is_not_strict_is_refused(tmp_path):
    out = str(tmp_path)
    args, log = _small_run(out)
    header, recs = runlog.read(log)
    header["config"]["k"] = 2.0  # what a hand-edited or foreign log might say
    runlog.rewrite(log, header, recs)
    rc, _, err = call(["figures", "--out", out])
    assert_one_line(rc, err, "k must be an integer")
