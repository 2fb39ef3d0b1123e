#!/usr/bin/env python3
"""The plugins' performance targets on a local node, measured in one run.

A local node (the test API server on loopback, the real plugin binaries on
mock hardware) and `nvdractl cycle` as the kubelet: one held gRPC connection
for all calls. Prints each figure with its ratio against its reference and
target, then a JSON summary. The figures:

  * p50 prepare/unprepare at ~0, 1,000 and 10,000 ledger entries (held
    claims and tombstones, filled in with bench/ledger_fill), against the
    p50 at ~0;
  * the floor: the same client against nvdra-fake-plugin (no work), plus one
    keep-alive claim GET against the same API server, plus the ledger's
    appends with fdatasync in the plugin's directory;
  * claims per second with 1, 8 and 64 claims in flight together (a node
    of 64 mock GPUs; their ledger transitions share fdatasyncs), and the
    CPU per claim of the plugin, the API server and the client;
  * idle RSS, PSS and threads of each plugin, start-to-GetInfo time, RSS
    after 2,000 claims were prepared and unprepared;
  * under the default client rate limit (5 QPS, burst 10): latency of 8 and
    64 claims arriving together, and which API calls were made while they
    were prepared.

Ratios measured in one run are what to compare: absolute numbers move with
the machine's load.

Usage (after scripts/build):  python3 bench/node_bench.py [--quick]
"""

import argparse
import http.client
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))

import localnode  # noqa: E402
from localnode import BIN, CD_DRIVER, GPU_DRIVER, make_claim, wait_for  # noqa: E402

# Records a prepare+unprepare cycle appends (PrepareStarted, PrepareCompleted,
# UnprepareStarted, the tombstone): the floor counts each with an fdatasync.
# The plugin waits for the syncs of the two starting ones only; the final
# ones ride on the next sync (docs/ledger-format.md, "Durable writes on the
# prepare path"), and the benchmark also prints the plugin against a floor
# of those two.
LEDGER_APPENDS_PER_CYCLE = 4
SYNCS_WAITED_PER_CYCLE = 2
RECORD_BYTES = 400
FAST = ["--kube-api-qps", "1000", "--kube-api-burst", "2000"]
QUIET = 3600  # reconcile period: no background API calls during the run
IDLE_THREADS_AFTER_S = 35  # see the footprint step
# Idle before each paced sync of the floor: a cycle's two syncs are about a
# millisecond apart, the rest of the cycle between them.
SYNC_GAP_S = 0.001
# Idle before each call of the no-op plugin's paced round trips.
CALL_GAP_S = 0.001
ROUNDS = 3  # floor and plugin measured in turns; the median round counts
WARMUP_CLAIMS = 300  # first N prepares after a start against the next N
ROWS = []
# The plugin's step timer (nvdra_request_step_seconds_total), in the order a
# prepare runs them; docs/benchmarks.md describes each.
STEPS = ["dispatch", "rpc_other", "claim_lock", "ledger_read", "claim_get", "config", "append_started",
         "fdatasync_started", "kind_work", "cdi", "append_final", "logging",
         "engine_other", "answer"]
STEP_RE = re.compile(r'^nvdra_request_step_seconds_total\{driver="[^"]*",operation="(\w+)",step="(\w+)"\} (\S+)$')
CALLS_RE = re.compile(r'^nvdra_request_steps_recorded_total\{driver="[^"]*",operation="(\w+)"\} (\S+)$')


def report(name, value, unit, ref=None, target=None, note=""):
    """One line: the figure, its ratio to `ref` and the target ratio it must meet."""
    ratio = value / ref if ref else None
    ok = None
    if target is not None:
        ok = (ratio if ratio is not None else value) <= target
    line = "%-52s %10.2f %-6s" % (name, value, unit)
    if ratio is not None:
        line += "  ratio %5.2fx" % ratio
    if target is not None:
        line += "  target <= %g%s  %s" % (target, "x" if ratio is not None else " " + unit,
                                          "ok" if ok else "MISSED")
    if note:
        line += "  (" + note + ")"
    print(line, flush=True)
    ROWS.append({"name": name, "value": value, "unit": unit, "ratio": ratio, "target": target, "ok": ok})


