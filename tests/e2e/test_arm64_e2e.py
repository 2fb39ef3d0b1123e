"""The arm64 (Grace) build end to end on this machine: the cross-built
programs (NVDRA_ARCH=arm64 scripts/build, into build-arm64/) run under
qemu-aarch64-static with the arm64 sysroot as their library root, nvdractl
included: registration, ResourceSlices, Prepare and Unprepare of a mock GPU
(with the plugin's copy of the arm64 CDI hook in its specs) and of an IMEX
channel, and the static hook itself run as a runtime runs it. And the
toolchain links a static C++ program that runs with no library root at
all, as the image's static programs must.

NVDRA_ARM64_BUILD_DIR names the arm64 build (default build-arm64/). Run as
a script (ctest does), it exits 77, which ctest reports as skipped, when
there is no arm64 build or no qemu-aarch64-static, unless
NVDRA_REQUIRE_ARM64=1 (scripts/test with NVDRA_TEST_ARM64=1) makes that a
failure.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from e2e_base import CD_DRIVER, GPU_DRIVER, NodeTestCase, cdi_ids, device_names, wait_for
import localnode
import test_cd_e2e

ARM64_BUILD = os.path.abspath(os.environ.get("NVDRA_ARM64_BUILD_DIR") or os.path.join(localnode.ROOT, "build-arm64"))
ARM64_BIN = os.path.join(ARM64_BUILD, "bin")
QEMU = "qemu-aarch64-static"
EM_AARCH64 = 183
PT_INTERP = 3
# The programs with --version (the image's OCI hook, as upstream's, has none).
VERSIONED_PROGRAMS = ["nvdra-gpu-kubelet-plugin", "nvdra-compute-domain-kubelet-plugin", "nvdractl", "nvdra-discover",
                      "nvdra-webhook"]
STATIC_PROJECT = os.path.join(os.path.dirname(__file__), "testdata", "cross-static")


def shipped_programs():
    out = subprocess.run(["bash", os.path.join(localnode.ROOT, "scripts", "image-rootfs"), "--programs"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def cache_value(key):
    """A value of the arm64 build's CMakeCache.txt, or None."""
    try:
        with open(os.path.join(ARM64_BUILD, "CMakeCache.txt")) as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name == key and "=" in rest:
                    return rest.split("=", 1)[1].strip()
    except FileNotFoundError:
        pass
    return None


