# thumbpipe: `make demo` runs the sample manifest, `make test` runs the tests.
# Both install what is missing (libvips from Debian) first.

SWIFT ?= swift
OUT ?= out
APT_INSTALL = DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends

.PHONY: all deps build demo test test-deploy test-slurm slurm-run format clean bench bench-archive bench-million

all: build

# System libraries come from Debian through pkg-config; install them when missing.
deps:
	@if ! pkg-config --exists vips; then \
	  echo "make: installing libvips-dev (pkg-config cannot find vips)"; \
	  apt-get update -qq && $(APT_INSTALL) libvips-dev pkg-config; \
	fi
	@if ! pkg-config --exists sqlite3; then \
	  echo "make: installing libsqlite3-dev (pkg-config cannot find sqlite3)"; \
	  apt-get update -qq && $(APT_INSTALL) libsqlite3-dev; \
	fi
	@command -v python3 >/dev/null || { apt-get update -qq && $(APT_INSTALL) python3; }
	@# The deploy/ tests parse job.yaml with Debian's PyYAML.
	@/usr/bin/python3 -c "import yaml" 2>/dev/null || { apt-get update -qq && $(APT_INSTALL) python3-yaml; }
	@# The report's browser test renders the page in headless Chromium.
	@command -v chromium >/dev/null || { apt-get update -qq && $(APT_INSTALL) chromium; }
	@# Contact-sheet labels need one font.
	@fc-list 2>/dev/null | grep -q . || { apt-get update -qq && $(APT_INSTALL) fonts-dejavu-core; }

build: deps
	$(SWIFT) build -c release

# Runs samples/items.jsonl into ./out. The sample names one photo that does not
# exist, so thumbpipe reports that item and exits 1, which make passes on.
demo: build
	@rm -rf $(OUT)
	@status=0; .build/release/thumbpipe run samples/items.jsonl -o $(OUT) || status=$$?; \
	echo; echo "Outputs in $(OUT)/:"; \
	echo "  $(OUT)/items.archive            the item archive (NSKeyedArchiver, BNRItem)"; \
	echo "  $(OUT)/<itemKey>                one full-size JPEG per item"; \
	echo "  $(OUT)/.thumbpipe/report.json   counts, timings, failures"; \
	echo "  $(OUT)/.thumbpipe/contact-sheet.png  every thumbnail with its name, to check at a glance"; \
	.build/release/thumbpipe contact-sheet $(OUT)/items.archive -o $(OUT)/.thumbpipe/contact-sheet.png -q; \
	echo; .build/release/thumbpipe inspect $(OUT)/items.archive; \
	echo; echo "thumbpipe exited $$status (1 = finished, some items failed; see above)"; \
	exit $$status

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-xctest
	@$(MAKE) --no-print-directory test-deploy
	@$(MAKE) --no-print-directory slurm-run

# deploy/kubernetes/job.yaml against the official Kubernetes schemas, offline
# (kubernetes-validate from PyPI ships them), in a venv under .build; and a broken
# copy must fail, so the check cannot pass vacuously.
KVENV = .build/kvenv
test-deploy:
	@python3 -c "import venv, ensurepip" 2>/dev/null || { apt-get update -qq && $(APT_INSTALL) python3-venv; }
	@test -x $(KVENV)/bin/kubernetes-validate || { python3 -m venv $(KVENV) && $(KVENV)/bin/pip install -q kubernetes-validate; }
	$(KVENV)/bin/kubernetes-validate --strict deploy/kubernetes/job.yaml
	@sed 's/completionMode: Indexed/completionMode: 4/' deploy/kubernetes/job.yaml > .build/job-broken.yaml
	@if $(KVENV)/bin/kubernetes-validate --strict --quiet .build/job-broken.yaml >/dev/null 2>&1; then \
	  echo "test-deploy: a broken job.yaml passed validation" >&2; exit 1; \
	else echo "test-deploy: a broken job.yaml is rejected, as it must be"; fi

# deploy/slurm/thumbpipe.sbatch on a real single-node Slurm (deploy/slurm/local-cluster.sh).
test-slurm: deps
	$(SWIFT) build --product thumbpipe
	@$(MAKE) --no-print-directory slurm-run

slurm-run:
	deploy/slurm/test-slurm.sh

format:
	$(SWIFT) format -i -r Sources Tests Package.swift

clean:
	rm -rf .build $(OUT)

# The nightly path at collection scale: 1,000,000 items (1,000 photos), first /
# unchanged / dry-run / 10 changed, wall time and peak memory each.
bench-million: deps
	@command -v vipsthumbnail >/dev/null || $(APT_INSTALL) libvips-tools
	@test -x /usr/bin/time || { apt-get update -qq && $(APT_INSTALL) time; }
	Benchmarks/million.sh

# The archive benchmark: 1,000,000 items with 6 KB thumbnails, written and read back.
bench-archive: deps
	Benchmarks/archive.sh

# The throughput benchmark: thumbpipe side by side with pyvips, the vips CLI pair,
# ImageMagick and the store-only floor, on 200 generated 8-24 Mpx JPEGs, then with
# pyvips and the floor on the PNG and HEIC sets; three rounds each.
BENCH_PY = Benchmarks/work/venv/bin/python
bench: deps
	@command -v vipsthumbnail >/dev/null || $(APT_INSTALL) libvips-tools
	@test -x /usr/bin/convert || { apt-get update -qq && $(APT_INSTALL) imagemagick; }
	@test -x /usr/bin/time || { apt-get update -qq && $(APT_INSTALL) time; }
	@python3 -c "import venv" 2>/dev/null || { apt-get update -qq && $(APT_INSTALL) python3-venv; }
	@test -x $(BENCH_PY) || { python3 -m venv Benchmarks/work/venv && $(BENCH_PY) -m pip install -q pyvips; }
	$(SWIFT) build -c release
	$(BENCH_PY) Benchmarks/bench.py --only jpeg --rounds 3 --memory --incremental
	$(BENCH_PY) Benchmarks/bench.py --only png --rounds 3 --peers thumbpipe,floor,pyvips
	$(BENCH_PY) Benchmarks/bench.py --only heic --rounds 3 --peers thumbpipe,floor,pyvips
