#!/bin/bash
# Issue #29's benchmark on a GPU machine: the 256^3, 1 Gpc/h run of params/photons_256.toml
# continued from its z = 0.1 state to z = 0.05 (a clustered stretch of ~30 sync points and 2 PM
# steps) on 1 rank and on N ranks (sharing the machine's GPUs, one each where there are
# enough), each timed, with the phases of every step from the log. The base run and the
# stretch keep the steps they were first measured with (eta 0.3, max_dln_a 0.05, the defaults
# until 2026-11-29) so that their times compare across commits; the whole run takes the file's
# steps, the defaults.
# Stages run in the order given; runs go to $RUNS (default /tmp/stretch_runs) and their logs
# come back in $OUT. The libraries of .ci/debian-packages must be findable by CMake.
#   usage, from the source root there: tests/bench/ranks_stretch.sh STAGE...
#     build [TARGET...]        configure (CUDA and MPI) and build orbis and the targets in /tmp/bm
#     base [NP]                the run from z = 99 to the z = 0.1 snapshot on NP ranks (default 1)
#     stretch NAME NP [K=V...] z = 0.1 -> 0.05 from that snapshot on NP ranks (orbis run --set K=V)
#     whole NAME NP [K=V...]   the whole run, z = 99 -> 0, at the file's (default) steps on NP ranks
#   SETS="K=V ..." (environment) adds overrides to every run, e.g. SETS="box.particles_per_side=512
#   box.size_mpc_h=2000" for another size (tests/bench/scaling.sh); PARAMS another file; BUILD
#   another build directory (default /tmp/bm: an older commit's build beside it, for A/B pairs).
#   Then, here: tests/bench/ranks_table.py LOG... prints the per-phase table.
set -o pipefail
out=${OUT:-device_out}
runs=${RUNS:-/tmp/stretch_runs}
b=${BUILD:-/tmp/bm}
src=$(pwd)
params=${PARAMS:-$src/params/photons_256.toml}
read -r -a common <<<"${SETS:-}"
mkdir -p "$out" "$runs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cores=$(nproc)

sets() {   # KEY=VALUE... -> --set KEY=VALUE...
  for kv in "$@"; do printf -- '--set\n%s\n' "$kv"; done
}

launch() {   # NAME NP ARGS...: orbis run on NP ranks, timed; the log to $OUT/NAME.log
  local name=$1 np=$2; shift 2
  local threads=$((cores / np))
  /usr/bin/time -f "%e s wall, %M kB peak (rank 0)" -o "$runs/$name.time" \
    mpirun --oversubscribe --bind-to none -np "$np" -x OMP_NUM_THREADS=$threads "$b/orbis" run "$params" \
    --overwrite "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name ($np ranks, $threads threads each): exit $rc, $(cat "$runs/$name.time" | tail -1)"
  grep -E "run loop|finished|ERROR|error" "$out/$name.log" | tail -3 | cut -c1-220
}

stretch_steps=(time.eta=0.3 time.max_dln_a=0.05 "${common[@]}")

while [ $# -gt 0 ]; do
  stage=$1; shift
  case $stage in
    build)
      targets=(orbis)
      while [ $# -gt 0 ] && [[ $1 != base && $1 != stretch && $1 != whole ]]; do targets+=("$1"); shift; done
      cmake -S . -B $b -G Ninja -DORBIS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
        >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
      cmake --build $b -j"$cores" --target "${targets[@]}" >"$out/build.log" 2>&1 ||
        { grep -E "error|Error" -A3 "$out/build.log" | head -40; exit 1; }
      echo "build ok: ${targets[*]}"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader ;;
    base)
      np=1
      if [[ ${1:-} =~ ^[0-9]+$ ]]; then np=$1; shift; fi
      mapfile -t args < <(sets output.directory="$runs/base" time.z_final=0.1 "time.output_redshifts=[0.1]" \
        output.snapshots=true analysis.pk=false analysis.fof=false analysis.energy_check=false "${stretch_steps[@]}")
      launch base "$np" "${args[@]}" ;;
    stretch)
      name=$1 np=$2; shift 2; extra=()
      while [ $# -gt 0 ] && [[ $1 == *=* ]]; do extra+=("$1"); shift; done
      snap=$(ls "$runs"/base/snapshot_*.hdf5 | tail -1)
      mapfile -t args < <(sets output.directory="$runs/$name" ic.file="$snap" time.z_final=0.05 \
        "time.output_redshifts=[0.05]" output.snapshots=false analysis.pk=false analysis.fof=false \
        "${stretch_steps[@]}" "${extra[@]}")
      launch "$name" "$np" "${args[@]}" ;;
    whole)
      name=$1 np=$2; shift 2; extra=()
      while [ $# -gt 0 ] && [[ $1 == *=* ]]; do extra+=("$1"); shift; done
      mapfile -t args < <(sets output.directory="$runs/$name" "${common[@]}" "${extra[@]}")
      launch "$name" "$np" "${args[@]}" ;;
    *)
      echo "unknown stage $stage"; exit 2 ;;
  esac
done
