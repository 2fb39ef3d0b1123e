"""VFIO passthrough (the PassthroughSupport gate) end to end on the h100x8
mock: the real GPU plugin publishing each GPU's gpu-vfio twin, moving the GPU
to vfio-pci in the mock's fake sysfs at Prepare and back to nvidia at
Unprepare, refusing the plain GPU meanwhile, and binding the GPU back after
a kill -9 between the unbind and the bind whose claim is then deleted, a kill
at every step of the bind and of the bind back whose retry finishes it, a GPU
that a process holds kept on nvidia until the process lets go, and a GPU
found on vfio-pci at start published for passthrough only.

--host-root is the test's work directory, whose proc/ shows this test's
process alone: the plugin looks there for the processes holding a GPU, and
tests running beside this one stay out of sight."""

import json
import os
import unittest

from e2e_base import GPU_DRIVER, NodeTestCase, cdi_ids, device_names, wait_for
from localnode import opaque_config



def mock_iommu_group(minor):
    return 40 + minor  # MockIommuGroup


class VfioEndToEnd(NodeTestCase):
    def vfio_plugin(self, gates="PassthroughSupport=true", extra=(), **kw):
        proc = os.path.join(self.node.workdir, "proc")
        if not os.path.isdir(proc):
            os.makedirs(proc)
            for name in ("self", str(os.getpid())):
                os.symlink("/proc/%d" % os.getpid(), os.path.join(proc, name))
        args = ["--feature-gates", gates, "--host-root", self.node.workdir, "--vfio-gpu-free-timeout", "0"] + list(extra)
        return self.gpu_plugin("h100x8", extra_args=args, **kw)

    def start(self, plugin, env=None):
        return plugin.start(env=env)

    @property
    def mock_root(self):
        return os.path.join(self.node.workdir, "mock-" + GPU_DRIVER)

    def devices(self):
        def complete():
            s = self.node.api.slices(GPU_DRIVER)
            return s if s and len(s) == s[0]["spec"]["pool"]["resourceSliceCount"] else None
        slices = wait_for(complete, what="the whole pool of GPU ResourceSlices")
        return {d["name"]: d for s in slices for d in s["spec"].get("devices", [])}

    def driver_of(self, bus_id):
        link = os.path.join(self.mock_root, "sys", "bus", "pci", "devices", bus_id, "driver")
        return os.path.basename(os.readlink(link)) if os.path.islink(link) else ""

    def spec(self, uid):
        with open(os.path.join(self.node.cdi_root, "k8s.gpu.nvidia.com-claim_%s.json" % uid)) as f:
            return json.load(f)

    def twin(self):
        devices = self.devices()
        twin = devices["gpu-vfio-0"]
        bus = twin["attributes"]["resource.kubernetes.io/pciBusID"]["string"]
        plain = [n for n, d in devices.items() if d["attributes"]["type"]["string"] == "gpu"
                 and d["attributes"]["resource.kubernetes.io/pciBusID"]["string"] == bus]
        self.assertEqual(len(plain), 1, plain)
        return twin, bus, plain[0]

    def test_a_passthrough_claim_gets_its_vfio_nodes_and_excludes_the_plain_gpu(self):
        plugin = self.start(self.vfio_plugin())
        twin, bus, plain_name = self.twin()
        self.assertEqual(twin["attributes"]["type"], {"string": "vfio"})
        self.assertEqual(twin["attributes"]["vendorID"], {"string": "0x10de"})
        minor = int(plain_name.split("-")[1])
        group = mock_iommu_group(minor)
        params = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "VfioDeviceConfig",
                  "iommu": {"backendPolicy": "LegacyOnly", "enableAPIDevice": True}}
        vm = self.gpu_claim("vm", ["gpu-vfio-0"], configs=[opaque_config(GPU_DRIVER, params)])
        r = plugin.prepare([vm])
        self.assertOk(r, vm[2])
        self.assertEqual(device_names(r[vm[2]]), ["gpu-vfio-0"])
        self.assertEqual(self.driver_of(bus), "vfio-pci")
        self.assertTrue(os.path.exists(os.path.join(self.mock_root, "dev", "vfio", str(group))))
        spec = self.spec(vm[2])
        nodes = [n["path"] for d in spec["devices"] for n in d["containerEdits"].get("deviceNodes", [])]
        self.assertEqual(nodes, ["/dev/vfio/%d" % group])
        common = spec["containerEdits"]
        self.assertIn("NVIDIA_VISIBLE_DEVICES=void", common.get("env", []))
        self.assertEqual([n["path"] for n in common.get("deviceNodes", [])], ["/dev/vfio/vfio"])

        # The slice withdraws the plain GPU while its twin is prepared.
        wait_for(lambda: plain_name not in self.devices(), 30, "the slice without " + plain_name)
        self.assertIn("gpu-vfio-0", self.devices())
        plain = self.gpu_claim("plain", [plain_name])
        r = plugin.prepare([plain])
        self.assertIn("requested device %s is already allocated to different claim %s" % (plain_name, vm[2]),
                      r[plain[2]]["error"])
        self.assertEqual(self.driver_of(bus), "vfio-pci")

        self.assertOk(plugin.unprepare([vm]), vm[2])
        self.assertEqual(self.driver_of(bus), "nvidia")
        wait_for(lambda: plain_name in self.devices(), 30, "the slice with " + plain_name + " again")
        self.assertFalse(os.path.exists(os.path.join(self.mock_root, "dev", "vfio", str(group))))
        r = plugin.prepare([plain])
        self.assertOk(r, plain[2])
        self.assertEqual(device_names(r[plain[2]]), [plain_name])
        self.assertOk(plugin.unprepare([plain]), plain[2])
        self.assertEqual(self.live_entries(plugin), [])

    def test_kill_after_the_unbind_and_the_claim_deleted_leaves_the_gpu_on_nvidia(self):
        plugin = self.vfio_plugin()
        self.start(plugin, env={"NVDRA_FAILPOINTS": "vfio-after-unbind=crash"})
        _, bus, _ = self.twin()
        claim = self.gpu_claim("vm-gone", ["gpu-vfio-0"])
        res = self.node.ctl(["prepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim], check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertEqual(plugin.wait_exit(), -9)
        self.assertEqual(self.driver_of(bus), "", "unbound from nvidia, not yet bound to vfio-pci")
        self.node.api.delete("resourceclaims", "default", "vm-gone")
        plugin.start()
        wait_for(lambda: self.live_entries(plugin) == [] and self.driver_of(bus) == "nvidia", 30,
                 "the reconciler to bind the GPU back to nvidia")

    def test_kill_at_every_step_of_the_bind_and_the_bind_back_then_the_retry_finishes(self):
        # The claim still exists: the kubelet's retry of Prepare resumes from
        # where the kill left the GPU and ends on vfio-pci; a kill while the
        # GPU goes back to nvidia is finished by the retried Unprepare.
        # (point, driver the kill leaves the GPU on); pci-after-driver-override
        # is reached once by the bind to vfio-pci, so the bind back is its 2nd.
        prepare_points = [("vfio-before-unbind", "nvidia"), ("vfio-after-unbind", ""),
                          ("pci-after-driver-override", ""), ("engine-after-device-prepare", "vfio-pci")]
        unprepare_points = [("pci-after-unbind", ""), ("pci-after-driver-override*2", ""),
                            ("pci-before-override-clear", "nvidia"), ("engine-after-device-unprepare", "nvidia")]
        plugin = self.vfio_plugin()
        for i, (fp, left_on) in enumerate(prepare_points + unprepare_points):
            with self.subTest(failpoint=fp):
                point, _, nth = fp.partition("*")
                plugin.start(env={"NVDRA_FAILPOINTS": point + "=crash" + ("*" + nth if nth else "")})
                _, bus, _ = self.twin()
                claim = self.gpu_claim("vm-kill-%d" % i, ["gpu-vfio-0"])
                ref = "%s/%s/%s" % claim
                if (fp, left_on) in prepare_points:
                    res = self.node.ctl(["prepare", "--socket", plugin.dra_socket, ref], check=False)
                else:
                    self.assertOk(plugin.prepare([claim]), claim[2])
                    res = self.node.ctl(["unprepare", "--socket", plugin.dra_socket, ref], check=False)
                self.assertNotEqual(res.returncode, 0, res)
                self.assertEqual(plugin.wait_exit(), -9)
                self.assertEqual(self.driver_of(bus), left_on)
                plugin.start()
                if (fp, left_on) in prepare_points:
                    r = plugin.prepare([claim])
                    self.assertOk(r, claim[2])
                    self.assertEqual(device_names(r[claim[2]]), ["gpu-vfio-0"])
                    self.assertEqual(self.driver_of(bus), "vfio-pci")
                self.assertOk(plugin.unprepare([claim]), claim[2])
                self.assertEqual(self.driver_of(bus), "nvidia")
                override = os.path.join(self.mock_root, "sys", "bus", "pci", "devices", bus, "driver_override")
                with open(override) as f:
                    self.assertEqual(f.read(), "\n")
                self.assertEqual(self.live_entries(plugin), [])
                plugin.stop()

    def test_a_process_on_the_gpu_keeps_it_on_nvidia_until_it_lets_go(self):
        plugin = self.start(self.vfio_plugin())
        _, bus, plain_name = self.twin()
        node = os.path.join(self.mock_root, "driver-root", "dev", "nvidia" + plain_name.split("-")[1])
        if not os.path.exists(node):
            node = os.path.join(self.mock_root, "dev", "nvidia" + plain_name.split("-")[1])
        fd = os.open(node, os.O_PATH)
        claim = self.gpu_claim("vm-busy", ["gpu-vfio-0"])
        try:
            r = plugin.prepare([claim])
        finally:
            os.close(fd)
        error = r[claim[2]]["error"]
        self.assertIn('error waiting for GPU "%s" to be free' % bus, error)
        self.assertIn("has open fds by process(es): %d" % os.getpid(), error)
        self.assertEqual(self.driver_of(bus), "nvidia")
        # The kubelet's retry, once the process let go.
        self.assertOk(plugin.prepare([claim]), claim[2])
        self.assertEqual(self.driver_of(bus), "vfio-pci")
        self.assertOk(plugin.unprepare([claim]), claim[2])
        self.assertEqual(self.driver_of(bus), "nvidia")

    def test_a_gpu_on_vfio_pci_at_start_stays_published_for_passthrough_only(self):
        plugin = self.start(self.vfio_plugin())
        twin, bus, plain_name = self.twin()
        claim = self.gpu_claim("vm-kept", ["gpu-vfio-0"])
        self.assertOk(plugin.prepare([claim]), claim[2])
        plugin.stop()
        plugin.start()
        # NVML (the mock) no longer sees the GPU; sysfs does.
        def republished():
            d = self.devices()
            return d if "gpu-vfio-0" in d and plain_name not in d else None
        devices = wait_for(republished, 30, "the slice without the plain GPU")
        self.assertEqual(devices["gpu-vfio-0"]["attributes"]["resource.kubernetes.io/pciBusID"], {"string": bus})
        self.assertEqual(self.driver_of(bus), "vfio-pci", "its claim still holds it")
        # The repeated Prepare answers from the ledger; Unprepare binds back.
        self.assertOk(plugin.prepare([claim]), claim[2])
        self.assertOk(plugin.unprepare([claim]), claim[2])
        self.assertEqual(self.driver_of(bus), "nvidia")
        self.assertEqual(self.live_entries(plugin), [])

    def test_device_metadata_files_describe_the_passthrough_device_while_it_is_prepared(self):
        plugin = self.start(self.vfio_plugin(gates="PassthroughSupport=true,DeviceMetadata=true"))
        twin, bus, _ = self.twin()
        vm = self.gpu_claim("vm-meta", ["gpu-vfio-0"])
        r = plugin.prepare([vm])
        self.assertOk(r, vm[2])
        meta_id = "gpu.nvidia.com/metadata=%s_gpu" % vm[2]
        self.assertIn(meta_id, cdi_ids(r[vm[2]]))
        path = os.path.join(plugin.plugin_dir, "dra-device-metadata", "default_vm-meta", "gpu", "metadata.json")
        with open(path) as f:
            # A stream of one object per API version; v1alpha1 only today.
            meta, _ = json.JSONDecoder().raw_decode(f.read())
        self.assertEqual(meta["kind"], "DeviceMetadata")
        self.assertEqual(meta["metadata"]["uid"], vm[2])
        device = meta["requests"][0]["devices"][0]
        self.assertEqual((device["driver"], device["name"]), (GPU_DRIVER, "gpu-vfio-0"))
        self.assertEqual(device["attributes"]["resource.kubernetes.io/pciBusID"], {"string": bus})
        spec_path = os.path.join(self.node.cdi_root, "gpu.nvidia.com_metadata_%s_gpu.json" % vm[2])
        with open(spec_path) as f:
            spec = json.load(f)
        self.assertEqual(spec["devices"][0]["containerEdits"]["mounts"][0]["hostPath"], path)
        self.assertOk(plugin.unprepare([vm]), vm[2])
        self.assertFalse(os.path.exists(path))
        self.assertFalse(os.path.exists(spec_path))
        self.assertEqual(self.driver_of(bus), "nvidia")


if __name__ == "__main__":
    unittest.main()
