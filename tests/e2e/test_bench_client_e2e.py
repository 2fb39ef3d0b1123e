"""The benchmark's kubelet stand-in (nvdractl cycle and wait-info) against a
real GPU plugin: claims in waves over one held connection end prepared or
unprepared as asked, and wait-info sees the registration socket answer.
A smoke test of the client bench/node_bench.py relies on; no timing is
asserted beyond the lower bound that its own pauses guarantee."""

import json
import os
import subprocess
import unittest

from e2e_base import NodeTestCase
from localnode import BIN


def ctl(*args):
    r = subprocess.run([os.path.join(BIN, "nvdractl")] + list(args), capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


class BenchClientEndToEnd(NodeTestCase):
    def claims(self, count):
        return ["%s/%s/%s" % self.gpu_claim("b-%d" % i, ["gpu-%d" % (i % 8)]) for i in range(count)]

    def cycle(self, gpu, *args):
        """nvdractl cycle against the plugin; its JSON, every call answered without error."""
        rc, out, err = ctl("cycle", "--socket", gpu.dra_socket, *args)
        self.assertEqual(rc, 0, out + err)
        r = json.loads(out)
        self.assertEqual(r["errors"], [])
        return r

    def test_concurrent_waves_prepare_and_unprepare_every_claim(self):
        gpu = self.gpu_plugin().start()
        # Waves of 3, 3 and 1: the last leaves two of the client's threads idle.
        refs = self.claims(7)
        r = self.cycle(gpu, "--concurrency", "3", *refs)
        self.assertEqual(r["prepare_ms"]["count"], 7)
        self.assertEqual(r["unprepare_ms"]["count"], 7)
        self.assertEqual(r["wave_ms"]["count"], 3)
        self.assertGreater(r["claims_per_s"], 0)
        self.assertEqual(self.live_entries(gpu), [])

    def test_pause_comes_before_each_call_and_stays_out_of_its_latency(self):
        gpu = self.gpu_plugin().start()
        refs = self.claims(2)
        r = self.cycle(gpu, "--pause-us", "20000", "--samples", *refs)
        # Two waves of one claim, a 20 ms pause before each prepare and each
        # unprepare: the run lasts the four pauses plus the calls, and no
        # call's latency holds its pause.
        calls = sum(r["prepare_samples_ms"]) + sum(r["unprepare_samples_ms"])
        self.assertGreaterEqual(r["total_ms"], calls + 80.0)
        self.assertEqual(self.live_entries(gpu), [])

    def test_prepare_only_holds_claims_until_unprepare_only(self):
        gpu = self.gpu_plugin().start()
        refs = self.claims(5)
        r = self.cycle(gpu, "--batch", "2", "--prepare-only", *refs)
        self.assertEqual(r["prepare_ms"]["count"], 3)  # calls of 2, 2 and 1 claims
        self.assertIsNone(r["unprepare_ms"])
        self.assertEqual(len(self.live_entries(gpu)), 5)
        self.cycle(gpu, "--unprepare-only", *refs)
        self.assertEqual(self.live_entries(gpu), [])

    def test_ledger_fill_adds_entries_the_running_plugin_reads_and_keeps_serving(self):
        gpu = self.gpu_plugin(extra_args=["--tombstone-ttl", "3600"]).start()
        r = subprocess.run([os.path.join(BIN, "ledger_fill"), gpu.plugin_dir, self.node.boot_id_path, "fill", "3",
                            "17", "gpu.nvidia.com", self.node.node_name],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        held = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual([h["device"] for h in held], ["fill-dev-0", "fill-dev-1", "fill-dev-2"])
        data = gpu.ledger()
        states = [c["state"] for c in data["claims"]]
        self.assertEqual(states.count("PrepareCompleted"), 3)
        self.assertEqual(states.count("Tombstone"), 17)
        # The plugin picks the rewritten ledger up at its next request.
        refs = self.claims(2)
        self.cycle(gpu, *refs)
        states = [c["state"] for c in gpu.ledger()["claims"]]
        self.assertEqual(states.count("PrepareCompleted"), 3)
        self.assertEqual(states.count("Tombstone"), 19)

    def test_wait_info_reports_when_the_registration_socket_answers(self):
        gpu = self.gpu_plugin().start()
        rc, out, err = ctl("wait-info", "--socket", gpu.reg_socket, "--timeout-ms", "20000")
        self.assertEqual(rc, 0, out + err)
        lines = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(lines[0], {"ready": True})
        self.assertGreater(lines[1]["answered_unix_ns"], 0)
        rc, _, err = ctl("wait-info", "--socket", gpu.reg_socket + ".missing", "--timeout-ms", "50")
        self.assertEqual(rc, 1)
        self.assertIn("did not answer", err)


if __name__ == "__main__":
    unittest.main()
