# thumbpipe: `make demo` runs the sample manifest, `make test` runs the tests.
# Both install what is missing (libvips from Debian) first. `make install`,
# `make deb` and `make image` ship it (see the README's Install section; docs/ has the rest).

SWIFT ?= swift
OUT ?= out
# A held apt or dpkg lock (unattended-upgrades, another install) is waited for, not failed on.
APT_LOCK = -o DPkg::Lock::Timeout=600
APT_INSTALL = DEBIAN_FRONTEND=noninteractive apt-get $(APT_LOCK) install -y -qq --no-install-recommends

# Where `make install` puts things (GNU conventions: PREFIX, DESTDIR).
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR ?= $(DATADIR)/zsh/site-functions
FISHCOMPDIR ?= $(DATADIR)/fish/vendor_completions.d

# The release binary links the Swift runtime and Foundation statically: it needs
# only Debian's runtime libraries (libvips42, libsqlite3-0, libseccomp2, libjpeg62-turbo and theirs; libavcodec59, loaded when a worker may meet a HEIC).
RELEASE_FLAGS = -c release --static-swift-stdlib
VERSION := $(shell sed -n 's/.*static let version = "\(.*\)"/\1/p' Sources/ThumbpipeCore/Reporting/RunReport.swift)
REVISION := $(shell git describe --always --dirty --tags 2>/dev/null || echo unknown)
# The tag `make image` gives its image; deploy/kubernetes/*.yaml name it.
IMAGE_NAME = localhost/thumbpipe
IMAGE = $(IMAGE_NAME):$(VERSION)
# The clean Debian 12 root the install test and the image's base are made from:
# cached outside the repository, so a fresh clone reuses it.
CACHE ?= $(HOME)/.cache/thumbpipe

.PHONY: all deps build docs demo test test-swift-cli test-swift-rest test-deploy test-slurm slurm-run format clean bench bench-archive bench-million fuzz test-sanitize \
	install install-files uninstall deb image test-install packaging-deps bench-static bench-sandbox

all: build

# System libraries come from Debian through pkg-config; install them when missing.
deps:
	@if ! pkg-config --exists vips; then \
	  echo "make: installing libvips-dev (pkg-config cannot find vips)"; \
	  apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libvips-dev pkg-config; \
	fi
	@if ! pkg-config --exists sqlite3; then \
	  echo "make: installing libsqlite3-dev (pkg-config cannot find sqlite3)"; \
	  apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libsqlite3-dev; \
	fi
	@if ! pkg-config --exists libjpeg; then \
	  echo "make: installing libjpeg62-turbo-dev (pkg-config cannot find libjpeg)"; \
	  apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libjpeg62-turbo-dev; \
	fi
	@if ! pkg-config --exists zlib; then \
	  echo "make: installing zlib1g-dev (pkg-config cannot find zlib)"; \
	  apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) zlib1g-dev; \
	fi
	@if ! pkg-config --exists libavcodec; then \
	  echo "make: installing libavcodec-dev (pkg-config cannot find libavcodec)"; \
	  apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libavcodec-dev; \
	fi
	@if ! pkg-config --exists libdeflate; then \
	  echo "make: installing libdeflate-dev (pkg-config cannot find libdeflate)"; \
	  apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libdeflate-dev; \
	fi
	@# The plane path's test reads its store files back with libjpeg-turbo's djpeg.
	@command -v djpeg >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libjpeg-turbo-progs; }
	@if ! pkg-config --exists libseccomp; then \
	  echo "make: installing libseccomp-dev (pkg-config cannot find libseccomp)"; \
	  apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libseccomp-dev; \
	fi
	@command -v python3 >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) python3; }
	@# The deploy/ tests parse job.yaml with Debian's PyYAML.
	@/usr/bin/python3 -c "import yaml" 2>/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) python3-yaml; }
	@# The report's browser test renders the page in headless Chromium.
	@command -v chromium >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) chromium; }
	@# Contact-sheet labels: a Latin font, and one with Chinese and Japanese (the font test names both).
	@fc-list 2>/dev/null | grep -q . || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) fonts-dejavu-core; }
	@fc-list ':charset=5199' 2>/dev/null | grep -q . || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) fonts-droid-fallback; }
	@pkg-config --exists fontconfig || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libfontconfig-dev; }
	@# The completion tests run the zsh and fish completions in those shells.
	@command -v zsh >/dev/null && command -v fish >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) zsh fish; }
	@# The nightly service's metrics are checked by Debian's promtool and served by its node-exporter.
	@command -v promtool >/dev/null && test -x /usr/bin/prometheus-node-exporter || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) prometheus prometheus-node-exporter; }
	@# The man page test and the install test read the page with man.
	@command -v man >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) man-db; }

