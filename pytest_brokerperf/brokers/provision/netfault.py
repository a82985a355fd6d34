"""Network faults on local broker nodes: a network namespace per node, Toxiproxy in front.

Each node of a cluster started with ``network=True`` runs in a Linux network namespace
of its own (``bpn<pid>-<i>``), joined to the host by a veth pair (``bpv<pid>-<i>`` on
the host side) carrying a /30 of ``10.201.0.0/16`` that this run picked and no other
interface uses. Every listener a client or a peer connects to (the KRaft controller's
too) is advertised on the host side of the node's pair, where a Toxiproxy proxy forwards
it into the namespace; so the nodes reach each other through proxies on the host, and
nothing needs the host to forward packets between namespaces (a host whose firewall
drops forwarded packets, as Docker's does, works as well). So:

* ``partition``/node-N: the node's host-side veth is taken down: nothing crosses it,
  in either direction, for clients and peers alike (the KRaft controller traffic
  included); brought up again (and the namespace's default route restored) to heal.
* ``partition``/clients: every client proxy gets a ``timeout`` toxic of 0 (data held,
  never delivered; connections stay open as through a black hole); peers still talk.
* ``delay``: a Toxiproxy ``latency`` toxic (``latency`` ± ``jitter`` ms) on the node's
  proxies (clients' and peers'), downstream: every byte the node sends back over a
  connection made to it is held that long. ``/clients``: on every client proxy.
* ``bandwidth``: ``tc qdisc ... tbf`` on both ends of the node's veth pair (the traffic
  into and out of the node). ``/clients``: the Toxiproxy ``bandwidth`` toxic on every
  client proxy (KB/s, downstream).
* ``loss``: needs ``tc netem`` (or the ``gact`` action's ``netrand``); the probe tells,
  and a run asking for loss on a kernel without either is refused before start.

What was created is registered with the session's watchdog (namespaces; the Toxiproxy
server is a managed process), so a SIGKILLed session leaves nothing behind, and
``brokerperf cleanup --local`` removes what a dead run left. See
docs/reference/faults.md (network faults).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_brokerperf.brokers.provision import watchdog
from pytest_brokerperf.core.errors import ProvisionError

__all__ = [
    "TOXIPROXY_VERSION",
    "ClusterNet",
    "NetProbe",
    "NodeNet",
    "ProxyPair",
    "ToxiproxyServer",
    "leftovers",
    "probe_network",
    "toxiproxy_binary",
]

#: The Toxiproxy release ci/setup.sh builds (``go install``) into the cache.
TOXIPROXY_VERSION = "v2.5.0"
_IP = "ip"
_TC = "tc"
#: no HTTP proxy from the environment between us and the loopback API
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_NS_PREFIX = "bpn"
_VETH_PREFIX = "bpv"


def _run(argv: list[str], *, check: bool = True, timeout: float = 10.0) -> str:
    """Run a short ip/tc command; ProvisionError naming the command when it fails."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                             check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        if check:
            raise ProvisionError(f"{' '.join(argv)} failed: {exc}") from None
        return ""
    if check and out.returncode != 0:
        raise ProvisionError(f"{' '.join(argv)} failed (exit {out.returncode}): "
                             f"{(out.stderr or out.stdout).strip()[:400]}")
    return out.stdout


def toxiproxy_binary() -> Path | None:
    """The Toxiproxy server ci/setup.sh built into the cache, or ``$BROKERPERF_TOXIPROXY``,
    or ``toxiproxy-server`` on PATH; None when there is none."""
    env = os.environ.get("BROKERPERF_TOXIPROXY")
    if env:
        return Path(env) if Path(env).is_file() else None
    from pytest_brokerperf.brokers.provision.maven import cache_root

    built = cache_root() / f"toxiproxy-{TOXIPROXY_VERSION.lstrip('v')}" / "server"
    if built.is_file():
        return built
    found = shutil.which("toxiproxy-server")
    return Path(found) if found else None


