# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help venv venv-spark40 venv-spark43 demo test test-main test-spark40 test-spark43 \
	test-kafka44 test-newest chromium kafka delta lint docs format bench bench-scale bench-soak bench-latency fault-matrix clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

$(STAMP): setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ".[all]"
	touch $(STAMP)

venv: $(STAMP) ## create/refresh the local virtualenv from constraints.txt

# A smaller virtualenv of another pyspark (no MLflow, plotly or dashboards): $(1) its folder, $(2)
# the constraints file that pins its pyspark (and Delta), $(3) its extras; the rest as
# constraints.txt pins it.
define tier_venv
	$(PYTHON) -m venv $(1)
	$(1)/bin/pip install -q --upgrade pip
	grep -v -e '^pyspark==' -e '^delta-spark==' constraints.txt > $(1)/constraints-base.txt
	$(1)/bin/pip install -q -c $(1)/constraints-base.txt -c $(2) -e ".[$(3)]"
	touch $(1)/.installed
endef

# Databricks Runtime 17.3 LTS is Spark 4.0: the engine's tests on the pyspark 4.0.x pinned in
# constraints-spark40.txt, with Delta 4.0's Spark writer.
VENV40 ?= .venv-spark40
STAMP40 := $(VENV40)/.installed
EXTRAS40 := kafka,spark,delta,delta-spark,embedded,notebooks,test
$(STAMP40): setup.py constraints.txt constraints-spark40.txt
	$(call tier_venv,$(VENV40),constraints-spark40.txt,$(EXTRAS40))

venv-spark40: $(STAMP40) ## the pyspark 4.0.x virtualenv of `make test-spark40`

# The newest pyspark, 4.3 (constraints-spark43.txt): no Delta release supports it yet, so no
# delta-spark there; delta-rs writes the tables.
VENV43 ?= .venv-spark43
STAMP43 := $(VENV43)/.installed
EXTRAS43 := kafka,spark,delta,embedded,notebooks,test
$(STAMP43): setup.py constraints.txt constraints-spark43.txt
	$(call tier_venv,$(VENV43),constraints-spark43.txt,$(EXTRAS43))

venv-spark43: $(STAMP43) ## the pyspark 4.3.x virtualenv of `make test-spark43`

# The dashboard test drives Debian's chromium; installed once, as root, when missing.
chromium: ## install Debian's chromium for the dashboard browser test (needs root)
	@test -x /usr/bin/chromium || (apt-get update -q && apt-get install -y -q chromium)

# Apache Kafka from Maven Central, once, into ~/.cache/mirror_lib/jars (MIRROR_JARS_CACHE): the
# pinned release's broker and MirrorMaker 2 (the integration tests and the bench), and the brokers
# of the version tiers (4.4, the newest; 3.9 and 2.8 with its ZooKeeper, the ones people migrate
# from), each pinned in mirror_lib/testing/kafka_jars.py.
KAFKA_SETS ?= kafka mm2 kafka:4.4 kafka:3.9 kafka:2.8
kafka: $(STAMP) ## fetch the pinned Apache Kafka jars (brokers of each tested release, MM2)
	$(BIN)/python -m mirror_lib.testing.kafka_jars $(KAFKA_SETS)

# Delta's Spark writer (the delta-spark package's jars, for this pyspark) from Maven Central, once,
# into Spark's Ivy cache ~/.ivy2.5.2: a local session with Delta starts and stops, within 15 min.
DELTA_FETCH = timeout 900 $(1)/python -c "from mirror_lib.spark.session import local_spark_session; \
	local_spark_session('delta-fetch', 1, delta=True).stop()"
delta: $(STAMP) ## fetch Delta's Spark jars for the pyspark of the virtualenv into Spark's Ivy cache
	$(call DELTA_FETCH,$(BIN))

demo: $(STAMP) ## run the embedded demo (two local brokers, Spark local, Delta on disk)
	$(BIN)/mirror validate examples/mm2.properties
	$(BIN)/mirror demo

lint: $(STAMP) ## ruff, the architecture contract (ARCHITECTURE.md), mypy and size/shape baselines
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python tests/tools/shape_limits.py

# The documentation site (mkdocs.yml, docs/), built in strict mode: a broken link, a missing page
# or anchor fails the build, and so `make test`. docs/configuration.md's reference of every key is
# generated from mirror_lib/config/settings.py at build time (docs/hooks/settings_reference.py).
DOCS_SITE ?= site
docs: $(STAMP) ## build the documentation site into site/ (strict: a broken link fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(DOCS_SITE)

format: $(STAMP) ## apply ruff formatting and fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Two pytest-xdist workers, a test file per worker at a time (its module fixtures stay together):
# most integration tests wait on brokers, outages and slices, so two run in the time of one.
# `make test PYTEST_WORKERS=0` runs the suite in one process. A worker that crashes (a native
# fault) ends the run as failed: pytest-xdist 3.8 replacing it under --dist loadfile can leave
# every worker idle and the run hanging (pytest-xdist issues 784, 1378; seen here once).
# --no-loadscope-reorder hands out files in the order of START_ORDER (tests/conftest.py): by
# default pytest-xdist orders them by their number of tests, so a one-test file that takes
# 13 minutes started last.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL = -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --max-worker-restart=0
# CI runs `make test` in under an hour on 2 cores: the full suite (the version tier and the
# three-broker tier included), then the pyspark 4.0 tier. The tiers of the newest releases and
# the fault matrix have targets of their own, run before a release (docs/testing.md).
test: lint docs chromium kafka delta ## lint, the docs build, the full suite, then the pyspark 4.0 tier
	$(BIN)/pytest $(PYTEST_PARALLEL)
	$(MAKE) test-spark40

