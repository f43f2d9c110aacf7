#!/bin/bash
# The GPU-resident step on a GPU machine, in one call: build (reusing /tmp/b when it is still
# there), the GPU tests, then bench_step_cuda on the two scenes of the README's table. The
# libraries of .ci/debian-packages must be findable by CMake.
#   usage, from the source root there: [BENCH=...] tests/bench/device_step.sh [build|tests|bench ...]
#   stages default to "build tests bench"; logs go to $OUT (or ./device_out).
set -o pipefail
out=${OUT:-device_out}
mkdir -p "$out"
stages=${*:-build tests bench}
b=/tmp/b
for stage in $stages; do
  case $stage in
    build)
      cmake -S . -B $b -G Ninja -DORBIS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_BUILD_TYPE=Release -DORBIS_MPI=OFF >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
      targets=$(ls tests/gpu/test_*.c* | sed -E 's#tests/gpu/(test_[a-z0-9_]+)\.(cu|cpp)#gpu_\1#')
      cmake --build $b -j16 --target orbis $targets unit_test_device_memory_plan bench_step_cuda \
        >"$out/build.log" 2>&1 || { grep -E "error|Error" -A3 "$out/build.log" | head -40; exit 1; }
      echo "build ok" ;;
    tests)
      ctest --test-dir $b -L gpu -R "${TESTS:-.}" --output-on-failure >"$out/gpu_tests.log" 2>&1
      rc=$?
      grep -E "tests passed|Passed|Failed|\*\*\*" "$out/gpu_tests.log"
      for t in ${VERBOSE_TESTS:-}; do $b/tests/gpu_$t -s 2>&1 | grep -E "MESSAGE|ERROR|vs Ewald|  " | cut -c1-300 >>"$out/messages.log"; done
      [ $rc -eq 0 ] || { grep -B2 -A12 "ERROR\|FAILED\|SKIP" "$out/gpu_tests.log" | head -80; exit 1; } ;;
    bench)
      # BENCH: one bench_step_cuda argument list per line (default: the issue's two scenes).
      nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
      lines=${BENCH:-"--scene=evolved --side=256 --box=1000
--scene=ics --side=512 --box=100 --z=99"}
      while IFS= read -r args; do
        [ -n "$args" ] && { echo "## bench_step_cuda $args"; $b/bench/bench_step_cuda $args; }
      done <<<"$lines" 2>&1 | tee "$out/bench.txt" ;;
    *)
      echo "unknown stage $stage"; exit 2 ;;
  esac
done
