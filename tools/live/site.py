"""Checks of a built live site that need no browser: the Pyodide lock's outside URLs and the site's size."""

from __future__ import annotations

import json
import os

from tools.live import pins


def site_mb(root: str) -> float:
    """The size of every file under ``root``, in MB (10^6 bytes); links are not followed."""
    total = 0
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total / 1e6


def check_size(root: str, budget_mb: float = pins.SITE_BUDGET_MB) -> float:
    """The site's size in MB; ValueError naming the folder, its size and the budget when it is over."""
    if not os.path.isdir(root):
        raise FileNotFoundError(f"site: no built site at {root}")
    mb = site_mb(root)
    if mb > budget_mb:
        biggest = sorted(((os.path.getsize(os.path.join(d, f)), os.path.join(d, f))
                          for d, _, fs in os.walk(root) for f in fs), reverse=True)[:3]
        names = ", ".join(f"{os.path.relpath(p, root)} ({s / 1e6:.1f} MB)" for s, p in biggest)
        raise ValueError(f"site: {root} is {mb:.1f} MB, over the {budget_mb:g} MB budget; largest: {names}")
    return mb


def closure(lock: dict, names) -> set[str]:
    """Every package of a pyodide-lock ``lock`` that ``names`` need (their ``depends``, transitively)."""
    pkgs, seen, todo = lock["packages"], set(), [n.lower().replace("_", "-") for n in names]
    while todo:
        n = todo.pop()
        if n in seen or n not in pkgs:
            continue
        seen.add(n)
        todo += [d.lower().replace("_", "-") for d in pkgs[n].get("depends", [])]
    return seen


def outside_urls(lock: dict, names) -> dict[str, str]:
    """name -> absolute URL of every package ``names`` need that the site does not serve itself."""
    out = {}
    for n in sorted(closure(lock, names)):
        f = lock["packages"][n]["file_name"]
        if f.startswith(("http://", "https://")) or f.startswith("//"):
            out[n] = f
    return out


def check_lock(lock_path: str, needed) -> dict[str, str]:
    """Raise ValueError unless the only outside package ``needed`` pulls in is the pinned numpy wheel, at
    its pinned URL with its pinned sha256. Returns the outside URLs (numpy's, when it is needed)."""
    with open(lock_path) as f:
        lock = json.load(f)
    if "numpy" not in lock["packages"]:
        raise ValueError(f"lock: {lock_path} has no numpy entry; expected {pins.NUMPY_WHEEL}")
    outside = outside_urls(lock, needed)
    extra = {n: u for n, u in outside.items() if n != "numpy"}
    if extra:
        raise ValueError(f"lock: packages would be fetched from outside the site: {extra}; only numpy may be")
    np_entry = lock["packages"]["numpy"]
    url = np_entry["file_name"]
    if "numpy" in outside and url != pins.NUMPY_URL:
        raise ValueError(f"lock: numpy URL is {url}; tools/live/pins.py pins {pins.NUMPY_URL}")
    if np_entry.get("sha256") != pins.NUMPY_SHA256:
        raise ValueError(f"lock: numpy sha256 is {np_entry.get('sha256')}; tools/live/pins.py pins "
                         f"{pins.NUMPY_SHA256}")
    return outside