@dataclass(frozen=True)
class NetProbe:
    """What this machine can do to a node's network (probed once per session)."""

    netns: bool
    tbf: bool
    netem: bool
    gact_netrand: bool
    toxiproxy: str | None
    #: why a capability is missing, by capability
    missing: dict[str, str] = field(default_factory=dict)

    def problem(self, action: str) -> str | None:
        """Why ``action`` cannot run here, or None."""
        if not self.netns:
            return ("network faults need network namespaces and veth pairs (root and "
                    f"iproute2): {self.missing.get('netns', 'not available')}")
        if self.toxiproxy is None:
            return ("network faults need the Toxiproxy server (the nodes' listeners are "
                    "proxied). Fix: bash ci/setup.sh (builds it with Go into the cache), or "
                    "point BROKERPERF_TOXIPROXY at a toxiproxy-server binary")
        if action == "bandwidth" and not self.tbf:
            return f"bandwidth needs tc's tbf qdisc: {self.missing.get('tbf', '')}"
        if action == "loss" and not (self.netem or self.gact_netrand):
            return ("loss needs packet loss in the kernel, and this kernel has neither tc's "
                    "netem qdisc nor the gact action's random drop ("
                    f"{self.missing.get('netem', '')}; {self.missing.get('gact', '')}); a TCP "
                    "proxy cannot lose packets (TCP retransmits them). Fix: a kernel with "
                    "sch_netem, or use delay/partition instead")
        return None

    def as_info(self) -> dict[str, Any]:
        return asdict(self)


@functools.lru_cache(maxsize=1)
def probe_network() -> NetProbe:
    """Try a namespace, a veth pair, tbf, netem and gact's netrand drop on a scratch pair
    (removed again); the result is cached for the session."""
    missing: dict[str, str] = {}
    toxi = toxiproxy_binary()
    tag = f"{os.getpid() % 100000}"
    ns, veth = f"bpprobe{tag}", f"bpq{tag}"
    netns = tbf = netem = gact = False
    if shutil.which(_IP) is None or shutil.which(_TC) is None:
        missing["netns"] = "ip/tc (iproute2) not found"
        return NetProbe(False, False, False, False, str(toxi) if toxi else None, missing)
    watchdog.track_netns(ns, veth)  # gone even if the session dies while probing
    try:
        _run([_IP, "netns", "add", ns])
        _run([_IP, "link", "add", veth, "type", "veth", "peer", "name", f"{veth}p",
              "netns", ns])
        netns = True
        _run([_IP, "link", "set", veth, "up"])
    except ProvisionError as exc:
        missing["netns"] = str(exc)
    if netns:
        for kind, argv in (
                ("tbf", [_TC, "qdisc", "add", "dev", veth, "root", "tbf", "rate", "10mbit",
                         "burst", "32kbit", "latency", "400ms"]),
                ("netem", [_TC, "qdisc", "add", "dev", veth, "root", "netem", "delay",
                           "10ms"])):
            try:
                _run([_TC, "qdisc", "del", "dev", veth, "root"], check=False)
                _run(argv)
                if kind == "tbf":
                    tbf = True
                else:
                    netem = True
            except ProvisionError as exc:
                missing[kind] = str(exc)
        try:
            _run([_TC, "qdisc", "add", "dev", veth, "clsact"])
            _run([_TC, "filter", "add", "dev", veth, "egress", "protocol", "ip", "u32",
                  "match", "u32", "0", "0", "action", "gact", "ok", "random", "netrand",
                  "drop", "50"])
            gact = True
        except ProvisionError as exc:
            missing["gact"] = str(exc)
    _run([_IP, "link", "del", veth], check=False)
    _run([_IP, "netns", "del", ns], check=False)
    watchdog.untrack_netns(ns, veth)
    return NetProbe(netns, tbf, netem, gact, str(toxi) if toxi else None, missing)


# -- Toxiproxy -----------------------------------------------------------------------


