#!/bin/bash
# The CUDA PM on the GPU machine in one call: build every GPU test and bench_pm_cuda, run the
# GPU tests (ctest -L gpu), then bench_pm_cuda (its arguments in BENCH, default all sizes).
# The libraries of .ci/debian-packages must be findable by CMake. Results go to $OUT
# (or ./device_out).
#   usage, from the source root there: [BENCH="512 3 512"] tests/bench/device_pm_cuda.sh
set -o pipefail
out=${OUT:-device_out}
mkdir -p "$out"
b=/tmp/b
cmake -S . -B $b -G Ninja -DORBIS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  -DORBIS_MPI=OFF >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
targets=$(ls tests/gpu/test_*.c* | sed 's|tests/gpu/\(test_[a-z0-9_]*\)\..*|gpu_\1|')
cmake --build $b -j16 --target $targets bench_pm_cuda >"$out/build.log" 2>&1 ||
  { grep -E "error|Error" "$out/build.log" | head -30; exit 1; }
echo "build ok"
ctest --test-dir $b -L gpu --output-on-failure >"$out/gpu_tests.log" 2>&1
rc=$?
grep -E "tests passed|Passed|Failed|Skipped" "$out/gpu_tests.log"
(cd $b/tests && ./gpu_test_pm_cuda) 2>&1 | grep -E "rms|planned|SUCCESS|FAIL" | tee "$out/gpu_test_pm_cuda.log"
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
$b/bench/bench_pm_cuda ${BENCH:-512 3 512} 2>&1 | tee "$out/bench_pm_cuda.txt"
exit $rc
