# Thin wrapper: dependencies, build, tests, the main job, report, benchmarks.
# Everything real lives in CMakeLists.txt, the bench CLI, and the scripts under tools/ and compare/.

BUILD    ?= build
BUILD_SAN ?= build-san
BUILD_TSAN ?= build-tsan
BUILD_VG ?= build-vg
JOBS     ?= $(shell nproc)
# Test binaries ctest runs at once (each runs its Criterion tests 2 at a time): on 2 cores, 2 took the
# ASan phase's ctest from 310 to 184-207 s and the main one from 169 to 106-124 s (a binary often waits on a
# child bench or a serial test). Tests that measure time on a quiet machine are RUN_SERIAL (CMakeLists.txt).
CTEST_JOBS ?= 2
# Debian packages the suite needs; installed on demand (root on a fresh machine).
DEB_PKGS := cmake ninja-build gcc make pkg-config libopenblas-dev libfftw3-dev libgsl-dev gnuplot-nox \
            libcriterion-dev zlib1g-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin valgrind
# Ninja where it is installed: it compiles a layer's dependents while the layer still links, which took the
# main build from 2:43 to 1:48 on 2 cores (Make's generator waits at each library). A build folder keeps the
# generator it was first configured with (CMake refuses another), so only a new one gets -G Ninja.
GEN = $(if $(wildcard $(1)/CMakeCache.txt),,$(if $(shell command -v ninja 2>/dev/null),-G Ninja))
COMPARE_PKGS := python3-torch python3-torchvision

.PHONY: all build deps test test-fast test-cuda-emu test-mpi test-san test-tsan test-valgrind demo report seeds profile cachesim gpusim build-vg compare bench-mlp bench-scaling bench-blascalls kernbench fuzz clean

all: build

deps:
	@./tools/deps.sh $(DEB_PKGS)

build:
	@cmake $(call GEN,$(BUILD)) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# The test command of the README: unit and integration tests; the same tests under ASan+UBSan; the
# threaded tests under TSan; valgrind memcheck on a short training run.
test: deps
	@echo "== build ($$(date -u +%T) UTC: each phase says when it starts, so the log shows where the time goes)"
	@$(MAKE) --no-print-directory build
	@echo "== unit and integration tests ($$(date -u +%T); the command line's own tests run once, under ASan)"
	@cd $(BUILD) && ctest --output-on-failure -j$(CTEST_JOBS) -LE '^(emu_long|asan_once)$$'
	@$(MAKE) --no-print-directory test-mpi test-san test-tsan test-valgrind
	@echo "== make test: done ($$(date -u +%T))"

test-fast: build
	@cd $(BUILD) && ctest --output-on-failure -j$(CTEST_JOBS) -LE emu_long

# The cuda device on the CPU emulation (tests/cuda_emu): every *_emu test, test_executor_emu's long walks too
# (make test runs the others). Needs nvcc (the toolkit's headers); where the build has none, says so.
test-cuda-emu: build
	@cd $(BUILD) && if ctest -N -L emu | grep -q 'Total Tests: [1-9]'; then \
	  cmake --build . -j$(JOBS) --target bench_emu test_executor_emu test_backends_emu test_cuda_mirrored_emu && \
	  ctest --output-on-failure -j$(CTEST_JOBS) -L emu; \
	  else echo "make test-cuda-emu: this build has no cuda device (no nvcc found), so no emulation"; exit 1; fi

# The sanitizer and valgrind builds leave the cuda layer out (-DTB_CUDA=OFF): the CUDA runtime does not run
# under ASan's shadow memory or valgrind, and nvcc's time is spent once, in the main build.
test-san:
	@echo "== ASan + UBSan ($$(date -u +%T))"
	@# -O1 -g1 (line tables), as ASan's authors advise: the build took 1:15-1:31 instead of 2:28 (-O2 -g, Make), its
	@# slowest tests as fast (test_ipu 49 s against 52, test_op_conv 16 against 16). -fexpensive-optimizations: GCC
	@# contracts a*b+c into an FMA only with it (-O2 sets it), and the bitwise tests hold for the contracted code
	@# every optimised build runs (at plain -O1 the SE-fused BatchNorm backward and the synthetic set's golden CRCs
	@# differed in the last bit).
	@cmake $(call GEN,$(BUILD_SAN)) -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -fexpensive-optimizations -g1 -DNDEBUG" -DTB_SANITIZE=ON -DTB_CUDA=OFF >/dev/null
	@cmake --build $(BUILD_SAN) -j$(JOBS)
	@# Not here: test_train (its long runs), and the checks that never run this build's code (layers reads the
	@# sources and archives the main build's run checked; fuzz_build builds its own clang targets; gpusim_py is Python).
	@cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1:no_huge_pages_for_shadow=0 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j$(CTEST_JOBS) -E '^(test_train|layers|fuzz_build|gpusim_py)$$'

