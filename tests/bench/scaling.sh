#!/bin/bash
# Issue #33 on a machine with several GPUs, one rank per GPU: weak and strong scaling over the
# clustered stretch of tests/bench/ranks_stretch.sh (z = 0.1 -> 0.05 at the default steps, the
# box of params/photons_256.toml's cosmology), and a 1024^3 run as far as the time allows.
# Each stage fits one device call of ten minutes on H200s; run them in separate calls. Logs
# and tables go to $OUT (default device_out). The libraries of .ci/debian-packages must be
# findable by CMake.
#   usage, from the source root there: tests/bench/scaling.sh STAGE...
#     build                    ranks_stretch.sh build (CUDA and MPI, /tmp/bm)
#     weak N...                256^3 particles per GPU, the box grown with them (the same
#                              clustering): N GPUs hold round(256 N^(1/3))^3 particles in
#                              1000 N^(1/3) Mpc/h (N = 8: 512^3 in 2 Gpc/h); the base run on N
#                              ranks, then the stretch on N ranks
#     strong N...              512^3 in 1 Gpc/h: the base run once on the largest N, then the
#                              stretch on each N
#     big NP [SECONDS]         1024^3 in 1 Gpc/h from z = 49 on NP ranks for SECONDS (default
#                              540), stopped with SIGTERM (a checkpoint): its PM steps and sync
#                              points, the ETA to z = 0 and the device memory per rank from the log
#   Then, here: tests/bench/ranks_table.py $OUT/*.log prints the per-phase tables.
set -o pipefail
out=${OUT:-device_out}
here=$(cd "$(dirname "$0")" && pwd)
export OUT=$out
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

counts() {   # the numeric arguments at the front of the list
  local list=()
  while [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; do list+=("$1"); shift; done
  echo "${list[@]}"
}

while [ $# -gt 0 ]; do
  stage=$1; shift
  case $stage in
    build)
      "$here/ranks_stretch.sh" build || exit 1 ;;
    weak)
      read -r -a gpus <<<"$(counts "$@")"; shift ${#gpus[@]}
      for n in "${gpus[@]}"; do
        side=$(python3 -c "print(round(256 * $n ** (1 / 3)))")
        box=$(python3 -c "print(1000 * $n ** (1 / 3))")
        echo "== weak: $n GPUs, ${side}^3 particles in $box Mpc/h"
        RUNS=/tmp/weak_$n SETS="box.particles_per_side=$side box.size_mpc_h=$box" \
          "$here/ranks_stretch.sh" base "$n" stretch "weak_$n" "$n"
        mv "$out/base.log" "$out/weak_${n}_base.log"
      done
      python3 "$here/ranks_table.py" "$out"/weak_[0-9]*.log | grep -v _base ;;
    strong)
      read -r -a gpus <<<"$(counts "$@")"; shift ${#gpus[@]}
      most=$(printf '%s\n' "${gpus[@]}" | sort -n | tail -1)
      export RUNS=/tmp/strong SETS="box.particles_per_side=512"
      "$here/ranks_stretch.sh" base "$most" && mv "$out/base.log" "$out/strong_base.log"
      for n in "${gpus[@]}"; do "$here/ranks_stretch.sh" stretch "strong_$n" "$n"; done
      python3 "$here/ranks_table.py" "$out"/strong_[0-9]*.log ;;
    big)
      np=$1; seconds=${2:-540}; shift; [[ ${1:-} =~ ^[0-9]+$ ]] && shift
      mkdir -p /tmp/big
      timeout -s TERM "$seconds" mpirun --oversubscribe --bind-to none -np "$np" \
        -x OMP_NUM_THREADS=$(( $(nproc) / np )) /tmp/bm/orbis run params/photons_256.toml --overwrite \
        --set box.particles_per_side=1024 --set ic.z_init=49 \
        --set analysis.energy_check=false --set output.directory=/tmp/big >"$out/big_$np.log" 2>&1
      echo "big: exit $? after at most $seconds s"
      grep -E "memory plan|memory held|PM over|ETA|checkpoint" "$out/big_$np.log" | tail -8 | cut -c1-300
      python3 "$here/ranks_table.py" "$out/big_$np.log" ;;
    *)
      echo "unknown stage $stage"; exit 2 ;;
  esac
done
