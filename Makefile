# The two commands of the README: `make demo` and `make test`.
# Everything is installed into .venv from the package registries.

VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: all demo test test-rust test-python fuzz develop release lint fmt bench soak clean docs

all: test

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "maturin>=1.16,<2" "pytest>=8" "pyyaml>=6" "trustme>=1.1" "hypothesis>=6.100"
	# openai-python, pinned to the release RetryPolicy.openai() reproduces: the
	# preset's tests run it side by side (they skip where it is absent).
	$(PY) -m pip install -q "openai==3.57.0"
	# genai-prices, pinned: tests/test_cost.py checks the published rates of
	# this release's data (Client(prices="genai-prices")).
	$(PY) -m pip install -q "genai-prices==0.2.3"
	# The OpenTelemetry SDK: tests/test_telemetry.py reads spans and metrics
	# with its in-memory exporter and reader.
	$(PY) -m pip install -q "opentelemetry-sdk==1.45.2"
	# rich: the batch command's live progress bar (tests/test_batch.py reads it in tmux).
	$(PY) -m pip install -q "rich==15.0.0"
	# The docs site's tools: tests/test_readme.py builds it strict, as `make docs` does.
	$(PY) -m pip install -q "mkdocs==1.6.1" "mkdocs-material==9.7.0" "mkdocstrings-python==2.0.1"
	touch $@

# Builds the extension into python/failover (editable install, fast dev profile).
develop: $(VENV)/.installed
	$(VENV)/bin/maturin develop -q --profile dev

# The docs site (docs/, mkdocs-material), built strict: no broken link, anchor or reference.
docs: develop
	$(VENV)/bin/mkdocs build --strict

# Optimised build, for the demo and the benchmarks.
release: $(VENV)/.installed
	$(VENV)/bin/maturin develop -q --release

demo: release
	$(PY) -m failover demo

test-rust:
	cargo test --quiet

# The Rust property tests (the `*_props` modules: hints, framing, each wire's
# readers, redaction) on FUZZ_CASES cases each instead of `cargo test`'s 64:
# 100000 take about 2.5 minutes on 2 cores. A failing case is saved under
# proptest-regressions/ (commit it, and make it a named #[test]).
FUZZ_CASES ?= 100000
fuzz:
	@echo "property tests (*_props): $(FUZZ_CASES) cases each"
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --quiet --lib _props

test-python: develop
	$(PY) -m pytest -q

test: test-rust test-python

lint: $(VENV)/.installed
	$(PY) -m pip install -q "ruff>=0.6" "mypy>=1.10" "check-jsonschema==0.39.0" "zizmor==1.33.1"
	cargo fmt --check
	cargo clippy --all-targets --features python -- -D warnings
	cargo clippy -p failover-bench-floor --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests bench
	$(VENV)/bin/ruff format --check python tests bench
	$(VENV)/bin/mypy
	$(PY) -m mypy.stubtest failover._native
	$(VENV)/bin/ruff check scripts
	$(VENV)/bin/ruff format --check scripts
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(VENV)/bin/zizmor --offline --no-progress .github/workflows

fmt:
	cargo fmt
	$(VENV)/bin/ruff format python tests bench

# The floor (bench/floor: the loopback server and the plain reqwest client), the optimised
# extension and the peers, then one run. `make bench BENCH_ARGS=--quick` for a short one.
BENCH_ARGS ?=
bench: release
	cargo build --release -p failover-bench-floor
	$(PY) -m pip install -q -r bench/requirements.txt
	$(PY) bench/run.py $(BENCH_ARGS)
	$(PY) bench/batch.py

# Load and soak against a local fault server (bench/soak.py): 10 minutes of soak after the
# bursts by default; `make soak SOAK_MINUTES=1` for a quick run.
SOAK_MINUTES ?= 10
soak: release
	$(PY) bench/soak.py --minutes $(SOAK_MINUTES)

