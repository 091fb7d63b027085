# Parallelism, Rebuilt: `make book` builds the executed HTML book, `make test` runs every test.
# Both create .venv on first use. Override the Python or torch with e.g.
#   make book PYTHON=python3.12 TORCH_SPEC="torch==2.5.1"
# A kernel that already has torch (a GPU box, Colab) keeps its own: TORCH_SPEC is only used when the venv
# has no torch yet.

PYTHON     ?= python3
VENV       ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed

# Notebook kernels: use the kernelspec installed inside the venv, never a user-level one left elsewhere.
export JUPYTER_PATH := $(abspath $(VENV))/share/jupyter
export PYDEVD_DISABLE_FILE_VALIDATION := 1

PARAMS     ?= cpu

# Worker processes for make test and make book: one per core, at most 4 (TEST_WORKERS, BOOK_WORKERS).
CORES      := $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)

# The live part (make book LIVE=1): JupyterLite + Pyodide + lib's torch-free wheel under _build/html/live/ and a
# "Run it live" button on the pages with a widget (tools/live/, _ext/live_button.py). Its tooling has its own
# venv, from PyPI, on a Python >= 3.12 found by tools/live/find_python.py (or LIVE_PYTHON=...); the book's venv
# is not changed. Without LIVE the book is built exactly as before.
LIVE        ?=
LIVE_VENV   ?= .venv-live
LIVE_PYTHON ?=
LIVE_STAMP  := $(LIVE_VENV)/.installed
ifneq ($(LIVE),)
export BOOK_LIVE := 1
endif

.PHONY: live live-venv
.PHONY: rerun book-from all book test test-unit test-notebooks browser-check chapters strip clean venv bench

all: test book

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (book)" >/dev/null
	touch $(STAMP)

# The executed, strict HTML book: clean (--all), every warning an error, broken references too, and no glued
# number shown as a tuple (tools/check_glued.py).
# Every chapter is executed now, from this checkout, on BOOK_WORKERS processes (one per core, at most 4) into a
# fresh _build/.jupyter_cache (tools/execute_book.py, which fails on any cell error); the build then takes every
# page from that cache (_build/_config.cache.yml: _config.yml with execute_notebooks: cache). BOOK_WORKERS=0:
# jupyter-book executes the chapters itself, one after another (_config.yml's execute_notebooks: force).
BOOK_WORKERS  ?= $(CORES)
BOOK_PARALLEL  = $(filter-out 0,$(strip $(BOOK_WORKERS)))

book: $(STAMP) $(if $(LIVE),$(LIVE_STAMP))
	rm -rf _build/.doctrees _build/html/reports
	$(if $(BOOK_PARALLEL),CI=true $(PY) tools/execute_book.py --workers $(BOOK_WORKERS))
	CI=true $(VENV)/bin/jupyter-book build . --all -W -n --keep-going$(if $(BOOK_PARALLEL), --config _build/_config.cache.yml)
	$(PY) tools/check_glued.py _build/html
	$(if $(LIVE),$(MAKE) --no-print-directory live)

# The live part into an already built _build/html (make book LIVE=1 runs it); checks the site's size budget.
live: $(LIVE_STAMP)
	PYTHONPATH=$(CURDIR) $(LIVE_VENV)/bin/python -m tools.live.build --site _build/html

live-venv: $(LIVE_STAMP)

$(LIVE_STAMP): tools/live/pins.py
	@py="$(LIVE_PYTHON)"; test -n "$$py" || py=$$($(PYTHON) tools/live/find_python.py) || exit 2; \
	test -x $(LIVE_VENV)/bin/python || $$py -m venv $(LIVE_VENV) || exit 2
	$(LIVE_VENV)/bin/python -m pip install -q --upgrade pip
	$(LIVE_VENV)/bin/python -m pip install -q $$(PYTHONPATH=$(CURDIR) $(PYTHON) -m tools.live.pins)
	touch $(LIVE_STAMP)

# Every chapter (or CHAPTERS="book/x/y ...") with the parameter set params/$(PARAMS).yaml, into runs/$(PARAMS)-<UTC>/.
# GNU make itself exits 2 whenever a recipe fails, so the tool's own code and what it means are printed on the
# last line; run python -m lib.rerun directly to get it as the exit status. Every value given on make's command
# line reaches the tool as one argument, as typed: single-quoted for the shell ('\'' for a quote in it) and taken
# unexpanded ($(value ...)), so spaces, quotes, $, ` and ; in PARAMS, CHAPTERS' words or RUN are plain text.
RERUN_FAILED = if [ $$rc -ne 0 ]; then case $$rc in 1) what="a chapter or the build failed";; 2) what="a mistake in the arguments or files, said above";; *) what="stopped by a signal or a crash";; esac; \
	  echo "make $@: python -m lib.rerun exited $$rc: $$what (make itself exits 2: run python -m lib.rerun directly for this code)" >&2; fi; exit $$rc

rerun: $(STAMP)
	@$(PY) -m lib.rerun --params '$(subst ','\'',$(value PARAMS))' $(if $(value CHAPTERS),--chapters $(foreach c,$(value CHAPTERS),'$(subst ','\'',$(c))')); rc=$$?; \
	  $(RERUN_FAILED)

# The HTML book from a rerun's executed notebooks, executing nothing: make book-from RUN=runs/<set>-<stamp>
book-from: $(STAMP)
	@test -n '$(subst ','\'',$(value RUN))' || { echo "book-from: set RUN=runs/<set>-<stamp> (a folder made by make rerun)"; exit 2; }
	rm -rf _build/.doctrees
	@$(PY) -m lib.rerun --book-from '$(subst ','\'',$(value RUN))'; rc=$$?; \
	  $(RERUN_FAILED)

# Unit, property and distributed tests, then every chapter under nbval (lax, with checked oracle cells), on
# TEST_WORKERS processes (pytest-xdist; one per core, at most 4; TEST_WORKERS=0 runs them in this process).
# --dist loadfile keeps each file, so each chapter's cells, on one worker and in order.
TEST_WORKERS ?= $(CORES)
XDIST        := -n $(TEST_WORKERS) --dist loadfile

test: $(STAMP)
	$(PY) -m pytest $(XDIST) tests book

test-unit: $(STAMP)
	$(PY) -m pytest $(XDIST) tests

test-notebooks: $(STAMP)
	$(PY) -m pytest $(XDIST) book

# Opens the built book in headless Chromium at 1400 px, offline: no JavaScript errors, every figure and formula
# drawn, no block wider than its box, no legend on a title, no paths, tracebacks, warnings or check cells.
browser-check: $(STAMP)
	$(PY) tools/browser_check.py _build/html --screenshots _build/screenshots
	$(if $(LIVE),$(PY) tools/browser_check.py _build/html --live $(if $(LIVE_ONLINE),--live-online))

# Chapters are edited as MyST Markdown (book/**/*.md): write each paired .ipynb from its .md (cell ids and
# oracle outputs kept, everything else stripped). `python tools/chapters.py check` says what is out of sync.
chapters: $(STAMP)
	$(PY) tools/chapters.py sync

# Strip outputs from every chapter except cells tagged keep_output.
strip: $(STAMP)
	$(VENV)/bin/nbstripout --keep-count --extra-keys "metadata.papermill cell.metadata.papermill metadata.widgets" book/*/*.ipynb

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf _build
