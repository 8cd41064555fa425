# Two commands on a fresh machine (README, "On a fresh machine"):
#   make perf    set up, then run the suite (pytest perf_tests); an optional package that
#                cannot be installed (no package index, say) is left out in one line
#   make test    set up, with every optional package, the test tools and the real launchers,
#                then run the suite's own tests
# Each step is a plain command; `make -n perf` prints them without running anything.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# Where torch comes from when no CUDA build is installed. Empty: the plain package index, where
# the pin resolves to a CPU wheel only on machines that carry one locally (this project's do);
# elsewhere it resolves to a CUDA build with several GB of libraries, so pass PyTorch's CPU
# index: make perf TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
TORCH_VERSION ?= 2.13.0

.PHONY: perf test test-setup lint test-parallel test-quiet test-long setup torch launchers

perf: setup
	$(PYTHON) -m tools install-optional
	$(PYTHON) -m pytest perf_tests

test: test-setup lint test-parallel test-quiet

# The three steps of `make test`, which .ci/run times one by one; each test phase lists its
# 15 slowest tests, so a change that makes one dear shows in the log. test-setup builds the
# container tests' images (tests/container_images.py, about a minute of one core, once per
# machine) beside its installs, on the core they leave idle; built inside the tests, they took
# that core from the tests run two at a time. Debian's root (--plain) needs no torch and starts
# first; the venv with this torch, once `make setup` has installed it. (`make`, not $(MAKE): a
# line naming $(MAKE) runs under `make -n` too, and this one starts a build.)
test-setup: launchers
	$(PYTHON) tests/container_images.py --plain & \
	make --no-print-directory setup && { $(PYTHON) tests/container_images.py & } && \
	$(PYTHON) -m tools install-optional --all && $(PIP) install -r requirements-test.txt; \
	installed=$$?; wait; exit $$installed

# ruff, with the rules pyproject.toml lists: pycodestyle, pyflakes, bugbear,
# absolute imports (a few seconds).
lint:
	$(PYTHON) -m ruff check .

# --dist loadgroup: the tests that read one shared session (their xdist_group mark) run on one
# worker, so that the session runs once; every other test goes to whichever worker is free.
# Beside those two workers, in a pytest of its own, the tests whose time is mostly an idle wait
# for a timeout (their idle_wait mark: four hung ranks, a run and a command past their limits):
# on a worker of the two they held it idle for about two minutes in all (tests/cpu_per_test.py
# measures a test's share of CPU). Their output follows.
test-parallel:
	beside=$$(mktemp); \
	$(PYTHON) -m pytest tests -m "idle_wait and not quiet_host and not long" --durations=8 \
	    > $$beside 2>&1 & waiting=$$!; \
	$(PYTHON) -m pytest tests -n 2 --dist loadgroup \
	    -m "not idle_wait and not quiet_host and not long" --durations=15; two=$$?; \
	wait $$waiting; waited=$$?; echo "== beside them, the idle waits:"; cat $$beside; \
	rm -f $$beside; test $$two -eq 0 && test $$waited -eq 0

# After the rest, alone: the tests that need the host to themselves.
test-quiet:
	$(PYTHON) -m pytest tests -m "quiet_host and not long" --durations=15

# The real bisections (tests marked long): 10-30 min each on 2 cores, alone on a quiet host.
test-long: setup
	$(PIP) install -r requirements-test.txt
	$(PYTHON) -m pytest tests -m long -s

# The project itself, editable: requirements.txt comes with it (pyproject.toml reads it), the
# plugin's entry point and the rn50-perf command are installed, and the tools keep
# reading and writing this checkout (baselines/, docs/). Built with this environment's
# setuptools (torch 2.13 brings 77; from 70.1 it needs no wheel package), so a host with no
# package index installs it too; pip keeps the torch installed above (the project asks only
# torch>=2.4).
setup: torch
	$(PIP) install "setuptools>=70.1"
	$(PIP) install --no-build-isolation -e .

# Keep a CUDA build of torch where one is installed (a GPU host); else install the CPU build.
torch:
	@if $(PYTHON) -c "import sys, torch; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; \
	then echo "keeping the installed CUDA build of torch"; \
	else echo "$(PIP) install torch==$(TORCH_VERSION) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))"; \
	     $(PIP) install torch==$(TORCH_VERSION) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)); fi

launchers:
	bash .ci/install-launchers.sh
