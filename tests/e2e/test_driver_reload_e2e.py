"""A GPU driver upgrade under a running GPU plugin: the mock node's driver is
swapped from version A to B (nvdra-discover --mock-swap-driver), with a gap
in between in which the driver is gone. The plugin lets go of the driver,
refuses new claims with a retryable error, keeps unpreparing, and comes back
on B: slices and claim specs name B, without a restart. Prints the swap's
timeline in milliseconds."""

import json
import os
import shutil
import subprocess
import time
import unittest

import localnode
from e2e_base import GPU_DRIVER, NodeTestCase, cdi_ids, wait_for
from localnode import BIN

FAKE_NVML = os.path.join(BIN, "..", "fake-nvml", "driver-root", "usr", "lib64", "libnvidia-ml.so.1")

NEW_VERSION = "580.65.06"


def semver(v):
    """A driver version as the slices publish it (semantic version: "570.158.01" -> "570.158.1")."""
    return ".".join(str(int(p)) for p in v.split("."))


def driver_versions(slices):
    out = set()
    for s in slices:
        for d in s["spec"].get("devices", []):
            v = d.get("attributes", {}).get("driverVersion", {}).get("version")
            if v:
                out.add(v)
    return out


def tainted(slices, key):
    devs = [d for s in slices for d in s["spec"].get("devices", [])]
    return bool(devs) and all(any(t["key"] == key for t in d.get("taints", [])) for d in devs)


