#!/usr/bin/env python3
"""A simulated fleet: one test API server and N nodes' plugin pairs.

One test API server on loopback (tests/apiserver) and, per node, a GPU
plugin and a ComputeDomain plugin: the real binaries on mock hardware
(h100x8 and gb200x4), each with its own directories, boot id, node name
and kubeconfig, and the plugins' default flags (reconcile period, client
rate limit, log verbosity), since their idle API traffic is what is
measured. Each plugin's kubeconfig carries a bearer token naming it
("<node>/gpu", "<node>/cd"), which the test API server counts requests and
watches under. The ComputeDomains of the cluster (one per group of nodes,
every node Ready in its domain and clique) are there before the plugins
start.

Measured:

  * idle, for --idle-seconds after every plugin registered and published
    its ResourceSlices: API requests per node per hour, split by plugin
    and by verb and resource; watches held per node (sampled every few
    seconds); RSS, PSS and threads of all plugins; the API server's RSS
    and threads;
  * a wave of --claims claims spread evenly over the nodes (per node:
    --cd-claims-per-node ComputeDomain channel claims, the rest single-GPU
    claims), allocated and reserved for a pod as the scheduler leaves them,
    prepared as the kubelets would (per node one `nvdractl cycle` per
    plugin, the node's claims together; all nodes at once), checked in
    every ledger, then unprepared the same way and checked again: API
    server requests per second during each half, prepare and unprepare
    latency p50/p99 over all claims, RSS after.

Prints a table, then a JSON summary (also to --json-out). Latency on a
loaded machine says little; the request and watch counts do not depend on
the load.

Usage (after scripts/build):  python3 bench/fleet_bench.py [--quick]
"""

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
sys.path.insert(0, HERE)

import localnode  # noqa: E402
from localnode import BIN, BINARIES, CD_DRIVER, GPU_DRIVER, make_claim, opaque_config, wait_for  # noqa: E402
from node_bench import h100, proc_figures  # noqa: E402

GPU_PROFILE_GPUS = 8  # the built-in h100x8
CD_PROFILE = "gb200x4"
# The gb200x4 mock profile's NVLink clique.
CLIQUE = "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90.32766"
SHORT = {GPU_DRIVER: "gpu", CD_DRIVER: "cd"}
WATCH_SAMPLE_S = 5.0


class FleetPlugin:
    """One plugin process of a fleet node, with its own kubeconfig (token)."""

    def __init__(self, node, driver, profile, base_kubeconfig):
        self.node = node
        self.driver = driver
        self.profile = profile
        self.client = "%s/%s" % (node.name, SHORT[driver])
        self.kubeconfig = os.path.join(node.dir, SHORT[driver] + ".kubeconfig")
        cfg = json.loads(json.dumps(base_kubeconfig))
        cfg["users"][0]["user"]["token"] = self.client
        with open(self.kubeconfig, "w") as f:
            json.dump(cfg, f)
        self.log_path = os.path.join(node.dir, SHORT[driver] + ".log")
        self.proc = None

    @property
    def plugin_dir(self):
        return os.path.join(self.node.plugins_dir, self.driver)

    @property
    def dra_socket(self):
        return os.path.join(self.plugin_dir, "dra.sock")

    @property
    def reg_socket(self):
        return os.path.join(self.node.registry_dir, "%s-reg.sock" % self.driver)

    def start(self):
        # Only what a node's DaemonSet sets per node: everything else
        # (reconcile period, QPS, verbosity) keeps the plugin's default.
        args = [os.path.join(BIN, BINARIES[self.driver]),
                "--node-name", self.node.name,
                "--kubeconfig", self.kubeconfig,
                "--cdi-root", self.node.cdi_root,
                "--kubelet-plugins-directory-path", self.node.plugins_dir,
                "--kubelet-registrar-directory-path", self.node.registry_dir,
                "--mock-hardware", self.profile,
                "--mock-state-dir", os.path.join(self.node.dir, "mock-" + SHORT[self.driver]),
                "--boot-id-path", self.node.boot_id_path]
        env = dict(os.environ)
        env.pop("NVDRA_FAILPOINTS", None)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def registered(self):
        if self.proc.poll() is not None:
            with open(self.log_path) as f:
                raise RuntimeError("%s exited with %s; log:\n%s" % (self.client, self.proc.returncode, f.read()[-4000:]))
        if not (os.path.exists(self.reg_socket) and os.path.exists(self.dra_socket)):
            return False
        r = subprocess.run([os.path.join(BIN, "nvdractl"), "register", "--socket", self.reg_socket],
                           capture_output=True, text=True, timeout=60)
        return r.returncode == 0

    def ledger(self):
        r = subprocess.run([os.path.join(BIN, "nvdractl"), "ledger", "show", "--json", self.plugin_dir],
                           capture_output=True, text=True, timeout=60, check=True)
        return json.loads(r.stdout).get("claims", [])


