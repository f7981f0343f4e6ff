# cuda_emu.cmake — the cuda device's tests on a CPU emulation of the GPU (emu.h, cuda/README.md), included by
# the top CMakeLists.txt inside if(TB_TESTS), where TB_CUDA_ON, TB_TEST_ENV and the layers' targets are known.
# The cuda device on the CPU (tests/cuda_emu, emu.h): test_cuda_ops and test_cuda where no GPU is. Each
# cuda/*.cu is made host C++ by emu_launch.py, the device's C glue compiled as it is, and the CUDA runtime
# and cuBLAS are host code; all of it with ASan, so the kernels' results and their bounds
# (compute-sanitizer memcheck's question) are checked on every machine with nvcc. No cudart is linked:
# a runtime call the emulation lacks is a link error, not a GPU call.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(TB_CUDA_ON AND Python3_Interpreter_FOUND AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  enable_language(CXX)
  file(GLOB tb_emu_cu CONFIGURE_DEPENDS cuda/*.cu)
  file(GLOB tb_emu_cuh CONFIGURE_DEPENDS cuda/*.cuh)
  file(GLOB tb_emu_c CONFIGURE_DEPENDS cuda/*.c)
  list(FILTER tb_emu_c EXCLUDE REGEX ".*/cublas_dl\\.c$") # emu_blas.cpp in its place
  set(tb_emu_dir ${CMAKE_BINARY_DIR}/cuda_emu)
  file(MAKE_DIRECTORY ${tb_emu_dir})
  # The device headers (.cuh) rewritten too, beside the sources, where their #include "x.cuh" finds them first.
  set(tb_emu_hdrs)
  foreach(cuh ${tb_emu_cuh})
    get_filename_component(name ${cuh} NAME)
    add_custom_command(OUTPUT ${tb_emu_dir}/${name}
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu_launch.py ${cuh} ${tb_emu_dir}/${name}
      DEPENDS ${cuh} ${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu_launch.py VERBATIM)
    list(APPEND tb_emu_hdrs ${tb_emu_dir}/${name})
  endforeach()
  set(tb_emu_srcs)
  foreach(cu ${tb_emu_cu})
    get_filename_component(base ${cu} NAME_WE)
    # A .cu that includes another .cu (ops_dwconv_fp16.cu) includes its rewritten .cpp: that one first.
    file(STRINGS ${cu} inc REGEX "#include \\\"[a-z_0-9]+\\\\.cu\\\"")
    set(deps ${cu} ${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu_launch.py ${tb_emu_hdrs})
    foreach(line ${inc})
      string(REGEX REPLACE ".*\\\"([a-z_0-9]+)\\\\.cu\\\".*" "${tb_emu_dir}/\\1.cpp" dep "${line}")
      list(APPEND deps ${dep})
    endforeach()
    add_custom_command(OUTPUT ${tb_emu_dir}/${base}.cpp
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu_launch.py ${cu} ${tb_emu_dir}/${base}.cpp
      DEPENDS ${deps} VERBATIM)
    list(APPEND tb_emu_srcs ${tb_emu_dir}/${base}.cpp)
  endforeach()
  # ASan alone, without use-after-scope checks or debug info (a report names the kernel; CMAKE_CXX_FLAGS=-g1
  # adds its lines): with UBSan and full debug info ops_dwconv.cpp took 74 s to compile, 13 s so (UBSan
  # more than doubles the instrumented templates' compile; the bounds are what we want).
  set(tb_emu_san -fsanitize=address -fno-omit-frame-pointer)
  set(tb_emu_cflags -O1 -fno-sanitize-address-use-after-scope)
  add_library(tb_cuda_emu OBJECT ${tb_emu_srcs} ${tb_emu_c} tests/cuda_emu/emu_runtime.cpp
              tests/cuda_emu/emu_blas.cpp)
  set_source_files_properties(${tb_emu_srcs} PROPERTIES
    COMPILE_OPTIONS "-include;${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu.h;-Wno-unknown-pragmas")
  # The grid runner is the emulation's own loop, not code under test: optimised and not instrumented
  # (at -O1 under ASan it was a third of test_cuda_emu's time).
  set_source_files_properties(tests/cuda_emu/emu_runtime.cpp PROPERTIES
    COMPILE_OPTIONS "-include;${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu.h;-O2;-fno-sanitize=all")
  target_include_directories(tb_cuda_emu PUBLIC util core workloads backends harness cuda tests/cuda_emu
                             ${CUDAToolkit_INCLUDE_DIRS} ${OPENBLAS_INCLUDE_DIRS})
  target_compile_definitions(tb_cuda_emu PUBLIC TB_HAVE_CUDA=1) # no NCCL: one emulated device
  target_compile_options(tb_cuda_emu PUBLIC ${tb_emu_cflags} ${tb_emu_san}
                         PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-std=c++17 -Wall -Wextra -Wno-unused-parameter>)
  # The layers' archives, not their targets: tb_core's links bring the real tb_cuda and cudart.
  set(tb_emu_libs $<TARGET_FILE:tb_harness> $<TARGET_FILE:tb_backends> $<TARGET_FILE:tb_workloads>
      $<TARGET_FILE:tb_core> $<TARGET_FILE:tb_util> PkgConfig::GSL PkgConfig::OPENBLAS PkgConfig::FFTW PkgConfig::ZLIB
      Threads::Threads m ${CMAKE_DL_LIBS})
  # TB_CUDA_EMULATED: a test may take fewer steps on the emulation, where a step costs what hundreds do on a GPU.
  set(tb_emu_defs TB_HAVE_CUDA=1 TB_CUDA_EMULATED=1 TB_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  set(tb_emu_env "${TB_TEST_ENV};ASAN_OPTIONS=detect_leaks=1;LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/tests/lsan.supp")
  if(MPI_C_FOUND)
    list(APPEND tb_emu_libs MPI::MPI_C)
    list(APPEND tb_emu_defs TB_HAVE_MPI=1)
  endif()
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    list(APPEND tb_emu_libs mvec)
  endif()
  # bench_emu: bench on the emulated device (its GPU is "CUDA emulation on the CPU" in every row), for the
  # tests that run bench and for trying a cuda run's whole path here; not installed, not for figures.
  set(tb_emu_exes bench_emu harness/main_bench.c)
  # Not test_calibrate_gpu: it times the device, which here is the CPU under ASan (minutes, and no figure).
  foreach(t test_cuda_ops test_cuda test_executor test_backends test_cuda_mirrored)
    list(APPEND tb_emu_exes ${t}_emu tests/${t}.c)
  endforeach()
  set(tb_emu_slow "cuda/@(persistent_cluster_vs_grid_barriers|persistent_last_layer_in_every_block_vs_apart|effnet_b0_bf16_loss_falls|effnet_b0_fp16_loss_falls|effnet_gradient_arena_and_overwrite_same_values|effnet_wgrad_split_vs_one_gemm|effnet_bn_in_depthwise_vs_apart)")
  while(tb_emu_exes)
    list(POP_FRONT tb_emu_exes exe src)
    # make test's (the kernels, the executor) in every build; the rest when make test-cuda-emu asks.
    if(exe MATCHES "^test_cuda(_ops)?_emu$")
      add_executable(${exe} ${src} $<TARGET_OBJECTS:tb_cuda_emu>)
    else()
      add_executable(${exe} EXCLUDE_FROM_ALL ${src} $<TARGET_OBJECTS:tb_cuda_emu>)
    endif()
    target_include_directories(${exe} PRIVATE $<TARGET_PROPERTY:tb_cuda_emu,INTERFACE_INCLUDE_DIRECTORIES>
                               backends/ipu ${CMAKE_BINARY_DIR})
    target_compile_definitions(${exe} PRIVATE ${tb_emu_defs} TB_BENCH_EXE="${CMAKE_BINARY_DIR}/bench_emu")
    target_compile_options(${exe} PRIVATE ${tb_emu_cflags} ${tb_emu_san})
    target_link_options(${exe} PRIVATE ${tb_emu_san} "LINKER:-u,blas_memory_alloc")
    add_dependencies(${exe} tb_harness tb_backends tb_workloads tb_core tb_util)
    target_link_libraries(${exe} PRIVATE ${tb_emu_libs})
    if(NOT exe STREQUAL "bench_emu")
      target_link_libraries(${exe} PRIVATE PkgConfig::CRITERION)
      if(exe STREQUAL "test_cuda_emu")
        add_test(NAME ${exe} COMMAND ${exe} --jobs 2 "--filter=!(${tb_emu_slow})")
      else()
        add_test(NAME ${exe} COMMAND ${exe} --jobs 2)
      endif()
      set_tests_properties(${exe} PROPERTIES TIMEOUT 600 LABELS emu ENVIRONMENT
        "${tb_emu_env}")
    endif()
  endwhile()
  # test_emu_runtime: the emulation itself (shuffles, grid and cluster barriers, a block's own shared memory,
  # the stops where a GPU would hang) on emu_selftest.cu's kernels, with the grid runner alone.
  add_custom_command(OUTPUT ${tb_emu_dir}/emu_selftest.cpp
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu_launch.py
            ${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu_selftest.cu ${tb_emu_dir}/emu_selftest.cpp
    DEPENDS ${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu_selftest.cu ${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu_launch.py VERBATIM)
  set_source_files_properties(${tb_emu_dir}/emu_selftest.cpp PROPERTIES
    COMPILE_OPTIONS "-include;${CMAKE_SOURCE_DIR}/tests/cuda_emu/emu.h")
  add_executable(test_emu_runtime tests/cuda_emu/test_emu_runtime.c ${tb_emu_dir}/emu_selftest.cpp
                 tests/cuda_emu/emu_runtime.cpp)
  target_include_directories(test_emu_runtime PRIVATE util tests/cuda_emu ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_options(test_emu_runtime PRIVATE ${tb_emu_cflags} ${tb_emu_san}
                         $<$<COMPILE_LANGUAGE:CXX>:-std=c++17 -Wall -Wextra -Wno-unused-parameter>)
  target_link_options(test_emu_runtime PRIVATE ${tb_emu_san})
  target_link_libraries(test_emu_runtime PRIVATE tb_util PkgConfig::CRITERION Threads::Threads)
  add_test(NAME test_emu_runtime COMMAND test_emu_runtime --jobs 2)
  set_tests_properties(test_emu_runtime PROPERTIES TIMEOUT 120 LABELS emu ENVIRONMENT "${tb_emu_env}")

  # test_emu_racecheck: make gpusim's racecheck finds a shared-memory race, and none where a barrier orders the
  # accesses (emu_selftest.cu's kernels built as bench_gpusim's are, below).
  add_executable(test_emu_racecheck tests/cuda_emu/test_emu_racecheck.cpp ${tb_emu_dir}/emu_selftest.cpp
                 tests/cuda_emu/emu_runtime.cpp tests/cuda_emu/emu_memtrace.cpp)
  target_include_directories(test_emu_racecheck PRIVATE util tests/cuda_emu ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(test_emu_racecheck PRIVATE TB_EMU_MEMTRACE=1)
  target_compile_options(test_emu_racecheck PRIVATE -O1 -std=c++17 -Wall -Wextra -Wno-unused-parameter
                         -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 -fno-tree-sra)
  target_link_libraries(test_emu_racecheck PRIVATE tb_util Threads::Threads)
  add_test(NAME test_emu_racecheck COMMAND test_emu_racecheck)
  set_tests_properties(test_emu_racecheck PROPERTIES TIMEOUT 60 LABELS emu ENVIRONMENT
    "TB_GPUSIM_OUT=${CMAKE_BINARY_DIR}/test_emu_racecheck.tsv;TB_GPUSIM_GLOBAL=1")

  # The long ones in make test-cuda-emu only (label emu_long), so that make test stays well under its 15
  # minutes: test_executor_emu (86 s of stage and layer-range walks), test_backends_emu (37 s of schedules),
  # test_cuda_mirrored_emu, and test_cuda's seven slowest (30 s each: 12 Adam steps of effnet-b0 in bf16 and
  # fp16, the gradient arena walk; 14 s: whole steps with the split 1x1 weight gradient, whose split
  # test_cuda_ops_emu's conv1x1 checks alone; 20 s: BatchNorm on the depthwise's load against the two apart, whose
  # fused path the quick set's steps against the cpu take too; 3-5 s: the persistent kernel's cluster barriers,
  # a path no default takes; 16 s: its last layer apart, TB_CUDA_MLP_LAST=apart's A/B path, against the default
  # the quick set's persistent_loop_vs_graph_and_cpu checks), split off test_cuda_emu's own entry.
  add_test(NAME test_cuda_emu_long COMMAND test_cuda_emu --jobs 2 "--filter=${tb_emu_slow}")
  set_tests_properties(test_cuda_emu_long PROPERTIES TIMEOUT 600 LABELS "emu;emu_long" ENVIRONMENT
    "${tb_emu_env}")
  set_tests_properties(test_executor_emu test_backends_emu test_cuda_mirrored_emu PROPERTIES LABELS "emu;emu_long")

  # bench_gpusim (make gpusim): bench on the emulation with each kernel's memory requests counted as a GPU's
  # warps would make them (emu_memtrace.cpp). The kernels carry GCC's ThreadSanitizer instrumentation with no
  # TSan runtime linked: its __tsan_readN/__tsan_writeN calls are emu_memtrace.cpp's. Built on demand only.
  add_library(tb_cuda_gpusim OBJECT EXCLUDE_FROM_ALL ${tb_emu_srcs} ${tb_emu_c} tests/cuda_emu/emu_runtime.cpp
              tests/cuda_emu/emu_blas.cpp tests/cuda_emu/emu_memtrace.cpp)
  set_source_files_properties(tests/cuda_emu/emu_memtrace.cpp PROPERTIES COMPILE_OPTIONS "-O2;-fno-sanitize=all")
  target_include_directories(tb_cuda_gpusim PUBLIC $<TARGET_PROPERTY:tb_cuda_emu,INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_definitions(tb_cuda_gpusim PUBLIC TB_HAVE_CUDA=1 TB_EMU_MEMTRACE=1)
  target_compile_options(tb_cuda_gpusim PRIVATE -O1 $<$<COMPILE_LANGUAGE:CXX>:-std=c++17 -Wall -Wextra
                         -Wno-unused-parameter -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 -fno-tree-sra>)
  add_executable(bench_gpusim EXCLUDE_FROM_ALL harness/main_bench.c $<TARGET_OBJECTS:tb_cuda_gpusim>)
  target_include_directories(bench_gpusim PRIVATE $<TARGET_PROPERTY:tb_cuda_emu,INTERFACE_INCLUDE_DIRECTORIES>
                             backends/ipu ${CMAKE_BINARY_DIR})
  target_compile_definitions(bench_gpusim PRIVATE ${tb_emu_defs})
  target_link_options(bench_gpusim PRIVATE "LINKER:-u,blas_memory_alloc")
  add_dependencies(bench_gpusim tb_harness tb_backends tb_workloads tb_core tb_util)
  target_link_libraries(bench_gpusim PRIVATE ${tb_emu_libs})
endif()
