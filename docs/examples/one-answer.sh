#!/usr/bin/env bash
# The real lines of docs/verdicts.md and docs/ab.md on one answer from every mode (issue 63): the
# smoke case 1n1g_fp32_b8, a 10-run baseline, then 300 MiB more held through the timed window
# (RN50_FAULT=grow@mib=300, the worker's fault knob: real memory) through the gate, A/B, a
# refresh and a forced one, and the baseline judged as another machine's. About 5 minutes on
# 2 cores. Each step's output is OUT_DIR/<step>.log.
set -u
cd "$(dirname "$0")/../.."
D=${1:?usage: one-answer.sh OUT_DIR}; mkdir -p "$D"; B=$D/b.json; rm -rf "$D"/r* "$B" "$D/elsewhere.json"
ARGS="-k 1n1g_fp32_b8 --perf-explain never --perf-baseline-file $B"
step() { local name=$1; shift; local t0=$SECONDS; echo "== $name: $*"; "$@" > "$D/$name.log" 2>&1; echo "== $name exit $? in $((SECONDS - t0)) s"; }
step 1-baseline python3 -m pytest perf_tests $ARGS --perf-update-baselines --perf-results $D/r1
step 2-gate-grown env RN50_FAULT=grow@mib=300 python3 -m pytest perf_tests $ARGS --perf-results $D/r2
step 3-ab-grown python3 -m pytest perf_tests -k 1n1g_fp32_b8 --perf-explain never --perf-candidate-env RN50_FAULT=grow@mib=300 --perf-runs 6 --perf-set max-runs=6 --perf-results $D/r3
step 4-refresh-refused env RN50_FAULT=grow@mib=300 python3 -m pytest perf_tests $ARGS --perf-update-baselines --perf-results $D/r4
cp "$B" "$D/b-before-force.json"
step 5-refresh-forced env RN50_FAULT=grow@mib=300 python3 -m pytest perf_tests $ARGS --perf-update-baselines=force --perf-runs 3 --perf-results $D/r5
python3 - "$D" <<'PY'
import json, sys
out = sys.argv[1]
d = json.load(open(f"{out}/b-before-force.json"))
env = d["entries"]["1n1g_fp32_b8"]["environment"]
env.update(device="Intel(R) Xeon(R) Platinum 8480+", cpu_count=16)
json.dump(d, open(f"{out}/elsewhere.json", "w"), indent=1)
PY
step 6-elsewhere python3 -m pytest perf_tests -k 1n1g_fp32_b8 --perf-explain never --perf-baseline-file $D/elsewhere.json --perf-require-baseline --perf-results $D/r6