class Claims:
    """Allocated single-GPU claims, loaded into the API server in bulk."""

    def __init__(self, node):
        self.node = node
        self.n = 0

    def make(self, count, prefix="c", devices=(0, 1, 2, 3)):
        objs, refs = [], []
        for k in range(count):
            i = self.n
            self.n += 1
            c = make_claim("%s-%d" % (prefix, i), [{"request": "gpu", "driver": GPU_DRIVER,
                                                    "pool": self.node.node_name,
                                                    "device": "gpu-%d" % devices[k % len(devices)]}])
            objs.append(c)
            refs.append("default/%s-%d/%s" % (prefix, i, c["metadata"]["uid"]))
        for k in range(0, len(objs), 500):
            self.node.api.load(objs[k:k + 500])
        return refs


def cycle(socket, claims, *flags):
    r = subprocess.run([os.path.join(BIN, "nvdractl"), "cycle", "--socket", socket] + list(flags) + claims,
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError("nvdractl cycle failed (%d): %s%s" % (r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return json.loads(r.stdout)


def cpu_seconds(plugin_pid, api_pid):
    """CPU seconds (user + system) so far of the plugin, the API server, and
    this process's finished children (the client runs as one)."""
    tick = os.sysconf("SC_CLK_TCK")

    def of(pid):
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick  # utime, stime

    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return [of(plugin_pid), of(api_pid), ch.ru_utime + ch.ru_stime]


def proc_figures(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                out[k] = int(v.split()[0])
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    out["Pss"] = int(line.split()[1])
    except OSError:
        out["Pss"] = None
    return out


def settle(pid, seconds=2.0):
    """Lets a plugin go idle: waits until its CPU time stops moving (or `seconds` pass)."""
    def cpu():
        with open("/proc/%d/stat" % pid) as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return int(parts[11]) + int(parts[12])
    deadline = time.monotonic() + seconds
    last = cpu()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = cpu()
        if now == last:
            return
        last = now


def start_timed(plugin):
    """Starts `plugin` and returns ms from exec to its registration socket answering GetInfo."""
    waiter = subprocess.Popen([os.path.join(BIN, "nvdractl"), "wait-info", "--socket", plugin.reg_socket,
                               "--timeout-ms", "30000"], stdout=subprocess.PIPE, text=True)
    assert json.loads(waiter.stdout.readline())["ready"]
    t0 = time.time_ns()
    plugin.start(wait=False)
    line = waiter.stdout.readline()
    waiter.wait(30)
    if not line:
        raise RuntimeError("%s never answered GetInfo; log:\n%s" % (plugin.name, plugin.read_log()))
    plugin.wait_registered()
    return (json.loads(line)["answered_unix_ns"] - t0) / 1e6


def get_p50(api_url, claim_ref, n, gap=0.0):
    """p50 of a keep-alive GET of one ResourceClaim, as the plugin does once per prepare;
    `gap` seconds idle before each (a plugin's GETs come between other work)."""
    u = urllib.parse.urlparse(api_url)
    ns, name, _ = claim_ref.split("/")
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    path = "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s" % (ns, name)
    times = []
    for _ in range(n):
        if gap:
            time.sleep(gap)  # pacing, not synchronisation
        t0 = time.perf_counter()
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        times.append((time.perf_counter() - t0) * 1e3)
        assert resp.status == 200, resp.status
    conn.close()
    return statistics.median(times)


def fdatasync_p50(directory, n, gap=0.0):
    """p50 of one ledger-sized append with fdatasync, in the directory the ledger lives in;
    `gap` seconds idle before each (a plugin's syncs come between other work)."""
    path = os.path.join(directory, "bench-append")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    rec = b"x" * RECORD_BYTES
    times = []
    try:
        for _ in range(n):
            if gap:
                time.sleep(gap)  # pacing, not synchronisation
            t0 = time.perf_counter()
            os.write(fd, rec)
            os.fdatasync(fd)
            times.append((time.perf_counter() - t0) * 1e3)
    finally:
        os.close(fd)
        os.unlink(path)
    return statistics.median(times)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def step_totals(port):
    """The plugin's step timer totals: {(operation, step): seconds}, {operation: calls}."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    conn.close()
    secs, calls = {}, {}
    for line in body.splitlines():
        m = STEP_RE.match(line)
        if m:
            secs[(m.group(1), m.group(2))] = float(m.group(3))
            continue
        m = CALLS_RE.match(line)
        if m:
            calls[m.group(1)] = float(m.group(2))
    return secs, calls


def step_means(before, after):
    """Mean ms per call of each step between two step_totals() readings."""
    out = {}
    for op in ("prepare", "unprepare"):
        n = after[1].get(op, 0) - before[1].get(op, 0)
        out[op] = {st: ((after[0].get((op, st), 0) - before[0].get((op, st), 0)) * 1e3 / n if n else 0.0)
                   for st in STEPS}
    return out


def slower_steps(ref, got, where, vs):
    """Prints, per operation, the four steps that grew most from `ref` to `got` (step_means)."""
    for op in ("prepare", "unprepare"):
        diff = sorted(STEPS, key=lambda st: ref[op][st] - got[op][st])[:4]
        print("  %s steps slower %s (mean ms, %s): %s" % (
            op, where, vs, ", ".join("%s %.3f vs %.3f" % (st, got[op][st], ref[op][st]) for st in diff)))


def breakdown(rnd, load):
    """Where the median round's prepare and unprepare went: the no-op plugin's
    round trip for gRPC, then the plugin's own steps (means per call), against
    the client's p50 and mean."""
    print("\n== where the time goes (median round; steps: the plugin's step timer, mean ms per call; "
          "load average %.1f %.1f %.1f)" % load)
    print("  %-34s %9s %9s" % ("step", "prepare", "unprepare"))
    grpc = {"prepare": rnd["noop_prepare"], "unprepare": rnd["noop_unprepare"]}
    print("  %-34s %9.3f %9.3f" % ("gRPC round trip (no-op plugin p50)", grpc["prepare"], grpc["unprepare"]))
    steps = rnd["steps"]
    for st in STEPS:
        if steps["prepare"][st] or steps["unprepare"][st]:
            print("  %-34s %9.3f %9.3f" % (st, steps["prepare"][st], steps["unprepare"][st]))
    print("  (the floor's GET p50 %.3f ms back to back, %.3f ms with 2 ms idle before each;"
          % (rnd["get"], rnd["get_paced"]))
    print("   its append+fdatasync p50 %.3f ms back to back, %.3f ms with %.1f ms idle before each;"
          % (rnd["sync"], rnd["sync_paced"], SYNC_GAP_S * 1e3))
    print("   the no-op plugin's prepare / unprepare p50 %.3f / %.3f ms with %.1f ms idle before each call)"
          % (rnd["noop_prepare_paced"], rnd["noop_unprepare_paced"], CALL_GAP_S * 1e3))
    out = {}
    for op in ("prepare", "unprepare"):
        total = grpc[op] + sum(steps[op].values())
        client = rnd[op]
        # Means add up: the same with the no-op plugin's mean round trip,
        # against the client's mean.
        total_mean = rnd["noop_%s_mean" % op] + sum(steps[op].values())
        mean = rnd[op + "_mean"]
        # Against the round trip with the server idle before the call, the
        # other end of the range: the plugin's calls come after some idle.
        total_paced = rnd["noop_%s_paced" % op] + sum(steps[op].values())
        out[op] = {"sum": total, "client_p50": client, "client_mean": mean,
                   "unaccounted": client - total, "unaccounted_pct": 100.0 * (client - total) / client,
                   "unaccounted_mean_pct": 100.0 * (mean - total_mean) / mean,
                   "unaccounted_paced_pct": 100.0 * (client - total_paced) / client}
    for key, label in (("sum", "sum"), ("client_p50", "client p50"), ("client_mean", "client mean")):
        print("  %-34s %9.3f %9.3f" % (label, out["prepare"][key], out["unprepare"][key]))
    print("  %-34s %8.1f%% %8.1f%%" % ("unaccounted (client p50 - sum)", out["prepare"]["unaccounted_pct"],
                                       out["unprepare"]["unaccounted_pct"]))
    print("  %-34s %8.1f%% %8.1f%%" % ("same, means (no-op and client)", out["prepare"]["unaccounted_mean_pct"],
                                       out["unprepare"]["unaccounted_mean_pct"]))
    print("  %-34s %8.1f%% %8.1f%%" % ("same, with the paced no-op", out["prepare"]["unaccounted_paced_pct"],
                                       out["unprepare"]["unaccounted_paced_pct"]))
    for op in ("prepare", "unprepare"):
        report("%s: client p50 not in a step" % op, abs(out[op]["unaccounted_pct"]), "%", target=10,
               note="means: %.1f%%; with the paced no-op: %.1f%%" % (out[op]["unaccounted_mean_pct"],
                                                                    out[op]["unaccounted_paced_pct"]))
    return out


def fake_plugin(node):
    d = os.path.join(node.workdir, "fake")
    os.makedirs(os.path.join(d, "plugins"), exist_ok=True)
    os.makedirs(os.path.join(d, "registry"), exist_ok=True)
    out = open(os.path.join(d, "stdout"), "w+")
    p = subprocess.Popen([os.path.join(BIN, "nvdra-fake-plugin"), "--kubelet-plugins-directory-path",
                          os.path.join(d, "plugins"), "--kubelet-registrar-directory-path",
                          os.path.join(d, "registry"), "--healthcheck-port", "-1"],
                         stdout=out, stderr=subprocess.DEVNULL)

    def ready():
        out.seek(0)
        first = out.readline()
        return json.loads(first) if first.endswith("\n") else None
    info = wait_for(ready, what="nvdra-fake-plugin")
    return p, info["dra_socket"]


def seed(gpu, claims, count):
    """Prepares and unprepares `count` claims through the plugin, four to a
    call (one per GPU of gpu-0..3; a GPU is held by one claim at a time)."""
    if count > 0:
        cycle(gpu.dra_socket, claims.make(count, prefix="seed"), "--batch", "4")


def fill(node, gpu, claims, count, prefix):
    """Adds `count` ledger entries (10% held claims, the rest tombstones) with
    bench/ledger_fill while the plugin runs: a real ledger, written by the
    ledger's own transitions (unsynced) and one synced compaction, which the
    plugin reads back at its next request. The held claims get their
    ResourceClaims in the API server, as a node's would have."""
    held = count // 10
    r = subprocess.run([os.path.join(BIN, "ledger_fill"), gpu.plugin_dir, node.boot_id_path, prefix, str(held),
                        str(count - held), GPU_DRIVER, node.node_name],
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError("ledger_fill failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
    objs = []
    for line in r.stdout.splitlines():
        h = json.loads(line)
        objs.append(make_claim(h["name"], [{"request": "gpu", "driver": GPU_DRIVER, "pool": node.node_name,
                                            "device": h["device"]}], uid=h["uid"]))
    for k in range(0, len(objs), 500):
        node.api.load(objs[k:k + 500])


def ledger_entries(node, gpu):
    return len(gpu.ledger().get("claims", []))


def h100(count):
    """A mock profile of `count` H100s (the built-in h100x8 has eight)."""
    return {"driverVersion": "570.158.01", "cudaDriverVersion": "12.8",
            "gpus": [{"count": count, "productName": "NVIDIA H100 80GB HBM3", "brand": "Nvidia",
                      "architecture": "Hopper", "cudaComputeCapability": "9.0", "memoryBytes": 85520809984,
                      "addressingMode": "HMM",
                      "pciBusIds": ["0000:%02x:00.0" % (i + 1) for i in range(count)],
                      "pcieRoots": ["pci0000:%02x" % (i + 1) for i in range(count)]}]}


def profile_file(node, count):
    path = os.path.join(node.workdir, "h100x%d.json" % count)
    with open(path, "w") as f:
        json.dump(h100(count), f)
    return path


def api_calls(node):
    _, body = node.api.request("GET", "/_nvdra/requests?clear=1")
    calls = {}
    for q in body["requests"]:
        kind = q["method"] + " " + ("resourceclaims" if "/resourceclaims/" in q["path"] else q["path"])
        calls[kind] = calls.get(kind, 0) + 1
    return calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--claims", type=int, default=200, help="claims per latency point")
    ap.add_argument("--entries", default="1000,10000", help="ledger sizes to measure at, comma-separated")
    ap.add_argument("--workdir-root", default=None,
                    help="where the nodes' directories go (default TMPDIR; /dev/shm takes fdatasync out)")
    ap.add_argument("--quick", action="store_true", help="smaller run (smoke): 20 claims a point, 1,000 entries")
    ap.add_argument("--cdi-root-on-disk", action="store_true",
                    help="CDI specs in the node's directory (default: a tmpfs, as /var/run/cdi on a node)")
    args = ap.parse_args()
    n = 20 if args.quick else args.claims
    sizes = [1000] if args.quick else [int(x) for x in args.entries.split(",")]
    summary = {"load_average": os.getloadavg(), "cpus": os.cpu_count()}
    print("%d CPUs; load average at start: %.1f %.1f %.1f (ratios in one run are what count); CDI root on %s"
          % ((os.cpu_count(),) + os.getloadavg() + ("the disk" if args.cdi_root_on_disk else "a tmpfs",)))

    import atexit
    import shutil
    import tempfile

    def new_node(tls=False):
        d = tempfile.mkdtemp(prefix="nvdra-bench-", dir=args.workdir_root)
        nd = localnode.LocalNode(workdir=d, tls=tls)
        nd.owned = True
        if not args.cdi_root_on_disk and os.path.isdir("/dev/shm"):
            # The deployments mount /var/run/cdi, a tmpfs, as the CDI root;
            # the ledger stays on the disk under test.
            nd.cdi_root = tempfile.mkdtemp(prefix="nvdra-bench-cdi-", dir="/dev/shm")
            atexit.register(shutil.rmtree, nd.cdi_root, True)
        return nd

    # Tombstones stay for the whole run, so the ledger keeps its size.
    keep = ["--tombstone-ttl", "86400"]
    node = new_node()
    fake = None
    try:
        gpu = node.plugin(GPU_DRIVER, "h100x8", extra_args=FAST + keep, reconcile_period=QUIET)
        cd = node.plugin(CD_DRIVER, "gb200x4", extra_args=FAST, reconcile_period=QUIET)
        os.sync()  # earlier jobs' writeback would slow the start's file system work
        started = time.monotonic()
        t_gpu = start_timed(gpu)
        t_cd = start_timed(cd)
        wait_for(lambda: node.api.slices(GPU_DRIVER), what="slices")
        claims = Claims(node)

        print("\n== footprint (idle)")
        idle = {}
        for p in (gpu, cd):
            settle(p.proc.pid)
            idle[p.name] = f = proc_figures(p.proc.pid)
            report("%s idle RSS" % p.name, f["VmRSS"] / 1024, "MiB", target=15,
                   note="anon %.1f, file %.1f MiB" % (f["RssAnon"] / 1024, f["RssFile"] / 1024))
            if f["Pss"] is not None:
                report("%s idle PSS" % p.name, f["Pss"] / 1024, "MiB")
            report("%s threads at start" % p.name, f["Threads"], "")
        # gRPC's EventEngine starts a thread beyond its reserve when work
        # queues up at start-up and retires it after 30 s without work: the
        # idle thread count is read once that time has passed.
        time.sleep(max(0.0, started + IDLE_THREADS_AFTER_S - time.monotonic()))
        for p in (gpu, cd):
            settle(p.proc.pid)
            threads = proc_figures(p.proc.pid)["Threads"]
            idle[p.name]["Threads"] = threads
            report("%s threads, idle %d s" % (p.name, IDLE_THREADS_AFTER_S), threads, "", target=12)
        report("gpu start to GetInfo", t_gpu, "ms", target=100)
        report("compute-domain start to GetInfo", t_cd, "ms", target=100)
        summary["idle"] = idle
        # From here on the GPU plugin serves its metrics (the step timer);
        # the footprint above is without that endpoint's thread.
        gpu.stop()
        port = free_port()
        gpu.extra_args += ["--http-endpoint", "127.0.0.1:%d" % port]
        gpu.start()
        cycle(gpu.dra_socket, claims.make(5, prefix="warm"))

        print("\n== floor (same client, one held connection) and the plugin, in turns")
        # Four claims stay held all run (gpu-4..7); the rest become tombstones.
        held = claims.make(4, prefix="held", devices=(4, 5, 6, 7))
        cycle(gpu.dra_socket, held, "--prepare-only")
        fake, fake_sock = fake_plugin(node)
        cycle(fake_sock, claims.make(5, prefix="fwarm"))
        # The floor and the plugin are measured in turns, ROUNDS times, and
        # the median round is reported: the disk's fdatasync and the
        # machine's load drift within a run, and a round compares the two
        # under the same conditions.
        per_round = max(20, n // 2)
        rounds = []
        os.sync()
        for k in range(ROUNDS):
            f = cycle(fake_sock, claims.make(per_round, prefix="floor%d-" % k))
            # The same round trips with the server idle before each call.
            fp = cycle(fake_sock, claims.make(per_round, prefix="floorp%d-" % k),
                       "--pause-us", str(int(CALL_GAP_S * 1e6)))
            get_ref = claims.make(1, prefix="get%d-" % k)[0]
            get = get_p50(node.api.url, get_ref, max(per_round, 50))
            get_paced = get_p50(node.api.url, get_ref, 50, gap=0.002)
            sync = fdatasync_p50(gpu.plugin_dir, max(per_round, 50))
            sync_paced = fdatasync_p50(gpu.plugin_dir, 50, gap=SYNC_GAP_S)
            floor = f["prepare_ms"]["p50"] + f["unprepare_ms"]["p50"] + get + LEDGER_APPENDS_PER_CYCLE * sync
            t0 = step_totals(port)
            r = cycle(gpu.dra_socket, claims.make(per_round, prefix="lat0-%d-" % k))
            rounds.append({"noop_prepare": f["prepare_ms"]["p50"], "noop_unprepare": f["unprepare_ms"]["p50"],
                           "noop_prepare_mean": f["prepare_ms"]["mean"], "noop_unprepare_mean": f["unprepare_ms"]["mean"],
                           "noop_prepare_paced": fp["prepare_ms"]["p50"], "noop_unprepare_paced": fp["unprepare_ms"]["p50"],
                           "get": get, "get_paced": get_paced, "sync": sync, "sync_paced": sync_paced, "floor": floor, "prepare": r["prepare_ms"]["p50"],
                           "unprepare": r["unprepare_ms"]["p50"], "prepare_mean": r["prepare_ms"]["mean"],
                           "unprepare_mean": r["unprepare_ms"]["mean"],
                           "steps": step_means(t0, step_totals(port)), "load": os.getloadavg()})
            print("  round %d: floor %.2f ms (no-op %.2f + %.2f, GET %.2f, append+fdatasync %.2f); "
                  "plugin %.2f + %.2f ms: %.2fx" % (k + 1, floor, f["prepare_ms"]["p50"], f["unprepare_ms"]["p50"],
                                                    get, sync, r["prepare_ms"]["p50"], r["unprepare_ms"]["p50"],
                                                    (r["prepare_ms"]["p50"] + r["unprepare_ms"]["p50"]) / floor),
                  flush=True)
        fake.terminate()
        fake.wait(10)
        fake = None
        mid = sorted(rounds, key=lambda x: (x["prepare"] + x["unprepare"]) / x["floor"])[len(rounds) // 2]
        floor = mid["floor"]
        report("no-op plugin prepare p50", mid["noop_prepare"], "ms")
        report("no-op plugin unprepare p50", mid["noop_unprepare"], "ms")
        report("claim GET p50 (keep-alive)", mid["get"], "ms")
        report("append %d B + fdatasync p50" % RECORD_BYTES, mid["sync"], "ms")
        report("floor: no-op cycle + GET + %d appends" % LEDGER_APPENDS_PER_CYCLE, floor, "ms")
        summary["floor_ms"] = floor
        summary["rounds"] = rounds

        report("prepare + unprepare p50 (median round)", mid["prepare"] + mid["unprepare"], "ms", ref=floor,
               target=1.25)
        worst = max(rounds, key=lambda x: (x["prepare"] + x["unprepare"]) / x["floor"])
        report("prepare + unprepare p50 (worst round)", worst["prepare"] + worst["unprepare"], "ms",
               ref=worst["floor"], target=1.5)
        waited = floor - (LEDGER_APPENDS_PER_CYCLE - SYNCS_WAITED_PER_CYCLE) * mid["sync"]
        report("same, against a floor of %d synced appends" % SYNCS_WAITED_PER_CYCLE,
               mid["prepare"] + mid["unprepare"], "ms", ref=waited,
               note="floor %.2f ms: the syncs the plugin waits for" % waited)
        summary["floor_waited_ms"] = waited
        # The floor's GET and syncs run back to back, each right after the
        # last; the plugin's come between other work, and on some machines
        # (virtual ones most) a disk flush or a loopback round trip after an
        # idle stretch is markedly slower. The same floor with both paced
        # shows how much of the gap that is.
        base = mid["noop_prepare"] + mid["noop_unprepare"] + mid["get_paced"]
        paced_all = base + LEDGER_APPENDS_PER_CYCLE * mid["sync_paced"]
        paced = base + SYNCS_WAITED_PER_CYCLE * mid["sync_paced"]
        report("same, against that floor paced (GET, %d syncs)" % LEDGER_APPENDS_PER_CYCLE, mid["prepare"] + mid["unprepare"],
               "ms", ref=paced_all,
               note="GET %.2f ms with 2 ms idle before each, append+fdatasync %.2f ms with %.1f ms idle before each"
               % (mid["get_paced"], mid["sync_paced"], SYNC_GAP_S * 1e3))
        report("same, against the floor paced with %d syncs" % SYNCS_WAITED_PER_CYCLE, mid["prepare"] + mid["unprepare"],
               "ms", ref=paced)
        summary["floor_paced_ms"] = paced_all
        summary["floor_waited_paced_ms"] = paced
        summary["breakdown"] = breakdown(mid, mid["load"])

        print("\n== prepare/unprepare p50 by ledger size (one claim at a time)")
        t0 = step_totals(port)
        base = cycle(gpu.dra_socket, claims.make(n, prefix="lat0"))
        s_base = step_means(t0, step_totals(port))
        p0, u0 = base["prepare_ms"]["p50"], base["unprepare_ms"]["p50"]
        entries = ledger_entries(node, gpu)
        report("prepare p50 at %d entries" % entries, p0, "ms")
        report("unprepare p50 at %d entries" % entries, u0, "ms")
        summary["latency"] = {entries: base}
        for i, size in enumerate(sizes):
            fill(node, gpu, claims, max(0, size - ledger_entries(node, gpu)), "fill%d" % i)
            os.sync()  # the fill's megabytes, written back meanwhile, would slow the syncs measured next
            cycle(gpu.dra_socket, claims.make(5, prefix="fwarm%d" % size))  # reads the filled ledger once
            t1 = step_totals(port)
            r = cycle(gpu.dra_socket, claims.make(n, prefix="lat%d" % size))
            entries = ledger_entries(node, gpu)
            slower_steps(s_base, step_means(t1, step_totals(port)), "at %d entries" % entries,
                         "there vs at the start")
            summary["latency"][entries] = r
            report("prepare p50 at %d entries" % entries, r["prepare_ms"]["p50"], "ms", ref=p0, target=1.1)
            report("unprepare p50 at %d entries" % entries, r["unprepare_ms"]["p50"], "ms", ref=u0, target=1.1)
        settle(gpu.proc.pid)
        f = proc_figures(gpu.proc.pid)
        report("gpu RSS at %d entries vs idle" % ledger_entries(node, gpu), f["VmRSS"] / 1024, "MiB",
               ref=idle[gpu.name]["VmRSS"] / 1024)
        gpu.stop()
        cd.stop()
    finally:
        if fake:
            fake.terminate()
        node.close()

    print("\n== footprint (idle) against an HTTPS API server, as in a cluster")
    node5 = new_node(tls=True)
    try:
        tg = node5.plugin(GPU_DRIVER, "h100x8", extra_args=FAST, reconcile_period=QUIET).start()
        tc = node5.plugin(CD_DRIVER, "gb200x4", extra_args=FAST, reconcile_period=QUIET).start()
        wait_for(lambda: node5.api.slices(GPU_DRIVER), what="slices over HTTPS")
        cycle(tg.dra_socket, Claims(node5).make(5, prefix="warm"))  # a claim GET over TLS too
        for p in (tg, tc):
            settle(p.proc.pid)
            f = proc_figures(p.proc.pid)
            report("%s idle RSS, HTTPS" % p.name, f["VmRSS"] / 1024, "MiB", target=15,
                   note="anon %.1f, file %.1f MiB" % (f["RssAnon"] / 1024, f["RssFile"] / 1024))
            summary.setdefault("idle_https", {})[p.name] = f
    finally:
        node5.close()

    print("\n== warm-up: the first %d prepares after a start against the next %d (a plugin of its own)"
          % (WARMUP_CLAIMS, WARMUP_CLAIMS))
    node6 = new_node()
    try:
        port6 = free_port()
        g6 = node6.plugin(GPU_DRIVER, "h100x8", extra_args=FAST + keep + ["--http-endpoint", "127.0.0.1:%d" % port6],
                          reconcile_period=QUIET)
        claims6 = Claims(node6)
        first_refs, next_refs = claims6.make(WARMUP_CLAIMS, prefix="first"), claims6.make(WARMUP_CLAIMS, prefix="next")
        g6.start()
        wait_for(lambda: node6.api.slices(GPU_DRIVER), what="slices")
        t0 = step_totals(port6)
        first = cycle(g6.dra_socket, first_refs)
        t1 = step_totals(port6)
        after = cycle(g6.dra_socket, next_refs)
        t2 = step_totals(port6)
        s_first, s_next = step_means(t0, t1), step_means(t1, t2)
        slower_steps(s_next, s_first, "in the first %d" % WARMUP_CLAIMS, "first vs next")
        for op in ("prepare", "unprepare"):
            report("first %d %ss after start p50" % (WARMUP_CLAIMS, op), first[op + "_ms"]["p50"], "ms",
                   ref=after[op + "_ms"]["p50"], target=1.1,
                   note="next %d: p50 %.2f ms; means %.2f and %.2f ms" % (
                       WARMUP_CLAIMS, after[op + "_ms"]["p50"], first[op + "_ms"]["mean"],
                       after[op + "_ms"]["mean"]))
        summary["warmup"] = {"first": first, "next": after, "steps_first": s_first, "steps_next": s_next}
    finally:
        node6.close()

    print("\n== memory after 2,000 claims (a plugin of its own)")
    node4 = new_node()
    try:
        g4 = node4.plugin(GPU_DRIVER, "h100x8", extra_args=FAST + keep, reconcile_period=QUIET).start()
        wait_for(lambda: node4.api.slices(GPU_DRIVER), what="slices")
        cycle(g4.dra_socket, Claims(node4).make(5, prefix="warm"))
        settle(g4.proc.pid)
        before = proc_figures(g4.proc.pid)["VmRSS"]
        # 2,000 claims prepared and unprepared through the plugin, their
        # tombstones kept, against the same plugin's RSS before them.
        seed(g4, Claims(node4), 2000)
        settle(g4.proc.pid)
        after = proc_figures(g4.proc.pid)["VmRSS"]
        report("gpu RSS after 2,000 claims vs before", after / 1024, "MiB", ref=before / 1024, target=1.5,
               note="%d ledger entries; %.1f MiB before" % (ledger_entries(node4, g4), before / 1024))
        summary["rss_after_2000"] = {"before_kib": before, "after_kib": after}
    finally:
        node4.close()

    print("\n== claims arriving together (group commit), 64 mock GPUs")
    node3 = new_node()
    try:
        wide = node3.plugin(GPU_DRIVER, profile_file(node3, 64), extra_args=FAST, reconcile_period=QUIET).start()
        wait_for(lambda: node3.api.slices(GPU_DRIVER), what="slices")
        claims3 = Claims(node3)
        all64 = tuple(range(64))
        # 192 claims a point in --quick too (a second each): the CPU figures
        # below count 10 ms clock ticks.
        per = 192
        # Warm-up: the first wave of 64 starts the worker and gRPC threads.
        cycle(wide.dra_socket, claims3.make(64, prefix="gcwarm", devices=all64), "--concurrency", "64")
        serial = None
        for conc in (1, 8, 64):
            refs = claims3.make(per, prefix="gc%d" % conc, devices=all64)
            before = cpu_seconds(wide.proc.pid, node3.api.proc.pid)
            r = cycle(wide.dra_socket, refs, "--concurrency", str(conc))
            cpu = [(b - a) * 1000.0 / per for a, b in zip(before, cpu_seconds(wide.proc.pid, node3.api.proc.pid))]
            if conc == 1:
                serial = r["claims_per_s"]
                report("claims/s, 1 at a time", serial, "/s")
            else:
                report("claims/s, %d together (vs serial)" % conc, r["claims_per_s"], "/s", ref=serial)
            # What the CPUs allow: every process of the node shares them.
            ceiling = os.cpu_count() * 1000.0 / max(sum(cpu), 1e-3)  # under a tick in all: no ceiling to speak of
            print("  CPU per claim prepared and unprepared, %d at a time: plugin %.2f, API server %.2f, "
                  "client %.2f ms; %.2f ms in all, so %d CPUs allow at most %.0f claims/s"
                  % (conc, cpu[0], cpu[1], cpu[2], sum(cpu), os.cpu_count(), ceiling), flush=True)
            r["cpu_ms_per_claim"] = {"plugin": cpu[0], "api_server": cpu[1], "client": cpu[2], "ceiling": ceiling}
            summary["together_%d" % conc] = r
    finally:
        node3.close()

    print("\n== default client rate limit (5 QPS, burst 10), 64 mock GPUs")
    node2 = new_node()
    try:
        slow = node2.plugin(GPU_DRIVER, profile_file(node2, 64), reconcile_period=QUIET).start()
        wait_for(lambda: node2.api.slices(GPU_DRIVER), what="slices")
        claims2 = Claims(node2)
        for together in (8, 64):
            refs = claims2.make(together, prefix="rl%d" % together, devices=tuple(range(64)))
            time.sleep(2.5)  # the token bucket refills to its burst (setup, not synchronisation)
            api_calls(node2)
            r = cycle(slow.dra_socket, refs, "--concurrency", str(together), "--prepare-only")
            calls = api_calls(node2)
            report("%d claims together: prepare p50" % together, r["prepare_ms"]["p50"], "ms")
            report("%d claims together: last prepare" % together, r["prepare_ms"]["max"], "ms",
                   note="%.1f s of tokens at 5 QPS after a burst of 10" % (max(0, together - 10) / 5.0))
            others = sum(v for k, v in calls.items() if k != "GET resourceclaims")
            report("%d claims together: API calls besides claim GETs" % together, others, "", target=0,
                   note=json.dumps(calls))
            cycle(slow.dra_socket, refs, "--unprepare-only")
    finally:
        node2.close()
    missed = [r["name"] for r in ROWS if r["ok"] is False]
    summary["rows"] = ROWS
    summary["missed"] = missed
    print("\n" + json.dumps(summary, indent=1, default=str))
    print("\nmissed targets: %d%s" % (len(missed), "".join("\n  " + m for m in missed)))


if __name__ == "__main__":
    main()
