#!/usr/bin/env python3
"""End-to-end prepare/unprepare latency and idle memory of the plugins.

A local node (test API server on loopback, real plugin binaries on mock
hardware); `nvdractl cycle` prepares and unprepares N single-GPU claims one
after the other over the real DRA socket, as a kubelet does for short-lived
pods, and reports p50/p90/p99 of each call. Then the plugins' resident
memory (VmRSS) is read after they have been idle for a moment.

Usage: python3 bench/e2e_latency.py [--claims 300] [--kube-api-qps 5]   (after building)
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))

import localnode  # noqa: E402
from localnode import CD_DRIVER, GPU_DRIVER, make_claim, wait_for  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--claims", type=int, default=300)
    ap.add_argument("--kube-api-qps", type=int, default=5, help="the plugins' --kube-api-qps (burst: twice that)")
    args = ap.parse_args()
    node = localnode.LocalNode()
    try:
        qps = ["--kube-api-qps", str(args.kube_api_qps), "--kube-api-burst", str(2 * args.kube_api_qps)]
        gpu = node.plugin(GPU_DRIVER, "h100x8", extra_args=qps).start()
        cd = node.plugin(CD_DRIVER, "gb200x4", extra_args=qps).start()
        wait_for(lambda: node.api.slices(GPU_DRIVER), what="slices")
        claims = []
        objs = []
        for i in range(args.claims):
            c = make_claim("bench-%d" % i, [{"request": "gpu", "driver": GPU_DRIVER, "pool": node.node_name,
                                             "device": "gpu-%d" % (i % 8)}])
            objs.append(c)
            claims.append("default/bench-%d/%s" % (i, c["metadata"]["uid"]))
        node.api.load(objs)
        # Warm-up: connections, first discovery of the API versions.
        warm = make_claim("warm", [{"request": "gpu", "driver": GPU_DRIVER, "pool": node.node_name, "device": "gpu-0"}])
        node.api.load([warm])
        node.ctl(["cycle", "--socket", gpu.dra_socket, "default/warm/" + warm["metadata"]["uid"]])
        r = node.ctl(["cycle", "--socket", gpu.dra_socket] + claims, timeout=600)
        result = json.loads(r.stdout)
        time.sleep(2)  # let the plugins go idle before reading their memory
        result["idle_rss_kib"] = {"gpu": gpu.rss_kib(), "compute-domain": cd.rss_kib()}
        print(json.dumps(result, indent=2))
    finally:
        node.close()


if __name__ == "__main__":
    main()
