# webtap: `make demo` and `make test` set up everything on a fresh Debian machine (as root),
# then run the main job or the whole test suite. Nothing here assumes a hand-installed tool.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SHARED ?= ../shared
export WEBTAP_SHARED := $(abspath $(SHARED))
# The venv's tools first: the editable build records the ninja it was built with, and rebuilds
# on import with it; it must be the venv's own, not whatever else is on PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)

# Debian packages the project uses: libpcap (headers + pkg-config for the build), the real
# peers the tests and benchmarks compare against (tshark, httpry, tcpdump), iproute2 for the
# network namespaces of the live tests.
APT_PKGS := build-essential pkg-config libpcap-dev tshark httpry tcpdump iproute2
# libssl-dev: OpenSSL's libcrypto (headers + pkg-config): SHA-1 of the Community ID column,
# TLS fingerprints (MD5/SHA-256, ext/tls/tls_fp.h) and QUIC Initial protection (ext/tls/quic_crypto.h)
APT_PKGS += libssl-dev
# the TLS exchange truth generator (tests/tlsx/gen_truth.py, issue 33): real nginx serving
# HTTP/1.1 and h2 over TLS in a network namespace, nghttp (nghttp2-client) for concurrent h2
# streams, curl for HTTP/1.1 and h2 (both write SSLKEYLOGFILE; nghttp through a preload shim)
APT_PKGS += nginx nghttp2-client curl
# the slow-HTTP attacks the abuse indicators are checked against (tests/abuse, issue 34):
# slowloris, slow body and slow read against nginx in a network namespace
APT_PKGS += slowhttptest

# Python packages: the build requirements (editable installs rebuild in this venv) and the
# runtime/test dependencies declared in pyproject.toml.
BUILD_REQS := meson-python meson ninja Cython numpy

.PHONY: all sysdeps venv build demo test bench bench-urltree bench-filter accuracy fuzz fuzz-sysdeps fuzz-build sanitize mutants clean

all: build