# Races: Criterion cannot start under TSan here ("could not initialize inheritable arena"), so the
# threaded engines are exercised through bench itself: the pool, mirrored replicas with the all-reduce
# (3 replicas: the sharded and the whole sums, each chunk read from every buffer) and sync BatchNorm,
# and the ipu pipeline with replicas and bf16. -O1 -g1, as ASan's build: the phase took 49 s against 55 at -O2 -g.
test-tsan:
	@echo "== ThreadSanitizer ($$(date -u +%T))"
	@cmake $(call GEN,$(BUILD_TSAN)) -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DTB_TSAN=ON -DTB_TESTS=OFF -DTB_CUDA=OFF >/dev/null
	@cmake --build $(BUILD_TSAN) -j$(JOBS) --target bench
	@set -e; export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1; B=$(BUILD_TSAN)/bench; \
	  O="--data synthetic --synthetic-samples 512,128 --eval-batch 64 --out /tmp/tb-tsan.jsonl --quiet"; \
	  $$B --backend threads --threads 3 --batch 16 --steps 4 $$O; \
	  $$B --backend threads --threads 3 --workload effnet-b0 --resolution 16 --batch 8 --steps 2 $$O; \
	  $$B --backend mirrored --devices 2 --batch 16 --steps 4 $$O; \
	  $$B --backend mirrored --devices 3 --batch 18 --steps 4 $$O; \
	  $$B --backend mirrored --devices 3 --batch 18 --steps 4 --optimizer lars $$O; \
	  $$B --backend mirrored --devices 2 --sync-bn --workload effnet-b0 --resolution 16 --batch 8 --steps 2 $$O; \
	  $$B --backend ipu --stages 2 --micro-batch 2 --ga 4 --replicas 2 --batch 16 --steps 3 $$O; \
	  $$B --backend ipu --stages 2 --micro-batch 2 --ga 4 --replicas 2 --precision bf16 --workload effnet-b0 \
	    --norm group --resolution 16 --batch 16 --steps 2 $$O
	@echo "ThreadSanitizer: no reports"

# The 2-rank MPI job: mirrored over MPI trains like cpu, and only rank 0 writes results.
test-mpi: build
	@echo "== MPI, 2 ranks ($$(date -u +%T))"
	@./tools/check_mpi.sh $(BUILD)

# Memory errors and leaks on a real (short) training run of each workload family. Its own build without
# -march=native: valgrind 3.19 has no AVX-512 (SIGILL on this machine's native code), but AVX2 where the
# CPU has it, so the vector paths are still checked. --blas-core env: no re-exec for an inherited
# OPENBLAS_CORETYPE, which would run the training outside valgrind. Then tools/cachesim.sh's check.
test-valgrind:
	@echo "== valgrind memcheck ($$(date -u +%T); its build first)"
	@$(MAKE) --no-print-directory build-vg
	@valgrind -q --error-exitcode=3 --leak-check=full --errors-for-leak-kinds=definite \
	  $(BUILD_VG)/bench --blas-core env --data synthetic --synthetic-samples 256,64 --batch 8 --steps 5 --eval-batch 64 \
	  --out /tmp/tb-valgrind.jsonl >/dev/null
	@valgrind -q --error-exitcode=3 --leak-check=full --errors-for-leak-kinds=definite \
	  $(BUILD_VG)/bench --blas-core env --backend mirrored --devices 2 --data synthetic --synthetic-samples 256,64 --batch 8 \
	  --steps 3 --eval-batch 64 \
	  --out /tmp/tb-valgrind.jsonl >/dev/null
	@./tools/cachesim_check.sh $(BUILD_VG)

# The bench valgrind can run (test-valgrind, cachesim).
build-vg:
	@cmake $(call GEN,$(BUILD_VG)) -S . -B $(BUILD_VG) -DCMAKE_BUILD_TYPE=Release -DTB_NATIVE=OFF -DTB_TESTS=OFF -DTB_CUDA=OFF \
	  -DCMAKE_C_FLAGS="$$(grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && echo -mavx2 -mfma)" >/dev/null
	@cmake --build $(BUILD_VG) -j$(JOBS) --target bench

# Memory traffic a layer, simulated (no hardware counters here): one step of WORKLOAD (effnet-b0 at 32x32
# batch 32 unless ARGS says otherwise) under callgrind's cache model; tables on stdout and in
# results/cachesim/ (tools/cachesim.sh says what is modelled). About 8 minutes; CACHESIM_LL=BYTES.
CACHESIM_WORKLOAD = $(or $(WORKLOAD),effnet-b0)
cachesim: deps build-vg
	@./tools/cachesim.sh $(BUILD_VG) --workload $(CACHESIM_WORKLOAD) $(or $(ARGS),$(if $(filter effnet%,$(CACHESIM_WORKLOAD)),--resolution 32 --batch 32))