class FleetNode(localnode.NodeDirs):
    """A node's directories (as the kubelet's and the host's) and its two plugins."""

    def __init__(self, root, index, base_kubeconfig, gpu_profile):
        self.name = "fleet-node-%03d" % index
        self.dir = os.path.join(root, "n%03d" % index)  # short: socket paths have 107 bytes
        localnode.NodeDirs.__init__(self, self.dir)
        self.gpu = FleetPlugin(self, GPU_DRIVER, gpu_profile, base_kubeconfig)
        self.cd = FleetPlugin(self, CD_DRIVER, CD_PROFILE, base_kubeconfig)
        self.plugins = (self.gpu, self.cd)
        self.claims = {GPU_DRIVER: [], CD_DRIVER: []}  # "ns/name/uid"


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def stats(api, clear=False):
    status, body = api.request("POST", "/_nvdra/stats", {"clear": clear})
    assert status == 200, body
    return body


def start_fleet(nodes, api, batch):
    """Starts the plugins `batch` nodes at a time, each batch registered before the next."""
    t0 = time.monotonic()
    for k in range(0, len(nodes), batch):
        group = nodes[k:k + batch]
        for n in group:
            for p in n.plugins:
                p.start()
        pending = [p for n in group for p in n.plugins]

        def all_registered():
            pending[:] = [p for p in pending if not p.registered()]
            return not pending
        wait_for(all_registered, timeout=120 + 10 * batch, what="plugins of nodes %d..%d to register"
                 % (k, k + len(group) - 1))
        print("  %d/%d nodes registered (%.0f s)" % (k + len(group), len(nodes), time.monotonic() - t0), flush=True)
    want = {(d, n.name) for n in nodes for d in (GPU_DRIVER, CD_DRIVER)}

    def published():
        have = {(s["spec"]["driver"], s["spec"].get("nodeName")) for s in api.slices()}
        return want <= have
    wait_for(published, timeout=300, what="every node's ResourceSlices")
    return time.monotonic() - t0


def wait_quiet(api, clients, timeout=120):
    """Waits until every ComputeDomain plugin holds its watches and the open
    watches stayed the same for two samples a second apart."""
    cds = [c for c in clients if c.endswith("/cd")]
    last = [None]

    def quiet():
        w = stats(api)["open_watches"]
        now = sorted((c, sum(v.values())) for c, v in w.items())
        held = all(w.get(c) for c in cds)
        same = now == last[0]
        last[0] = now
        if not (held and same):
            time.sleep(1.0)  # pacing between samples, not synchronisation
        return held and same
    wait_for(quiet, timeout=timeout, what="the fleet's watches to settle")


def footprint(nodes):
    out = {}
    for driver in (GPU_DRIVER, CD_DRIVER):
        figs = [proc_figures(n.gpu.proc.pid if driver == GPU_DRIVER else n.cd.proc.pid) for n in nodes]
        out[SHORT[driver]] = {
            "rss_kib_total": sum(f["VmRSS"] for f in figs),
            "rss_kib_median": statistics.median(f["VmRSS"] for f in figs),
            "pss_kib_total": sum(f["Pss"] or 0 for f in figs),
            "anon_kib_total": sum(f["RssAnon"] for f in figs),
            "threads_total": sum(f["Threads"] for f in figs),
            "threads_median": statistics.median(f["Threads"] for f in figs),
        }
    out["all"] = {k: out["gpu"][k] + out["cd"][k] for k in ("rss_kib_total", "pss_kib_total", "anon_kib_total",
                                                               "threads_total")}
    return out