build: deps
	THUMBPIPE_REVISION=$(REVISION) $(SWIFT) build $(RELEASE_FLAGS) --product thumbpipe

# Runs samples/items.jsonl into ./out. The sample names one photo that does not
# exist on purpose: the demo passes when that item, and only that item, failed.
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
	echo; samples/check-demo.sh $$status $(OUT)

test: deps
	$(SWIFT) build --build-tests
	@# Two test processes side by side, the command line's suites and all others:
	@# one process runs as many tests at once as there are cores, and a command-line
	@# test mostly waits on the thumbpipe it started (one process: 214 s; two: 159 s).
	@$(MAKE) --no-print-directory --output-sync=target -j2 test-swift-cli test-swift-rest
	@# The Kubernetes and Slurm checks mostly wait (on pip, on slurmd): the release
	@# build the install test needs runs beside them (10 m 23 s → 9 m 25 s on 2 cores).
	@$(MAKE) --no-print-directory --output-sync=target -j3 test-deploy slurm-run build
	@$(MAKE) --no-print-directory test-install

# The test bundle run directly (`swift test` holds the build folder's lock, so two
# of it cannot run at once); --skip rather than a second filter, so that a suite
# added anywhere else runs too.
# TZ=UTC: a photo time that names no offset is read in the machine's zone, and the
# tests' expected dates are written in UTC (MetadataRunTests gives zones of its own).
RUN_TESTS = TZ=UTC "$$($(SWIFT) build --show-bin-path)/thumbpipePackageTests.xctest" --testing-library swift-testing
CLI_SUITES = '^ThumbpipeCLITests\.'
test-swift-cli:
	$(RUN_TESTS) --filter $(CLI_SUITES)
test-swift-rest:
	$(RUN_TESTS) --skip $(CLI_SUITES)

# deploy/kubernetes/job.yaml against the official Kubernetes schemas, offline
# (kubernetes-validate from PyPI ships them), in a venv under .build; and a broken
# copy must fail, so the check cannot pass vacuously.
KVENV = .build/kvenv
test-deploy:
	@python3 -c "import venv, ensurepip" 2>/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) python3-venv; }
	@test -x $(KVENV)/bin/kubernetes-validate || { python3 -m venv $(KVENV) && $(KVENV)/bin/pip install -q kubernetes-validate; }
	$(KVENV)/bin/kubernetes-validate --strict deploy/kubernetes/job.yaml deploy/kubernetes/cronjob.yaml
	@sed 's/completionMode: Indexed/completionMode: 4/' deploy/kubernetes/job.yaml > .build/job-broken.yaml
	@if $(KVENV)/bin/kubernetes-validate --strict --quiet .build/job-broken.yaml >/dev/null 2>&1; then \
	  echo "test-deploy: a broken job.yaml passed validation" >&2; exit 1; \
	else echo "test-deploy: a broken job.yaml is rejected, as it must be"; fi
	@sed 's/completionMode: Indexed/completionMode: 4/' deploy/kubernetes/cronjob.yaml > .build/cronjob-broken.yaml
	@if $(KVENV)/bin/kubernetes-validate --strict --quiet .build/cronjob-broken.yaml >/dev/null 2>&1; then \
	  echo "test-deploy: a broken cronjob.yaml passed validation" >&2; exit 1; \
	else echo "test-deploy: a broken cronjob.yaml is rejected, as it must be"; fi

# deploy/slurm/thumbpipe.sbatch on a real single-node Slurm (deploy/slurm/local-cluster.sh).
test-slurm: deps
	$(SWIFT) build --product thumbpipe
	@$(MAKE) --no-print-directory slurm-run

slurm-run:
	deploy/slurm/test-slurm.sh

# ---- Fuzzing and sanitizers (see the README's Fuzzing and sanitizers section) -------------

# Every fuzz target SECONDS seconds under libFuzzer and AddressSanitizer, outside
# the normal build (its own build folder), one line a target; non-zero on a finding.
SECONDS ?= 180
FUZZ_TARGETS = jsonl json csv pipeline archive shard icc dates sniff jpeg-planes thumbnail-png report sidecar xmp iptc heif
FUZZ_BUILD = .build/fuzz
fuzz: deps
	$(SWIFT) build -c release --product thumbpipe-fuzz --build-path $(FUZZ_BUILD) \
	  -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld -Xcc -fsanitize=fuzzer-no-link,address
	Fuzz/run.sh $(FUZZ_BUILD)/release/thumbpipe-fuzz $(SECONDS) $(FUZZ_TARGETS)

