"""Tests mirror lib/: tests/placement/ for lib/placement/, tests/galvatron/search/ for lib/galvatron/search/, ..."""

import os

#: The repository root (tests in subfolders find book/, data/ and benchmarks/ from here).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