def split_requests(snapshot, nodes):
    """{plugin: {"verb resource": count}} summed over the fleet's clients, and the total per plugin."""
    by = {"gpu": {}, "cd": {}, "other": {}}
    names = {p.client: SHORT[p.driver] for n in nodes for p in n.plugins}
    for client, verbs in snapshot["requests"].items():
        key = names.get(client, "other")
        for verb, per in verbs.items():
            for res, count in per.items():
                k = "%s %s" % (verb, res)
                by[key][k] = by[key].get(k, 0) + count
    return by


def idle_phase(api, nodes, seconds):
    """Counts requests and samples open watches for `seconds`."""
    clients = [p.client for n in nodes for p in n.plugins]
    stats(api, clear=True)
    t0 = time.monotonic()
    samples = []
    while True:
        s = stats(api)
        per_node = {}
        by_resource = {}
        for c in clients:
            w = s["open_watches"].get(c, {})
            node = c.rsplit("/", 1)[0]
            per_node[node] = per_node.get(node, 0) + sum(w.values())
            for r, k in w.items():
                key = "%s %s" % (c.rsplit("/", 1)[1], r)
                by_resource[key] = by_resource.get(key, 0) + k
        samples.append({"per_node": per_node, "by_resource": by_resource, "api_threads": s["threads"]})
        left = t0 + seconds - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(WATCH_SAMPLE_S, left))  # the measurement window, not synchronisation
    elapsed = time.monotonic() - t0
    snap = stats(api)
    by = split_requests(snap, nodes)
    n = len(nodes)
    per_hour = 3600.0 / elapsed / n
    watch_counts = [v for smp in samples for v in smp["per_node"].values()]
    by_resource = {}
    for smp in samples:
        for k, v in smp["by_resource"].items():
            by_resource.setdefault(k, []).append(v / n)
    return {
        "seconds": elapsed,
        "requests_total": snap["total"],
        "requests_per_node_hour": sum(sum(v.values()) for k, v in by.items() if k != "other") * per_hour,
        "requests_per_node_hour_by_plugin": {k: sum(v.values()) * per_hour for k, v in by.items() if k != "other"},
        "requests_per_node_hour_by_verb": {k: {vr: c * per_hour for vr, c in sorted(v.items())}
                                           for k, v in by.items() if k != "other"},
        "requests_other": by["other"],
        "watches_per_node": {"min": min(watch_counts), "median": statistics.median(watch_counts),
                             "max": max(watch_counts), "samples": len(samples)},
        "watches_per_node_by_resource": {k: statistics.median(v) for k, v in sorted(by_resource.items())},
        "watch_requests_per_node_hour": sum(c for k, v in by.items() if k != "other"
                                            for vr, c in v.items() if vr.startswith("watch ")) * per_hour,
        "api_threads_max": max(s["api_threads"] for s in samples),
    }