class ToxiproxyServer:
    """One ``toxiproxy-server`` on loopback, driven over its HTTP API."""

    def __init__(self, binary: Path, port: int, log_file: Path) -> None:
        from pytest_brokerperf.brokers.provision.process import ManagedProcess

        self.port = port
        self.api = f"http://127.0.0.1:{port}"
        self.proc = ManagedProcess([str(binary), "-host", "127.0.0.1", "-port", str(port)],
                                   log_file=log_file, name="toxiproxy")

    def start(self, timeout: float = 15.0) -> None:
        self.proc.start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.request("GET", "/version")
                return
            except ProvisionError:
                if time.monotonic() > deadline or not self.proc.alive():
                    raise ProvisionError(f"the Toxiproxy server did not answer on {self.api} "
                                         f"within {timeout:g} s:\n{self.proc.log_tail(20)}"
                                         ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.stop(timeout=5.0)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with _OPENER.open(req, timeout=5.0) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise ProvisionError(f"Toxiproxy {method} {path}: HTTP {exc.code} "
                                 f"{exc.read().decode(errors='replace')[:300]}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ProvisionError(f"Toxiproxy {method} {path}: {exc}") from None
        try:
            return json.loads(text) if text else None
        except ValueError:
            return text  # /version answers in plain text

    def add_proxy(self, name: str, listen: str, upstream: str) -> None:
        self.request("POST", "/proxies", {"name": name, "listen": listen,
                                          "upstream": upstream, "enabled": True})

    def add_toxic(self, proxy: str, name: str, kind: str, attributes: dict[str, int],
                  stream: str = "downstream") -> None:
        self.request("POST", f"/proxies/{proxy}/toxics",
                     {"name": name, "type": kind, "stream": stream, "toxicity": 1.0,
                      "attributes": attributes})

    def remove_toxic(self, proxy: str, name: str) -> None:
        self.request("DELETE", f"/proxies/{proxy}/toxics/{name}")


@dataclass(frozen=True)
class ProxyPair:
    """One proxied listener of a node: Toxiproxy's name, the host-side address it listens
    on, the namespace address it forwards to, and whether clients (not peers) use it."""

    name: str
    listen_host: str
    port: int
    upstream_host: str
    clients: bool


@dataclass
class NodeNet:
    """One node's namespace and veth pair."""

    index: int
    netns: str
    veth: str
    host_addr: str  # the host side of the pair: where the node's proxies listen
    node_addr: str  # inside the namespace: where the node binds
    proxies: list[ProxyPair] = field(default_factory=list)
    partitioned: bool = False
    shaped: bool = False


def _used_subnets() -> set[int]:
    """Third octets of the 10.201.x.0/24 nets any interface on the host already uses."""
    text = _run([_IP, "-o", "-4", "addr", "show"], check=False)
    return {int(m) for m in re.findall(r"inet 10\.201\.(\d+)\.", text)}


class ClusterNet:
    """The namespaces, veth pairs and proxies of one local cluster (``nodes`` nodes)."""

    def __init__(self, nodes: int, workdir: Path, probe: NetProbe) -> None:
        self.probe = probe
        self.workdir = workdir
        self.nodes: list[NodeNet] = []
        self.server: ToxiproxyServer | None = None
        self._count = nodes
        self.toxics: dict[str, list[str]] = {}  # proxy name -> toxic names in force

    @property
    def mechanism(self) -> dict[str, str]:
        """Which mechanism each fault kind runs with here (the record and the manifest)."""
        return {
            "partition/node": "veth link down (namespace per node)",
            "partition/clients": "toxiproxy timeout toxic (0) on every client proxy",
            "delay": ("toxiproxy latency toxic (downstream) on the node's client and peer "
                      "proxies"),
            "bandwidth/node": "tc tbf on both ends of the node's veth pair",
            "bandwidth/clients": "toxiproxy bandwidth toxic on every client proxy",
            "loss": ("tc netem loss" if self.probe.netem
                     else "gact netrand drop" if self.probe.gact_netrand
                     else "unavailable on this kernel (no netem, no gact)"),
        }

    def info(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "probe": self.probe.as_info(),
                "nodes": [{"node": n.index, "netns": n.netns, "veth": n.veth,
                           "host_addr": n.host_addr, "node_addr": n.node_addr,
                           "proxies": [asdict(p) for p in n.proxies]} for n in self.nodes],
                "toxiproxy_api": self.server.api if self.server else None}

    def create(self) -> None:
        """The namespaces and veth pairs (registered with the watchdog first)."""
        problem = self.probe.problem("partition")
        if problem:
            raise ProvisionError(problem)
        used = _used_subnets()
        third = next((x for x in [(os.getpid() + k) % 250 + 1 for k in range(250)]
                      if x not in used), None)
        if third is None:
            raise ProvisionError("no free 10.201.x.0/24 subnet for the nodes' veth pairs")
        tag = os.getpid() % 10_000_000
        for i in range(1, self._count + 1):
            ns, veth = f"{_NS_PREFIX}{tag}-{i}", f"{_VETH_PREFIX}{tag}-{i}"
            host, node = f"10.201.{third}.{4 * i + 1}", f"10.201.{third}.{4 * i + 2}"
            watchdog.track_netns(ns, veth)
            _run([_IP, "netns", "add", ns])
            nn = NodeNet(i, ns, veth, host, node)
            self.nodes.append(nn)
            _run([_IP, "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                  "netns", ns])
            _run([_IP, "addr", "add", f"{host}/30", "dev", veth])
            _run([_IP, "link", "set", veth, "up"])
            self._ns(nn, [_IP, "addr", "add", f"{node}/30", "dev", "eth0"])
            self._ns(nn, [_IP, "link", "set", "lo", "up"])
            self._ns(nn, [_IP, "link", "set", "eth0", "up"])
            self._ns(nn, [_IP, "route", "add", "default", "via", host])

    def _ns(self, nn: NodeNet, argv: list[str], check: bool = True) -> str:
        return _run([_IP, "netns", "exec", nn.netns, *argv], check=check)

    def exec_prefix(self, index: int) -> list[str]:
        """What to put before a node's argv so that it runs in its namespace."""
        ip = shutil.which(_IP) or _IP
        return [ip, "netns", "exec", self.nodes[index - 1].netns]

    def start_proxies(self, api_port: int, pairs: dict[int, list[ProxyPair]]) -> None:
        """The Toxiproxy server and each node's proxies (node index -> its listeners)."""
        assert self.probe.toxiproxy is not None
        self.server = ToxiproxyServer(Path(self.probe.toxiproxy), api_port,
                                      self.workdir / "logs" / "toxiproxy.log")
        self.server.start()
        for index, plist in pairs.items():
            nn = self.nodes[index - 1]
            nn.proxies = list(plist)
            for p in plist:
                self.server.add_proxy(p.name, f"{p.listen_host}:{p.port}",
                                      f"{p.upstream_host}:{p.port}")

    def destroy(self) -> None:
        """Remove every proxy, qdisc, veth pair and namespace this cluster made."""
        if self.server is not None:
            with contextlib.suppress(ProvisionError):
                self.server.stop()
            self.server = None
        for nn in self.nodes:
            _run([_IP, "link", "del", nn.veth], check=False)
            _run([_IP, "netns", "del", nn.netns], check=False)
            watchdog.untrack_netns(nn.netns, nn.veth)
        self.nodes = []

    # -- the faults ---------------------------------------------------------------

    def _node(self, index: int) -> NodeNet:
        if not 1 <= index <= len(self.nodes):
            raise ProvisionError(f"the cluster has {len(self.nodes)} node(s); there is no "
                                 f"node {index}")
        return self.nodes[index - 1]

    def _client_proxies(self) -> list[str]:
        return [p.name for nn in self.nodes for p in nn.proxies if p.clients]

    def _toxic(self, proxies: list[str], name: str, kind: str,
               attributes: dict[str, int]) -> None:
        assert self.server is not None
        for p in proxies:
            self.server.add_toxic(p, name, kind, attributes)
            self.toxics.setdefault(p, []).append(name)

    def apply(self, action: str, index: int | None, amount: dict[str, float]) -> str:
        """Start ``action`` on node ``index`` (None: the clients); what was done."""
        if action == "partition":
            if index is None:
                self._toxic(self._client_proxies(), "bp-partition", "timeout", {"timeout": 0})
                return "timeout toxic (0: data held, never delivered) on every client proxy"
            nn = self._node(index)
            _run([_IP, "link", "set", nn.veth, "down"])
            nn.partitioned = True
            return f"{nn.veth} down: {nn.netns} ({nn.node_addr}) cut from clients and peers"
        if action == "delay":
            ms, jitter = int(amount["delay_ms"]), int(amount.get("jitter_ms", 0))
            names = (self._client_proxies() if index is None
                     else [p.name for p in self._node(index).proxies
                           if not p.name.endswith("-controller")])
            self._toxic(names, "bp-delay", "latency", {"latency": ms, "jitter": jitter})
            return f"latency toxic {ms} ms ± {jitter} ms (downstream) on {', '.join(names)}"
        if action == "bandwidth":
            kbit = int(amount["kbit_s"])
            if index is None:
                rate = max(1, kbit // 8)  # Toxiproxy's bandwidth toxic counts KB/s
                self._toxic(self._client_proxies(), "bp-bandwidth", "bandwidth",
                            {"rate": rate})
                return f"bandwidth toxic {rate} KB/s on every client proxy"
            nn = self._node(index)
            burst = max(32, kbit // 80)  # kbit: 100 ms' worth at HZ-independent rates
            tbf = ["tbf", "rate", f"{kbit}kbit", "burst", f"{burst}kbit", "latency", "200ms"]
            _run([_TC, "qdisc", "replace", "dev", nn.veth, "root", *tbf])
            self._ns(nn, [_TC, "qdisc", "replace", "dev", "eth0", "root", *tbf])
            nn.shaped = True
            return f"tc tbf rate {kbit}kbit burst {burst}kbit on {nn.veth} and its peer"
        if action == "loss":
            pct = amount["loss_pct"]
            if not self.probe.netem:
                raise ProvisionError(self.probe.problem("loss") or "loss: no mechanism")
            struck = [self._node(index)] if index is not None else list(self.nodes)
            for nn in struck:
                _run([_TC, "qdisc", "replace", "dev", nn.veth, "root", "netem", "loss",
                      f"{pct:g}%"])
                self._ns(nn, [_TC, "qdisc", "replace", "dev", "eth0", "root", "netem",
                              "loss", f"{pct:g}%"])
                nn.shaped = True
            return f"tc netem loss {pct:g}% on {', '.join(n.veth for n in struck)}"
        raise ProvisionError(f"unknown network fault {action!r}")

    def heal(self) -> str:
        """Undo every network fault in force; what was undone."""
        done: list[str] = []
        for proxy, names in list(self.toxics.items()):
            for name in names:
                with contextlib.suppress(ProvisionError):
                    assert self.server is not None
                    self.server.remove_toxic(proxy, name)
            done.append(f"toxics {', '.join(names)} off {proxy}")
        self.toxics = {}
        for nn in self.nodes:
            if nn.partitioned:
                _run([_IP, "link", "set", nn.veth, "up"])
                # the namespace lost its default route with the link: give it back
                self._ns(nn, [_IP, "route", "replace", "default", "via", nn.host_addr])
                nn.partitioned = False
                done.append(f"{nn.veth} up")
            if nn.shaped:
                _run([_TC, "qdisc", "del", "dev", nn.veth, "root"], check=False)
                self._ns(nn, [_TC, "qdisc", "del", "dev", "eth0", "root"], check=False)
                nn.shaped = False
                done.append(f"qdisc off {nn.veth}")
        return "; ".join(done) or "nothing in force"


def leftovers(prefix_tag: str | None = None) -> dict[str, list[str]]:
    """The namespaces and host veths whose names this project uses (``bpn``/``bpv``),
    optionally of one owner pid's tag: what a test checks is gone."""
    ns = [line.split()[0] for line in _run([_IP, "netns", "list"], check=False).splitlines()
          if line.startswith(_NS_PREFIX)]
    links = re.findall(r"^\d+: (bpv[0-9]+-[0-9]+)[@:]",
                       _run([_IP, "-o", "link", "show"], check=False), flags=re.M)
    if prefix_tag is not None:
        ns = [n for n in ns if n.startswith(f"{_NS_PREFIX}{prefix_tag}-")]
        links = [x for x in links if x.startswith(f"{_VETH_PREFIX}{prefix_tag}-")]
    return {"netns": ns, "veth": links}
