# Two commands: `make run` (the product on its embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Azurite (the Azure Storage emulator, an npm package) for the Azure blockstore's tests
AZURITE := $(VENV)/azurite/node_modules/.bin/azurite-blob

.PHONY: run test test-setup test-suite lint-beside lint bench clean chaos-long topologies drill docs browser screenshots \
	azurite compat-clients compat compat-airflow system-packages

# the web UI's tests drive Debian's headless Chromium (Playwright's own download is
# not used): installed once, skipped when the browser is there
CHROMIUM ?= /usr/bin/chromium
# pytest-xdist workers of `make test`: three keep two cores busy while tests wait on
# their servers
TEST_WORKERS ?= 3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# the project's virtualenv first: the other set-up steps make theirs inside it, side by
# side (two creating .venv at once can fail with "File exists")
VENV_CFG := $(VENV)/pyvenv.cfg
$(VENV_CFG):
	$(PYTHON) -m venv $(VENV)

# pip installs without compiling every module of every package (pyspark, botocore and
# moto hold thousands): the processes that import a module compile it, once
$(STAMP): pyproject.toml | $(VENV_CFG)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-compile -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m e2e.demo $(ARGS)

browser: system-packages

# every Debian package the tests use (the browser, rclone, s3cmd), in one apt-get run:
# apt-get takes a lock, so the other set-up steps run beside it, never a second one
system-packages:
	@missing=""; \
	test -x $(CHROMIUM) || missing="$$missing chromium chromium-driver"; \
	command -v rclone >/dev/null || missing="$$missing rclone"; \
	command -v s3cmd >/dev/null || missing="$$missing s3cmd"; \
	test -z "$$missing" || { $(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y $$missing; }

# the S3 clients of the compatibility suite (tests/compat) that are not Python packages
# of the project: rclone and s3cmd from Debian, installed once; s3fs in a virtualenv of
# its own, since aiobotocore pins a botocore older than the project's boto3
S3FS_CLIENT := $(VENV)/s3fs-client/bin/python
DBT_CLIENT := $(VENV)/dbt-client/bin/dbt
compat-clients: system-packages $(S3FS_CLIENT) $(DBT_CLIENT)

$(S3FS_CLIENT): | $(VENV_CFG)
	$(PYTHON) -m venv $(VENV)/s3fs-client
	$(VENV)/s3fs-client/bin/pip install --quiet --no-compile s3fs pandas pyarrow

# dbt with the DuckDB adapter, for `lakectl dbt create-branch-schema` (dbt pins its own
# dependencies; 1.10 is the last dbt-core that installs from PyPI alone)
$(DBT_CLIENT): | $(VENV_CFG)
	$(PYTHON) -m venv $(VENV)/dbt-client
	$(VENV)/dbt-client/bin/pip install --quiet --no-compile "dbt-core==1.10.*" "dbt-duckdb==1.10.*"

# Treeverse's Airflow provider on Airflow 2 in a virtualenv of its own (Airflow pins
# SQLAlchemy 1.4 and many more: tests/compat/airflow-constraints.txt holds its versions);
# building it takes over a minute, so only `make compat` runs its test (the
# compat_airflow marker, left out of the default pytest run)
AIRFLOW_CLIENT := $(VENV)/airflow-client/bin/python
compat-airflow: $(AIRFLOW_CLIENT)

$(AIRFLOW_CLIENT): tests/compat/airflow-constraints.txt | $(STAMP)
	$(PYTHON) -m venv $(VENV)/airflow-client
	$(VENV)/airflow-client/bin/pip install --quiet apache-airflow==2.10.5 \
		airflow-provider-lakefs==0.48.0 -c tests/compat/airflow-constraints.txt
	touch $@

# the whole compatibility suite, the Airflow provider's workflow included (-m '' selects
# every marker)
compat: compat-clients compat-airflow
	$(BIN)/python -m pytest -n 2 --dist loadfile -m '' tests/compat

$(AZURITE): | $(VENV_CFG)
	npm install --prefix $(VENV)/azurite --no-audit --no-fund --loglevel=error azurite@3
	touch $@

azurite: $(AZURITE)

# CI runs `make test`. The set-up steps (the project's virtualenv, the clients'
# virtualenvs, Azurite, Debian's packages) run side by side; then the lint step (style,
# types, layers) runs beside the tests, which take $(TEST_WORKERS) workers (pytest-xdist, a
# file's tests on one worker; each worker starts its own PostgreSQL, moto, Azurite and
# emulators, on ports of its own share); the slowest are listed at the end, to keep the
# suite within its time. Either failing fails the run.
# The suite starts some 140 server and sidecar processes: each reads the project's
# compiled modules (written by the first) instead of compiling them again, even where
# the environment says not to write bytecode.
test: export PYTHONDONTWRITEBYTECODE =
test:
	$(MAKE) --jobs=4 --output-sync=target test-setup
	$(MAKE) --jobs=2 --no-print-directory lint-beside test-suite

test-setup: $(STAMP) compat-clients $(AZURITE)

test-suite: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30

# the lint step, its output shown when it ends (all of it if it failed), not amid the
# tests' progress
LINT_LOG := $(VENV)/lint.log
lint-beside: $(STAMP)
	@$(MAKE) --no-print-directory lint > $(LINT_LOG) 2>&1; rc=$$?; \
	if [ $$rc -ne 0 ]; then cat $(LINT_LOG); echo "lint failed (make lint)"; \
	else echo "lint passed: ruff, mypy, import layers (make lint)"; fi; exit $$rc

# the README's screenshots (docs/img/), taken from two live regions in the browser
screenshots: $(STAMP) browser
	$(BIN)/python -m lakefs_testing.screenshots

# many chaos runs over every combination (e2e/chaos_long.py); an interrupted campaign
# continues where it stopped: make chaos-long SEEDS=100 OPS=40 [JOBS=2]; HANDOVER=1 has
# the runs move the primary too (switchovers, failovers, failbacks); REGIONS=3 mirrors
# to a third region too and GROUPS=1 adds a mirror group per destination (I8);
# SIDECARS=2 runs two replication services per region:
# make chaos-long SEEDS=20 OPS=200 JOBS=1 REGIONS=3 GROUPS=1
SEEDS ?= 24
OPS ?= 40
JOBS ?=
HANDOVER ?=
REGIONS ?=
GROUPS ?=
SIDECARS ?=
chaos-long: $(STAMP)
	$(BIN)/python -m e2e.chaos_long --seeds $(SEEDS) --ops $(OPS) $(if $(JOBS),--jobs $(JOBS)) \
		$(if $(HANDOVER),--handover) $(if $(REGIONS),--regions $(REGIONS)) \
		$(if $(GROUPS),--groups) $(if $(SIDECARS),--sidecars $(SIDECARS)) \
		--results chaos-long.jsonl --resume $(ARGS)

# seed 003's topologies with real processes (e2e/topologies.py): one source to two
# regions, two regions mirroring each other, a group mirrored to two regions:
# make topologies [ARGS="one-to-many"]
topologies: $(STAMP)
	$(BIN)/python -m e2e.topologies $(ARGS)

# the DR drill (e2e/drill.py): switchover and back, kill -9 and failover, failback, a
# workload committing all along; RPO and RTO per phase: make drill [ARGS="--quick"]
drill: $(STAMP)
	$(BIN)/python -m e2e.drill $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# rewrite docs/CONFIG_SERVER.md and docs/CONFIG_REPLICATION.md from the settings models
docs: $(STAMP)
	$(BIN)/python -m lakefs_testing.config_reference

clean:
	rm -rf $(VENV)