def make_domains(api, nodes, per_domain):
    """One ComputeDomain per `per_domain` nodes, every node Ready in it and in
    its clique (in the plugins' namespace, "default"), as the controller
    and the IMEX daemons leave them. Returns {node name: domain uid}."""
    objs, of = [], {}
    for k in range(0, len(nodes), per_domain):
        group = nodes[k:k + per_domain]
        uid = str(uuid.uuid4())
        name = "fleet-cd-%03d" % (k // per_domain)
        objs.append({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                     "metadata": {"name": name, "namespace": "default", "uid": uid},
                     "spec": {"numNodes": len(group), "channel": {"resourceClaimTemplate": {"name": name + "-channel"}}},
                     "status": {"status": "Ready",
                                "nodes": [{"name": n.name, "status": "Ready", "cliqueID": CLIQUE,
                                           "ipAddress": "10.0.%d.%d" % (i // 250, i % 250 + 1), "index": i}
                                          for i, n in enumerate(group)]}})
        objs.append({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainClique",
                     "metadata": {"name": "%s.%s" % (uid, CLIQUE), "namespace": "default"},
                     "daemons": [{"nodeName": n.name, "cliqueID": CLIQUE, "index": i, "status": "Ready",
                                  "ipAddress": "10.0.%d.%d" % (i // 250, i % 250 + 1)} for i, n in enumerate(group)]})
        for n in group:
            of[n.name] = uid
    api.load(objs)
    return of


def make_wave(api, nodes, claims, cd_per_node, domains):
    """The wave's claims, spread evenly over the nodes, loaded into the API server."""
    objs = []
    for i in range(claims):
        n = nodes[i % len(nodes)]
        k = i // len(nodes)  # the claim's index on its node
        name = "w-%s-%d" % (n.name, k)
        pod = [("pod-" + name, str(uuid.uuid4()))]
        if k < cd_per_node:
            params = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
                      "domainID": domains[n.name]}
            c = make_claim(name, [{"request": "channel", "driver": CD_DRIVER, "pool": n.name,
                                   "device": "channel-%d" % k}],
                           configs=[opaque_config(CD_DRIVER, params, requests=["channel"])], reserved_for=pod)
            driver = CD_DRIVER
        else:
            c = make_claim(name, [{"request": "gpu", "driver": GPU_DRIVER, "pool": n.name,
                                   "device": "gpu-%d" % (k - cd_per_node)}], reserved_for=pod)
            driver = GPU_DRIVER
        objs.append(c)
        n.claims[driver].append("default/%s/%s" % (name, c["metadata"]["uid"]))
    for k in range(0, len(objs), 500):
        api.load(objs[k:k + 500])
    return len(objs)


def run_half(nodes, flag):
    """One half of the wave: per node and plugin one `nvdractl cycle` with the
    node's claims together, all nodes at once. Returns (seconds, results)."""
    procs = []
    t0 = time.monotonic()
    for n in nodes:
        for p in n.plugins:
            refs = n.claims[p.driver]
            if not refs:
                continue
            cmd = [os.path.join(BIN, "nvdractl"), "cycle", "--socket", p.dra_socket, flag, "--samples",
                   "--concurrency", str(len(refs))] + refs
            procs.append((p, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    results = []
    for p, proc in procs:
        out, err = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError("%s: nvdractl cycle %s failed (%d): %s%s" % (p.client, flag, proc.returncode,
                                                                            out[-2000:], err[-2000:]))
        results.append((p, json.loads(out)))
    return time.monotonic() - t0, results


def quantiles(ms):
    ms = sorted(ms)
    if not ms:
        return None
    at = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731 (as nvdractl cycle computes them)
    return {"count": len(ms), "p50": at(0.50), "p99": at(0.99), "max": ms[-1], "mean": sum(ms) / len(ms)}


def check_ledgers(nodes, want_prepared):
    """Every claim of the wave is PrepareCompleted (want_prepared) or no
    claim is live any more; returns the live entries counted."""
    live = 0
    for n in nodes:
        for p in n.plugins:
            entries = [c for c in p.ledger() if c.get("state") != "Tombstone"]
            live += len(entries)
            uids = sorted(r.rsplit("/", 1)[1] for r in n.claims[p.driver])
            if want_prepared:
                got = sorted(c["uid"] for c in entries if c.get("state") == "PrepareCompleted")
                if got != uids:
                    raise RuntimeError("%s: ledger holds %s prepared, the wave prepared %s" % (p.client, got, uids))
            elif entries:
                raise RuntimeError("%s: live ledger entries after the unprepare: %s" % (p.client, entries))
    return live


def wave_half(api, nodes, flag):
    stats(api, clear=True)
    seconds, results = run_half(nodes, flag)
    snap = stats(api)
    by = split_requests(snap, nodes)
    key = "prepare" if flag == "--prepare-only" else "unprepare"
    samples = {d: [] for d in (GPU_DRIVER, CD_DRIVER)}
    for p, r in results:
        samples[p.driver] += r[key + "_samples_ms"]
    per_second = list(snap["per_second"].values())
    return {
        "seconds": seconds,
        "calls": sum(len(v) for v in samples.values()),
        "requests": sum(sum(v.values()) for v in by.values()),
        "requests_by_verb": {k: v for k, v in by.items() if v},
        "requests_per_s": sum(sum(v.values()) for v in by.values()) / seconds,
        "requests_per_s_peak": max(per_second) if per_second else 0,
        "latency_ms": quantiles(samples[GPU_DRIVER] + samples[CD_DRIVER]),
        "latency_ms_gpu": quantiles(samples[GPU_DRIVER]),
        "latency_ms_cd": quantiles(samples[CD_DRIVER]),
        "load_average": os.getloadavg(),
    }


def stop_all(nodes):
    live = [p for n in nodes for p in n.plugins if p.proc and p.proc.poll() is None]
    for p in live:
        p.proc.send_signal(signal.SIGTERM)
    for p in live:
        try:
            p.proc.wait(30)
        except subprocess.TimeoutExpired:
            p.proc.kill()
            p.proc.wait(5)
    for n in nodes:
        for p in n.plugins:
            if p.proc:
                p.log.close()


def print_table(s):
    i, w = s["idle"], s["wave"]
    fp, fa = s["footprint_idle"], s["footprint_after"]
    rows = [
        ("nodes (plugin pairs)", "%d" % s["nodes"]),
        ("load average at start", "%.2f %.2f %.2f" % tuple(s["load_average_start"])),
        ("start: all registered and published", "%.0f s" % s["start_seconds"]),
        ("idle window", "%.0f s" % i["seconds"]),
        ("API requests per node per hour, idle", "%.1f" % i["requests_per_node_hour"]),
        ("  GPU plugin", "%.1f" % i["requests_per_node_hour_by_plugin"]["gpu"]),
        ("  ComputeDomain plugin", "%.1f" % i["requests_per_node_hour_by_plugin"]["cd"]),
    ]
    for plugin in ("gpu", "cd"):
        for vr, c in i["requests_per_node_hour_by_verb"][plugin].items():
            rows.append(("    %s: %s" % (plugin, vr), "%.1f" % c))
    rows += [
        ("watch requests per node per hour (reconnects)", "%.1f" % i["watch_requests_per_node_hour"]),
        ("watches held per node (min/median/max)", "%d / %g / %d" % (
            i["watches_per_node"]["min"], i["watches_per_node"]["median"], i["watches_per_node"]["max"])),
    ]
    for k, v in i["watches_per_node_by_resource"].items():
        rows.append(("  %s" % k, "%g" % v))
    rows += [
        ("RSS of all plugins, idle", "%.1f MiB (GPU %.1f, CD %.1f)" % (
            fp["all"]["rss_kib_total"] / 1024, fp["gpu"]["rss_kib_total"] / 1024, fp["cd"]["rss_kib_total"] / 1024)),
        ("  median per plugin, GPU / CD", "%.1f / %.1f MiB" % (fp["gpu"]["rss_kib_median"] / 1024,
                                                               fp["cd"]["rss_kib_median"] / 1024)),
        ("PSS of all plugins, idle", "%.1f MiB" % (fp["all"]["pss_kib_total"] / 1024)),
        ("threads of all plugins, idle", "%d (median GPU %g, CD %g)" % (
            fp["all"]["threads_total"], fp["gpu"]["threads_median"], fp["cd"]["threads_median"])),
        ("API server RSS / threads, idle", "%.1f MiB / %d" % (s["apiserver_idle"]["VmRSS"] / 1024,
                                                              s["apiserver_idle"]["Threads"])),
        ("wave: claims (GPU + ComputeDomain channel)", "%d + %d" % (w["claims_gpu"], w["claims_cd"])),
    ]
    for half in ("prepare", "unprepare"):
        h = w[half]
        lat = h["latency_ms"]
        rows += [
            ("%s: wall time" % half, "%.1f s" % h["seconds"]),
            ("%s: API requests (per s, peak second)" % half, "%d (%.1f/s, %d)" % (
                h["requests"], h["requests_per_s"], h["requests_per_s_peak"])),
            ("%s latency p50 / p99 / max" % half, "%.1f / %.1f / %.1f ms" % (lat["p50"], lat["p99"], lat["max"])),
        ]
        for d in ("gpu", "cd"):
            q = h["latency_ms_" + d]
            if q:
                rows.append(("  %s p50 / p99" % d, "%.1f / %.1f ms" % (q["p50"], q["p99"])))
    rows += [
        ("RSS of all plugins after the wave", "%.1f MiB" % (fa["all"]["rss_kib_total"] / 1024)),
        ("API server RSS after the wave", "%.1f MiB" % (s["apiserver_after"]["VmRSS"] / 1024)),
    ]
    print()
    for name, value in rows:
        print("%-52s %s" % (name, value))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--idle-seconds", type=float, default=600)
    ap.add_argument("--claims", type=int, default=1000, help="claims in the wave, spread evenly over the nodes")
    ap.add_argument("--cd-claims-per-node", type=int, default=2,
                    help="of a node's claims, this many are ComputeDomain channel claims (the rest single-GPU)")
    ap.add_argument("--domain-nodes", type=int, default=4, help="nodes per ComputeDomain")
    ap.add_argument("--start-batch", type=int, default=10, help="nodes started together")
    ap.add_argument("--workdir-root", default=None, help="where the nodes' directories go (default: TMPDIR)")
    ap.add_argument("--json-out", help="also write the JSON summary here")
    ap.add_argument("--keep", action="store_true", help="keep the fleet's directories")
    ap.add_argument("--quick", action="store_true", help="smoke run: 5 nodes, 20 s idle, 50 claims")
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.idle_seconds, args.claims = 5, 20, 50
    per_node = -(-args.claims // args.nodes)
    cd_per_node = min(args.cd_claims_per_node, per_node)
    gpus = max(GPU_PROFILE_GPUS, per_node - cd_per_node)
    summary = {"nodes": args.nodes, "idle_seconds_asked": args.idle_seconds, "claims": args.claims,
               "load_average_start": os.getloadavg(), "cpus": os.cpu_count(), "nofile": raise_nofile(),
               "bin_dir": "NVDRA_BIN_DIR" if os.environ.get("NVDRA_BIN_DIR") else "build/bin"}
    print("%d nodes, %d CPUs; load average at start: %.2f %.2f %.2f; RLIMIT_NOFILE %d" % (
        (args.nodes, os.cpu_count()) + os.getloadavg() + (summary["nofile"],)), flush=True)

    root = tempfile.mkdtemp(prefix="nvdra-fleet-", dir=args.workdir_root)
    api = None
    nodes = []
    try:
        api = localnode.ApiServer(root, "fleet-node-000")
        # A real API server's watch cache sends a bookmark about once a
        # minute; the test server's default of one a second would wake every
        # watching plugin every second.
        api.request("POST", "/_nvdra/watches", {"bookmark_interval": 60})
        with open(api.kubeconfig) as f:
            base = json.load(f)
        gpu_profile = "h100x8"
        if gpus > GPU_PROFILE_GPUS:
            gpu_profile = os.path.join(root, "h100x%d.json" % gpus)
            with open(gpu_profile, "w") as f:
                json.dump(h100(gpus), f)
        nodes = [FleetNode(root, i, base, gpu_profile) for i in range(args.nodes)]
        api.load([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "uid": str(uuid.uuid4())}}
                  for n in nodes[1:]])
        domains = make_domains(api, nodes, args.domain_nodes)

        print("\n== start: %d plugins, %d nodes at a time" % (2 * len(nodes), args.start_batch), flush=True)
        summary["start_seconds"] = start_fleet(nodes, api, args.start_batch)
        wait_quiet(api, [p.client for n in nodes for p in n.plugins])

        print("\n== idle for %.0f s (load average %.2f %.2f %.2f)" % ((args.idle_seconds,) + os.getloadavg()),
              flush=True)
        summary["idle"] = idle_phase(api, nodes, args.idle_seconds)
        summary["load_average_idle_end"] = os.getloadavg()
        summary["footprint_idle"] = footprint(nodes)
        summary["apiserver_idle"] = proc_figures(api.proc.pid)

        print("\n== wave: %d claims over %d nodes (load average %.2f %.2f %.2f)" % (
            (args.claims, args.nodes) + os.getloadavg()), flush=True)
        make_wave(api, nodes, args.claims, cd_per_node, domains)
        wave = {"claims_gpu": sum(len(n.claims[GPU_DRIVER]) for n in nodes),
                "claims_cd": sum(len(n.claims[CD_DRIVER]) for n in nodes)}
        wave["prepare"] = wave_half(api, nodes, "--prepare-only")
        check_ledgers(nodes, want_prepared=True)
        wave["prepared_checked"] = wave["claims_gpu"] + wave["claims_cd"]
        wave["unprepare"] = wave_half(api, nodes, "--unprepare-only")
        wave["live_after_unprepare"] = check_ledgers(nodes, want_prepared=False)
        summary["wave"] = wave
        summary["footprint_after"] = footprint(nodes)
        summary["apiserver_after"] = proc_figures(api.proc.pid)
    finally:
        stop_all(nodes)
        if api:
            api.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print_table(summary)
    print("\n" + json.dumps(summary, indent=1, default=str))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(summary, f, indent=1, default=str)


if __name__ == "__main__":
    main()
