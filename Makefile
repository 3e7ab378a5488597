# hpcbridge: `make run` serves the hooks, `make test` runs every test (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PORT ?= 8080
HOST ?= 127.0.0.1
# The product's one version, hooks/__init__.py's: the package's, the metrics' and the image's.
VERSION = $(shell $(PYTHON) -c 'import hooks; print(hooks.__version__)')
IMAGE ?= hpcbridge:$(VERSION)

.PHONY: run test lint unit openapi demo bench bench-follow bench-slow bench-data bench-containers bench-system bench-dependencies lock image clean

$(VENV)/.runtime: requirements.txt
	@bash tests/venv.sh $(PYTHON) $(VENV) requirements.txt
	@touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt
	@bash tests/venv.sh $(PYTHON) $(VENV) requirements-dev.txt
	@touch $(VENV)/.runtime $@

# gunicorn with hooks.gunicorn_conf, as in the image (hooks/cli.py).
run: $(VENV)/.runtime
	HOST=$(HOST) PORT=$(PORT) $(VENV)/bin/python -m hooks serve

test: $(VENV)/.dev
	@bash tests/run.sh

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check hooks tests bench
	$(VENV)/bin/mypy

unit: $(VENV)/.dev
	$(VENV)/bin/pytest -q tests/unit tests/static
	$(VENV)/bin/pytest -q --doctest-modules hooks/core hooks/schedulers

# docs/hooks-openapi.yaml's BatchJobSpec and BatchJobStatus, written from crds/batchjob.yaml.
openapi: $(VENV)/.dev
	$(VENV)/bin/python -m tests.static.openapi

demo: $(VENV)/.dev
	@bash tests/demo.sh

bench: $(VENV)/.dev
	@bash bench/run.sh $(BENCH_ARGS)

bench-follow: $(VENV)/.dev
	@BENCH_MODULE=bench.follow bash bench/run.sh $(BENCH_ARGS)

bench-slow: $(VENV)/.dev
	@BENCH_MODULE=bench.slow_clients bash bench/run.sh $(BENCH_ARGS)

# The outputs mover against scp of the same 1 GiB; needs the S3 store of tests/clusters/s3-up.sh too.
bench-data: $(VENV)/.dev
	@BENCH_MODULE=bench.data BENCH_S3=1 bash bench/run.sh $(BENCH_ARGS)

# Containers from create to Running, image cached or not, and N BatchJobs sharing one uncached
# image; needs the SLURM cluster, the registries and the runtimes of tests/clusters (bench/containers.py).
bench-containers: $(VENV)/.dev
	$(VENV)/bin/python -m bench.containers $(BENCH_ARGS)

# The whole system on the Kubernetes cluster KUBECONFIG points at (CRD, Metacontroller and hooks
# installed there): N BatchJobs created at once, see bench/system.py.
bench-system: $(VENV)/.dev
	$(VENV)/bin/python -m bench.system $(BENCH_ARGS)

# One BatchJob and N that depend on it (spec.dependsOn), on the cluster KUBECONFIG points at: the
# dependents' submissions after its Succeeded, and their syncs while waiting (bench/dependencies.py).
bench-dependencies: $(VENV)/.dev
	$(VENV)/bin/python -m bench.dependencies $(BENCH_ARGS)

# requirements.lock: every package of the image at an exact version with its hashes, resolved
# from requirements.txt for the image's Python (the Dockerfile installs it with --require-hashes).
# Pins already in the lock are kept; delete it first to move every transitive pin.
lock: $(VENV)/.dev
	$(VENV)/bin/uv pip compile requirements.txt --generate-hashes --python-version 3.11 \
		--python-platform linux --custom-compile-command 'make lock' -o requirements.lock

# The image (Dockerfile), labelled with the version and the commit: IMAGE=REGISTRY/hpcbridge:TAG.
image:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION="$$(git rev-parse HEAD)" \
		-t $(IMAGE) .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build hpcbridge.egg-info