class DriverReloadEndToEnd(NodeTestCase):
    def setUp(self):
        super().setUp()
        self.plugin = self.gpu_plugin().start()
        self.root = self.node.mock_state_dir(GPU_DRIVER)
        self.slices = lambda: self.node.api.slices(GPU_DRIVER)
        with open(os.path.join(self.root, "proc/driver/nvidia/version")) as f:
            self.old = f.read().split("Kernel Module")[1].split()[0]
        wait_for(lambda: driver_versions(self.slices()) == {semver(self.old)}, what="slices")

    def swap(self, version):
        r = subprocess.run([os.path.join(BIN, "nvdra-discover"), "--mock-hardware", "h100x8", "--mock-root",
                            self.root, "--mock-swap-driver", version], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)

    def held_driver_files(self):
        """The mock driver's files and device nodes the plugin has open or mapped."""
        pid = self.plugin.proc.pid
        prefixes = [os.path.join(self.root, p) for p in ("usr/lib", "lib/firmware", "dev/nvidia")]
        held = set()
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            held.update(target for p in prefixes if target.startswith(p))
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                path = line[line.find("/"):].strip() if "/" in line else ""
                held.update(path for p in prefixes if path and path.startswith(p))
        return sorted(held)

    def spec_text(self, uid):
        with open(os.path.join(self.node.cdi_root, "k8s.gpu.nvidia.com-claim_%s.json" % uid)) as f:
            return f.read()

    def log_has(self, text, start):
        return text in self.plugin.read_log()[start:]

    def wait_log(self, text, start, what, max_delay=0.2):
        try:
            wait_for(lambda: self.log_has(text, start), 10, what, max_delay=max_delay)
        except TimeoutError:
            self.fail("%s: no \"%s\" in the plugin's log:\n%s" % (what, text, self.plugin.read_log()[start:][-6000:]))

    def test_swap_from_a_to_b_without_a_restart(self):
        key = GPU_DRIVER + "/driver-reloading"
        a = self.gpu_claim("before-a", ["gpu-0"])
        b = self.gpu_claim("before-b", ["gpu-1"])
        r = self.plugin.prepare([a, b])
        self.assertOk(r, a[2])
        self.assertOk(r, b[2])
        ids_before = cdi_ids(r[a[2]])
        self.assertIn("libcuda.so." + self.old, self.spec_text(a[2]))
        before = self.held_driver_files()
        log_start = len(self.plugin.read_log())
        timeline = {}

        # Gone.
        t0 = time.monotonic()
        self.swap("gone")
        self.wait_log("went away", log_start, "driver gone noticed", max_delay=0.01)
        timeline["gone noticed"] = (time.monotonic() - t0) * 1000
        self.wait_log("driver released", log_start, "driver released", max_delay=0.01)
        during = self.held_driver_files()
        timeline["descriptors closed"] = (time.monotonic() - t0) * 1000
        wait_for(lambda: tainted(self.slices(), key), 10, "devices tainted", max_delay=0.01)
        timeline["devices tainted"] = (time.monotonic() - t0) * 1000
        self.assertEqual(during, [])

        # Prepare in the gap: a retryable error that says why.
        c = self.gpu_claim("during", ["gpu-2"])
        r = self.plugin.prepare([c])
        self.assertIn("driver is reloading", r[c[2]]["error"])
        # A claim prepared before the swap unprepares from the ledger alone.
        self.assertOk(self.plugin.unprepare([b]), b[2])
        self.assertNotIn("k8s.gpu.nvidia.com-claim_%s.json" % b[2], self.node.cdi_files())

        # Back, on B.
        t1 = time.monotonic()
        self.swap(NEW_VERSION)
        self.wait_log("is back (was", log_start, "driver back noticed", max_delay=0.01)
        timeline["back noticed"] = (time.monotonic() - t1) * 1000
        try:
            wait_for(lambda: "libcuda.so." + NEW_VERSION in self.spec_text(a[2]), 10, "spec rewritten", max_delay=0.01)
        except TimeoutError:
            self.fail("spec not rewritten; plugin log:\n" + self.plugin.read_log()[log_start:][-6000:])
        timeline["specs rewritten"] = (time.monotonic() - t1) * 1000
        try:
            wait_for(lambda: driver_versions(self.slices()) == {semver(NEW_VERSION)} and
                     not tainted(self.slices(), key), 10, "slices republished", max_delay=0.01)
        except TimeoutError:
            self.fail("slices %s, tainted %s; plugin log:\n%s" % (driver_versions(self.slices()),
                      tainted(self.slices(), key), self.plugin.read_log()[log_start:][-5000:]))
        timeline["slices republished"] = (time.monotonic() - t1) * 1000
        after = self.held_driver_files()

        spec = json.loads(self.spec_text(a[2]))
        text = json.dumps(spec)
        self.assertNotIn("libcuda.so." + self.old, text)
        self.assertIn("libcuda.so." + NEW_VERSION, text)
        self.assertEqual(["%s-gpu-0" % a[2]], [d["name"] for d in spec["devices"]])
        # The kubelet's retry of the same claim: same ids, B's files.
        r = self.plugin.prepare([a])
        self.assertEqual(cdi_ids(r[a[2]]), ids_before)
        r = self.plugin.prepare([c])
        self.assertOk(r, c[2])
        self.assertIn("libcuda.so." + NEW_VERSION, self.spec_text(c[2]))
        self.assertOk(self.plugin.unprepare([a, c]), a[2])
        self.assertEqual(self.node.cdi_files(), [])

        status, body = self.node.api.request("GET", "/_nvdra/objects?resource=events")
        reloads = [e for e in body["items"] if e.get("reason") == "NvidiaDriverReloaded"]
        self.assertEqual(len(reloads), 1, body)
        self.assertEqual(reloads[0]["involvedObject"]["kind"], "Node")
        self.assertIn(self.old, reloads[0]["message"])
        self.assertIn(NEW_VERSION, reloads[0]["message"])
        log = self.plugin.read_log()[log_start:]
        self.assertIn("NVIDIA driver %s replaced by %s" % (self.old, NEW_VERSION), log)
        print("\nswap timeline (ms after the swap's gone / back step):")
        for k, v in timeline.items():
            print("  %-20s %7.1f" % (k, v))
        for line in log.splitlines():
            if "driver reload timeline" in line:
                print("  plugin: " + line[line.find("driver reload timeline"):])
        print("open driver files before: %s\n  during: %s\n  after: %s" % (before, during, after))
        # The mock driver's files are empty, never loaded: nothing was open.
        self.assertTrue(all(NEW_VERSION not in f and self.old not in f for f in after))

    def test_back_with_the_same_version(self):
        a = self.gpu_claim("same", ["gpu-0"])
        self.assertOk(self.plugin.prepare([a]), a[2])
        log_start = len(self.plugin.read_log())
        self.swap("gone")
        self.wait_log("went away", log_start, "driver gone noticed")
        self.swap(self.old)
        self.wait_log("NVIDIA driver %s replaced by %s" % (self.old, self.old), log_start, "driver back")
        wait_for(lambda: driver_versions(self.slices()) == {semver(self.old)} and
                 not tainted(self.slices(), GPU_DRIVER + "/driver-reloading"), 10, "slices republished")
        self.assertIn("libcuda.so." + self.old, self.spec_text(a[2]))
        self.assertOk(self.plugin.unprepare([a]), a[2])

    def test_files_replaced_under_a_steady_driver(self):
        """A library of the driver removed and the plugin's copy of the CDI
        hook gone (as when the toolkit's or the driver's files are replaced
        without a reload): the claims' specs are written again without the
        library, a Warning names the file and the claim, and the hook the
        specs name is put back."""
        a = self.gpu_claim("steady", ["gpu-0"])
        self.assertOk(self.plugin.prepare([a]), a[2])
        lib = os.path.join(self.root, "usr/lib/x86_64-linux-gnu", "libnvidia-gpucomp.so." + self.old)
        self.assertIn('"%s"' % lib, self.spec_text(a[2]))
        hook = os.path.join(self.plugin.plugin_dir, "nvidia-cdi-hook")
        self.assertIn('"%s"' % hook, self.spec_text(a[2]))
        log_start = len(self.plugin.read_log())
        os.remove(lib)
        try:
            wait_for(lambda: '"%s"' % lib not in self.spec_text(a[2]), 10, "spec written again")
        except TimeoutError:
            self.fail("spec still names %s; plugin log:\n%s" % (lib, self.plugin.read_log()[log_start:][-5000:]))
        self.wait_log("%s is gone" % lib, log_start, "the file that is gone named")
        log = self.plugin.read_log()[log_start:]
        line = [l for l in log.splitlines() if "%s is gone" % lib in l][0]
        self.assertIn("claim default/steady " + a[2], line)
        self.assertNotIn("does not exist, and a CDI spec still names it", log)
        self.assertIn("libcuda.so." + self.old, self.spec_text(a[2]))

        log_start = len(self.plugin.read_log())
        os.remove(hook)
        self.wait_log("the CDI hook %s was gone: installed it again" % hook, log_start, "hook put back")
        self.assertTrue(os.access(hook, os.X_OK))
        self.assertIn('"%s"' % hook, self.spec_text(a[2]))
        self.assertOk(self.plugin.unprepare([a]), a[2])


