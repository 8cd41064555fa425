#!/bin/bash
# The next GPU lease (issue 59's part 2), prepared on a CPU host; run from the checkout's root on
# the lent machine, as root (the project's H200: no package manager, so bwrap travels in .carry/):
#
#   mkdir -p .carry && cp /usr/bin/bwrap .carry/     # once, on a Debian 12 machine
#   run(command="bash docs/gpu-hours/next-lease.sh", carry=[".carry"], timeout_s=600)
#
# In the order of what it is worth, each step only where the time left covers its plan (seconds,
# from what the GPU hours took: docs/gpu.md), the rest skipped with that reason:
#   S1  gpu_check --measure: the environment and the peaks (the corrected estimates on a GPU)  30
#   S2  a ten-run baseline of 1n1g_amp_b256 on the host, into baselines/<key>.json             320
#   S3  the image path: gpu_check --only amp-in-image (bwrap over this root)                     90
#   S4  the gate inside that image against S2's baseline (2 runs): pass expected                120
#   S5  the gate inside image B, the same root with CUDA_LAUNCH_BLOCKING=1 in its
#       /etc/environment (2 runs): a regression naming the image's variable                     125
#   S6  max batch from 2048 by 128 to a limit of 8192, past the card's memory                   240
#   S7  the compiled amp case at b256 and b512 (2 runs each)                                     360
#   S8  issue 55's auto band on the card, against S2's ten-run baseline (it stores "auto"): three
#       sessions of 5 runs with no fault and three under RN50_FAULT=slow@share=0.02, alternated,
#       each pair where 290 s are left                                                      3 x 290
# S1-S4 fit the default DEADLINE of 570 s (a 15-minute lease: the machine's start, this call, and
# about 3 minutes to run one of S3-S5 again). The next lease: STEPS=S5,S6 then STEPS=S7, then
# STEPS=S8 (two pairs a call).
#   DEADLINE=SECONDS  the time this call may take (default 570)
#   STEPS=S3,S4       these steps alone, in the order above
#   DRY_RUN=1         on any host: each pytest command collects its cases (--collect-only), each
#                     gpu_check command runs (on a host without CUDA it says so), nothing else;
#                     the clock is the steps' plans, so it says which steps this DEADLINE skips
# $OUT gets at most 4 files: summary.txt (a line a step), output.log (what each step printed),
# the baseline files written, results.tgz (each step's output, results.json and summaries).
set -u
cd "$(dirname "$0")/../.." || exit 1
DRY_RUN=${DRY_RUN:-}
if [ -z "$DRY_RUN" ] && ! nvidia-smi -L > /dev/null 2>&1; then
    echo "next-lease.sh: needs a GPU host (nvidia-smi lists none here); DRY_RUN=1 checks it anywhere" >&2
    exit 1
fi
OUT=${OUT:-$(mktemp -d /tmp/lease-out-XXXX)}
mkdir -p "$OUT"
[ -d .carry ] && export PATH="$PWD/.carry:$PATH"
export PYTHONUNBUFFERED=1
W=$(mktemp -d /tmp/lease-XXXX)
touch "$W/started"
T0=$SECONDS
PLANNED=0   # a dry run's clock: the plans of the steps so far
DEADLINE=${DEADLINE:-570}
PYTHON=$(command -v python3)
COMMON=(--perf-profile full --perf-precisions amp -p no:cacheprovider -rs)
IMAGE=(--perf-image / --perf-container-runtime bwrap --perf-image-python "$PYTHON")

elapsed() { if [ -n "$DRY_RUN" ]; then echo "$PLANNED"; else echo $((SECONDS - T0)); fi; }
log() { echo "[$(elapsed) s] $*" | tee -a "$OUT/summary.txt"; }
left() { echo $((DEADLINE - $(elapsed))); }
wanted() { [ -z "${STEPS:-}" ] || [[ ",$STEPS," == *",$1,"* ]]; }

