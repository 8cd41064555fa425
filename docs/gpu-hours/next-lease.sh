#!/bin/bash
# The next GPU lease (issue 67's part 2), prepared on a CPU host: one 15-minute lease, the
# machine's start included (a minute or more), on one card. Run from the checkout's root on the
# lent machine:
#
#   run(command="bash docs/gpu-hours/next-lease.sh", timeout_s=600)
#
# In this order, each step only where the time left to DEADLINE covers its plan, else skipped
# with that reason in summary.txt. Plans in seconds, from what the GPU hours took (docs/gpu.md,
# docs/gpu-hours/): a full-profile run of amp b256 about 25 s (the H200 of 2026-11-28: 9 runs and
# part of a tenth in 250 s; 2 runs in a session of 61 s, so about 11 s a session's own start):
#   S1  the environment and the matmul/copy peaks (gpu-check --measure): 13.8 + 9.8 s on the
#       H100 of 2026-11-27, with the tool's start                                           30
#   S2  a ten-run baseline of 1n1g_amp_b256 into baselines/<key>.json: 10 x 25 + 11 + 4;
#       --perf-explain never (a stored operator profile is a launch more, ~35 s, which the
#       band's pair below needs); the runs' wall time against their timed window, from each
#       run's record (the suite records no finer split of a run's time yet: the issue on a
#       run's cost adds it)                                                                 265
#   S3  the auto band on the card, against S2's entry (it stores "auto"): pairs of gate
#       sessions, 5 runs with no fault then 5 under RN50_FAULT=slow@share=0.02, alternated so
#       the card's drift falls on both; as many pairs as fit, each only where both fit
#                                                                         each pair 2 x 136
#   S4  two ranks on the one card: 1n2g_amp_b256 with --perf-set share-devices=on (both on
#       device 0), 1 run. NCCL first: it runs NCCL, DDP and the interconnect probe across two
#       CUDA processes; where NCCL refuses a duplicate device (one line in summary.txt), gloo
#       with CUDA tensors: DDP across CUDA ranks, its buckets through the host. Neither is a
#       1n2g figure (the verdict is shared-devices). No hour measured two ranks yet: a launch
#       of 25 s, a window at half the card's rate each, the session's start            2 x 60
#   S5  compiled amp (--perf-set compile=on) at b256 and b512, 1 run each: torch.compile's
#       first compilation 58-60 s (H100 2026-11-26, H200 2026-11-28) in each run's fresh
#       process, the run's 25 s, the session's start                                      190
# The default DEADLINE, 570 s, is the call's 600 s less bring-back and the last step's stop:
# S1, S2 and one pair of S3 (567 s planned). The lease's time after it (its start and this
# call take 11-12 of its 15 minutes) holds one more short call: STEPS=S4 DEADLINE=150. S5 goes
# to the lease after. A call after S2 runs on the checkout as it travels anew: commit S2's
# baseline file (it comes back in $OUT) into baselines/ first, or S3 gates against the old one.
#   DEADLINE=SECONDS  the time this call may take (default 570)
#   STEPS=S3,S4       these steps alone, in the order above
#   DRY_RUN=1         on any host: runs nothing, prints each command a step would run
#                     (`S2 command: ...`, shell-quoted) on the clock of the steps' plans, so it
#                     says which steps this DEADLINE keeps; tests/test_next_lease.py parses
#                     each command with the suite's own parser
# $OUT gets at most 4 files beside summary.txt (a line a step): output.log (what each step
# printed), the baseline file S2 wrote, results.tgz (each step's results.json, run records,
# summaries, outputs; not the profiler's traces).
set -u
cd "$(dirname "$0")/../.." || exit 1
DRY_RUN=${DRY_RUN:-}
if [ -z "$DRY_RUN" ] && ! nvidia-smi -L > /dev/null 2>&1; then
    echo "next-lease.sh: needs a GPU host (nvidia-smi lists none here); DRY_RUN=1 shows its plan anywhere" >&2
    exit 1
fi
OUT=${OUT:-$(mktemp -d /tmp/lease-out-XXXX)}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
W=$(mktemp -d /tmp/lease-XXXX)
touch "$W/started"
T0=$SECONDS
PLANNED=0   # a dry run's clock: the plans of the steps so far
DEADLINE=${DEADLINE:-570}
PYTHON=$(command -v python3 || echo python3)
PYTEST=(python3 -m pytest perf_tests --perf-profile full --perf-precisions amp -p no:cacheprovider -rs)
GATE=(--perf-runs 5 --perf-set max-runs=5 --perf-explain never)

elapsed() { if [ -n "$DRY_RUN" ]; then echo "$PLANNED"; else echo $((SECONDS - T0)); fi; }
log() { echo "[$(elapsed) s] $*" | tee -a "$OUT/summary.txt"; }
left() { echo $((DEADLINE - $(elapsed))); }
wanted() { [ -z "${STEPS:-}" ] || [[ ",$STEPS," == *",$1,"* ]]; }
fits() {   # fits NAME PLAN: whether the step is wanted and its plan fits, else say why not
    wanted "$1" || return 1
    [ "$(left)" -ge "$2" ] && return 0
    log "$1 skipped: planned $2 s, $(left) s left"
    return 1
}

