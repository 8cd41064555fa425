"""Where the nodes of a multi-node run meet: the address the workers' store is published on (node
0's, the "rendezvous"), and the interface each node's collectives (gloo, NCCL) bind to. Both are
chosen, never guessed from a hostname: a node's own name often resolves to a loopback address on
that node (Debian writes `127.0.1.1 <hostname>` into /etc/hosts), which no other node can reach.

The launcher (on the first node) picks the rendezvous address: the first node's address on the
interface that reaches the others. On every node, `python -m perf_tests.runs.network` runs before
the node's agent (perf_tests/runs/agent.py): it finds the local address that reaches that
rendezvous address and the interface holding it, sets GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME
to it unless the user set them, tells the agent whether this host holds the store (node 0's must:
the agent checks), prints one `RN50_NODE {...}` line for the run record (and, where the run folder
is on this node too, writes it there: a launcher's forwarded output can lose a line), and becomes
the agent. Standard library only: it runs on nodes where pytest is not imported.
"""
from __future__ import annotations

import argparse
import fcntl
import ipaddress
import json
import os
import socket
import struct
import sys
from pathlib import Path

NODE_MARK = "RN50_NODE "
NODE_FILES = "node-*.json"   # in the run folder: node-<host>-<pid>.json
SOCKET_IFNAME_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
LOOPBACK = "127.0.0.1"
SIOCGIFADDR = 0x8915
# Any port will do: connecting a UDP socket only asks the kernel for a route, nothing is sent.
ROUTE_PROBE_PORT = 9


class NetworkError(Exception):
    """No usable address for a node: one line naming the node and what to set."""


def interface_addresses() -> dict[str, str]:
    """IPv4 address of each interface of this host that has one (name -> address)."""
    found = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                answer = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, request)
            except OSError:
                continue
            found[name] = socket.inet_ntoa(answer[20:24])
    return found


def resolve(name: str) -> str:
    """The IPv4 address `name` resolves to on this host."""
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (socket.gaierror, IndexError):
        raise NetworkError(f"node {name} does not resolve to an IPv4 address on "
                           f"{socket.gethostname()}; list nodes by address, or add it to "
                           "/etc/hosts or DNS") from None


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


def route_source(address: str) -> str:
    """This host's address on the route to `address` (the kernel's choice; nothing is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((address, ROUTE_PROBE_PORT))
        except OSError as error:
            raise NetworkError(f"{socket.gethostname()} has no route to {address} "
                               f"({error.strerror})") from None
        return probe.getsockname()[0]


def interface_of(address: str) -> str | None:
    if is_loopback(address):
        return "lo"
    return next((name for name, held in interface_addresses().items() if held == address), None)


def is_this_host(name: str) -> bool:
    if name in {"localhost", socket.gethostname(), socket.gethostname().split(".")[0],
                socket.getfqdn()}:
        return True
    try:
        address = resolve(name)
    except NetworkError:
        return False
    return is_loopback(address) or address in interface_addresses().values()


def rendezvous_address(first: str, others: list[str]) -> tuple[str, str]:
    """The address the first node publishes the rendezvous on, and how it was chosen.

    `first` and `others` are node names or addresses; all on this host gives the loopback."""
    peers = [other for other in others if other != first]
    if not peers or all(is_this_host(node) for node in [first, *peers]):
        return LOOPBACK, "every node is this host"
    try:
        if not is_loopback(first):
            return first, f"the address of {first}"
    except ValueError:
        pass   # a name, not an address
    if is_this_host(first):
        peer_address = resolve(peers[0])
        address = route_source(peer_address)
        return address, (f"this host's address on {interface_of(address) or 'the interface'} "
                         f"that reaches {peers[0]} ({peer_address})")
    address = resolve(first)
    if is_loopback(address):
        raise NetworkError(f"node {first} resolves to {address} on {socket.gethostname()}, a "
                           "loopback address the other nodes cannot reach; run the suite on "
                           f"{first}, or list the nodes by address")
    return address, f"{first} as it resolves on {socket.gethostname()}"


def describe_node(rendezvous_host: str, environ: dict[str, str]) -> dict:
    """This node's side of the run: its address towards the rendezvous, the interface holding
    it, and the socket interfaces the collectives will use (the user's where set)."""
    address = LOOPBACK if is_loopback(rendezvous_host) else route_source(rendezvous_host)
    interface = interface_of(address)
    node = {"host": socket.gethostname(), "address": address, "interface": interface,
            "hosts_rendezvous": address == rendezvous_host, "set_by_user": [],
            "pid": os.getpid()}
    for variable in SOCKET_IFNAME_VARIABLES:
        if environ.get(variable):
            node["set_by_user"].append(variable)
            node[variable] = environ[variable]
        else:
            node[variable] = interface
    return node


SUITE_AGENT = "perf_tests.runs.agent"


def agent_command(node: dict, agent: list[str]) -> list[str]:
    """The node's agent (`python -m perf_tests.runs.agent ...`) told whether this host holds the
    store: node 0 must, however many agents share its host."""
    at = agent.index(SUITE_AGENT) + 1
    return [*agent[:at], "--hosts-store", "yes" if node["hosts_rendezvous"] else "no",
            *agent[at:]]


def write_node_file(run_dir: Path, node: dict) -> None:
    """The node's line as a file in the run folder, where that folder is on this node (a shared
    file system, or simulated nodes); nothing where it is not."""
    if not run_dir.is_dir():
        return
    path = run_dir / f"node-{node['host']}-{node['pid']}.json"
    try:
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(node))
        os.replace(partial, path)
    except OSError:
        pass  # the line on stdout still carries it


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m perf_tests.runs.network",
        description="Start this node's agent with a chosen address and interface.")
    parser.add_argument("--rendezvous-host", required=True,
                        help="the address the first node publishes the rendezvous on")
    parser.add_argument("--run-dir", help="the run's folder: where it exists on this node, "
                        "the node's line is also written there")
    parser.add_argument("agent", nargs=argparse.REMAINDER,
                        help=f"-- python -m {SUITE_AGENT} ...")
    arguments = parser.parse_args(argv)
    agent = arguments.agent[1:] if arguments.agent[:1] == ["--"] else arguments.agent
    if SUITE_AGENT not in agent:
        parser.error(f"give the agent's command after --: python -m {SUITE_AGENT} ...")
    environ = dict(os.environ)
    try:
        node = describe_node(arguments.rendezvous_host, environ)
    except NetworkError as error:
        print(f"rn50-perf: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    for variable in SOCKET_IFNAME_VARIABLES:
        if node[variable]:
            environ[variable] = node[variable]
    print(NODE_MARK + json.dumps(node), flush=True)
    if arguments.run_dir:
        write_node_file(Path(arguments.run_dir), node)
    command = agent_command(node, agent)
    os.execvpe(command[0], command, environ)


if __name__ == "__main__":
    main()
