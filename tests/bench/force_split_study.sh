#!/bin/bash
# The force-split convergence study (docs/force_split.md) on a GPU machine: one whole run per
# line of a variants file, all from the same ICs, then the small files of every run (log, P(k),
# FoF mass functions) packed into $OUT/force_split_runs.tgz for force_split_report.py.
#   usage, from the source root there:
#     tests/bench/force_split_study.sh PARAMS VARIANTS_FILE [KEY=VALUE...]
#   PARAMS: the parameter file every run starts from; KEY=VALUE: overrides for every run;
#   VARIANTS_FILE: one run a line, "NAME KEY=VALUE..." (# starts a comment).
#   BIN (default /tmp/b/orbis) is the orbis binary, RUNS (default /tmp/force_split_runs) the
#   runs' folder. A run whose folder already holds its z_final P(k) is not run again.
set -o pipefail
out=${OUT:-device_out}
runs=${RUNS:-/tmp/force_split_runs}
bin=${BIN:-/tmp/b/orbis}
[ $# -ge 2 ] || { sed -n 2,11p "$0"; exit 2; }
params=$1 variants=$2; shift 2
common=("$@")
mkdir -p "$out" "$runs"

while read -r name rest; do
  [[ -z $name || $name == \#* ]] && continue
  read -ra sets <<<"$rest"
  args=()
  for kv in output.directory="$runs/$name" "${common[@]}" "${sets[@]}"; do args+=(--set "$kv"); done
  mkdir -p "$runs/$name"
  start=$(date +%s.%N)
  /usr/bin/time -v -o "$runs/$name/time.txt" "$bin" run "$params" --overwrite "${args[@]}" \
    >"$runs/$name/run.log" 2>&1
  rc=$?
  printf '%-28s exit %d  %6.1f s  %s\n' "$name" $rc "$(python3 -c "import time; print(time.time() - $start)")" \
    "$(grep -m1 -o 'finished: .*' "$runs/$name/run.log" | cut -c1-100)"
  [ $rc = 0 ] || tail -5 "$runs/$name/run.log"
done <"$variants"

(cd "$runs" && tar czf "$out/force_split_runs.tgz" */run.log */time.txt */ic_power.txt */powerspec_*.txt \
   */fof_tab_*_massfn.txt 2>/dev/null)
echo "packed $(ls "$runs" | wc -l) runs into force_split_runs.tgz"