# The cuda device's kernels as a GPU's memory would see them, on the CPU emulation (no GPU needed): one training
# step at batches 1 and 2 (effnet-b0 224x224 fp32; ARGS replaces all of that, e.g. ARGS="--workload effnet-b0
# --resolution 224 --precision bf16m"), each kernel's sectors a request and bytes, projected to batch 256;
# modelled, not measured (tools/gpusim.sh). About 2 minutes.
gpusim: build
	@cmake --build $(BUILD) --target help | grep -q bench_gpusim || { echo "make gpusim: this build has no cuda device (no nvcc found), so no emulation"; exit 1; }
	@cmake --build $(BUILD) -j$(JOBS) --target bench_gpusim
	@./tools/gpusim.sh $(BUILD) $(ARGS)

# The main job: the default suite, then the report.
demo: deps build
	@./tools/demo.sh $(BUILD)

# Charts and results/REPORT.md from result rows, without running anything: the last demo's rows if
# there are any, else the committed sample (RESULTS=FILE to choose). Writes only ignored paths
# (results/REPORT.md, results/charts/): nothing tracked changes.
RESULTS ?= $(if $(wildcard results/demo.jsonl),results/demo.jsonl,results/sample.jsonl)
report: build
	@$(BUILD)/bench report --in $(RESULTS) --out-dir results

# Issue 30's seeds: this machine calibrated if needed; seed 001's B4-G16 pipeline at 64x64 (its stage
# times check the device model here: suites/seed-001.suite); seed 002 (suites/seed-002.suite: the Keras
# MNIST MLP, batch 1 per replica, 50 epochs x 2000 steps on cpu, threads, mirrored and ipu); then the
# report with its Seeds section: published, measured here and projected, each labelled. Rows in
# results/seeds.jsonl; writes only ignored paths. SEED_DATA=DIR trains on the MNIST IDX files in DIR
# (default: Debian's Fashion-MNIST); SEED_EPOCHS=N runs seed 002's set-ups for N epochs.
seeds: deps build
	@SEED_DATA="$(SEED_DATA)" SEED_EPOCHS="$(SEED_EPOCHS)" ./tools/seeds.sh $(BUILD)

# perf stat + perf record -g of the timed phase of one throughput run (perf is turned on and off around
# the steps through its control fifo; see tools/profile.sh):
#   make profile BACKEND=cpu WORKLOAD=mnist-mlp [ARGS="--batch 64"]
PROFILE_PKGS := linux-perf
profile: build
	@./tools/deps.sh $(PROFILE_PKGS) || echo "profile: no perf ($(PROFILE_PKGS)); the run goes on without counters"
	@./tools/profile.sh $(BUILD) $(or $(BACKEND),cpu) $(or $(WORKLOAD),mnist-mlp) $(ARGS)

compare: deps build
	@./tools/deps.sh $(COMPARE_PKGS)
	@/usr/bin/python3 compare/run_compare.py $(or $(CONFIG),mlp-b1) --rounds $(or $(ROUNDS),3) --threads $(or $(THREADS),1)

bench-mlp: deps build
	@./tools/bench_mlp.sh $(BUILD)

# Issue 31's scaling on this machine's cores, in one run (tools/scaling.sh): threads strong scaling with
# where the time goes per layer type, mirrored weak scaling, MPI 2 ranks against one process, the ipu
# pipeline with replicas; rows in results/scaling.jsonl, tables in results/scaling.md.
#   make bench-scaling [PHASES="strong weak mpi ipu"] (SCALE_THREADS, SCALE_ROUNDS, SCALE_IPU_RES: see the script)
bench-scaling: deps build
	@./tools/scaling.sh $(BUILD) $(PHASES)

# The memory floor of mnist-mlp's batch-1 Adam update (BENCHMARKS.md, issue 4).
membw: build
	@$(BUILD)/membw $(or $(PARAMS),167690) $(or $(THREADS),2)

# Single-thread GFLOP/s of the skinny 1×1 GEMM kernels (gemm_rows, gemm_rows_atb) on EfficientNet-B0's shapes.
kernbench: build
	@$(BUILD)/kernbench $(or $(REPEATS),5)

# OpenBLAS's buffer allocator under threads that call sgemm at once: its shared table (one mutex) against our
# per-thread buffers (core/blas_buffers.c), alternating, µs a phase. THREADS defaults to 1 and all cores.
bench-blascalls: build
	@$(BUILD)/blascalls $(or $(ROUNDS),5) $(THREADS)

# Each reader's libFuzzer target runs 10^6 executions (FUZZ_RUNS), capped at SECONDS_PER_TARGET.
fuzz:
	@TB_FUZZ_RUNS=$(or $(FUZZ_RUNS),1000000) ./tools/fuzz/run.sh $(or $(SECONDS_PER_TARGET),1800)

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_TSAN)
