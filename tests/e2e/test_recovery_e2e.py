"""Crash, restart and upgrade scenarios against the real plugin binaries."""

import concurrent.futures
import os
import random
import signal
import time
import unittest

from e2e_base import NodeTestCase, device_names, wait_for

# Fault points on the prepare and unprepare paths (ledger and engine).
PREPARE_FAILPOINTS = [
    "ledger-before-started-write", "ledger-after-started-write",
    "engine-after-device-prepare", "engine-after-cdi-write",
    "ledger-before-completed-write", "ledger-after-completed-write",
]
UNPREPARE_FAILPOINTS = [
    "ledger-before-unprepare-write", "ledger-after-unprepare-write",
    "engine-after-device-unprepare",
    "ledger-before-tombstone-write", "ledger-after-tombstone-write",
]


class RecoveryEndToEnd(NodeTestCase):
    def test_stale_prepare_started_is_cleaned_up_after_its_claim_is_deleted(self):
        plugin = self.gpu_plugin()
        plugin.start(env={"NVDRA_FAILPOINTS": "engine-after-device-prepare=crash"})
        claim = self.gpu_claim("batssuite-rc-stale", ["gpu-0"])
        res = self.node.ctl(["prepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim], check=False)
        self.assertNotEqual(res.returncode, 0, "the plugin should have crashed mid-prepare")
        plugin.wait_exit()
        # The pod and claim are force-deleted while the plugin is down.
        self.node.api.delete("resourceclaims", "default", "batssuite-rc-stale")
        plugin.start()
        wait_for(lambda: self.live_entries(plugin) == [], 30, "the reconciler to remove the stale claim")
        self.assertIn("Checkpointed RC cleanup: unprepared stale claim: default/batssuite-rc-stale (claim " + claim[2], plugin.read_log())
        self.assertEqual(self.node.cdi_files(), [])
        # The kubelet's late Unprepare is a no-op success.
        self.assertOk(plugin.unprepare([claim]), claim[2])

    def test_an_emptied_ledger_keeps_its_claims_specs_and_devices(self):
        plugin = self.gpu_plugin()
        plugin.start()
        held = self.gpu_claim("held", ["gpu-0"])
        self.assertOk(plugin.prepare([held]), held[2])
        plugin.stop()
        # The ledger is lost (0 bytes) while the plugin is down.
        open(os.path.join(plugin.plugin_dir, "ledger.log"), "w").close()
        plugin.start()
        # The first claim after the restart must not get the lost claim's GPU,
        # however soon it comes.
        other = self.gpu_claim("other", ["gpu-0"])
        res = plugin.prepare([other])
        self.assertIn("requested device gpu-0 is already allocated to different claim " + held[2], res[other[2]]["error"])
        self.assertTrue(any(held[2] in f for f in self.node.cdi_files()), self.node.cdi_files())
        # The held claim's own Prepare answers with its device.
        again = plugin.prepare([held])
        self.assertOk(again, held[2])
        self.assertEqual([d["device_name"] for d in again[held[2]]["devices"]], ["gpu-0"])
        self.assertIn("ledger recovery", plugin.read_log())

    def test_after_a_reboot_a_device_of_a_claim_deleted_meanwhile_goes_to_its_new_claim_at_once(self):
        plugin = self.gpu_plugin()
        plugin.start()
        old = self.gpu_claim("before-reboot", ["gpu-3"], reserved_for=[("pod-a", "uid-pod-a")])
        self.assertOk(plugin.prepare([old]), old[2])
        plugin.stop()
        # The node reboots; while it is down the pod and its claim are
        # deleted and gpu-3 is allocated to another pod's claim.
        self.node.set_boot_id("boot-after")
        self.node.api.delete("resourceclaims", "default", "before-reboot")
        new = self.gpu_claim("after-reboot", ["gpu-3"], reserved_for=[("pod-b", "uid-pod-b")])
        plugin.start()
        res = plugin.prepare([new])
        self.assertOk(res, new[2])
        self.assertEqual(device_names(res[new[2]]), ["gpu-3"])
        self.assertEqual([e["uid"] for e in self.live_entries(plugin)], [new[2]])

    def test_kill_at_every_failpoint_then_kubelet_retry_converges(self):
        plugin = self.gpu_plugin()
        for i, fp in enumerate(PREPARE_FAILPOINTS + UNPREPARE_FAILPOINTS):
            with self.subTest(failpoint=fp):
                claim = self.gpu_claim("crash-%d" % i, ["gpu-%d" % (i % 8)])
                if fp in PREPARE_FAILPOINTS:
                    plugin.start(env={"NVDRA_FAILPOINTS": fp + "=crash"})
                    res = self.node.ctl(["prepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim], check=False)
                    self.assertNotEqual(res.returncode, 0)
                else:
                    plugin.start(env={"NVDRA_FAILPOINTS": fp + "=crash"})
                    self.assertOk(plugin.prepare([claim]), claim[2])
                    res = self.node.ctl(["unprepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim], check=False)
                    self.assertNotEqual(res.returncode, 0)
                plugin.wait_exit()
                plugin.start()
                # The kubelet retries the call that failed until it succeeds.
                if fp in PREPARE_FAILPOINTS:
                    r = plugin.prepare([claim])
                    self.assertOk(r, claim[2])
                    self.assertEqual(device_names(r[claim[2]]), ["gpu-%d" % (i % 8)])
                self.assertOk(plugin.unprepare([claim]), claim[2])
                self.assertEqual(self.live_entries(plugin), [])
                self.assertEqual(self.node.cdi_files(), [])
                plugin.stop()

    def test_two_plugin_processes_never_double_hold_a_device(self):
        old = self.gpu_plugin(rolling_update_id="old-pod").start()
        new = self.gpu_plugin(rolling_update_id="new-pod").start()
        claims = [self.gpu_claim("storm-%d" % i, ["gpu-%d" % (i % 4)]) for i in range(24)]
        rng = random.Random(7)

        def worker(seed):
            local = random.Random(seed)
            for _ in range(12):
                c = local.choice(claims)
                p = local.choice([old, new])
                if local.random() < 0.6:
                    p.prepare([c])
                else:
                    p.unprepare([c])

        with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
            list(pool.map(worker, [rng.random() for _ in range(6)]))
        holders = {}
        for e in self.live_entries(old):
            for dev in e.get("held", []):
                self.assertNotIn(dev, holders, "device %s held by %s and %s" % (dev, holders.get(dev), e["uid"]))
                holders[dev] = e["uid"]
        # Both processes see the same ledger.
        self.assertEqual(sorted(e["uid"] for e in self.live_entries(old)),
                         sorted(e["uid"] for e in self.live_entries(new)))
        for c in claims:
            self.assertOk(old.unprepare([c]), c[2])
        self.assertEqual(self.live_entries(new), [])

    def test_sigterm_during_discovery_retries_ends_the_plugin_at_once(self):
        # Discovery that keeps failing is retried for about four minutes; a
        # signal in between must not wait for that (the kubelet's pod
        # deletion grace period is 30 s).
        for plugin in (self.gpu_plugin(), self.cd_plugin()):
            plugin.start(env={"NVDRA_FAILPOINTS": "plugin-device-discovery=error"}, wait=False)
            wait_for(lambda: "device discovery failed (attempt 3)" in plugin.read_log(), 30,
                     "%s to retry its discovery" % plugin.name)
            plugin.proc.send_signal(signal.SIGTERM)
            start = time.monotonic()
            self.assertEqual(plugin.wait_exit(timeout=10), 0, plugin.read_log())
            self.assertLess(time.monotonic() - start, 2.0, plugin.read_log())
            self.assertIn("during startup, shutting down", plugin.read_log())
            self.assertFalse(os.path.exists(plugin.dra_socket))


if __name__ == "__main__":
    unittest.main()
