"""Two real hosts on this machine, for the multi-node tests: two network namespaces joined by a
veth pair, each with its own private address, hostname and hosts file, so that a process started
on one sees only its own interface and names resolve as they would on that node.

    with TwoHosts(tmp_path / "hosts") as hosts:
        subprocess.run([*hosts.enter(hosts.nodes[1]), "hostname"])     # runs on node 2
        # OpenMPI: OMPI_MCA_plm_rsh_agent=<hosts.rsh_agent> starts remote daemons without ssh

Each node's own name maps to 127.0.1.1 in its own hosts file, as Debian's installer writes it
(and the other node's name to that node's real address): the trap a launcher falls into when it
publishes a hostname instead of an address. Only addresses inside these namespaces are used;
leaving the block ends every process in them and deletes the namespaces and the link.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

# A private /24 that only exists between the two namespaces; each instance takes its own
# third octet, so concurrent instances (pytest -n 2) never share an address.
SUBNET_PREFIX = "10.250"
# Inside each namespace the link has the same name, as a cluster's nodes name their fabric.
LINK_NAME = "fabric0"
COMMAND_TIMEOUT = 30


class HostsUnavailable(RuntimeError):
    """The namespaces could not be made; the message says what is missing or what failed."""


def two_hosts_available() -> str | None:
    """None when this machine can make the two hosts, else the reason (for pytest.skip)."""
    missing = [name for name in ("ip", "nsenter", "unshare", "mount")
               if shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
               is None]
    if missing:
        return (f"two hosts need {', '.join(missing)}; install them with "
                ".ci/install-launchers.sh (Debian: iproute2 util-linux)")
    if os.geteuid() != 0:
        return "two hosts need network namespaces, which only root can make"
    return None


@dataclass(frozen=True)
class Node:
    name: str          # its hostname, and the name the other node resolves to `address`
    address: str
    namespace: str
    holder_pid_file: Path


class TwoHosts:
    """Two hosts; `nodes[0]` is node 1. `enter(node)` is the command prefix that runs a program
    there (its network, hostname and hosts file); `rsh_agent` is that as a script taking the
    host as its first argument, as OpenMPI's plm_rsh_agent calls ssh."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        tag = uuid.uuid4().hex[:6]
        # The third octet from the tag: two instances at once collide with odds 1 in 200.
        subnet = f"{SUBNET_PREFIX}.{int(tag, 16) % 200 + 20}"
        self.tag = tag
        self.nodes = [Node(f"rn50-{tag}-n{index}", f"{subnet}.{index}", f"rn50-{tag}-{index}",
                           self.root / f"n{index}.holder.pid") for index in (1, 2)]
        self.link_ends = (f"rn50{tag}a", f"rn50{tag}b")
        self.rsh_agent = self.root / "enter-host"
        self.holders: list[subprocess.Popen] = []

    # -- life cycle -------------------------------------------------------------------------

    def __enter__(self) -> "TwoHosts":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> None:
        reason = two_hosts_available()
        if reason:
            raise HostsUnavailable(reason)
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            for node in self.nodes:
                self.ip("netns", "add", node.namespace)
            self.ip("link", "add", self.link_ends[0], "type", "veth", "peer", "name",
                    self.link_ends[1])
            for node, end in zip(self.nodes, self.link_ends):
                self.ip("link", "set", end, "netns", node.namespace)
                self.ip("-n", node.namespace, "link", "set", end, "name", LINK_NAME)
                self.ip("-n", node.namespace, "addr", "add", f"{node.address}/24", "dev",
                        LINK_NAME)
                self.ip("-n", node.namespace, "link", "set", LINK_NAME, "up")
                self.ip("-n", node.namespace, "link", "set", "lo", "up")
                self.start_holder(node)
            self.write_rsh_agent()
            self.wait_until_linked()
        except BaseException:
            self.stop()
            raise

    def ip(self, *arguments: str) -> None:
        done = subprocess.run(["ip", *arguments], capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT)
        if done.returncode != 0:
            raise HostsUnavailable(f"ip {' '.join(arguments)} failed: {done.stderr.strip()}")

    def hosts_file(self, node: Node) -> Path:
        return self.root / f"{node.name}.hosts"

    def start_holder(self, node: Node) -> None:
        """A process that holds the node's hostname (UTS namespace) and hosts file (a mount
        namespace with it bound over /etc/hosts) for `enter` to join."""
        lines = ["127.0.0.1 localhost", f"127.0.1.1 {node.name}"]
        lines += [f"{other.address} {other.name}" for other in self.nodes if other != node]
        self.hosts_file(node).write_text("\n".join(lines) + "\n")
        script = ('mount --make-rprivate / && mount --bind "$1" /etc/hosts && hostname "$2" '
                  '&& echo $$ > "$3.partial" && mv "$3.partial" "$3" && exec sleep 86400')
        holder = subprocess.Popen(
            # nsenter, not `ip netns exec`: that mounts a sysfs of its own, without the
            # cgroup folder slurmd looks for.
            ["nsenter", f"--net=/run/netns/{node.namespace}", "unshare", "--uts", "--mount",
             "sh", "-c",
             script, "holder", str(self.hosts_file(node)), node.name,
             str(node.holder_pid_file)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        self.holders.append(holder)
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while not node.holder_pid_file.exists():
            if holder.poll() is not None or time.monotonic() > deadline:
                raise HostsUnavailable(f"the holder of {node.name} did not start: "
                                       f"{holder.stderr.read().decode(errors='replace')[-300:]}")
            time.sleep(0.05)

    def write_rsh_agent(self) -> None:
        """`enter-host HOST COMMAND...`: as `ssh HOST COMMAND...`, the command joined into one
        shell line, run on HOST (a node's name or address)."""
        cases = "\n".join(f"    {node.name}|{node.address}) pid_file={node.holder_pid_file} ;;"
                          for node in self.nodes)
        self.rsh_agent.write_text(f"""#!/bin/sh
# Written by tests/two_hosts.py: enters a test host instead of ssh-ing to it.
host=$1
shift
case "$host" in
{cases}
    *) echo "enter-host: no test host $host" >&2; exit 255 ;;
esac
exec nsenter --target "$(cat "$pid_file")" --net --uts --mount -- sh -c "$*"
""")
        self.rsh_agent.chmod(0o755)

    def wait_until_linked(self) -> None:
        """Node 2 reaches a listener on node 1's address (Python sockets: no ping here)."""
        first, second = self.nodes
        probe = ("import socket,sys;s=socket.socket();s.bind((sys.argv[1],0));s.listen();"
                 "print(s.getsockname()[1],flush=True);s.accept()")
        with subprocess.Popen([*self.enter(first), "python3", "-c", probe, first.address],
                              stdout=subprocess.PIPE, text=True) as listener:
            try:
                port = listener.stdout.readline().strip()
                connect = ("import socket,sys;socket.create_connection((sys.argv[1],"
                           "int(sys.argv[2])),timeout=5)")
                done = subprocess.run([*self.enter(second), "python3", "-c", connect,
                                       first.address, port], capture_output=True, text=True,
                                      timeout=COMMAND_TIMEOUT)
                if done.returncode != 0:
                    raise HostsUnavailable(f"{second.name} cannot reach {first.address}:"
                                           f"{port}: {done.stderr.strip()[-300:]}")
            finally:
                listener.kill()

    def stop(self) -> None:
        """End every process in the namespaces, then delete them (and with them the link)."""
        for node in self.nodes:
            self.end_processes_of(node)
        for holder in self.holders:
            try:
                holder.wait(timeout=COMMAND_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        for node in self.nodes:
            subprocess.run(["ip", "netns", "delete", node.namespace], capture_output=True,
                           timeout=COMMAND_TIMEOUT)
        subprocess.run(["ip", "link", "delete", self.link_ends[0]], capture_output=True,
                       timeout=COMMAND_TIMEOUT)

    # -- using the hosts --------------------------------------------------------------------

    def enter(self, node: Node) -> list[str]:
        pid = node.holder_pid_file.read_text().strip()
        return ["nsenter", "--target", pid, "--net", "--uts", "--mount", "--"]

    def node_named(self, name: str) -> Node:
        return next(node for node in self.nodes if name in (node.name, node.address))

    def processes_on(self, node: Node) -> list[int]:
        """Live processes in the node's network namespace (the holder excluded)."""
        try:
            namespace = os.stat(f"/run/netns/{node.namespace}")
        except OSError:
            return []
        holder = node.holder_pid_file.read_text().strip() if node.holder_pid_file.exists() else ""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or entry == holder:
                continue
            try:
                linked = os.stat(f"/proc/{entry}/ns/net")
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if (linked.st_ino, linked.st_dev) == (namespace.st_ino, namespace.st_dev) \
                    and state != "Z":
                found.append(int(entry))
        return found

    def end_processes_of(self, node: Node) -> None:
        for _ in range(5):
            alive = self.processes_on(node)
            if node.holder_pid_file.exists():
                alive.append(int(node.holder_pid_file.read_text().strip()))
            if not alive:
                return
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            node.holder_pid_file.unlink(missing_ok=True)
            time.sleep(0.2)

    def throttle(self, rate: str | None) -> None:
        """Limit what each node sends over the link to `rate` (tc's token bucket filter, e.g.
        '1gbit'), or lift the limit (None)."""
        for node in self.nodes:
            if rate is None:
                subprocess.run(["tc", "-n", node.namespace, "qdisc", "del", "dev", LINK_NAME,
                                "root"], capture_output=True, timeout=COMMAND_TIMEOUT)
            else:
                done = subprocess.run(
                    ["tc", "-n", node.namespace, "qdisc", "replace", "dev", LINK_NAME, "root",
                     "tbf", "rate", rate, "burst", "256kb", "latency", "50ms"],
                    capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
                if done.returncode != 0:
                    raise HostsUnavailable(f"tc cannot throttle {LINK_NAME} on {node.name}: "
                                           f"{done.stderr.strip()}")

    def set_link(self, node: Node, up: bool) -> None:
        """Take the node's end of the link down (a partition) or bring it back up."""
        self.ip("-n", node.namespace, "link", "set", LINK_NAME, "up" if up else "down")
