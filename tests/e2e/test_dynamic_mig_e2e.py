"""Dynamic MIG (the DynamicMIG gate) end to end on the dynamic-mig mock: the
real GPU plugin publishing partitionable devices, creating MIG devices at
Prepare and destroying them at Unprepare, refusing overlaps, and cleaning up
after a kill -9. The mock's GPUs: gpu-0 an H100 with MIG mode off, gpu-1 an
H100 with it on, gpu-2 an A100 with it off (a plain full GPU), gpu-3 an A100
with it on (MIG devices only)."""

import json
import os
import unittest

import localnode
from e2e_base import GPU_DRIVER, NodeTestCase, device_names, wait_for
from test_recovery_e2e import PREPARE_FAILPOINTS, UNPREPARE_FAILPOINTS

GATE = ["--feature-gates", "DynamicMIG=true"]
# The mock's nvidia-cap minors of a MIG device (MockDeviceLib::MigGiCapMinor, MigCiCapMinor).


def gi_cap_minor(gpu_minor, gi):
    return 100 + gpu_minor * 200 + gi * 10


def ci_cap_minor(gpu_minor, gi, ci):
    return gi_cap_minor(gpu_minor, gi) + 1 + ci


class DynamicMigBase(NodeTestCase):
    def mig_plugin(self, **kw):
        return self.gpu_plugin("dynamic-mig", extra_args=list(GATE), **kw)

    @property
    def mock_root(self):
        return os.path.join(self.node.workdir, "mock-" + GPU_DRIVER)

    def mig_state(self):
        path = os.path.join(self.mock_root, "state", "mig.json")
        if not os.path.exists(path):
            return {}
        with open(path) as f:
            return json.load(f)

    def instances(self, uuid=None):
        return [i for i in self.mig_state().get("instances", []) if uuid is None or i["parentUUID"] == uuid]

    def mig_mode(self, uuid):
        return self.mig_state().get("migMode", {}).get(uuid)

    def pool(self):
        """The GPU ResourceSlices once every slice of the pool is published."""
        def complete():
            s = self.node.api.slices(GPU_DRIVER)
            return s if s and len(s) == s[0]["spec"]["pool"]["resourceSliceCount"] else None
        return wait_for(complete, what="the whole pool of GPU ResourceSlices")

    def devices(self):
        return {d["name"]: d for s in self.pool() for d in s["spec"].get("devices", [])}

    def gpu_uuid(self, name):
        return self.devices()[name]["attributes"]["uuid"]["string"]

    def spec_text(self, uid):
        with open(os.path.join(self.node.cdi_root, "k8s.gpu.nvidia.com-claim_%s.json" % uid)) as f:
            return f.read()


