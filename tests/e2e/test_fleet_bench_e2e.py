"""The fleet benchmark's client (bench/fleet_bench.py) on a small fleet, and
the test API server's per-client counters it reads: every claim of the
wave ends prepared, then unprepared; requests and watches are counted per
client and add up. No time is asserted."""

import http.client
import json
import os
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

import localnode
from localnode import ROOT, wait_for

FLEET = os.path.join(ROOT, "bench", "fleet_bench.py")


class ApiServerStats(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="nvdra-stats-")
        self.addCleanup(self.dir.cleanup)
        self.api = localnode.ApiServer(self.dir.name, "node-a")
        self.addCleanup(self.api.stop)
        self.url = urllib.parse.urlparse(self.api.url)

    def call(self, path, token=None):
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=10)
        conn.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return resp.status

    def stats(self, clear=False):
        status, body = self.api.request("POST", "/_nvdra/stats", {"clear": clear})
        self.assertEqual(status, 200, body)
        return body

    def test_requests_and_watches_are_counted_under_their_token(self):
        self.stats(clear=True)
        self.assertEqual(self.call("/api/v1/nodes/node-a", "node-a/gpu"), 200)
        self.assertEqual(self.call("/api/v1/nodes/node-a", "node-a/gpu"), 200)
        self.assertEqual(self.call("/apis/resource.k8s.io/v1/resourceslices", "node-a/cd"), 200)
        self.assertEqual(self.call("/api/v1/nodes/missing"), 404)
        watch = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=10)
        watch.request("GET", "/api/v1/nodes?watch=1&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dnode-a",
                      headers={"Authorization": "Bearer node-a/cd"})
        resp = watch.getresponse()
        self.assertEqual(resp.status, 200)
        s = wait_for(lambda: (lambda b: b if b["open_watches"] else None)(self.stats()), what="the open watch")
        self.assertEqual(s["open_watches"], {"node-a/cd": {"nodes": 1}})
        self.assertEqual(s["requests"], {"node-a/gpu": {"get": {"nodes": 2}},
                                         "node-a/cd": {"list": {"resourceslices": 1}, "watch": {"nodes": 1}},
                                         "": {"get": {"nodes": 1}}})
        self.assertEqual(s["total"], 5)
        self.assertEqual(s["watches_started"], 1)
        self.assertEqual(sum(s["per_second"].values()), 5)
        self.assertGreater(s["threads"], 1)
        resp.close()
        watch.close()
        # Clearing resets the counters, not the streams; a closed stream goes
        # (the server sees it at its next bookmark, a second later).
        self.assertEqual(self.stats(clear=True)["total"], 5)
        self.assertEqual(self.stats()["total"], 0)
        wait_for(lambda: not self.stats()["open_watches"], what="the closed watch to go")


class FleetBenchClient(unittest.TestCase):
    NODES = 3
    CLAIMS = 15  # five a node: two ComputeDomain channel claims, three GPU claims

    def test_small_fleet_prepares_and_unprepares_every_claim_and_counts_per_node(self):
        with tempfile.TemporaryDirectory(prefix="fleet-t-") as d:
            out = os.path.join(d, "summary.json")
            r = subprocess.run([sys.executable, FLEET, "--nodes", str(self.NODES), "--idle-seconds", "4",
                                "--claims", str(self.CLAIMS), "--start-batch", "2", "--workdir-root", d,
                                "--json-out", out], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-4000:])
            with open(out) as f:
                s = json.load(f)
            self.assertEqual([n for n in os.listdir(d) if n.startswith("nvdra-fleet-")], [])
        self.assertEqual(s["nodes"], self.NODES)
        self.assert_idle(s["idle"])
        w = s["wave"]
        self.assertEqual((w["claims_gpu"], w["claims_cd"]), (9, 6))
        # Every claim was found PrepareCompleted in its plugin's ledger, and
        # no entry was left live after the unprepare.
        self.assertEqual(w["prepared_checked"], self.CLAIMS)
        self.assertEqual(w["live_after_unprepare"], 0)
        for half in ("prepare", "unprepare"):
            self.assertEqual(w[half]["calls"], self.CLAIMS)
            self.assertEqual(w[half]["latency_ms"]["count"], self.CLAIMS)
            self.assertEqual(w[half]["latency_ms_gpu"]["count"], 9)
            self.assertEqual(w[half]["latency_ms_cd"]["count"], 6)
            self.assertLessEqual(w[half]["latency_ms"]["p50"], w[half]["latency_ms"]["p99"])
            self.assertEqual(w[half]["requests"], sum(sum(v.values()) for v in w[half]["requests_by_verb"].values()))
        # A first Prepare reads its claim once; an Unprepare reads none.
        by = w["prepare"]["requests_by_verb"]
        self.assertEqual(by["gpu"]["get resourceclaims"], 9)
        self.assertEqual(by["cd"]["get resourceclaims"], 6)
        self.assertNotIn("get resourceclaims", w["unprepare"]["requests_by_verb"].get("gpu", {}))
        for fp in (s["footprint_idle"], s["footprint_after"]):
            self.assertGreater(fp["gpu"]["rss_kib_total"], 0)
            self.assertEqual(fp["all"]["rss_kib_total"], fp["gpu"]["rss_kib_total"] + fp["cd"]["rss_kib_total"])
        self.assertGreater(s["apiserver_idle"]["VmRSS"], 0)

    def assert_idle(self, idle):
        total = idle["requests_per_node_hour"]
        by_plugin = idle["requests_per_node_hour_by_plugin"]
        self.assertGreaterEqual(total, 0)
        self.assertAlmostEqual(total, by_plugin["gpu"] + by_plugin["cd"], places=6)
        for plugin, verbs in idle["requests_per_node_hour_by_verb"].items():
            self.assertTrue(all(v > 0 for v in verbs.values()), verbs)
            self.assertAlmostEqual(sum(verbs.values()), by_plugin[plugin], places=6)
        self.assertEqual(idle["requests_other"], {})
        # Each plugin watches its node's slices of its driver; the
        # ComputeDomain plugin of a node without ComputeDomain claims
        # watches nothing else.
        self.assertEqual(idle["watches_per_node_by_resource"],
                         {"cd resourceslices": 1, "gpu resourceslices": 1})
        self.assertEqual(idle["watches_per_node"]["min"], 2)
        self.assertEqual(idle["watches_per_node"]["max"], 2)
        self.assertGreaterEqual(idle["watches_per_node"]["samples"], 1)


if __name__ == "__main__":
    unittest.main()