clean:
	rm -rf target $(VENV) python/failover/*.so

# Release artifacts (CONTRIBUTING.md): the wheel and the sdist, each installed into a fresh
# venv and smoke-tested (scripts/smoke.py). The version is Cargo.toml's.
.PHONY: wheel sdist-check check-version
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
# pyproject.toml's [project] version, when it has one, is the one maturin stamps: the two agree.
PYPROJECT_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n 1)
# Where the wheel and sdist land, and the wheel's profile: `dist` (thin LTO, stripped), as the
# release workflow builds; `make wheel WHEEL_PROFILE=release` for a quicker one.
WHEELS := target/wheels
WHEEL_PROFILE ?= dist

check-version:
	@test -z "$(PYPROJECT_VERSION)" || test "$(PYPROJECT_VERSION)" = "$(VERSION)" \
		|| { echo "pyproject.toml's version $(PYPROJECT_VERSION) is not Cargo.toml's $(VERSION)"; exit 1; }

# The build tools, pinned: zig (as a PyPI package) links against glibc 2.17 from any
# host, so the wheel is manylinux2014 without a manylinux container; auditwheel checks it.
$(VENV)/.build-tools: $(VENV)/.installed
	$(PY) -m pip install -q "ziglang==0.17.1" "auditwheel==6.8.2"
	touch $@

# A manylinux2014 x86_64 wheel into target/wheels (built under its own target triple,
# target/x86_64-unknown-linux-gnu/, so that it leaves the develop builds alone), checked by
# auditwheel, then installed into a fresh venv in /tmp for scripts/smoke.py.
wheel: $(VENV)/.build-tools check-version
	rm -f $(WHEELS)/failover-$(VERSION)-*manylinux*x86_64.whl
	$(VENV)/bin/maturin build --profile $(WHEEL_PROFILE) --zig --compatibility manylinux2014 \
		--target x86_64-unknown-linux-gnu --out $(WHEELS)
	$(VENV)/bin/auditwheel show $(WHEELS)/failover-$(VERSION)-*manylinux*x86_64.whl \
		| tee $(WHEELS)/auditwheel.txt
	grep -Eq '"manylinux_2_(5|12|17)_x86_64"' $(WHEELS)/auditwheel.txt
	d=$$(mktemp -d /tmp/failover-wheel.XXXXXX) && $(PYTHON) -m venv $$d/venv \
		&& $$d/venv/bin/pip install -q --no-cache-dir $(WHEELS)/failover-$(VERSION)-*manylinux*x86_64.whl \
		&& (cd $$d && $$d/venv/bin/python $(CURDIR)/scripts/smoke.py); \
		rc=$$?; rm -rf $$d; exit $$rc

# The sdist, as a user without a wheel for their platform gets it: `pip install` of it in a
# fresh venv in /tmp compiles the extension with cargo (into this repository's target/, so
# compiled crates are reused: about 25 s warm, 1.5 min cold, on 2 cores), then scripts/smoke.py.
sdist-check: $(VENV)/.installed check-version
	rm -f $(WHEELS)/failover-$(VERSION).tar.gz
	$(VENV)/bin/maturin sdist --out $(WHEELS)
	# The sdist's files carry a fixed old mtime (a reproducible archive), so cargo would take
	# the crate last built here for fresh: clean it (only it; the dependencies stay built).
	cargo clean --release -p failover
	d=$$(mktemp -d /tmp/failover-sdist.XXXXXX) && $(PYTHON) -m venv $$d/venv \
		&& start=$$(date +%s) \
		&& env -u VIRTUAL_ENV CARGO_TARGET_DIR=$(CURDIR)/target \
			$$d/venv/bin/pip install -q --no-cache-dir $(WHEELS)/failover-$(VERSION).tar.gz \
		&& echo "sdist-check: pip install of the sdist took $$(( $$(date +%s) - start )) s" \
		&& (cd $$d && $$d/venv/bin/python $(CURDIR)/scripts/smoke.py); \
		rc=$$?; rm -rf $$d; exit $$rc