class DynamicMigEndToEnd(DynamicMigBase):
    def test_slices_carry_counter_sets_and_every_placement(self):
        plugin = self.mig_plugin().start()
        slices = self.pool()
        devices = {d["name"]: d for s in slices for d in s["spec"].get("devices", [])}
        # Before Kubernetes 1.35 each GPU's counter set sits with its devices.
        counter_sets = {c["name"]: c for s in slices for c in s["spec"].get("sharedCounters", [])}
        self.assertEqual(sorted(counter_sets), ["gpu-0-counter-set", "gpu-1-counter-set", "gpu-3-counter-set"])
        for s in slices:
            for c in s["spec"].get("sharedCounters", []):
                owner = c["name"][:-len("-counter-set")]
                self.assertTrue(any(d["name"].startswith(owner) for d in s["spec"]["devices"]), s["spec"])
        self.assertEqual(sorted(n for n in counter_sets["gpu-0-counter-set"]["counters"] if n.startswith("memory-slice")),
                         ["memory-slice-%d" % i for i in range(8)])
        # Full GPUs: the H100s (gpu-1 leaves MIG mode for it) and the A100
        # with MIG mode off; the A100 in MIG mode only has placements.
        self.assertEqual(sorted(n for n in devices if "-mig-" not in n), ["gpu-0", "gpu-1", "gpu-2"])
        self.assertNotIn("consumesCounters", devices["gpu-2"])
        full = devices["gpu-0"]["consumesCounters"][0]
        self.assertEqual(full["counterSet"], "gpu-0-counter-set")
        self.assertEqual(sorted(n for n in full["counters"] if n.startswith("memory-slice")),
                         ["memory-slice-%d" % i for i in range(8)])
        placement = devices["gpu-0-mig-2g20gb-14-2"]
        self.assertEqual(placement["attributes"]["type"], {"string": "mig"})
        self.assertEqual(placement["attributes"]["profile"], {"string": "2g.20gb"})
        self.assertEqual(placement["attributes"]["parentUUID"], devices["gpu-0"]["attributes"]["uuid"])
        self.assertEqual(placement["capacity"]["memory"], {"value": "20096Mi"})
        used = placement["consumesCounters"][0]
        self.assertEqual(used["counterSet"], "gpu-0-counter-set")
        self.assertEqual(sorted(n for n in used["counters"] if n.startswith("memory-slice")),
                         ["memory-slice-2", "memory-slice-3"])
        self.assertEqual(len([n for n in devices if n.startswith("gpu-0-mig-")]), 25)
        self.assertIn("gpu-3-mig-7g40gb-0-0", devices)
        # The sweep at start turned MIG mode off on the idle H100, as upstream.
        h100_on = devices["gpu-1"]["attributes"]["uuid"]["string"]
        wait_for(lambda: self.mig_mode(h100_on) is False, 30, "MIG mode off on gpu-1")
        self.assertIn("Disabled MIG mode on GPU %s" % h100_on, plugin.read_log())
        a100_on = devices["gpu-3-mig-7g40gb-0-0"]["attributes"]["parentUUID"]["string"]
        self.assertNotEqual(self.mig_mode(a100_on), False, "an A100 stays in MIG mode")

    def test_a_placement_prepares_with_its_caps_nodes_and_excludes_what_overlaps(self):
        plugin = self.mig_plugin().start()
        gpu0 = self.gpu_uuid("gpu-0")
        a = self.gpu_claim("mig-a", ["gpu-0-mig-2g20gb-14-2"])
        r = plugin.prepare([a])
        self.assertOk(r, a[2])
        self.assertEqual(device_names(r[a[2]]), ["gpu-0-mig-2g20gb-14-2"])
        self.assertTrue(self.mig_mode(gpu0), "Prepare turned MIG mode on")
        made = self.instances(gpu0)
        self.assertEqual(len(made), 1)
        self.assertEqual((made[0]["giProfileId"], made[0]["placementStart"], made[0]["placementSize"]), (14, 2, 2))
        spec = self.spec_text(a[2])
        gi, ci = made[0]["giId"], made[0]["ciId"]
        for node in ("/dev/nvidia0", "/dev/nvidiactl",
                     "/dev/nvidia-caps/nvidia-cap%d" % gi_cap_minor(0, gi),
                     "/dev/nvidia-caps/nvidia-cap%d" % ci_cap_minor(0, gi, ci)):
            self.assertIn('"%s"' % node, spec, node)
        self.assertTrue(os.path.exists(os.path.join(self.mock_root, "dev", "nvidia-caps",
                                                    "nvidia-cap%d" % ci_cap_minor(0, gi, ci))))

        # Whatever the scheduler said: an overlapping placement and the full
        # GPU are refused, each with its own error.
        overlap = self.gpu_claim("mig-overlap", ["gpu-0-mig-1g10gb-19-3"])
        full = self.gpu_claim("full", ["gpu-0"])
        r = plugin.prepare([overlap, full])
        for c in (overlap, full):
            self.assertIn("already allocated by claim " + a[2], r[c[2]]["error"])
        self.assertIn("memory-slice-3", r[overlap[2]]["error"])
        self.assertEqual(len(self.instances(gpu0)), 1, "nothing was created for the refused claims")

        # A placement beside it prepares.
        b = self.gpu_claim("mig-b", ["gpu-0-mig-1g10gb-19-0"])
        self.assertOk(plugin.prepare([b]), b[2])
        self.assertEqual(sorted(i["placementStart"] for i in self.instances(gpu0)), [0, 2])

        self.assertOk(plugin.unprepare([a]), a[2])
        self.assertTrue(self.mig_mode(gpu0), "MIG mode stays on while a MIG device is left")
        self.assertOk(plugin.unprepare([b]), b[2])
        self.assertEqual(self.instances(gpu0), [])
        self.assertFalse(self.mig_mode(gpu0), "an H100 leaves MIG mode with its last MIG device")
        self.assertFalse(os.path.exists(os.path.join(self.mock_root, "dev", "nvidia-caps",
                                                    "nvidia-cap%d" % ci_cap_minor(0, gi, ci))))

        # With both gone the full GPU prepares.
        r = plugin.prepare([full])
        self.assertOk(r, full[2])
        self.assertEqual(device_names(r[full[2]]), ["gpu-0"])
        self.assertOk(plugin.unprepare([full]), full[2])
        self.assertEqual(self.live_entries(plugin), [])
        self.assertEqual(self.node.cdi_files(), [])

    def test_an_ampere_gpu_in_mig_mode_stays_in_it(self):
        plugin = self.mig_plugin().start()
        c = self.gpu_claim("a100", ["gpu-3-mig-3g20gb-9-4"])
        self.assertOk(plugin.prepare([c]), c[2])
        parent = self.devices()["gpu-3-mig-3g20gb-9-4"]["attributes"]["parentUUID"]["string"]
        self.assertEqual(len(self.instances(parent)), 1)
        self.assertOk(plugin.unprepare([c]), c[2])
        self.assertEqual(self.instances(parent), [])
        self.assertNotEqual(self.mig_mode(parent), False)

    def test_kill_after_the_mig_device_is_created_then_the_kubelets_retry_takes_it(self):
        plugin = self.mig_plugin()
        plugin.start(env={"NVDRA_FAILPOINTS": "dynamic-mig-after-create=crash"})
        gpu0 = self.gpu_uuid("gpu-0")
        claim = self.gpu_claim("mig-killed", ["gpu-0-mig-3g40gb-9-4"])
        res = self.node.ctl(["prepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim], check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertEqual(plugin.wait_exit(), -9)
        self.assertEqual(len(self.instances(gpu0)), 1, "the MIG device outlived the process")
        plugin.start()
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        made = self.instances(gpu0)
        self.assertEqual(len(made), 1, "the retry took the device at the recorded placement")
        gi, ci = made[0]["giId"], made[0]["ciId"]
        self.assertIn('"/dev/nvidia-caps/nvidia-cap%d"' % ci_cap_minor(0, gi, ci), self.spec_text(claim[2]))
        self.assertOk(plugin.unprepare([claim]), claim[2])
        self.assertEqual(self.instances(gpu0), [])
        self.assertFalse(self.mig_mode(gpu0))

    def test_kill_after_the_mig_device_is_created_and_the_claim_deleted_rolls_it_back(self):
        plugin = self.mig_plugin()
        plugin.start(env={"NVDRA_FAILPOINTS": "dynamic-mig-after-create=crash"})
        gpu0 = self.gpu_uuid("gpu-0")
        claim = self.gpu_claim("mig-gone", ["gpu-0-mig-1g20gb-15-6"])
        self.node.ctl(["prepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim], check=False)
        self.assertEqual(plugin.wait_exit(), -9)
        self.assertEqual(len(self.instances(gpu0)), 1)
        self.node.api.delete("resourceclaims", "default", "mig-gone")
        plugin.start()
        wait_for(lambda: self.live_entries(plugin) == [] and self.instances(gpu0) == [], 30,
                 "the reconciler to roll the half-prepared claim back")
        wait_for(lambda: self.mig_mode(gpu0) is False, 30, "MIG mode off again")
        self.assertEqual(self.node.cdi_files(), [])

    def test_a_mig_device_no_ledger_entry_owns_is_destroyed_at_start_and_the_retry_succeeds(self):
        plugin = self.mig_plugin().start()
        gpu0 = self.gpu_uuid("gpu-0")
        claim = self.gpu_claim("mig-lost", ["gpu-0-mig-4g40gb-5-0"])
        self.assertOk(plugin.prepare([claim]), claim[2])
        old = self.instances(gpu0)
        self.assertEqual(len(old), 1)
        plugin.stop()
        # The claim's record and spec are lost while the plugin is down: the
        # MIG device is one no ledger entry owns.
        open(os.path.join(plugin.plugin_dir, "ledger.log"), "w").close()
        for f in self.node.cdi_files():
            os.remove(os.path.join(self.node.cdi_root, f))
        plugin.start()
        wait_for(lambda: "Destroyed MIG device %s" % old[0]["uuid"] in plugin.read_log(), 30,
                 "the sweep to destroy the MIG device no claim owns")
        self.assertIn("no claim owns it", plugin.read_log())
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        made = self.instances(gpu0)
        self.assertEqual(len(made), 1)
        self.assertNotEqual(made[0]["uuid"], old[0]["uuid"], "a new MIG device, not the unowned one")
        self.assertOk(plugin.unprepare([claim]), claim[2])
        self.assertEqual(self.instances(gpu0), [])

    def test_kill_at_every_failpoint_of_a_dynamic_mig_claim_then_the_retry_converges(self):
        # The crash matrix of test_recovery_e2e with a dynamic MIG claim,
        # plus the kill between the MIG device's creation and its record.
        plugin = self.mig_plugin()
        prepare_points = PREPARE_FAILPOINTS + ["dynamic-mig-after-create"]
        gpu0 = None
        for i, fp in enumerate(prepare_points + UNPREPARE_FAILPOINTS):
            with self.subTest(failpoint=fp):
                device = ["gpu-0-mig-1g10gb-19-%d" % (i % 7), "gpu-0-mig-2g20gb-14-%d" % (2 * (i % 3))][i % 2]
                claim = self.gpu_claim("mig-crash-%d" % i, [device])
                plugin.start(env={"NVDRA_FAILPOINTS": fp + "=crash"})
                gpu0 = gpu0 or self.gpu_uuid("gpu-0")
                if fp in prepare_points:
                    res = self.node.ctl(["prepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim], check=False)
                    self.assertNotEqual(res.returncode, 0)
                else:
                    self.assertOk(plugin.prepare([claim]), claim[2])
                    res = self.node.ctl(["unprepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim],
                                        check=False)
                    self.assertNotEqual(res.returncode, 0)
                self.assertEqual(plugin.wait_exit(), -9)
                plugin.start()
                if fp in prepare_points:
                    r = plugin.prepare([claim])
                    self.assertOk(r, claim[2])
                    self.assertEqual(device_names(r[claim[2]]), [device])
                    self.assertEqual(len(self.instances(gpu0)), 1)
                self.assertOk(plugin.unprepare([claim]), claim[2])
                self.assertEqual(self.instances(gpu0), [])
                self.assertFalse(self.mig_mode(gpu0))
                self.assertEqual(self.live_entries(plugin), [])
                self.assertEqual(self.node.cdi_files(), [])
                plugin.stop()


class TopologyAttributesEndToEnd(DynamicMigBase):
    """resource.kubernetes.io/pcieRoot and numaNode, from the mock's fake
    sysfs, on GPUs and MIG devices; the list form with DRAListTypeAttributes."""

    NUMA = "resource.kubernetes.io/numaNode"
    ROOT = "resource.kubernetes.io/pcieRoot"

    def check(self, gates, numa_of):
        args = ["--feature-gates", gates] if gates else []
        plugin = self.gpu_plugin("dynamic-mig", extra_args=args).start()
        devices = self.devices()
        expected = {"gpu-0": (0, "pci0000:15"), "gpu-2": (1, "pci0000:40")}
        if "DynamicMIG=true" in gates:
            expected.update({"gpu-0-mig-1g10gb-19-3": (0, "pci0000:15"), "gpu-1": (0, "pci0000:27"),
                             "gpu-3-mig-7g40gb-0-0": (1, "pci0000:40")})
        else:
            self.assertEqual(sorted(devices), ["gpu-0", "gpu-2"])
        for name, (numa, root) in expected.items():
            self.assertEqual(devices[name]["attributes"][self.NUMA], numa_of(numa), name)
            self.assertEqual(devices[name]["attributes"][self.ROOT], {"string": root}, name)
        plugin.stop()

    def test_int_form_without_list_type_attributes(self):
        self.check("", lambda n: {"int": n})

    def test_int_form_with_dynamic_mig(self):
        self.check("DynamicMIG=true", lambda n: {"int": n})

    def test_list_form_with_list_type_attributes(self):
        self.check("DRAListTypeAttributes=true", lambda n: {"ints": [n]})

    def test_list_form_with_list_type_attributes_and_dynamic_mig(self):
        self.check("DRAListTypeAttributes=true,DynamicMIG=true", lambda n: {"ints": [n]})


class DynamicMigKubernetes135EndToEnd(DynamicMigBase):
    def setUp(self):
        self.node = localnode.LocalNode(kube_version="1.35")
        self.addCleanup(self.node.close)

    def test_counter_sets_are_in_slices_of_their_own(self):
        self.mig_plugin().start()
        slices = self.pool()
        with_counters = [s for s in slices if s["spec"].get("sharedCounters")]
        self.assertEqual(sorted(c["name"] for s in with_counters for c in s["spec"]["sharedCounters"]),
                         ["gpu-0-counter-set", "gpu-1-counter-set", "gpu-3-counter-set"])
        for s in with_counters:
            self.assertFalse(s["spec"].get("devices"), "a counter set slice carries no devices")
        devices = [d for s in slices for d in s["spec"].get("devices", [])]
        self.assertIn("gpu-0-mig-7g80gb-0-0", [d["name"] for d in devices])
        pools = {s["spec"]["pool"]["name"] for s in slices}
        self.assertEqual(len(pools), 1, "one pool")
        self.assertEqual({s["spec"]["pool"]["resourceSliceCount"] for s in slices}, {len(slices)})


class StaticMigEndToEnd(DynamicMigBase):
    """Without the gate MIG devices are served as the administrator made them."""

    def test_without_the_gate_static_mig_devices_are_served_as_today(self):
        plugin = self.gpu_plugin("a100-mig").start()
        slices = self.pool()
        devices = {d["name"]: d for s in slices for d in s["spec"]["devices"]}
        self.assertIn("gpu-2-mig-3g20gb-9-0", devices)
        self.assertFalse(any("consumesCounters" in d for d in devices.values()))
        self.assertFalse(any(s["spec"].get("sharedCounters") for s in slices))
        self.assertFalse(any(n.startswith("gpu-0-mig-") for n in devices), "no placements without the gate")
        claim = self.gpu_claim("static", ["gpu-2-mig-3g20gb-9-0"])
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        with open(os.path.join(self.node.cdi_root, "k8s.gpu.nvidia.com-claim_%s.json" % claim[2])) as f:
            spec = f.read()
        # The administrator's MIG device (GPU instance 2, compute instance 0 on gpu-2).
        for minor in (gi_cap_minor(2, 2), ci_cap_minor(2, 2, 0)):
            self.assertIn('"/dev/nvidia-caps/nvidia-cap%d"' % minor, spec, minor)
        self.assertOk(plugin.unprepare([claim]), claim[2])
        log = os.path.join(self.node.workdir, "mock-" + GPU_DRIVER, "state", "control.log")
        text = open(log).read() if os.path.exists(log) else ""
        self.assertNotIn("CreateMigInstance", text)
        self.assertNotIn("DestroyMigInstance", text)


if __name__ == "__main__":
    unittest.main()
