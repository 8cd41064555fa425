#!/usr/bin/env bash
# What one tiny session costs in CPU, its whole process tree counted (the fork server, which
# outlives the agent that started it, included): cgroup v1's cpuacct, so root on a host that
# mounts it (the development VM does, at /sys/fs/cgroup/cpuacct). PAIRS pairs, alternated:
# without the project's bytecode (each process compiles the modules, pytest rewrites the
# plugin's) and with it; then what the fork server's imports alone cost. Run from the
# repository root, with the virtual environment's python3 first on PATH:
#     bash docs/examples/session-cpu.sh [PAIRS]        (about 15 s a pair on 2 cores)
set -euo pipefail
pairs=${1:-5}
group=/sys/fs/cgroup/cpuacct/rn50-session-cpu
mkdir -p "$group"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
session=(-m pytest perf_tests -k 1n1g_fp32 --perf-batches 2 --perf-set image-size=32
         --perf-set warmup=1 --perf-set iters=2 --perf-precisions fp32 --perf-set threads=1
         --perf-runs 1 --perf-set max-runs=1 --perf-set plots=off -q -p no:cacheprovider
         --perf-baseline-file "$work/baseline.json")
echo '{"schema_version": 1, "entries": {}}' > "$work/baseline.json"

cpu() {   # cpu LABEL COMMAND...: the command's CPU seconds, its children's included
    local label=$1 before after
    shift
    before=$(cat "$group/cpuacct.usage")
    bash -c 'echo $$ > "$0/tasks"; exec "$@"' "$group" "$@" > /dev/null 2>&1 || true
    sleep 1   # the fork server ends as its session's process is gone
    after=$(cat "$group/cpuacct.usage")
    python3 -c "import sys; print(f'{sys.argv[1]:<28} {(int(sys.argv[3]) - int(sys.argv[2])) / 1e9:.2f} s')" \
        "$label" "$before" "$after"
}
no_bytecode() { find perf_tests rn50_model tools -name __pycache__ -type d -prune -exec rm -rf {} +; }

cpu "warm-up" env -u PYTHONDONTWRITEBYTECODE python3 "${session[@]}" --perf-results "$work/r"
for _ in $(seq "$pairs"); do
    no_bytecode
    rm -rf "$work/r"; cpu "session, no bytecode" env PYTHONDONTWRITEBYTECODE=1 python3 \
        "${session[@]}" --perf-results "$work/r"
    rm -rf "$work/r"; env -u PYTHONDONTWRITEBYTECODE python3 "${session[@]}" \
        --perf-results "$work/r" > /dev/null 2>&1 || true   # writes the bytecode
    rm -rf "$work/r"; cpu "session, bytecode" env -u PYTHONDONTWRITEBYTECODE python3 \
        "${session[@]}" --perf-results "$work/r"
done
for _ in 1 2 3; do
    cpu "fork server's imports" python3 -c \
        "import torch, torch._dynamo, rn50_model.worker, rn50_model.environment"
done