# The worker-side suites (plane path, decode, kernels, crafted files, fuzz replay,
# the corpus sweep when THUMBPIPE_CORPUS is set) with AddressSanitizer in the Swift
# code and AddressSanitizer and UBSan in the C targets (Swift on Linux has no UBSan:
# its own arithmetic traps on overflow); reports go to .build/sanitize-reports.
SANITIZE_BUILD = .build/sanitize
SANITIZE_SUITES = CBoundsTests|PlanePathTests|ConvertedPlanesTests|ColourTests|PlanePathCorpusTests|DecodeSniffTests|ThumbnailTests|FidelityTests|CorpusFidelityTests|StoreTests|StoreCheckTests|FuzzReplayTests|EncodingTests|ScaleTests|RoundedClipTests|SRGBByNumbersTests|ManifestFuzzTests
test-sanitize: deps
	@mkdir -p .build/sanitize-reports && chmod 1777 .build/sanitize-reports  # workers (nobody when run as root) write there
	$(SWIFT) build --build-tests --build-path $(SANITIZE_BUILD) -Xswiftc -sanitize=address \
	  -Xcc -fsanitize=address,undefined -Xcc -fno-sanitize-recover=undefined
	THUMBPIPE_SANITIZER_REPORTS=$(CURDIR)/.build/sanitize-reports \
	ASAN_OPTIONS=detect_leaks=0:log_path=$(CURDIR)/.build/sanitize-reports/asan \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$(CURDIR)/.build/sanitize-reports/ubsan \
	  $(SWIFT) test --skip-build --build-path $(SANITIZE_BUILD) --disable-xctest --filter '$(SANITIZE_SUITES)'
	@if ls .build/sanitize-reports/* >/dev/null 2>&1; then \
	  echo "test-sanitize: sanitizer reports in .build/sanitize-reports:" >&2; cat .build/sanitize-reports/* >&2; exit 1; \
	else echo "test-sanitize: no sanitizer report"; fi

format:
	$(SWIFT) format -i -r Sources Tests Package.swift

clean:
	rm -rf .build $(OUT)

# The nightly path at collection scale: 1,000,000 items (1,000 photos), first /
# unchanged / dry-run / 10 changed, wall time and peak memory each.
bench-million: deps
	@command -v vipsthumbnail >/dev/null || $(APT_INSTALL) libvips-tools
	@test -x /usr/bin/time || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) time; }
	Benchmarks/million.sh

# The archive benchmark: 1,000,000 items with 6 KB thumbnails, written and read back.
bench-archive: deps
	Benchmarks/archive.sh

# The throughput benchmark: thumbpipe side by side with pyvips, the vips CLI pair,
# ImageMagick and the store-only floor, on 200 generated 8-24 Mpx JPEGs, then with
# pyvips and the floor on the PNG set, and with the HEVC decode floor (FFmpeg's
# decoder and libde265) on the HEIC set (generated and phones' own); then the chart.
BENCH_PY = Benchmarks/work/venv/bin/python
bench: deps
	@command -v vipsthumbnail >/dev/null || $(APT_INSTALL) libvips-tools
	@test -x /usr/bin/convert || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) imagemagick; }
	@test -x /usr/bin/time || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) time; }
	@python3 -c "import venv" 2>/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) python3-venv; }
	@test -x $(BENCH_PY) || { python3 -m venv Benchmarks/work/venv && $(BENCH_PY) -m pip install -q pyvips; }
	@# The products the benchmark runs (a plain release build would also build the test support, which needs Swift Testing).
	$(SWIFT) build $(RELEASE_FLAGS) --product thumbpipe
	$(SWIFT) build $(RELEASE_FLAGS) --product store-floor
	@test -f /usr/include/turbojpeg.h || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libturbojpeg0-dev; }
	cc -O2 -Wall -o Benchmarks/work/codec-floor Benchmarks/CodecFloor/codec-floor.c -lturbojpeg
	@test -f /usr/include/x86_64-linux-gnu/libavcodec/avcodec.h -o -f /usr/include/libavcodec/avcodec.h || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libavcodec-dev; }
	@test -f /usr/include/libde265/de265.h || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) libde265-dev; }
	cc -O2 -Wall -o Benchmarks/work/hevc-floor Benchmarks/HevcFloor/hevc-floor.c -lavcodec -lavutil -lde265
	@touch Benchmarks/work/bench-started
	$(BENCH_PY) Benchmarks/bench.py --only jpeg --rounds 5 --memory --incremental \
	  --peers thumbpipe,codec-floor,codec-floor-durable,libvips-path,pyvips-floor,floor,pyvips,vips-cli,magick
	$(BENCH_PY) Benchmarks/bench.py --only png --rounds 3 --peers thumbpipe,floor,pyvips
	$(BENCH_PY) Benchmarks/bench.py --only heic --rounds 3 --peers thumbpipe,hevc-floor,hevc-floor-de265,floor,pyvips
	@# The HEIC set four times over: the per-item pace, with the processes' start-up weighing a quarter.
	$(BENCH_PY) Benchmarks/bench.py --only heic --repeat 4 --rounds 3 --peers thumbpipe,hevc-floor
	@# The ratios of this run, drawn beside its JSON, and the tables BENCHMARKS.md shows.
	python3 Benchmarks/chart.py --markdown $$(find Benchmarks/results -name 'throughput-*.json' -newer Benchmarks/work/bench-started | sort)

# The static binary against one linked to the toolchain's shared Swift runtime,
# side by side: start-up (--version, hyperfine) and a run over the JPEG set.
bench-static: build
	@command -v hyperfine >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) hyperfine; }
	$(SWIFT) build -c release --product thumbpipe --scratch-path .build/dynamic
	Benchmarks/static.sh .build/release/thumbpipe .build/dynamic/release/thumbpipe

# The workers' sandbox (Landlock and seccomp) against none, side by side.
bench-sandbox: build
	Benchmarks/sandbox.sh .build/release/thumbpipe

# ---- Shipping -------------------------------------------------------------

# Everything but the binary's build, so `make deb` can stage without rebuilding.
install-files:
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/thumbpipe/pipelines $(DESTDIR)$(MANDIR)/man1 \
	  $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0755 .build/release/thumbpipe $(DESTDIR)$(BINDIR)/thumbpipe
	install -m 0644 pipelines/*.json $(DESTDIR)$(DATADIR)/thumbpipe/pipelines/
	install -m 0644 docs/man/thumbpipe.1 $(DESTDIR)$(MANDIR)/man1/thumbpipe.1
	install -m 0644 completions/thumbpipe.bash $(DESTDIR)$(BASHCOMPDIR)/thumbpipe
	install -m 0644 completions/_thumbpipe $(DESTDIR)$(ZSHCOMPDIR)/_thumbpipe
	install -m 0644 completions/thumbpipe.fish $(DESTDIR)$(FISHCOMPDIR)/thumbpipe.fish

# The manual's and the completions' lists of run's options, from the option table.
docs: build
	.build/release/thumbpipe __docs docs/man/thumbpipe.1 completions/thumbpipe.bash completions/_thumbpipe completions/thumbpipe.fish

install: build
	@$(MAKE) --no-print-directory install-files

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/thumbpipe $(DESTDIR)$(MANDIR)/man1/thumbpipe.1 \
	  $(DESTDIR)$(BASHCOMPDIR)/thumbpipe $(DESTDIR)$(ZSHCOMPDIR)/_thumbpipe $(DESTDIR)$(FISHCOMPDIR)/thumbpipe.fish
	for f in pipelines/*.json; do rm -f $(DESTDIR)$(DATADIR)/thumbpipe/pipelines/$$(basename $$f); done
	-rmdir $(DESTDIR)$(DATADIR)/thumbpipe/pipelines $(DESTDIR)$(DATADIR)/thumbpipe 2>/dev/null

# Debian's packaging tools, installed when missing.
packaging-deps:
	@command -v dpkg-shlibdeps >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) dpkg-dev; }
	@command -v lintian >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) lintian; }
	@command -v mmdebstrap >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) mmdebstrap; }
	@command -v buildah >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) buildah; }
	@command -v systemd-nspawn >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) systemd-container; }
	@command -v strip >/dev/null || { apt-get $(APT_LOCK) update -qq && $(APT_INSTALL) binutils; }

# .build/thumbpipe_VERSION_amd64.deb, checked by lintian.
deb: build packaging-deps
	packaging/build-deb.sh $(VERSION) $(REVISION)

# An OCI image from the .deb on debian:bookworm-slim, as .build/thumbpipe-VERSION.oci.tar.
image: deb
	packaging/build-image.sh $(VERSION) $(REVISION) $(IMAGE) $(CACHE)

# The .deb installed by apt on a clean Debian 12 root (no Swift), then the image.
test-install: deb
	packaging/build-image.sh $(VERSION) $(REVISION) $(IMAGE) $(CACHE)
	packaging/test-install.sh $(VERSION) $(IMAGE) $(CACHE)
