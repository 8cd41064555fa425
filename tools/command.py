"""`rn50-perf <verb>`: the suite's tools behind one command, as git's and asv's are. Each verb is a
module with a `main(argv)`; `rn50-perf --help` lists them, `rn50-perf VERB --help` tells one.
`python3 -m tools VERB` runs the same in a checkout that is not installed."""
from __future__ import annotations

import importlib
import sys

COMMAND = "rn50-perf"
# verb -> (module, what it does), in the order --help lists them.
VERBS: dict[str, tuple[str, str]] = {
    "report": ("tools.report.command", "tables and plots from results, logs or baselines; "
                                       "--compare two of them"),
    "history": ("tools.history.command", "a case's throughput across sessions, its step "
                                         "changes and its baseline's lineage"),
    "publish": ("tools.history.publish", "the history as a static site"),
    "promote": ("tools.promote_baseline", "a results file's cases into a baseline file"),
    "bisect": ("tools.bisect.command", "which change made a candidate stack slower"),
    "calibrate": ("tools.calibrate.command", "false alarms and detection of the gate on this "
                                             "machine; --replay the GPU hours' runs"),
    "extract-logs": ("tools.extract_logs.command", "img/s and speedup from DLPerf-style logs"),
    "gpu-check": ("tools.gpu.check", "every CUDA path of the workload; --measure the first GPU "
                                     "hour"),
    "gpu-bench": ("tools.gpu.bench", "the H200 issue's measurements on a CUDA host"),
    "host-load": ("tools.host_load", "a command run beside busy loops or under a CPU quota"),
    "install-optional": ("tools.install_optional", "the optional packages, one at a time"),
    "options-doc": ("tools.options_doc", "docs/options.md from the option table"),
    "architecture-doc": ("tools.architecture_doc", "docs/architecture.md's figures from the tree"),
    "formats-doc": ("tools.formats_doc", "docs/formats.md's measures from the measures table"),
    "bench-harness": ("tools.bench.harness", "the harness against a bare training loop"),
    "bench-image": ("tools.bench.image", "an image session against a host session"),
    "bench-probe": ("tools.bench.probe", "the interconnect probe's cost"),
    "bench-publish": ("tools.bench.publish", "the history site at 1,000 sessions"),
}


def verb_command(verb: str) -> str:
    """`rn50-perf report`: how a verb names itself in its usage and error lines."""
    assert verb in VERBS, verb
    return f"{COMMAND} {verb}"


def usage() -> str:
    width = max(map(len, VERBS))
    return "\n".join([f"usage: {COMMAND} VERB [ARGS...]   ({COMMAND} VERB --help for one)", "",
                      "verbs:", *(f"  {verb:<{width}}  {text}" for verb, (_, text)
                                  in VERBS.items())])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    verb, rest = args[0], args[1:]
    if verb not in VERBS:
        print(f"{COMMAND}: error: no verb {verb!r}; use one of {', '.join(VERBS)} "
              f"({COMMAND} --help)", file=sys.stderr)
        return 2
    return importlib.import_module(VERBS[verb][0]).main(rest)
