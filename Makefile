# hpclab: the two commands a user needs are `make course` and `make test`.
# Everything else here is a step of those two, usable on its own.

VENV   := .venv
PY     := $(VENV)/bin/python
HPCLAB := $(VENV)/bin/hpclab
PYTEST_ARGS ?=

.PHONY: uninstall help setup build cluster-up cluster-down cluster-status course test bench lab grade-demo grade classroom classroom-down bench-classroom distro-check clean

help:
	@echo "make course        set up, start the local cluster, run every notebook and lab, write the report"
	@echo "make test          set up, start the local cluster, run the tests"
	@echo "make test-fast     for contributors: the quick tests that need no cluster (never starts it)"
	@echo "make lock          requirements.lock from pyproject.toml (after changing a pin)"
	@echo "make lab           JupyterLab on localhost with the course"
	@echo "make bench         benchmarks into build/bench/"
	@echo "make bench-stability [RUNS=3]  the course 3 times quiet and once loaded: the same verdicts?"
	@echo "make grade-demo    grade a simulated class with nbgrader (one line per student)"
	@echo "make grade STEP=.. instructor pipeline step (see grader/README.md)"
	@echo "make classroom     a summer school here: accounts, JupyterHub, Slurm limits, grading (STUDENTS=30)"
	@echo "make bench-classroom [PRESTART=120]  30 simulated students through the hub: build/classroom/load-*.md"
	@echo "make cluster-up | cluster-down | cluster-status"
	@echo "make distro-check DIST=trixie  set-up and course in a pristine Debian root (NOTEBOOKS=... for some; NET=ipv4: no IPv6)"
	@echo "make uninstall     remove what set-up and the cluster installed (DRY=1 to see; keeps runs/)"

setup:
	@bash scripts/setup.sh

build:
	@$(MAKE) -s -C src

# Open MPI 5 and MPICH 5 from their pinned wheels, each in its own prefix, the kernels built with
# each, one Lmod module file per library (scripts/mpi-libraries.sh; the last step of make setup).
.PHONY: mpi-libraries
mpi-libraries:
	@bash scripts/mpi-libraries.sh

cluster-up: setup
	@$(HPCLAB) cluster up

cluster-down:
	@$(HPCLAB) cluster down

cluster-status:
	@$(HPCLAB) cluster status

course: cluster-up
	@$(HPCLAB) course run

# Two at a time, then the tests that need the cluster or the machine to themselves one at a time:
# scripts/test.sh says how, tests/conftest.py (ALONE) which.
test: cluster-up
	@bash scripts/test.sh $(PY) $(PYTEST_ARGS)

# For contributors, meant to take under 2 minutes: every test that needs neither the cluster nor
# the classroom and is not slow. tests/conftest.py marks a test that uses either fixture (and the slow ones), so
# none of these starts the cluster; make test runs them all. They run on every core at once
# (pytest-xdist, one worker a core, a test file's tests in one worker so its fixtures are made once).
.PHONY: test-fast
test-fast: setup
	@$(PY) -m pytest -m "not cluster and not classroom and not slow" -n auto --dist loadfile $(PYTEST_ARGS)

# requirements.lock (every Python package with its hashes) from pyproject.toml: scripts/lock.sh.
.PHONY: lock
lock:
	@bash scripts/lock.sh

bench: cluster-up
	@$(PY) bench/run_all.py

lab: cluster-up
	@$(HPCLAB) course lab

grade-demo: setup
	@$(HPCLAB) course grade-demo

# Instructor pipeline, one step at a time (see grader/README.md):
#   make grade STEP=release COURSE=~/class LAB=lab-transports   (steps: init release collect autograde feedback export)
grade: setup
	@$(PY) -m hpclab.grading $(STEP) $(COURSE) $(LAB) $(ARGS)

STUDENTS ?= 30
INSTRUCTORS ?= 1
classroom: cluster-up
	@$(HPCLAB) classroom up --students $(STUDENTS) --instructors $(INSTRUCTORS)

classroom-down:
	@$(HPCLAB) classroom down

# The whole course three times on a quiet machine and once beside stress-ng --cpu 1: does every
# fidelity row keep its verdict? build/bench/verdict-stability.{json,md} (bench/stability.py).
.PHONY: bench-stability
bench-stability: cluster-up
	@$(PY) bench/stability.py $(if $(RUNS),--runs $(RUNS))

# PRESTART=S: the servers are started over S seconds before the students arrive (as the README
# recommends for a room); without it they arrive to none running.
bench-classroom: classroom
	@$(PY) bench/classroom.py $(if $(PRESTART),--prestart-over $(PRESTART))

# The course on another Debian release, as a new user meets it: a pristine debootstrapped root
# (cached in /var/tmp/hpclab-roots/<dist>), a fresh clone of HEAD, set-up with the network, the
# cluster and the course in a network namespace of their own (scripts/distro-check.sh says more).
#   make distro-check DIST=trixie NOTEBOOKS="00-getting-started 02-transports"
DIST ?= trixie
NOTEBOOKS ?=
distro-check:
	@bash scripts/distro-check.sh $(DIST) $(NOTEBOOKS)

clean:
	rm -rf build/bin build/lib build/course build/bench

# Remove what make setup and the local cluster installed for this checkout (scripts/uninstall.sh):
# DRY=1 only says what; runs/ is kept unless RUNS=delete; apt packages only with APT=remove.
uninstall:
	@bash scripts/uninstall.sh
