#!/usr/bin/env python3
"""nvdra on a local node with mock GPUs: the README's main command.

Starts the test API server, both kubelet plugins on mock hardware, and plays
the kubelet with nvdractl: registration, published ResourceSlices, claims
prepared and unprepared, a shared claim, a channel conflict, a plugin crash
and recovery. Prints what an operator would want to see.

Options: --gpu-profile (default h100x8), --cd-profile (default gb200x4),
--keep (leave the node running until Ctrl-C, for trying nvdractl by hand).
"""

import argparse
import json
import os
import re
import socket
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import localnode  # noqa: E402
from localnode import CD_DRIVER, GPU_DRIVER, make_claim, opaque_config, wait_for  # noqa: E402


# Bold titles on a terminal only: logs and pipes get plain text.
BOLD, PLAIN = ("\033[1m", "\033[0m") if sys.stdout.isatty() else ("", "")


def title(text):
    print("\n%s== %s%s" % (BOLD, text, PLAIN), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def show_result(label, result):
    for uid, r in result.items():
        if r["error"]:
            print("  %-28s claim %s: ERROR %s" % (label, uid[:8], r["error"]))
        for d in r["devices"]:
            print("  %-28s claim %s: %s -> %s" % (label, uid[:8], d.get("device_name"),
                                                 ", ".join(d.get("cdi_device_ids", []))))


def timed(fn, *args):
    t0 = time.monotonic()
    out = fn(*args)
    return out, (time.monotonic() - t0) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu-profile", default="h100x8")
    ap.add_argument("--cd-profile", default="gb200x4")
    ap.add_argument("--keep", action="store_true", help="keep the node running until Ctrl-C")
    ap.add_argument("--kube-api-qps", type=int, default=50, help="the plugins' --kube-api-qps (burst: twice that)")
    args = ap.parse_args()

    node = localnode.LocalNode()
    try:
        title("Local node %s in %s" % (node.node_name, node.workdir))
        print("  test API server: %s (kubeconfig %s)" % (node.api.url, node.api.kubeconfig))
        # The client-side API rate limit defaults to 5 QPS like upstream; every
        # Prepare reads its ResourceClaim once, so a node preparing many claims
        # in a burst wants more.
        qps = ["--kube-api-qps", str(args.kube_api_qps), "--kube-api-burst", str(2 * args.kube_api_qps)]
        metrics = {GPU_DRIVER: "127.0.0.1:%d" % free_port(), CD_DRIVER: "127.0.0.1:%d" % free_port()}
        gpu = node.plugin(GPU_DRIVER, args.gpu_profile, extra_args=qps + ["--http-endpoint", metrics[GPU_DRIVER]]).start()
        cd = node.plugin(CD_DRIVER, args.cd_profile, extra_args=qps + ["--http-endpoint", metrics[CD_DRIVER]]).start()
        for p in (gpu, cd):
            info = node.ctl(["register", "--socket", p.reg_socket]).stdout.strip()
            print("  registered %-26s pid %-7d %s" % (p.driver, p.proc.pid, info.replace("\n", " ")[:120]))

        title("ResourceSlices published by the plugins")
        slices = wait_for(lambda: node.api.slices(GPU_DRIVER), what="GPU slices")
        cd_slices = wait_for(lambda: node.api.slices(CD_DRIVER), what="CD slices")
        for s in slices + cd_slices:
            devs = s["spec"]["devices"]
            print("  %s pool %s: %d device(s)" % (s["spec"]["driver"], s["spec"]["pool"]["name"], len(devs)))
            for d in devs[:3]:
                attrs = d.get("attributes", {})
                short = {k: list(v.values())[0] for k, v in attrs.items() if k in
                         ("productName", "uuid", "type", "resource.kubernetes.io/pciBusID", "id")}
                print("    %-12s %s" % (d["name"], json.dumps(short)))
            if len(devs) > 3:
                print("    ... and %d more" % (len(devs) - 3))

        # Device names come from what the GPU plugin published, so any profile works.
        names = sorted((d["name"] for sl in slices for d in sl["spec"]["devices"]),
                       key=lambda n: [int(t) if t.isdigit() else t for t in n.replace("-", " ").split()])
        if len(names) < 3:
            raise SystemExit("the demo needs a GPU profile with at least 3 devices")
        dev = lambda i: names[i % len(names)]  # noqa: E731
        free = lambda i: names[2 + i % (len(names) - 2)]  # noqa: E731  (not held by pod 1 or the shared claim)

        title("Pod 1 asks for one GPU")
        c1 = make_claim("pod1-gpu", [{"request": "gpu", "driver": GPU_DRIVER, "pool": node.node_name, "device": dev(0)}])
        node.api.load([c1])
        ref1 = ("default", "pod1-gpu", c1["metadata"]["uid"])
        r, ms = timed(gpu.prepare, [ref1])
        show_result("NodePrepareResources", r)
        print("  took %.1f ms; CDI spec files: %s" % (ms, node.cdi_files()))

        title("Two pods share one claim (prepared once, same device)")
        c2 = make_claim("shared-gpu", [{"request": "gpu", "driver": GPU_DRIVER, "pool": node.node_name, "device": dev(1)}])
        node.api.load([c2])
        ref2 = ("default", "shared-gpu", c2["metadata"]["uid"])
        show_result("pod A", gpu.prepare([ref2]))
        show_result("pod B (idempotent)", gpu.prepare([ref2]))

        title("A claim with an unknown config field fails for good, and leaves nothing behind")
        bad = make_claim("bad-config", [{"request": "gpu", "driver": GPU_DRIVER, "pool": node.node_name, "device": free(0)}],
                         configs=[opaque_config(GPU_DRIVER, {"apiVersion": "resource.nvidia.com/v1beta1",
                                                             "kind": "GpuConfig", "unexpectedField": "foo"})])
        node.api.load([bad])
        show_result("NodePrepareResources", gpu.prepare([("default", "bad-config", bad["metadata"]["uid"])]))

        title("IMEX channels: different channels coexist, the same channel is refused")
        domain = str(uuid.uuid4())
        node.api.load([{"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                        "metadata": {"name": "demo-domain", "namespace": "default", "uid": domain},
                        "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "demo-channel"}}},
                        "status": {"status": "Ready", "nodes": [{"name": node.node_name, "status": "Ready"}]}}])
        # What this node's IMEX daemon reports once it runs (ComputeDomainCliques, the default):
        # the plugin waits for it before it prepares a channel.
        clique = re.search(r"identified fabric clique: (\S+)", cd.read_log()).group(1)
        node.api.load([{"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainClique",
                        "metadata": {"name": "%s.%s" % (domain, clique), "namespace": "default"},
                        "daemons": [{"nodeName": node.node_name, "cliqueID": clique, "ipAddress": "10.0.0.1",
                                     "index": 0, "status": "Ready"}]}])
        refs = []
        for name, ch in (("chan-a", 0), ("chan-b", 0), ("chan-c", 1)):
            c = make_claim(name, [{"request": "channel", "driver": CD_DRIVER, "pool": node.node_name,
                                   "device": "channel-%d" % ch}],
                           configs=[opaque_config(CD_DRIVER, {"apiVersion": "resource.nvidia.com/v1beta1",
                                                              "kind": "ComputeDomainChannelConfig",
                                                              "domainID": domain})])
            node.api.load([c])
            refs.append(("default", name, c["metadata"]["uid"]))
            show_result(name + " (channel-%d)" % ch, cd.prepare([refs[-1]]))
        show_result("chan-a released", cd.unprepare([refs[0]]))
        show_result("chan-b retried", cd.prepare([refs[1]]))

        title("The plugin is killed (-9) mid-prepare, the claim is deleted, the reconciler cleans up")
        gpu.stop()
        gpu.start(env={"NVDRA_FAILPOINTS": "engine-after-device-prepare=crash"})
        c3 = make_claim("doomed", [{"request": "gpu", "driver": GPU_DRIVER, "pool": node.node_name, "device": free(1)}])
        node.api.load([c3])
        res = node.ctl(["prepare", "--socket", gpu.dra_socket, "default/doomed/" + c3["metadata"]["uid"]], check=False)
        print("  prepare RPC failed as the plugin died (exit %s)" % gpu.wait_exit())
        node.api.delete("resourceclaims", "default", "doomed")
        gpu.start()
        wait_for(lambda: "unprepared stale claim: default/doomed" in gpu.read_log(), 30, "reconciler")
        print("  plugin log: " + [l for l in gpu.read_log().splitlines() if "unprepared stale claim" in l][-1].strip())

        title("Ledger, as an operator sees it (nvdractl ledger show)")
        print(node.ctl(["ledger", "show", "--boot-id-file", node.boot_id_path, gpu.plugin_dir]).stdout.rstrip())

        title("Latency over the real socket (nvdractl cycle: 100 claims, prepare then unprepare each)")
        objs, refs = [], []
        for i in range(100):
            c = make_claim("bench-%d" % i, [{"request": "gpu", "driver": GPU_DRIVER, "pool": node.node_name,
                                             "device": free(i)}])
            objs.append(c)
            refs.append("default/bench-%d/%s" % (i, c["metadata"]["uid"]))
        node.api.load(objs)
        stats = json.loads(node.ctl(["cycle", "--socket", gpu.dra_socket] + refs, timeout=300).stdout)
        for op in ("prepare_ms", "unprepare_ms"):
            st = stats[op]
            print("  %-10s p50 %6.1f ms  p90 %6.1f ms  p99 %6.1f ms" % (op.split("_")[0], st["p50"], st["p90"], st["p99"]))
        print("  (--kube-api-qps %d; each prepare reads its ResourceClaim once from the API server)" % args.kube_api_qps)
        print("  idle RSS: gpu plugin %d KiB, compute-domain plugin %d KiB" % (gpu.rss_kib(), cd.rss_kib()))

        if args.keep:
            ctl = os.path.join(localnode.BIN, "nvdractl")
            example = make_claim("my-claim", [{"request": "gpu", "driver": GPU_DRIVER, "pool": node.node_name,
                                               "device": free(len(names))}])
            example_file = os.path.join(node.workdir, "my-claim.json")
            with open(example_file, "w") as f:
                json.dump({"objects": [example]}, f, indent=2)
            title("Node left running in %s" % node.workdir)
            print("  logs: %s, %s, %s" % (gpu.log_path, cd.log_path, os.path.join(node.workdir, "apiserver.log")))
            print("  add a claim (allocated as the scheduler would, on device %s) and prepare it:"
                  % example["status"]["allocation"]["devices"]["results"][0]["device"])
            print("    curl -s -X POST -H 'Content-Type: application/json' --data @%s %s/_nvdra/load"
                  % (example_file, node.api.url))
            print("    %s prepare --socket %s default/my-claim/%s" % (ctl, gpu.dra_socket, example["metadata"]["uid"]))
            print("    %s unprepare --socket %s default/my-claim/%s" % (ctl, gpu.dra_socket, example["metadata"]["uid"]))
            print("  metrics: curl -s http://%s/metrics | grep ^nvidia_dra" % metrics[GPU_DRIVER])
            print("           curl -s http://%s/metrics | grep ^nvidia_dra" % metrics[CD_DRIVER])
            print("  ledger:  %s ledger show --boot-id-file %s %s" % (ctl, node.boot_id_path, gpu.plugin_dir))
            print("  slices:  curl -s %s/apis/resource.k8s.io/v1/resourceslices" % node.api.url)
            print("  Ctrl-C to stop.", flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
        title("Done")
    finally:
        node.close()


if __name__ == "__main__":
    main()