test-newest: test-kafka44 test-spark43 ## the tiers of the newest releases: Kafka 4.4 brokers, pyspark 4.3

test-main: lint docs chromium kafka delta ## lint, the docs build and the full suite on the main virtualenv only
	$(BIN)/pytest $(PYTEST_PARALLEL)

# Replication, checkpoints, materialization and one notebook on pyspark 4.0.x: the tests marked
# spark40 in these files (about 4 minutes on a busy 2-core machine).
SPARK40_FILES ?= tests/integration/test_replication.py tests/integration/test_checkpoints.py \
	tests/integration/test_tables.py tests/integration/test_delta_writers.py \
	tests/notebooks/test_notebooks.py
test-spark40: $(STAMP40) ## the spark40-marked tests on pyspark 4.0.x (Databricks Runtime 17.3 LTS)
	$(call DELTA_FETCH,$(VENV40)/bin)
	$(VENV40)/bin/pytest -p no:cacheprovider $(PYTEST_PARALLEL) -m spark40 $(SPARK40_FILES)

# Replication, checkpoints and notebook 02 (whose run materializes the tables) on pyspark 4.3,
# the newest: no Delta release supports Spark 4.3 yet, so delta-rs writes the tables.
SPARK43_FILES ?= tests/integration/test_replication.py tests/integration/test_checkpoints.py \
	tests/notebooks/test_notebooks.py
test-spark43: $(STAMP43) ## the spark40-marked tests of 3 files on pyspark 4.3.x (tables by delta-rs)
	$(VENV43)/bin/pytest -p no:cacheprovider $(PYTEST_PARALLEL) -m spark40 $(SPARK43_FILES)

# Replication and checkpoints against brokers of Apache Kafka 4.4, the newest (MirrorMaker 2 and
# the rest of the suite stay on 4.3.1: connect-mirror 4.4.0 is not served).
KAFKA44_FILES ?= tests/integration/test_replication.py tests/integration/test_checkpoints.py
test-kafka44: kafka ## the spark40-marked replication and checkpoint tests on Kafka 4.4 brokers
	MIRROR_TEST_KAFKA_VERSION=4.4 $(BIN)/pytest -p no:cacheprovider $(PYTEST_PARALLEL) \
		-m spark40 $(KAFKA44_FILES)

# Every fault of docs/testing.md#the-fault-matrix on three-broker clusters under a steady load,
# then the one-slot variants of the integration tier's fault tests (about 20 minutes on 2 cores);
# each three-broker fault's figures go to $(FAULTS_DIR)/fault-figures.jsonl.
FAULTS_DIR ?= $(HOME)/.cache/mirror_lib/fault-matrix
fault-matrix: kafka delta ## the whole fault matrix, and the one-slot fault tests (about 20 minutes)
	rm -rf $(FAULTS_DIR) && mkdir -p $(FAULTS_DIR)
	MIRROR_FAULT_MATRIX=1 MIRROR_FAULT_FIGURES=$(FAULTS_DIR)/fault-figures.jsonl \
		$(BIN)/pytest -p no:cacheprovider -v tests/faults --basetemp=$(FAULTS_DIR)/runs
	MIRROR_FAULT_MATRIX=1 $(BIN)/pytest -p no:cacheprovider $(PYTEST_PARALLEL) -m fault_matrix \
		tests/integration
	cat $(FAULTS_DIR)/fault-figures.jsonl

bench: $(STAMP) ## run the benchmarks in bench/ (not part of the tests)
	$(BIN)/python bench/replication.py

# The scale and soak benches (bench/README.md, "Scale and soak"): hours each at their defaults.
# SCALE_ARGS / SOAK_ARGS pass flags, e.g. `make bench-soak SOAK_ARGS="--minutes 5"`.
SCALE_ARGS ?=
SOAK_ARGS ?=
bench-scale: $(STAMP) kafka ## partitions, groups, new topics and flows, beside MirrorMaker 2
	$(BIN)/python bench/scale.py $(SCALE_ARGS)

bench-soak: $(STAMP) kafka ## hours at 5,000 records/s: every piece of state, extrapolated to 30 days
	$(BIN)/python bench/soak.py $(SOAK_ARGS)

# The latency bench (bench/README.md, "Latency"): 6 contestants and the probe's floor, 5 times,
# fresh brokers for each run. LATENCY_ARGS passes flags, e.g. LATENCY_ARGS="--reps 1".
LATENCY_ARGS ?=
bench-latency: $(STAMP) kafka ## p50/p99 at 5,000 records/s, ours beside MirrorMaker 2, repeated
	$(BIN)/python bench/latency.py $(LATENCY_ARGS)

clean: ## remove the virtualenv and local state
	rm -rf $(VENV) $(VENV40) $(VENV43) mirror-state site .pytest_cache .ruff_cache .mypy_cache