sysdeps:
	@missing=""; for p in $(APT_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.deps-stamp: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q $(BUILD_REQS)
	$(BIN)/pip install -q numpy pandas pyarrow matplotlib pytest pytest-xdist hypothesis scapy
	# tqdm: the progress bar on a terminal (the optional extra webtap[progress]; without it no bar)
	$(BIN)/pip install -q tqdm
	# pytest-timeout: a test that hangs fails with every thread's stack (pyproject: timeout) instead
	# of holding CI until its own limit
	$(BIN)/pip install -q pytest-timeout
	# Dask: the distributed analyzer (httpanalyzer --dask) and its LocalCluster tests
	$(BIN)/pip install -q "dask[distributed,dataframe]"
	# duckdb: tests/distributed reads the Dask dataset with it, as docs/DISTRIBUTED.md says users can
	$(BIN)/pip install -q duckdb
	# atheris: the coverage-guided fuzzer of tests/fuzz (smoke runs in make test, long runs in make fuzz)
	$(BIN)/pip install -q atheris
	# marisa-trie: the static-trie peer of the URL tree benchmark (benchmarks/bench_urltree.py)
	$(BIN)/pip install -q marisa-trie
	# aioquic (and its cryptography): the real QUIC server/client of the netns test and an
	# independent AES-GCM/HKDF reference for ext/tls/quic_crypto.h's tests (issue 18)
	$(BIN)/pip install -q aioquic
	# cryptography (also aioquic's): the decrypted truth of `httpanalyzer compare --tls --keylog`
	# (httpanalyzer/tls_truth.py; the optional extra webtap[verify])
	$(BIN)/pip install -q cryptography
	# notebooks/ run in the tests (tests/notebooks) through nbclient in a kernel of this venv
	$(BIN)/pip install -q nbclient nbformat ipykernel
	# the readers the record outputs are tested against: communityid (Community ID reference),
	# zat (Zeek logs), duckdb (Parquet file and Dask dataset queries)
	$(BIN)/pip install -q communityid zat duckdb
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (webtap .venv)" >/dev/null
	touch $@

venv: $(VENV)/.deps-stamp

build: sysdeps venv
	$(BIN)/pip install -q --no-build-isolation --no-deps -e .
	$(BIN)/python -c "import webtap; print('webtap', webtap.__version__, 'built against', webtap.libpcap_version())"

# The demo runs webtap as a user's install has it: from a wheel in build/user-venv (rebuilt when a
# source is newer), so no command pays the editable install's build check on import (~0.1-0.2 s
# per process, docs/PERFORMANCE.md); the tests keep the editable, incremental development build.
demo: sysdeps venv
	$$($(BIN)/python -m benchmarks.wheel_env build/user-venv) demo/webtap_demo.py

# -ra: the summary names every skip (and failure) with its reason; with CI=true (as CI sets it)
# tests/conftest.py turns every environment skip into a failure naming what is missing
test: build
	$(BIN)/python -m pytest -q -n 2 -ra tests

# webtap is timed as a user installs it: from a wheel (benchmarks/wheel_env.py), not through
# the editable install's import hook, which re-checks the build on every first import
bench: build
	WEBTAP_BENCH_PYTHON=$$($(BIN)/python -m benchmarks.wheel_env) $(BIN)/python -m benchmarks.run

# URL tree vs set vs marisa-trie vs the paper (issue 7); BENCH_SET=all adds the domain lists
bench-filter: build
	$(BIN)/python -m benchmarks.bench_filter

bench-urltree: build
	$(BIN)/python -m benchmarks.bench_urltree
	# the URL store (static base + AVL delta, issue 35): bytes/URL, prefix match, insert, delta 0/1/10 %
	$(BIN)/python -m benchmarks.bench_urlstore

# webtap vs tshark (both modes) on every shared trace: the tables of docs/ACCURACY.md
# ("Transactions") and the pooled report with the paper's figures in build/accuracy/ (issue 5)
accuracy: build
	# the transaction comparison of every shared trace, both modes, against the pinned counts of
	# tests/expectations/transactions.json (make test runs a fixed sample of it: ~25 min here)
	$(BIN)/python -m tests.tools.expectations transactions $(WEBTAP_SHARED)/traces
	$(BIN)/python -m tests.tools.compare_table $(WEBTAP_SHARED)/traces --report build/accuracy
	$(BIN)/python -m tests.tools.compare_table --traces-table build/accuracy/per_trace.csv $(WEBTAP_SHARED)/traces

# Robustness (issue 10, docs/ROBUSTNESS.md). `make fuzz` builds a copy of the extensions with
# clang, libFuzzer coverage and ASan/UBSan (build/fuzz-ext, used through WEBTAP_EXT_DIR) and
# fuzzes every target FUZZ_TIME seconds; the corpus grows in build/fuzz/corpus. `make sanitize`
# builds the extensions with gcc's ASan/UBSan (build/sanitize) and runs SANITIZE_TESTS under them
# (not the tshark comparisons: Wireshark's tools hang at start with the ASan runtime preloaded).
FUZZ_TIME ?= 180
FUZZ_TARGETS ?= source dissect encap http segment canon blacklist tree urlbase tls quic sni exchange
FUZZ_APT_PKGS := clang-14 libclang-rt-14-dev
FUZZ_CFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=pointer-overflow \
  -fno-sanitize-recover=undefined -fno-omit-frame-pointer -gline-tables-only
SANITIZE_CFLAGS := -fsanitize=address,undefined -fno-sanitize=pointer-overflow \
  -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g
SANITIZE_TESTS ?= tests/capture tests/dissect tests/urlfilter tests/httpanalyzer tests/fuzz tests/robustness
SANITIZE_ENV = LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  PYTHONMALLOC=malloc WEBTAP_EXT_DIR=$(abspath build/sanitize/ext)

fuzz-sysdeps:
	@$(MAKE) --no-print-directory sysdeps APT_PKGS="$(FUZZ_APT_PKGS)"

fuzz-build: build fuzz-sysdeps
	@test -f build/fuzz-ext/build.ninja || CC=clang-14 $(BIN)/meson setup build/fuzz-ext \
	  -Dbuildtype=debugoptimized -Db_ndebug=false -Db_lundef=false \
	  -Dc_args="$(FUZZ_CFLAGS)" -Dc_link_args="-fsanitize=fuzzer-no-link,address,undefined"
	$(BIN)/ninja -C build/fuzz-ext

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz $$t for $(FUZZ_TIME) s"; \
	  $(BIN)/python -m tests.fuzz.run $$t --seconds $(FUZZ_TIME) --ext-dir build/fuzz-ext/ext \
	    > build/fuzz-$$t.log 2>&1 || { tail -60 build/fuzz-$$t.log; exit 1; }; \
	  grep -E "DONE|^Done|stat::" build/fuzz-$$t.log; \
	done

sanitize: build
	@test -f build/sanitize/build.ninja || $(BIN)/meson setup build/sanitize \
	  -Dbuildtype=debugoptimized -Db_ndebug=false -Db_lundef=false \
	  -Dc_args="$(SANITIZE_CFLAGS)" -Dc_link_args="-fsanitize=address,undefined"
	$(BIN)/ninja -C build/sanitize
	$(SANITIZE_ENV) $(BIN)/python -m pytest -q -p no:cacheprovider -m "not tshark" $(SANITIZE_TESTS)

# Mutation run (issue 32, docs/ROBUSTNESS.md "Mutants"): each mutant of tests/tools/mutants.py
# is applied to a copy of the source in build/mutants/src, that copy's extensions rebuilt (one
# at a time, incrementally), and the deterministic tests that should catch it run against the
# copy; prints a killed/survived table, exit 1 if one survived. Not part of `make test`.
mutants: build
	$(BIN)/python -m tests.tools.mutants $(MUTANTS)

clean:
	rm -rf build builddir $(VENV)
