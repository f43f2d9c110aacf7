#!/bin/bash
# The headline benchmark (PhotoNs-GPU's precision check at 256^3) on a GPU machine. Stages run
# in the order given; runs go to $RUNS (default /tmp/headline_runs) and the small files of each
# run (log, time, P(k), FoF mass functions and catalogues; no snapshots) come back packed as
# $OUT/NAME.tgz. The libraries of .ci/debian-packages must be findable by CMake.
#   usage, from the source root there: tests/bench/headline.sh STAGE...
#     build                         configure and build orbis in /tmp/b
#     run NAME PARAMS [KEY=VALUE...] one whole run, timed (/usr/bin/time), outputs in $RUNS/NAME
#     piece NAME PARAMS SECONDS [KEY=VALUE...]
#                                   run or continue (--restart from its newest checkpoint) a long
#                                   run for at most SECONDS, then SIGTERM (a checkpoint, exit 0);
#                                   packed once it has reached its end
#     disk                          write speed of $RUNS's disk (0.94 GB, with and without fsync)
#   Then, here: analysis/python/compare_runs.py DEFAULT_DIR REFERENCE_DIR (unpacked tarballs)
#   and tests/bench/headline_table.py RUN_DIR prints the time table.
set -o pipefail
out=${OUT:-device_out}
runs=${RUNS:-/tmp/headline_runs}
bin=${BIN:-/tmp/b/orbis}
src=$(pwd)
mkdir -p "$out" "$runs"

pack() {   # NAME: the run's small files, for the comparison script and the table
  (cd "$runs/$1" && tar czf "$out/$1.tgz" run.log time.txt ic_power.txt powerspec_*.txt fof_tab_*.hdf5 \
     fof_tab_*_massfn.txt 2>/dev/null)
  echo "packed $1: $(grep -c . "$runs/$1/run.log") log lines"
}

overrides() {   # KEY=VALUE... -> --set KEY=VALUE...
  for kv in "$@"; do printf -- '--set\n%s\n' "$kv"; done
}

while [ $# -gt 0 ]; do
  stage=$1; shift
  case $stage in
    build)
      cmake -S . -B /tmp/b -G Ninja -DORBIS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
        -DORBIS_MPI=OFF >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
      cmake --build /tmp/b -j16 --target orbis >"$out/build.log" 2>&1 ||
        { grep -E "error|Error" -A3 "$out/build.log" | head -40; exit 1; }
      echo "build ok"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader ;;
    run)
      name=$1 params=$2; shift 2; sets=()
      while [ $# -gt 0 ] && [[ $1 == *=* ]]; do sets+=("$1"); shift; done
      mkdir -p "$runs/$name"
      mapfile -t args < <(overrides output.directory="$runs/$name" "${sets[@]}")
      /usr/bin/time -v -o "$runs/$name/time.txt" "$bin" run "$src/$params" --overwrite "${args[@]}" \
        >"$runs/$name/run.log" 2>&1
      echo "$name: exit $?, $(grep -E 'Elapsed|Maximum resident' "$runs/$name/time.txt" | tr -s ' \t' ' ')"
      tail -1 "$runs/$name/run.log" | cut -c1-200
      pack "$name" ;;
    piece)
      name=$1 params=$2 seconds=$3; shift 3; sets=()
      while [ $# -gt 0 ] && [[ $1 == *=* ]]; do sets+=("$1"); shift; done
      mkdir -p "$runs/$name"
      mapfile -t args < <(overrides output.directory="$runs/$name" "${sets[@]}")
      if ls "$runs/$name"/checkpoint_*.orbis >/dev/null 2>&1; then mode=--restart; else mode=--overwrite; fi
      echo "== piece of $name ($mode, at most $seconds s) at $(date -u +%T)" >>"$runs/$name/run.log"
      /usr/bin/time -a -v -o "$runs/$name/time.txt" timeout -s TERM "$seconds" \
        "$bin" run "$src/$params" $mode "${args[@]}" >>"$runs/$name/run.log" 2>&1
      echo "$name piece: exit $?; $(grep -E 'Elapsed' "$runs/$name/time.txt" | tail -1 | tr -s ' \t' ' ')"
      grep -E " step +[0-9]+ " "$runs/$name/run.log" | tail -1 | cut -c1-200
      if grep -q "^\[.*finished:" "$runs/$name/run.log"; then pack "$name"; fi ;;
    disk)
      for sync in none fsync; do
        flag=; [ $sync = fsync ] && flag=conv=fsync
        echo "dd 0.94 GB to $runs ($sync): $(dd if=/dev/zero of="$runs/dd.bin" bs=1M count=896 $flag 2>&1 | tail -1)"
        rm -f "$runs/dd.bin"
      done ;;
    *)
      echo "unknown stage $stage"; exit 2 ;;
  esac
done
