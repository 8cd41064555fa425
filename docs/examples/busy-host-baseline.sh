#!/usr/bin/env bash
# A baseline recorded beside CPU hogs, as in docs/results.md#baselines: four busy loops run while
# 1n1g is measured (on and off as other jobs come and go, or all the time with `constant`), none
# while 1n2g is; --perf-update-baselines then refuses what cannot be trusted.
#   docs/examples/busy-host-baseline.sh OUT_DIR [constant]
set -u
cd "$(dirname "$0")/../.."
OUT=${1:?usage: docs/examples/busy-host-baseline.sh OUT_DIR [constant]}
rm -rf "$OUT"; mkdir -p "$OUT"
python3 -m pytest perf_tests -k "1n1g_fp32 or 1n2g_fp32" --perf-update-baselines -p no:cacheprovider \
    --perf-baseline-file "$OUT/cpu.json" --perf-results "$OUT/results" > "$OUT/session.log" 2>&1 &
session=$!
hogs=()
start_hogs() { for _ in 1 2 3 4; do (while :; do :; done) & hogs+=($!); done; }
stop_hogs() { [ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2>/dev/null; hogs=(); }
while kill -0 $session 2>/dev/null && [ ! -d "$OUT/results/1n2g_fp32_b8" ]; do
    if [ "${2:-}" = constant ]; then
        [ ${#hogs[@]} -eq 0 ] && start_hogs; sleep 1
    else
        start_hogs; sleep $((RANDOM % 8 + 2)); stop_hogs; sleep $((RANDOM % 6 + 1))
    fi
done
stop_hogs
wait $session; echo "rc=$?" >> "$OUT/session.log"
tail -n 30 "$OUT/session.log"
