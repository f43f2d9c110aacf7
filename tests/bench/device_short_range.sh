#!/bin/bash
# The short-range step, CUDA vs CPU backend, on a GPU machine in one call: build (reusing
# /tmp/b when it is still there), GPU tests, then bench_short_range. The libraries of
# .ci/debian-packages must be findable by CMake (installed, or on CMAKE_PREFIX_PATH and
# PKG_CONFIG_PATH).
#   usage, from the source root there: [BENCH=...] tests/bench/device_short_range.sh [build|tests|bench ...]
#   stages default to "build tests bench"; results go to $OUT (or ./device_out).
set -o pipefail
out=${OUT:-device_out}
mkdir -p "$out"
stages=${*:-build tests bench}
b=/tmp/b
bench=$b/bench/bench_short_range
for stage in $stages; do
  case $stage in
    build)
      cmake -S . -B $b -G Ninja -DORBIS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_BUILD_TYPE=Release -DORBIS_MPI=OFF >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
      cmake --build $b -j16 --target orbis gpu_test_p2p_cuda gpu_test_p2p_cuda_solver gpu_test_orb_tree_cuda \
        gpu_test_walk_cuda gpu_test_treepm_ewald_cuda bench_short_range \
        >"$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -30; exit 1; }
      echo "build ok" ;;
    tests)
      ctest --test-dir $b -L gpu --output-on-failure >"$out/gpu_tests.log" 2>&1
      rc=$?
      grep -E "tests passed|Passed|Failed" "$out/gpu_tests.log"
      $b/tests/gpu_test_p2p_cuda_solver 2>&1 | grep -E "MESSAGE|ERROR" | cut -c1-240 | tee -a "$out/gpu_tests.log"
      [ $rc -eq 0 ] || exit 1 ;;
    bench)
      # BENCH: one bench_short_range argument list per line (default: the bar at 128^3).
      nproc; nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
      lines=${BENCH:-"--p2p=compare --scene=sheets --threads=16 --reps=3 128
--p2p=compare --scene=clustered --threads=16 --reps=1 128"}
      while IFS= read -r args; do
        [ -n "$args" ] && $bench $args
      done <<<"$lines" 2>&1 | tee "$out/bench.txt" ;;
    *)
      echo "unknown stage $stage"; exit 2 ;;
  esac
done