class OperatorMarkerEndToEnd(NodeTestCase):
    """The GPU operator's layout: the driver manager takes the validator's
    driver-ready marker away before it touches the driver, and the plugin
    lets go of the driver on that alone; the marker back, it serves again."""

    def setUp(self):
        self.node = localnode.LocalNode(mock_layout="gpu-operator")
        self.addCleanup(self.node.close)
        self.node.build_mock_node("h100x8")
        self.plugin = self.gpu_plugin().start()

    def test_marker_gone_and_back(self):
        marker = os.path.join(self.node.mock_root, "run/nvidia/validations/driver-ready")
        with open(marker) as f:
            content = f.read()
        key = GPU_DRIVER + "/driver-reloading"
        slices = lambda: self.node.api.slices(GPU_DRIVER)
        wait_for(lambda: slices() and not tainted(slices(), key), what="slices")
        log_start = len(self.plugin.read_log())
        os.remove(marker)
        wait_for(lambda: "driver-ready marker %s is gone" % marker in self.plugin.read_log()[log_start:], 10,
                 "the marker's absence noticed")
        wait_for(lambda: tainted(slices(), key), 10, "devices tainted")
        c = self.gpu_claim("during", ["gpu-0"])
        self.assertIn("driver is reloading", self.plugin.prepare([c])[c[2]]["error"])
        with open(marker, "w") as f:
            f.write(content)
        wait_for(lambda: not tainted(slices(), key), 10, "taint gone")
        self.assertOk(self.plugin.prepare([c]), c[2])


