"""What one run left, read into a `RunOutcome`: rank 0's record, the failure files of failing
ranks, the launcher's logs; and, where the run failed, the one line that says why (a rank out of
memory, a rank killed, a node lost, a timeout, a launcher's own failure).
"""
from __future__ import annotations

import json
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.core.cases import Case
from perf_tests.core.text import utc_now
from perf_tests.runs.agent import AGENT_EXIT_MARK
from perf_tests.runs.launch import LaunchResult
from perf_tests.runs.network import NODE_FILES, NODE_MARK
from rn50_model.record import FAILURE_MARK, RECORD_MARK

TAIL_LINES = 15
# A node lost or cut off, as the launcher saw it: these say more than a timeout or a rank's
# broken connection, which is all the surviving ranks see.
NODE_LOST = [
    (re.compile(r"srun: error: Node failure on (?P<node>\S+)"),
     "node {node} stopped answering Slurm (node failure: down or cut off from the network); "
     "Slurm ended the step"),
    (re.compile(r"srun: error: (?P<node>\S+): task (?P<task>\d+): Killed"),
     "node {node} lost: its agent (Slurm task {task}) was killed; Slurm ended the step"),
    (re.compile(r"process rank (?P<task>\d+) with PID \d+ on node (?P<node>\S+) exited on "
                r"signal (?P<signal>\d+)"),
     "node {node} lost: its agent (mpirun process {task}) was killed by signal {signal}; "
     "mpirun ended the others"),
]
# The line an agent or perf_tests.runs.network ends with where it cannot start the node's workers
# (a node 0 away from the store's host, no address for the node): the run's own line.
AGENT_LINE = re.compile(r"^rn50-perf: (?P<line>.+)$", re.MULTILINE)
PORT_IN_USE = re.compile(r"address already in use|EADDRINUSE|errno 98", re.IGNORECASE)
# c10d retrying a store whose host name does not resolve where the workers run (one such
# warning alone is a host without IPv6: the IPv4 address then serves).
UNRESOLVED_STORE = re.compile(r"network addresses of \((?P<host>[^,]+), \d+\) cannot be "
                              r"retrieved \(gai error: (?P<error>[^)]*)\)")


@dataclass
class RunOutcome:
    index: int
    outcome: str                  # ok | oom | error
    global_ips: float | None
    message: str                  # one line; empty when ok
    stderr_tail: list[str] = field(default_factory=list)
    record: dict | None = None
    network: dict = field(default_factory=dict)   # rendezvous endpoint, each node's interface
    # A launcher's failure that another launch may not meet: `port-in-use` (the store's port
    # was taken).
    launch_failure: str = ""
    relaunched: bool = False      # ... and it was launched again: not the case's failure
    phases: dict = field(default_factory=dict)   # where its wall time went (runs/phases.py)

    def to_dict(self, case: Case, launcher: str, commands: list[list[str]], elapsed: float) -> dict:
        return {"case_id": case.case_id, "run": self.index, "outcome": self.outcome,
                "global_ips": self.global_ips, "message": self.message,
                "stderr_tail": self.stderr_tail, "launcher": launcher, "commands": commands,
                "launch_seconds": round(elapsed, 3), "finished_at": utc_now(),
                "phases": self.phases, "network": self.network, "record": self.record,
                **({"relaunched": True} if self.relaunched else {})}


def tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    kept = [line for line in text.splitlines() if line.strip()]
    return kept[-lines:]


def marked_lines(paths: list[Path], mark: str) -> list[dict]:
    found = []
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        found += marked_lines_of(text, mark)
    return found


def marked_lines_of(text: str, mark: str) -> list[dict]:
    """The JSON behind `mark` on each line of `text` that starts with it."""
    found = []
    for line in text.splitlines():
        if line.startswith(mark):
            try:
                found.append(json.loads(line[len(mark):]))
            except ValueError:
                pass
    return found


def node_lines(run_dir: Path, stdout_paths: list[Path]) -> list[dict]:
    """Each node's line (perf_tests.runs.network), once: from the launcher's output, which can
    lose a line, and from the files the agents wrote into the run folder where it is theirs too."""
    found = {}
    for path in sorted(run_dir.glob(NODE_FILES)):
        try:
            node = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        found[node.get("host"), node.get("pid")] = node
    for node in marked_lines(stdout_paths, NODE_MARK):
        found.setdefault((node.get("host"), node.get("pid")), node)
    return list(found.values())


def read_failures(run_dir: Path, stdout_paths: list[Path]) -> dict[int, dict]:
    """Failures by rank, from the failure files or, where the folder is not shared, stdout."""
    failures = {}
    for path in sorted(run_dir.glob("rank*.failure.json")):
        try:
            failure = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        failures[int(failure["rank"])] = failure
    for failure in marked_lines(stdout_paths, FAILURE_MARK):
        failures.setdefault(int(failure["rank"]), failure)
    return failures


def signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def assemble_run(index: int, run_dir: Path, launched: LaunchResult, timeout: float) -> RunOutcome:
    """What one launch came to, with one line saying why where it failed."""
    record_path = run_dir / "record.json"
    record = None
    if record_path.exists():
        record = json.loads(record_path.read_text())
    else:
        records = marked_lines(launched.stdout_paths, RECORD_MARK)
        record = records[0] if records else None
    failures = read_failures(run_dir, launched.stdout_paths)
    waited = launched.wait
    clean_exit = not waited.timed_out and all(code == 0 for code in waited.returncodes.values())
    if record is not None and not failures and clean_exit:
        # An interconnect-only run (--perf-collectives) measures no img/s.
        ips = record.get("global_ips")
        return RunOutcome(index, "ok", float(ips) if ips is not None else None, "",
                          record=record)

    agent_errors = "\n".join(path.read_text(errors="replace") for path in launched.stderr_paths
                             if path.exists())
    if not waited.timed_out:
        lost = node_lost(agent_errors)
        if lost:
            return RunOutcome(index, "error", None, f"run {index}: {lost}",
                              tail_of(launched.stderr_paths))
    # A rank killed by a signal writes nothing; its peers then fail on the broken connection
    # and do write. The launcher names the rank that died, which is the cause.
    exits = rank_exits(agent_errors)
    killed = killed_cause(exits, failures)
    if killed is not None:
        rank, code = killed
        return RunOutcome(index, "error", None,
                          f"run {index}: rank {rank} was killed by {signal_name(code)}",
                          rank_tail(run_dir, rank, launched))
    if failures:
        # The earliest failure is the cause; the others are usually peers losing their link.
        rank = min(failures, key=lambda r: (failures[r].get("failed_at", float("inf")), r))
        failure = failures[rank]
        outcome = failure["outcome"]
        what = "ran out of memory" if failure["outcome"] == "oom" else "failed"
        others = sorted(set(failures) - {rank})
        ranks = "rank" if len(others) == 1 else "ranks"
        also = f" ({ranks} {', '.join(map(str, others))} failed too)" if others else ""
        message = (f"run {index}: rank {rank} {what}: {failure['error_type']}: "
                   f"{failure['message']}{also}")
        # Rank 0 binds the store's port itself: one taken since the launcher or the agent
        # found it free is the launcher's failure, not the workload's.
        taken = "port-in-use" if PORT_IN_USE.search(failure["message"]) else ""
        return RunOutcome(index, outcome, None, message, rank_tail(run_dir, rank, launched),
                          launch_failure=taken)

    if waited.timed_out:
        live = "; ".join(waited.live_at_timeout) or "no process found"
        message = (f"run {index}: no result after {timeout:.0f} s (--perf-set timeout); at the "
                   f"timeout: {live}{unresolved_store(agent_errors)}")
        stopped = [re.match(r"rank (\d+)", s) for s in waited.live_at_timeout if "stopped" in s]
        rank = int(stopped[0][1]) if stopped and stopped[0] else None
        return RunOutcome(index, "error", None, message, rank_tail(run_dir, rank, launched))

    if PORT_IN_USE.search(agent_errors):
        return RunOutcome(index, "error", None,
                          f"run {index}: the rendezvous port was in use; pick another with "
                          "--perf-set rdzv-port, or leave it out to use a free one",
                          tail_of(launched.stderr_paths), launch_failure="port-in-use")
    if exits:
        rank, code = exits[0]
        return RunOutcome(index, "error", None, f"run {index}: rank {rank} exited with code "
                          f"{code}", rank_tail(run_dir, rank, launched))
    said = AGENT_LINE.search(agent_errors)
    if said:
        return RunOutcome(index, "error", None, f"run {index}: {said['line']}",
                          tail_of(launched.stderr_paths))
    codes = ", ".join(f"{name} exited with {code}" for name, code in waited.returncodes.items()
                      if code != 0)
    return RunOutcome(index, "error", None,
                      f"run {index}: no record was written ({codes or 'all exited with 0'})",
                      tail_of(launched.stderr_paths))


def killed_cause(exits: list[tuple[int, int]], failures: dict[int, dict]) -> tuple[int, int] | None:
    """(rank, exit code) of the rank a signal killed that ended the run, among the `exits` the
    launcher reported (the cause first), where it wrote no failure of its own; None where none
    did. Not a rank ended by SIGTERM after another failed on its own: the agent ends the
    peers so, and the failure is the cause."""
    for rank, code in exits:
        if code < 0 and rank not in failures and not (failures and code == -signal.SIGTERM):
            return rank, code
    return None


def rank_exits(agent_errors: str) -> list[tuple[int, int]]:
    """(rank, exit code) of each rank the agents (perf_tests/runs/agent.py) report failed: each
    agent's first observed, the earliest first (several nodes' agents, whose outputs are read
    one after the other on one host), then the others. A rank killed by a signal takes its
    peers down with it, and their agents then report them too, as ended by SIGTERM or failed."""
    reported = sorted(marked_lines_of(agent_errors, AGENT_EXIT_MARK),
                      key=lambda exit: (not exit.get("first"), exit.get("at", float("inf"))))
    return [(int(exit["rank"]), int(exit["exitcode"])) for exit in reported]


def unresolved_store(agent_errors: str) -> str:
    """`; the rendezvous store's host vm does not resolve where ...`, where c10d kept retrying
    one; '' where it did not."""
    retries = list(UNRESOLVED_STORE.finditer(agent_errors))
    if len(retries) < 3:
        return ""
    host, error = retries[-1]["host"], retries[-1]["error"]
    return (f"; c10d kept retrying its rendezvous store at {host}, a name that does not resolve "
            f"where the agents run ({error}): add it to their /etc/hosts")


def node_lost(launcher_output: str) -> str | None:
    """The first node the launcher reports lost, in one line; None when it reports none."""
    matches = [(pattern.search(launcher_output), line) for pattern, line in NODE_LOST]
    found = [(match.start(), line.format(**match.groupdict())) for match, line in matches if match]
    return min(found)[1] if found else None


def rank_tail(run_dir: Path, rank: int | None, launched: LaunchResult) -> list[str]:
    if rank is not None:
        lines = tail(run_dir / f"rank{rank}.log")
        if lines:
            return [f"[rank {rank}] {line}" for line in lines]
    return tail_of(launched.stderr_paths)


def tail_of(paths: list[Path]) -> list[str]:
    lines = []
    for path in paths:
        lines.extend(f"[{path.stem}] {line}" for line in tail(path))
    return lines[-TAIL_LINES:]