def elf_header(path):
    """(e_machine, has a PT_INTERP program header) of a 64-bit little-endian ELF file."""
    with open(path, "rb") as f:
        data = f.read(1 << 16)
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise AssertionError("%s is no 64-bit little-endian ELF file" % path)
    machine = struct.unpack_from("<H", data, 18)[0]
    phoff = struct.unpack_from("<Q", data, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    types = [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]
    return machine, PT_INTERP in types


def needed_libraries(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return sorted(line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line)


def missing_prerequisites():
    """Why this suite cannot run here, or None."""
    if shutil.which(QEMU) is None:
        return "%s not found (scripts/setup installs qemu-user-static)" % QEMU
    if not cache_value("NVDRA_SYSROOT"):
        return "no arm64 build in %s (NVDRA_ARCH=arm64 bash scripts/build)" % ARM64_BUILD
    for p in shipped_programs():
        if not os.path.exists(os.path.join(ARM64_BIN, p)):
            return "%s was not built in %s" % (p, ARM64_BIN)
    return None


def setUpModule():
    reason = missing_prerequisites()
    if reason:
        raise unittest.SkipTest(reason)
    # Every program the local node starts is the arm64 one, under emulation.
    localnode.BIN = ARM64_BIN
    localnode.EXEC_WRAPPER = [shutil.which(QEMU), "-L", cache_value("NVDRA_SYSROOT")]


def emulated(proc):
    """True when the process runs qemu's binary (the arm64 program under emulation)."""
    return os.path.realpath("/proc/%d/exe" % proc.pid) == os.path.realpath(shutil.which(QEMU))


class Arm64Programs(unittest.TestCase):
    def test_every_shipped_program_is_aarch64_and_links_only_glibc(self):
        programs = shipped_programs()
        self.assertIn("nvdra-gpu-kubelet-plugin", programs)
        for p in programs:
            path = os.path.join(ARM64_BIN, p)
            machine, dynamic = elf_header(path)
            self.assertEqual(machine, EM_AARCH64, p)
            if dynamic:
                # libstdc++ and libgcc are linked in (nvdra_shipped_binary):
                # the image carries glibc alone.
                for lib in needed_libraries(path):
                    self.assertRegex(lib, r"^(libc|libm|libdl|libpthread|librt|ld-linux-aarch64)\.so\.[0-9]+$",
                                     "%s links %s" % (p, lib))

    def test_the_plugins_and_tools_run_and_report_this_tree_s_version(self):
        with open(os.path.join(localnode.ROOT, "CMakeLists.txt")) as f:
            version = next(line for line in f if line.startswith("project(nvdra VERSION")).split()[2]
        for p in VERSIONED_PROGRAMS:
            r = subprocess.run(localnode.EXEC_WRAPPER + [os.path.join(ARM64_BIN, p), "--version"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, "%s: %s" % (p, r.stderr))
            self.assertEqual(r.stdout.splitlines()[0], "nvdra " + version, p)

    def test_the_image_root_holds_only_aarch64_files_and_its_programs_start_on_its_own_glibc(self):
        """What scripts/build-image --arch arm64 puts in the image: the
        programs, and dash, coreutils and glibc of Debian's arm64 packages."""
        work = tempfile.mkdtemp(prefix="nvdra-arm64-rootfs-")
        self.addCleanup(shutil.rmtree, work, True)
        scripts = os.path.join(localnode.ROOT, "scripts")
        subprocess.run(["bash", os.path.join(scripts, "debian-tree"), "arm64", os.path.join(work, "debian"),
                        os.path.join(ARM64_BUILD, "image-cache")], check=True, capture_output=True, timeout=600)
        rootfs = os.path.join(work, "rootfs")
        subprocess.run(["bash", os.path.join(scripts, "image-rootfs"), "--debian-root", os.path.join(work, "debian"),
                        rootfs, ARM64_BIN], check=True, capture_output=True, timeout=300)
        machines = {}
        for d, _, files in os.walk(rootfs):
            for name in files:
                path = os.path.join(d, name)
                with open(path, "rb") as f:
                    if os.path.islink(path) or f.read(4) != b"\x7fELF":
                        continue
                machines[os.path.relpath(path, rootfs)] = elf_header(path)[0]
        self.assertIn("usr/bin/dash", machines)
        self.assertIn("usr/lib/aarch64-linux-gnu/libc.so.6", machines)
        self.assertEqual({p: m for p, m in machines.items() if m != EM_AARCH64}, {})
        self.assertEqual(os.readlink(os.path.join(rootfs, "usr", "bin", "sh")), "dash")
        self.assertTrue(os.path.exists(os.path.join(rootfs, "etc", "ld.so.cache")))
        for p in shipped_programs():
            self.assertIn("usr/bin/" + p, machines)
            r = subprocess.run([QEMU, "-L", rootfs, os.path.join(rootfs, "usr", "bin", p), "--help"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, "%s: %s" % (p, r.stderr))
            # Usage names the flags (the hook prints it to stderr, as upstream's).
            self.assertIn("--", r.stdout + r.stderr, p)

    def test_the_toolchain_links_a_static_program_that_runs_without_a_library_root(self):
        work = tempfile.mkdtemp(prefix="nvdra-cross-static-")
        self.addCleanup(shutil.rmtree, work, True)
        toolchain = os.path.join(localnode.ROOT, "cmake", "cross-arm64.cmake")
        subprocess.run(["cmake", "-S", STATIC_PROJECT, "-B", work, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        "-DCMAKE_TOOLCHAIN_FILE=" + toolchain, "-DNVDRA_SYSROOT=" + cache_value("NVDRA_SYSROOT")],
                       check=True, capture_output=True, timeout=300)
        subprocess.run(["cmake", "--build", work], check=True, capture_output=True, timeout=300)
        program = os.path.join(work, "cross_static")
        machine, dynamic = elf_header(program)
        self.assertEqual(machine, EM_AARCH64)
        self.assertFalse(dynamic, "the program asks for a loader")
        self.assertEqual(needed_libraries(program), [])
        # No -L: nothing of the sysroot is reachable, and none is needed.
        r = subprocess.run([QEMU, program, "arm64"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "sum=500500 caught=thrown root=1 args=1 arm64\n")


class GpuPluginUnderEmulation(NodeTestCase):
    def test_registers_publishes_prepares_and_unprepares_a_mock_gpu(self):
        plugin = self.gpu_plugin().start()  # start() waits for nvdractl's registration call
        self.assertTrue(emulated(plugin.proc))
        slices = wait_for(lambda: self.node.api.slices(GPU_DRIVER), timeout=60, what="GPU ResourceSlices")
        devices = [d for s in slices for d in s["spec"]["devices"]]
        self.assertEqual(sorted(d["name"] for d in devices), ["gpu-%d" % i for i in range(8)])
        self.assertEqual(slices[0]["spec"]["pool"]["name"], self.node.node_name)
        self.assertEqual(slices[0]["spec"]["nodeName"], self.node.node_name)

        claim = self.gpu_claim("arm64-gpu", ["gpu-3"])
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        self.assertEqual(device_names(r[claim[2]]), ["gpu-3"])
        self.assertEqual(cdi_ids(r[claim[2]]), ["k8s.gpu.nvidia.com/claim=%s-gpu-3" % claim[2]])
        spec_file = "k8s.gpu.nvidia.com-claim_%s.json" % claim[2]
        with open(os.path.join(self.node.cdi_root, spec_file)) as f:
            spec = json.load(f)
        self.assertEqual(spec["kind"], "k8s.gpu.nvidia.com/claim")
        self.assertEqual([d["name"] for d in spec["devices"]], ["%s-gpu-3" % claim[2]])
        self.assertEqual([c["uid"] for c in self.live_entries(plugin)], [claim[2]])
        # The plugin found the arm64 hook beside it (through qemu's
        # /proc/self/exe) and copied it into its plugin directory, where the
        # spec's hooks run it.
        copy = os.path.join(plugin.plugin_dir, "nvidia-cdi-hook")
        with open(copy, "rb") as a, open(os.path.join(ARM64_BIN, "nvdra-cdi-hook"), "rb") as b:
            self.assertTrue(a.read() == b.read(), "the plugin directory's hook is not the arm64 build's")
        self.assertEqual(os.stat(copy).st_mode & 0o777, 0o755)
        hooks = spec.get("containerEdits", {}).get("hooks", [])
        for d in spec["devices"]:
            hooks += d.get("containerEdits", {}).get("hooks", [])
        self.assertTrue(hooks, spec)
        self.assertEqual({h["path"] for h in hooks}, {copy})

        self.assertOk(plugin.unprepare([claim]), claim[2])
        self.assertNotIn(spec_file, self.node.cdi_files())
        self.assertEqual(self.live_entries(plugin), [])
        self.assertEqual(plugin.stop(), 0)
        self.assertFalse(os.path.exists(plugin.dra_socket))
        self.assertFalse(os.path.exists(plugin.reg_socket))


class ComputeDomainPluginUnderEmulation(test_cd_e2e.ComputeDomainTestCase):
    def test_registers_publishes_prepares_and_unprepares_an_imex_channel(self):
        self.assertTrue(emulated(self.plugin.proc))
        slices = wait_for(lambda: self.node.api.slices(CD_DRIVER), timeout=60, what="ComputeDomain slices")
        self.assertEqual(sorted(d["name"] for s in slices for d in s["spec"]["devices"]), ["channel-0", "daemon-0"])

        c = self.channel_claim("arm64-channel", 0)
        r = self.plugin.prepare([c])
        self.assertOk(r, c[2])
        self.assertEqual(cdi_ids(r[c[2]]), ["k8s.compute-domain.nvidia.com/claim=%s-channel-0" % c[2]])
        self.assertIn("/dev/nvidia-caps-imex-channels/channel0", self.spec_text(c[2]))
        self.assertEqual(self.node_label(), self.domain_uid)

        self.assertOk(self.plugin.unprepare([c]), c[2])
        self.assertIsNone(self.node_label())
        self.assertNotIn("k8s.compute-domain.nvidia.com-claim_%s.json" % c[2], self.node.cdi_files())
        self.assertEqual(self.plugin.stop(), 0)


class CdiHookUnderEmulation(unittest.TestCase):
    """The image's own OCI hook (scripts/image-rootfs --programs lists
    nvdra-cdi-hook): a static program, run as runc runs a createContainer
    hook, with the container's state on stdin."""

    HOOK = "nvdra-cdi-hook"

    def setUp(self):
        if self.HOOK not in shipped_programs():
            self.skipTest("the image ships no %s yet" % self.HOOK)
        self.hook = os.path.join(ARM64_BIN, self.HOOK)
        self.bundle = tempfile.mkdtemp(prefix="nvdra-hook-bundle-")
        self.addCleanup(shutil.rmtree, self.bundle, True)
        self.rootfs = os.path.join(self.bundle, "rootfs")
        os.makedirs(os.path.join(self.rootfs, "usr", "lib64"))
        with open(os.path.join(self.bundle, "config.json"), "w") as f:
            json.dump({"ociVersion": "1.0.2", "root": {"path": "rootfs"}}, f)

    def run_hook(self, *args):
        state = {"ociVersion": "1.0.2", "id": "arm64-hook", "status": "creating", "pid": os.getpid(),
                 "bundle": self.bundle}
        # No -L: a static hook needs no library root.
        return subprocess.run([QEMU, self.hook] + list(args), input=json.dumps(state), capture_output=True,
                              text=True, timeout=60)

    def test_the_hook_is_static_and_creates_links_inside_the_rootfs(self):
        machine, dynamic = elf_header(self.hook)
        self.assertEqual(machine, EM_AARCH64)
        self.assertFalse(dynamic, "the hook asks for a loader")
        link = os.path.join(self.rootfs, "usr", "lib64", "libcuda.so")
        for _ in range(2):  # idempotent
            r = self.run_hook("create-symlinks", "--link", "libcuda.so.1::/usr/lib64/libcuda.so")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(os.readlink(link), "libcuda.so.1")


if __name__ == "__main__":
    reason = missing_prerequisites()
    if reason:
        print("test_arm64_e2e: " + reason)
        sys.exit(1 if os.environ.get("NVDRA_REQUIRE_ARM64") == "1" else 77)
    unittest.main(verbosity=2)