# step NAME PLAN COMMAND...: the command into $W/NAME.txt, stopped 10 s before the deadline, its
# output appended to output.log; a dry run prints it and counts its plan.
step() {
    local name=$1 plan=$2; shift 2
    log "$name command: $(printf '%q ' "$@")"
    if [ -n "$DRY_RUN" ]; then
        PLANNED=$((PLANNED + plan))
        return 0
    fi
    timeout --signal TERM --kill-after 30 $(($(left) > 20 ? $(left) - 10 : 10)) "$@" \
        > "$W/$name.txt" 2>&1
    local status=$?
    log "$name exit status $status: $(grep -E '^(1n[12]g_amp|\| (environment|peaks) |no path ran|=+ .*[0-9.]+s)' "$W/$name.txt" | cut -c1-300)"
    { echo "===== $name: $*"; echo "===== exit status $status"; cat "$W/$name.txt"; } \
        >> "$OUT/output.log"
    return "$status"
}

bring_back() {
    find baselines -maxdepth 1 -name '*.json' -newer "$W/started" -exec cp {} "$OUT/" \;
    (cd "$W" && find . \( -name '*.txt' -o -name '*.json' -o -name '*.md' \) -size -2M \
        | tar czf "$OUT/results.tgz" -T -)
    rm -rf "$W"
    log "done: $(cd "$OUT" && echo *)"
}
trap bring_back EXIT

GPU=$(command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)
log "host: ${GPU:-no GPU}; python $PYTHON; DEADLINE $DEADLINE s"

if fits S1 30; then
    step S1 30 python3 -m tools gpu-check --measure "$W/measure" --budget 60 \
        --steps environment,peaks
fi

if fits S2 265; then
    step S2 265 "${PYTEST[@]}" -k 1n1g_amp_b256 --perf-runs 10 --perf-update-baselines \
        --perf-explain never --perf-results "$W/s2"
    [ -z "$DRY_RUN" ] && log "S2 wall time: $(python3 - "$W/s2" <<'EOF'
import json, pathlib, statistics, sys
runs = [json.loads(path.read_text()) for path in pathlib.Path(sys.argv[1]).rglob("run-*.json")]
launch = [run["launch_seconds"] for run in runs if run.get("launch_seconds")]
window = [run["record"]["elapsed_s"] for run in runs if (run.get("record") or {}).get("elapsed_s")]
if launch and window:
    print(f"{len(runs)} runs: {statistics.median(launch):.1f} s a run's launch (median), its "
          f"timed window {statistics.median(window):.2f} s; the rest is unsplit (the suite "
          "records no finer split yet)")
else:
    print("no run records")
EOF
)"
fi

# S3: each pair only where both its sessions fit (a gate without its slowed twin says nothing).
for pair in 1 2 3; do
    wanted S3 || break
    if [ "$(left)" -lt 272 ]; then
        log "S3 pair $pair skipped: planned 272 s, $(left) s left"
        break
    fi
    step S3 136 "${PYTEST[@]}" -k 1n1g_amp_b256 "${GATE[@]}" --perf-results "$W/s3-$pair-none"
    step S3 136 env RN50_FAULT=slow@share=0.02 "${PYTEST[@]}" -k 1n1g_amp_b256 "${GATE[@]}" \
        --perf-results "$W/s3-$pair-slow"
done

TWO_RANKS=(-k 1n2g_amp_b256 --perf-set share-devices=on --perf-runs 1 --perf-set max-runs=1
           --perf-explain never)
if fits S4 120; then
    # The gloo run only where NCCL's did not pass (a dry run shows both).
    if ! step S4 60 "${PYTEST[@]}" "${TWO_RANKS[@]}" --perf-results "$W/s4-nccl" \
            || [ -n "$DRY_RUN" ]; then
        [ -z "$DRY_RUN" ] && log "S4: NCCL with two ranks on one device: $(grep -m 1 -iE \
            'duplicate GPU|both on CUDA device|ncclInvalidUsage|1n2g_amp_b256: ' "$W/S4.txt" \
            | cut -c1-250)"
        mv "$W/S4.txt" "$W/S4-nccl.txt" 2> /dev/null
        step S4 60 "${PYTEST[@]}" "${TWO_RANKS[@]}" --perf-set dist-backend=gloo \
            --perf-results "$W/s4-gloo"
    fi
fi

if fits S5 190; then
    step S5 190 "${PYTEST[@]}" -k 1n1g_amp --perf-batches 256,512 --perf-runs 1 \
        --perf-set max-runs=1 --perf-set compile=on --perf-explain never --perf-results "$W/s5"
fi
