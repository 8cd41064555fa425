#!/usr/bin/env bash
# The real history behind docs/history-site.md's screenshots: seven tiny smoke sessions of this
# host (1n1g_fp32 at 32 px, one thread a worker; 1n2g_fp32 too in the second and sixth), the
# fourth and fifth slowed by the fault knob (RN50_FAULT=slow@share=0.3: an idle wait after each
# step), the last an A/B session whose candidate carries the same slowdown; then the site, from
# them, this host's baseline, the GPU baselines of the repository and the H200 session that
# recorded one, and four screenshots of it (Chromium's, as 8-bit PNG) into SHOTS. Run from the
# repository root:
#     bash docs/examples/history-site.sh OUT [SHOTS]     (10 to 20 minutes on 2 cores)
set -euo pipefail
OUT=${1:?usage: history-site.sh OUT [SHOTS]}
SHOTS=${2:-$OUT}
results="$OUT/perf_results"
baseline="$OUT/cpu-baseline.json"
tiny=(--perf-set image-size=32 --perf-set warmup=1 --perf-set iters=2 --perf-set threads=1
      --perf-ignore-host-state --perf-baseline-file "$baseline" -q -p no:cacheprovider)

session() {   # session NAME [pytest arguments...]: one session; a failed gate goes on
    local name=$1
    shift
    python3 -m pytest perf_tests "${tiny[@]}" --perf-results "$results/$name" "$@" || true
}

session 01-baseline -k 1n1g_fp32 --perf-runs 3 --perf-update-baselines=force
session 02 -k "1n1g_fp32 or 1n2g_fp32" --perf-runs 3
session 03 -k 1n1g_fp32 --perf-runs 3
RN50_FAULT=slow@share=0.3 session 04-slow -k 1n1g_fp32 --perf-runs 3
RN50_FAULT=slow@share=0.3 session 05-slow -k 1n1g_fp32 --perf-runs 3
session 06 -k "1n1g_fp32 or 1n2g_fp32" --perf-runs 3
session 07-ab -k 1n1g_fp32 --perf-runs 6 --perf-candidate-env RN50_FAULT=slow@share=0.3
rn50-perf publish "$results" "$baseline" baselines/*.json \
    docs/gpu-hours/2026-11-25-nvidia-h200/2-baseline-results.json --output "$OUT/site"

shot() {   # shot NAME VIEW: the site at VIEW (its URL's hash), 1200 x 900
    local png="$SHOTS/history-site-$1.png"
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,900 \
        --virtual-time-budget=5000 --screenshot="$png" "file://$(realpath "$OUT/site")/index.html$2"
    python3 -c 'import sys; from PIL import Image
Image.open(sys.argv[1]).convert("RGB").quantize(256).save(sys.argv[1], optimize=True)' "$png"
}
hardware=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["hardware"])' \
           "$results/02/results.json")   # this host's key: cpu-amd-epyc on the development VM
mkdir -p "$SHOTS"
shot index ""
shot series "#view=case&series=$hardware/1n1g_fp32_b8"
shot ab "#view=ab&session=07-ab"
shot diff "#view=case&series=$hardware/1n1g_fp32_b8&a=01-baseline&b=06"
