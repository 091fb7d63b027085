"""lib.atomic: a failed write leaves the old file untouched and no temporary file behind."""

import json
import os

import pytest

from lib import atomic


def test_writes_and_replaces(tmp_path):
    p = tmp_path / "sub" / "f.json"
    atomic.write_json(str(p), {"a": 1})
    assert json.loads(p.read_text()) == {"a": 1}
    atomic.write_text(str(p), "new")
    assert p.read_text() == "new"
    assert os.listdir(p.parent) == ["f.json"]


def test_a_crash_mid_write_keeps_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "f.txt"
    p.write_text("old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic.write_text(str(p), "new")
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_unserialisable_json_leaves_nothing(tmp_path):
    p = tmp_path / "f.json"
    with pytest.raises(TypeError):
        atomic.write_json(str(p), {"a": object()})
    assert not p.exists() and os.listdir(tmp_path) == []


def test_permissions_are_ordinary_not_private(tmp_path):
    p = tmp_path / "new.txt"
    atomic.write_text(str(p), "x")
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(p).st_mode & 0o777 == 0o666 & ~umask
    os.chmod(p, 0o640)
    atomic.write_text(str(p), "y")
    assert os.stat(p).st_mode & 0o777 == 0o640
