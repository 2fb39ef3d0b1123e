#!/usr/bin/env python3
"""One ResourceClaim shared by 15 pods, five times over, as upstream's GPU
stress test does it (rc-shared-gpu and 15 pods per loop): for each loop a
new claim (a new UID) reserved for 15 pods, one Prepare per pod over the
real DRA socket (the kubelet prepares a shared claim for each pod that
starts), then its Unprepare. The GPU plugin runs with the default client
rate limit (5 QPS, burst 10) against the test API server on loopback.

Prints the total time and each Prepare's latency (p50, max), as JSON. Results: docs/benchmarks.md.

Usage: python3 bench/shared_claim.py [--loops 5] [--pods 15]   (after building)
"""

import argparse
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))

import localnode  # noqa: E402
from localnode import GPU_DRIVER, make_claim, wait_for  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loops", type=int, default=5)
    ap.add_argument("--pods", type=int, default=15)
    args = ap.parse_args()
    node = localnode.LocalNode()
    try:
        gpu = node.plugin(GPU_DRIVER, "h100x8").start()
        wait_for(lambda: node.api.slices(GPU_DRIVER), what="slices")
        latencies = []
        start = time.monotonic()
        for loop in range(args.loops):
            pods = [("stress-pod-%d" % i, str(uuid.uuid4())) for i in range(args.pods)]
            claim = make_claim("rc-shared-gpu", [{"request": "gpu", "driver": GPU_DRIVER, "pool": node.node_name,
                                                  "device": "gpu-0"}], reserved_for=pods)
            node.api.load([claim])
            ref = "default/rc-shared-gpu/" + claim["metadata"]["uid"]
            for _ in pods:
                t0 = time.monotonic()
                node.ctl(["prepare", "--socket", gpu.dra_socket, ref])
                latencies.append(time.monotonic() - t0)
            node.ctl(["unprepare", "--socket", gpu.dra_socket, ref])
            node.api.delete("resourceclaims", "default", "rc-shared-gpu")
        total = time.monotonic() - start
        latencies.sort()
        out = {
            "loops": args.loops, "pods": args.pods, "total_s": round(total, 2),
            "prepare_p50_ms": round(1000 * latencies[len(latencies) // 2], 1),
            "prepare_max_ms": round(1000 * latencies[-1], 1),
        }
        print(json.dumps(out))
    finally:
        node.close()


if __name__ == "__main__":
    main()
