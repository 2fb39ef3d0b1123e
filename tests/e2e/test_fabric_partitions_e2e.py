"""Fabric Manager partitions (the FabricManagerPartitioning gate) end to end
on the h100x8 mock, an HGX board whose mock Fabric Manager offers the shared
NVSwitch partitions (one of all 8 GPUs, ids 1-2 of 4, ids 3-6 of 2, ids 7-14
of 1): the real GPU plugin publishing gpuModuleID and partitionN, activating
the partition of exactly a claim's GPUs at Prepare and deactivating it at
Unprepare, refusing a claim whose GPUs form no partition, and deactivating a
partition whose claim was deleted while the plugin lay killed after the
activation. The mock keeps Fabric Manager's state under its root
(state/fabric-manager.json and .log), where the tests read it."""

import json
import os
import unittest

from e2e_base import GPU_DRIVER, NodeTestCase, device_names, wait_for

GATE = ["--feature-gates", "FabricManagerPartitioning=true"]


class FabricPartitionsEndToEnd(NodeTestCase):
    def fm_plugin(self, **kw):
        return self.gpu_plugin("h100x8", extra_args=list(GATE), **kw)

    @property
    def mock_root(self):
        return os.path.join(self.node.workdir, "mock-" + GPU_DRIVER)

    def active(self):
        path = os.path.join(self.mock_root, "state", "fabric-manager.json")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return json.load(f)["active"]

    def fm_log(self):
        path = os.path.join(self.mock_root, "state", "fabric-manager.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().splitlines()

    def devices(self):
        def complete():
            s = self.node.api.slices(GPU_DRIVER)
            return s if s and len(s) == s[0]["spec"]["pool"]["resourceSliceCount"] else None
        slices = wait_for(complete, what="the whole pool of GPU ResourceSlices")
        return {d["name"]: d for s in slices for d in s["spec"].get("devices", [])}

    def pair(self, partition_id):
        """The names of the two GPUs whose partition2 is `partition_id`."""
        names = sorted(n for n, d in self.devices().items()
                       if d["attributes"].get("partition2", {}).get("int") == partition_id)
        self.assertEqual(len(names), 2, names)
        return names

    def test_the_slice_carries_module_ids_and_the_partition_of_each_size(self):
        self.fm_plugin().start()
        devices = self.devices()
        gpus = {n: d for n, d in devices.items() if d["attributes"]["type"]["string"] == "gpu"}
        self.assertEqual(len(gpus), 8)
        modules = sorted(d["attributes"]["gpuModuleID"]["int"] for d in gpus.values())
        self.assertEqual(modules, list(range(1, 9)))
        for d in gpus.values():
            m = d["attributes"]["gpuModuleID"]["int"]
            self.assertEqual(d["attributes"]["partition8"], {"int": 0})
            self.assertEqual(d["attributes"]["partition4"], {"int": 1 if m <= 4 else 2})
            self.assertEqual(d["attributes"]["partition2"], {"int": 3 + (m - 1) // 2})
            self.assertEqual(d["attributes"]["partition1"], {"int": 6 + m})

    def test_prepare_activates_the_claims_partition_and_unprepare_deactivates_it(self):
        plugin = self.fm_plugin().start()
        names = self.pair(4)
        claim = self.gpu_claim("pair", names)
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        self.assertEqual(device_names(r[claim[2]]), names)
        self.assertEqual(self.active(), [4])
        # The kubelet's retry changes nothing.
        self.assertOk(plugin.prepare([claim]), claim[2])
        self.assertEqual(self.fm_log(), ["activate 4"])
        self.assertOk(plugin.unprepare([claim]), claim[2])
        self.assertEqual(self.active(), [])
        self.assertEqual(self.fm_log(), ["activate 4", "deactivate 4"])
        self.assertEqual(self.live_entries(plugin), [])

    def test_gpus_that_form_no_partition_are_refused_for_that_claim_alone(self):
        plugin = self.fm_plugin().start()
        first, second = self.pair(3), self.pair(5)
        mixed = self.gpu_claim("mixed", [first[0], second[0]])
        fits = self.gpu_claim("fits", second)
        r = plugin.prepare([mixed, fits])
        self.assertIn("does not match any FM partition; refusing partition activation", r[mixed[2]]["error"])
        self.assertIn("fabric manager: GPU module set [", r[mixed[2]]["error"])
        self.assertOk(r, fits[2])
        self.assertEqual(self.active(), [5])
        # The refused claim holds nothing: its GPU serves a fitting claim.
        alone = self.gpu_claim("alone", [first[0]])
        self.assertOk(plugin.prepare([alone]), alone[2])
        self.assertEqual(sorted(self.active()), [5, self.devices()[first[0]]["attributes"]["partition1"]["int"]])
        r = plugin.unprepare([mixed, fits, alone])
        for c in (mixed, fits, alone):
            self.assertOk(r, c[2])
        self.assertEqual(self.active(), [])

    def test_kill_after_the_activation_and_the_claim_deleted_deactivates_it(self):
        plugin = self.fm_plugin()
        plugin.start(env={"NVDRA_FAILPOINTS": "fabric-partition-after-activate=crash"})
        names = self.pair(6)
        claim = self.gpu_claim("pair-gone", names)
        res = self.node.ctl(["prepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim], check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertEqual(plugin.wait_exit(), -9)
        self.assertEqual(self.active(), [6], "activated before the kill")
        self.node.api.delete("resourceclaims", "default", "pair-gone")
        plugin.start()
        wait_for(lambda: self.live_entries(plugin) == [] and self.active() == [], 30,
                 "the reconciler to deactivate the partition of the deleted claim")
        self.assertEqual(self.fm_log(), ["activate 6", "deactivate 6"])
        self.assertEqual(self.node.cdi_files(), [])

    def test_kill_after_the_activation_then_the_kubelets_retry_completes_the_claim(self):
        plugin = self.fm_plugin()
        plugin.start(env={"NVDRA_FAILPOINTS": "fabric-partition-after-activate=crash"})
        names = self.pair(5)
        claim = self.gpu_claim("pair-retried", names)
        self.node.ctl(["prepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim], check=False)
        self.assertEqual(plugin.wait_exit(), -9)
        plugin.start()
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        self.assertEqual(device_names(r[claim[2]]), names)
        self.assertEqual(self.active(), [5])
        self.assertEqual(self.fm_log(), ["activate 5"], "the retry found it active")
        self.assertOk(plugin.unprepare([claim]), claim[2])
        self.assertEqual(self.active(), [])

    def test_a_partition_no_ledger_entry_owns_is_deactivated_at_start(self):
        plugin = self.fm_plugin().start()
        names = self.pair(3)
        claim = self.gpu_claim("pair-lost", names)
        self.assertOk(plugin.prepare([claim]), claim[2])
        self.assertEqual(self.active(), [3])
        plugin.stop()
        # The claim's record is lost while the plugin is down.
        open(os.path.join(plugin.plugin_dir, "ledger.log"), "w").close()
        for f in self.node.cdi_files():
            os.remove(os.path.join(self.node.cdi_root, f))
        plugin.start()
        wait_for(lambda: self.active() == [], 30, "the sweep to deactivate the partition no claim owns")
        self.assertIn("Fabric Manager partition 3 was left active by no prepared claim", plugin.read_log())


if __name__ == "__main__":
    unittest.main()