# run NAME PLAN COMMAND...: the command into $W/NAME.txt, stopped 10 s before the deadline; in a
# dry run a pytest command only collects its cases.
run() {
    local name=$1 plan=$2; shift 2
    wanted "$name" || return 1
    if [ "$(left)" -lt "$plan" ]; then
        log "$name skipped: planned $plan s, $(left) s left"
        return 1
    fi
    [ -n "$DRY_RUN" ] && [ "$3" = pytest ] && set -- "$@" --collect-only -q
    log "$name: $*"
    timeout --signal TERM --kill-after 30 $(($(left) > 20 ? $(left) - 10 : 10)) "$@" \
        > "$W/$name.txt" 2>&1
    local status=$?
    PLANNED=$((PLANNED + plan))
    log "$name exit status $status: $(grep -E '^(1n1g_amp|\| (environment|peaks|amp-in-image) |no path ran|=+ .*[0-9.]+s)' "$W/$name.txt" | cut -c1-300)"
    { echo "===== $name: $*"; echo "===== exit status $status"; cat "$W/$name.txt"; } \
        >> "$OUT/output.log"
    return 0
}

bring_back() {
    [ -f "$W/environment.orig" ] && cp "$W/environment.orig" /etc/environment
    find baselines -maxdepth 1 -name '*.json' -newer "$W/started" -exec cp {} "$OUT/" \;
    # Not the profiler's traces (tens of MB): results.json, records, summaries, outputs.
    (cd "$W" && find . \( -name '*.txt' -o -name '*.json' -o -name '*.md' \) -size -2M \
        | tar czf "$OUT/results.tgz" -T -)
    rm -rf "$W"
    log "done: $(cd "$OUT" && echo *)"
}
trap bring_back EXIT

log "host: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1); python $PYTHON; bwrap $(command -v bwrap || echo 'not on PATH')"

run S1 30 "$PYTHON" -m tools gpu-check --measure "$W/measure" --budget 60 --steps environment,peaks

run S2 320 python3 -m pytest perf_tests "${COMMON[@]}" -k 1n1g_amp_b256 --perf-runs 10 \
    --perf-update-baselines --perf-results "$W/s2"

run S3 90 "$PYTHON" -m tools gpu-check --only amp-in-image --output "$W/s3-paths.json"

if command -v bwrap > /dev/null; then
    run S4 120 python3 -m pytest perf_tests "${COMMON[@]}" -k 1n1g_amp_b256 --perf-runs 2 \
        --perf-set max-runs=2 --perf-explain never "${IMAGE[@]}" --perf-results "$W/s4"
    # Image B: this root with one variable more; /etc/environment is put back when the call ends.
    if wanted S5 && [ "$(left)" -ge 125 ]; then
        if [ -z "$DRY_RUN" ]; then
            cp /etc/environment "$W/environment.orig" && echo CUDA_LAUNCH_BLOCKING=1 >> /etc/environment
        fi
        run S5 125 python3 -m pytest perf_tests "${COMMON[@]}" -k 1n1g_amp_b256 --perf-runs 2 \
            --perf-set max-runs=2 --perf-explain never "${IMAGE[@]}" --perf-results "$W/s5"
        [ -f "$W/environment.orig" ] && cp "$W/environment.orig" /etc/environment \
            && rm "$W/environment.orig"
    elif wanted S5; then
        log "S5 skipped: planned 125 s, $(left) s left"
    fi
else
    log "S4, S5 skipped: bwrap is not on PATH (copy /usr/bin/bwrap from a Debian 12 machine into .carry/)"
fi

run S6 240 python3 -m pytest perf_tests "${COMMON[@]}" -k 1n1g_amp --perf-batches 2048 \
    --perf-find-max-batch --perf-set batch-step=128 --perf-set max-batch-limit=8192 \
    --perf-explain never --perf-results "$W/s6"

run S7 360 python3 -m pytest perf_tests "${COMMON[@]}" -k 1n1g_amp --perf-batches 256,512 \
    --perf-runs 2 --perf-set max-runs=2 --perf-set compile=on --perf-explain never \
    --perf-results "$W/s7"

# S8: the pairs take turns, so the card's drift over the call falls on both alike.
for pair in 1 2 3; do
    run S8 145 python3 -m pytest perf_tests "${COMMON[@]}" -k 1n1g_amp_b256 --perf-runs 5 \
        --perf-set max-runs=5 --perf-explain never --perf-results "$W/s8-$pair-none" || break
    RN50_FAULT=slow@share=0.02 run S8 145 python3 -m pytest perf_tests "${COMMON[@]}" \
        -k 1n1g_amp_b256 --perf-runs 5 --perf-set max-runs=5 --perf-explain never \
        --perf-results "$W/s8-$pair-slow" || break
done