def nvml_config(version, init_error=0):
    return {"initError": init_error, "driverVersion": version, "cudaDriverVersion": 12080, "devices": [
        {"minor": 0, "uuid": "GPU-11111111-2222-3333-4444-555555555555", "name": "NVIDIA H100 80GB HBM3",
         "brand": 14, "arch": 9, "cc": [9, 0], "busId": "00000000:3B:00.0", "memoryTotal": 85520809984}]}


def kernel_version_text(version):
    return "NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Release Build\n" % version


@unittest.skipIf(not os.path.exists(FAKE_NVML), "the fake libnvidia-ml.so.1 is not built")
class NvmlDriverReloadEndToEnd(NodeTestCase):
    """The NVML backend with the fake libnvidia-ml.so.1 in a driver root: the
    library is really dlopen'ed, so /proc/<pid>/maps shows whether the
    plugin let go of it while the driver is gone."""

    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.node.workdir, "driver-root")
        self.lib = os.path.join(self.root, "usr", "lib64", "libnvidia-ml.so.1")
        os.makedirs(os.path.dirname(self.lib))
        shutil.copy(FAKE_NVML, self.lib)
        self.config = os.path.join(self.node.workdir, "nvml.json")
        self.version_file = os.path.join(self.node.workdir, "nvidia-version")
        self.load("570.158.01")
        # An empty profile: the NVML backend.
        self.plugin = self.node.plugin(GPU_DRIVER, "", env={"FAKE_NVML_CONFIG": self.config}, extra_args=[
            "--container-driver-root", self.root, "--nvidia-driver-root", self.root,
            "--driver-version-file", self.version_file]).start()

    def write(self, path, text):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)

    def load(self, version):
        self.write(self.config, json.dumps(nvml_config(version)))
        self.write(self.version_file, kernel_version_text(version))

    def unload(self):
        os.remove(self.version_file)
        self.write(self.config, json.dumps(nvml_config("570.158.01", init_error=9)))  # DRIVER_NOT_LOADED

    def held(self):
        """What of the driver root the plugin has mapped or open."""
        pid = self.plugin.proc.pid
        out = set()
        with open("/proc/%d/maps" % pid) as f:
            out.update("map " + l[l.find("/"):].strip() for l in f if self.root in l)
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if t.startswith(self.root) or t.startswith("/dev/nvidia"):
                out.add("fd " + t)
        return sorted(out)

    def test_nvml_is_unloaded_while_the_driver_is_gone(self):
        slices = lambda: self.node.api.slices(GPU_DRIVER)
        wait_for(lambda: driver_versions(slices()) == {"570.158.1"}, what="slices on 570.158.01")
        before = self.held()
        self.assertIn("map " + os.path.realpath(self.lib), before)
        log_start = len(self.plugin.read_log())
        self.unload()
        wait_for(lambda: "driver released" in self.plugin.read_log()[log_start:], 10, "driver released")
        during = self.held()
        self.assertEqual(during, [], self.plugin.read_log()[log_start:])
        self.load(NEW_VERSION)
        wait_for(lambda: driver_versions(slices()) == {semver(NEW_VERSION)}, 10, "slices on " + NEW_VERSION)
        after = self.held()
        self.assertIn("map " + os.path.realpath(self.lib), after)
        print("\nNVML backend, driver root files mapped or open:\n  before: %s\n  during: %s\n  after: %s" %
              (before, during, after))


if __name__ == "__main__":
    unittest.main()
