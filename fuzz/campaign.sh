#!/usr/bin/env bash
# Long fuzzing campaigns, one target at a time, at the lowest CPU priority.
#
#   fuzz/campaign.sh [SECONDS] [ENDPOINT_SECONDS] [TARGET...]
#
# Defaults: 3600 s per target and 3 h for the stateful `endpoint` target, every target. Each run starts from
# the committed seeds (fuzz/corpus/<target>, read only) and grows fuzz/work/<target> (not committed); crashes
# land in fuzz/artifacts/<target>. Logs and a summary (executions, coverage, crashes per target) go to
# fuzz/logs/. Debug assertions are on, so integer overflow is a crash too.
set -uo pipefail
cd "$(dirname "$0")/.."

secs=${1:-3600}
endpoint_secs=${2:-10800}
shift $(( $# > 2 ? 2 : $# ))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(endpoint wire frame usid_ev node_config scenario bootstrap host)
fi

cargo +nightly fuzz build -a >/dev/null || exit 1
mkdir -p fuzz/logs
summary=fuzz/logs/summary.txt
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD)" >> "$summary"
for t in "${targets[@]}"; do
    n=$secs
    [ "$t" = endpoint ] && n=$endpoint_secs
    mkdir -p "fuzz/work/$t" "fuzz/artifacts/$t"
    log="fuzz/logs/$t.log"
    start=$(date +%s)
    nice -n 19 cargo +nightly fuzz run -a "$t" "fuzz/work/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$n" -timeout=10 -print_final_stats=1 >"$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*')
    ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*')
    crashes=$(find "fuzz/artifacts/$t" -type f | wc -l)
    line="$t: ${took}s, ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?}, ${crashes} crash files, exit $rc"
    echo "$line" | tee -a "$summary"
done
