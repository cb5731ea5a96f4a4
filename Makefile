# hpcbridge: `make test` and `make demo` are the whole set-up on a fresh Debian 12 machine.
# Both first run scripts/setup.sh, which installs only what is missing (Debian packages, .venv,
# the cached parallel h5py and mpi4py wheels, hpcbridge itself) and takes seconds when done.

PY      := .venv/bin/python
MPI_NP  ?= 4
DEMO_URL ?= file://$(CURDIR)/.demo-data
export MPI_NP

.PHONY: help setup test test-serial demo bench lint clean

help:
	@echo "make test   - set up what is missing, run serial tests and MPI tests (mpirun -n $(MPI_NP))"
	@echo "make demo   - set up what is missing, run the demo job on local storage, print a report"
	@echo "make bench  - run the benchmarks (JSON in results/)"
	@echo "make lint   - flake8"
	@echo "make clean  - remove .venv, test logs, demo data (the cached wheels stay in ~/.cache/hpcbridge)"

setup:
	@bash scripts/setup.sh

test: setup
	@bash scripts/run-tests.sh

test-serial: setup
	$(PY) -m pytest -m "not mpi"

demo: setup
	@bash scripts/demo.sh "$(DEMO_URL)"

bench: setup
	$(PY) benchmarks/posix_overhead.py
	$(PY) benchmarks/readahead.py
	$(PY) benchmarks/dfsio.py
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
	  mpirun -n $(MPI_NP) $(PY) benchmarks/lanl_checkpoint.py --hdfs testbed
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
	  mpirun -n $(MPI_NP) $(PY) benchmarks/shared_file_ceiling.py -e

lint: setup
	@$(PY) -m flake8 --version >/dev/null 2>&1 || $(PY) -m pip install -q "flake8>=7"  # the dev extra's linter, on demand
	$(PY) -m flake8 hpcbridge tests benchmarks examples scripts

clean:
	rm -rf .venv .test-logs .demo-data results build *.egg-info
