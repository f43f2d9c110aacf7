#!/bin/bash
# Isolated systems on a GPU machine (issue #31), in one call: build (CUDA, no MPI), the GPU
# tests of vacuum boundaries, bench_vacuum on the CUDA step engine (Plummer spheres of 1M and
# 16M particles: time per force evaluation and errors against the exact direct sum), and the
# 1M-particle Hernquist merger of params/hernquist_merger.toml through first passage and
# coalescence, timed. The libraries of .ci/debian-packages must be findable by CMake.
#   usage, from the source root there: tests/bench/device_vacuum.sh [build|tests|bench|merger ...]
#   stages default to "build tests bench merger"; logs go to $OUT (or ./device_out).
#   BENCH: bench_vacuum argument lines (default below); MERGER: extra `orbis run --set` pairs.
set -o pipefail
out=${OUT:-device_out}
mkdir -p "$out"
stages=${*:-build tests bench merger}
b=/tmp/bv
for stage in $stages; do
  case $stage in
    build)
      cmake -S . -B $b -G Ninja -DORBIS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_BUILD_TYPE=Release -DORBIS_MPI=OFF >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
      cmake --build $b -j"$(nproc)" --target orbis bench_vacuum ${TARGETS:-gpu_test_vacuum_cuda gpu_test_vacuum_engine_cuda gpu_test_fmm_leaf_cell_cuda} \
        >"$out/build.log" 2>&1 || { grep -E "error|Error" -A3 "$out/build.log" | head -40; exit 1; }
      echo "build ok" ;;
    tests)
      ctest --test-dir $b -L gpu -R "${TESTS:-vacuum|fmm_leaf_cell}" --output-on-failure >"$out/gpu_tests.log" 2>&1
      rc=$?
      grep -E "tests passed|Passed|Failed|\*\*\*" "$out/gpu_tests.log"
      [ $rc -eq 0 ] || { grep -B2 -A12 "ERROR\|FAILED\|SKIP" "$out/gpu_tests.log" | head -80; exit 1; } ;;
    bench)
      nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
      # The rows of bench_vacuum_results.md ("A thread per pair in the device far field").
      lines=${BENCH:-"--p2p=engine --scene=plummer --order=4 --theta=0.5,0.6,0.7 --reps=5 1000000
--p2p=engine --scene=hernquist --order=5 --theta=0.5 --reps=5 1000000
--p2p=engine --scene=halo_bulge --order=4 --theta=0.5 --reps=5 1000000
--p2p=engine --scene=halo_bulge --order=6 --theta=0.4 --reps=5 1000000
--p2p=engine --scene=plummer --order=4 --theta=0.5 --reps=3 --sample=300 16000000"}
      while IFS= read -r args; do
        # shellcheck disable=SC2086
        [ -n "$args" ] && { echo "## bench_vacuum $args"; $b/bench/bench_vacuum $args; }
      done <<<"$lines" 2>&1 | tee "$out/bench.txt" ;;
    merger)
      # 2 x 500k particles; softening and steps as the file's, outputs every 0.25 time units.
      read -r -a extra <<<"${MERGER:-}"
      sets=(ic.particles=500000 gravity.softening=0.05 time.output_interval=0.25 output.snapshots=false
            output.directory=/tmp/merger_1m "${extra[@]}")
      args=()
      for kv in "${sets[@]}"; do args+=(--set "$kv"); done
      timeout "${MERGER_TIMEOUT:-600}" /usr/bin/time -f "%e s wall, %M kB peak" -o "$out/merger.time" \
        $b/orbis run params/hernquist_merger.toml \
        --overwrite "${args[@]}" >"$out/merger.log" 2>&1
      echo "merger: exit $?, $(tail -1 "$out/merger.time")"
      grep -E "conservation at|run loop|finished|ERROR" "$out/merger.log" | cut -c1-200 | tail -12
      grep -E "^\[.*step " "$out/merger.log" | tail -2 | cut -c1-300 ;;
    *)
      echo "unknown stage $stage"; exit 2 ;;
  esac
done
