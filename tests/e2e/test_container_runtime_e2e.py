"""Claims prepared by the real plugins, run in containers by a real OCI runtime.

Podman (with runc) reads the CDI specs the plugins wrote and starts a busybox
container with the CDI ids the plugin returned; a script inside reports what
the container got (device nodes, driver libraries, nvidia-smi -L, env, the
libcuda links and what its linker cache lists). The specs' hooks run the
real nvdra-cdi-hook from the copy the plugin (started without
--nvidia-cdi-hook-path) left in its plugin directory; the mock's libcuda is
swapped for a real shared object with the soname libcuda.so.1, so the
container's ldconfig -p shows what the hook's update-ldcache did. Podman 4.3
reads specs only from /etc/cdi and /var/run/cdi,
so each run happens in a private mount namespace (unshare -m) with the
node's CDI directory bind-mounted over /etc/cdi and an empty one over
/var/run/cdi.
"""

import filecmp
import glob
import json
import os
import shutil
import stat
import subprocess
import tempfile
import unittest
import uuid

from e2e_base import CD_DRIVER, GPU_DRIVER, NodeTestCase, cdi_ids, make_claim, opaque_config, wait_for
from localnode import BIN

DRIVER_VERSION = {"h100x8": "570.158.01", "a100-mig": "550.127.08", "gb200x4": "570.158.01"}
LIB_DIR = "/usr/lib/x86_64-linux-gnu"
BUSYBOX = shutil.which("busybox") or "/bin/busybox"
APPLETS = ["sh", "ls", "cat", "env", "test", "[", "echo", "find", "sort", "grep", "readlink", "stat", "printf"]
# The container's ldconfig (for `ldconfig -p`): the host's, a static program.
LDCONFIG = "/sbin/ldconfig"
CC = shutil.which("cc") or shutil.which("clang")

# Runs inside the container: one JSON object on stdout.
REPORT = r"""
set -e
q() { printf '"%s"' "$1"; }
printf '{"nodes": ['
first=1
for n in $(find /dev -name 'nvidia*' -o -name 'card*' -o -name 'renderD*' -o -name 'channel*' | sort); do
  [ -c "$n" ] || continue
  [ $first = 1 ] || printf ', '; first=0; q "$n"
done
printf '], "files": {'
first=1
for f in "$@"; do
  [ $first = 1 ] || printf ', '; first=0
  if [ -f "$f" ]; then q "$f"; printf ': true'; else q "$f"; printf ': false'; fi
done
printf '}, "smi": '
if [ -x /usr/bin/nvidia-smi ]; then
  out=$(/usr/bin/nvidia-smi -L 2>&1) && rc=0 || rc=$?
  printf '{"rc": %d, "lines": [' "$rc"
  first=1
  echo "$out" | while IFS= read -r line; do
    [ $first = 1 ] || printf ', '; first=0; q "$line"
  done
  printf ']}'
else
  printf 'null'
fi
printf ', "env": {'
first=1
for k in NVIDIA_CTK_LIBCUDA_DIR CLIQUE_ID COMPUTE_DOMAIN_UUID NVIDIA_VISIBLE_DEVICES; do
  eval v=\${$k-__unset__}
  [ "$v" = __unset__ ] && continue
  [ $first = 1 ] || printf ', '; first=0; q "$k"; printf ': '; q "$v"
done
printf '}, "imexd": %s, "links": {' "$([ -d /imexd ] && echo true || echo false)"
first=1
for l in /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so; do
  [ -L "$l" ] || continue
  [ $first = 1 ] || printf ', '; first=0; q "$l"; printf ': '; q "$(readlink "$l")"
done
printf '}, "ldcache": ['
first=1
if [ -x /sbin/ldconfig ]; then
  /sbin/ldconfig -p | grep 'libcuda' | while IFS= read -r line; do
    [ $first = 1 ] || printf ', '; first=0; q "$(echo $line)"
  done
fi
printf ']}\n'
"""


def runtime_missing():
    if os.geteuid() != 0:
        return "needs root (podman with runc, mknod'ed device nodes)"
    for tool in ("podman", "runc", "unshare"):
        if shutil.which(tool) is None and not os.path.exists("/usr/sbin/" + tool):
            return "%s is not installed (scripts/setup installs it)" % tool
    if not os.path.exists(BUSYBOX):
        return "busybox-static is not installed (scripts/setup installs it)"
    if not os.path.exists(LDCONFIG) or CC is None:
        return "needs the host's ldconfig and a C compiler (a stand-in libcuda with its soname)"
    return None


@unittest.skipIf(runtime_missing(), runtime_missing() or "")
class ContainerRuntime(NodeTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="nvdra-ctr-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.rootfs = os.path.join(self.tmp, "rootfs")
        os.makedirs(os.path.join(self.rootfs, "bin"))
        shutil.copy(BUSYBOX, os.path.join(self.rootfs, "bin", "busybox"))
        for a in APPLETS:
            os.symlink("busybox", os.path.join(self.rootfs, "bin", a))
        for d in ("dev", "proc", "sys", "tmp", "etc"):
            os.makedirs(os.path.join(self.rootfs, d), exist_ok=True)
        with open(os.path.join(self.rootfs, "report.sh"), "w") as f:
            f.write(REPORT)
        os.makedirs(os.path.join(self.rootfs, "sbin"))
        shutil.copy(LDCONFIG, os.path.join(self.rootfs, "sbin", "ldconfig"))

    def mock_root(self, driver):
        return os.path.join(self.node.workdir, "mock-" + driver)

    def real_libcuda(self, driver, version):
        """Swaps the mock's empty libcuda.so.<version> for a shared object
        with the soname libcuda.so.1, as the driver's is: what ldconfig
        reads. The plugin discovered its files at start, so the swap (a
        rename, the file never missing) happens after it started."""
        target = os.path.join(self.mock_root(driver), LIB_DIR.lstrip("/"), "libcuda.so." + version)
        self.assertTrue(os.path.isfile(target), target)
        stub = os.path.join(self.tmp, "libcuda-stub.so")
        subprocess.run([CC, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", stub, "-x", "c", "/dev/null"],
                       check=True, capture_output=True)
        os.chmod(stub, 0o755)
        os.replace(stub, target)

    def spec_hooks(self):
        hooks = []
        for path in glob.glob(os.path.join(self.node.cdi_root, "*.json")):
            with open(path) as f:
                spec = json.load(f)
            hooks += spec.get("containerEdits", {}).get("hooks", [])
            for d in spec.get("devices", []):
                hooks += d.get("containerEdits", {}).get("hooks", [])
        return hooks

    def run_container(self, driver, ids, files=()):
        """Runs report.sh in a container with the CDI ids; returns its report."""
        empty = os.path.join(self.tmp, "empty-cdi")
        os.makedirs(empty, exist_ok=True)
        podman = ["podman", "--root", os.path.join(self.tmp, "storage"), "--runroot", os.path.join(self.tmp, "run"),
                  "--storage-driver", "vfs", "--runtime", shutil.which("runc") or "/usr/sbin/runc",
                  "run", "--rm", "--network", "none",
                  "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
        for i in ids:
            podman += ["--device", i]
        podman += ["--rootfs", self.rootfs, "/bin/sh", "/report.sh"] + list(files)
        inner = ("set -e; mount --make-rprivate /; mkdir -p /etc/cdi /var/run/cdi; "
                 "mount --bind \"$1\" /etc/cdi; mount --bind \"$2\" /var/run/cdi; shift 2; exec \"$@\"")
        cmd = ["unshare", "-m", "sh", "-c", inner, "sh", self.node.cdi_root, empty] + podman
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, "podman failed: %s\n%s" % (r.stdout, r.stderr))
        try:
            return json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.fail("no report from the container: %r %r" % (r.stdout, r.stderr))

    def gpu_nodes(self, report):
        return sorted(n for n in report["nodes"] if n[len("/dev/nvidia"):].isdigit())

    def assert_driver(self, report, driver, version):
        """What every GPU container gets: libraries, binaries, env, and what
        the hooks did in it."""
        for lib in ("libcuda.so." + version, "libnvidia-ml.so." + version):
            self.assertTrue(report["files"][LIB_DIR + "/" + lib], lib)
        self.assertTrue(report["files"]["/lib/firmware/nvidia/%s/gsp_ga10x.bin" % version])
        self.assertTrue(report["files"]["/usr/bin/nvidia-smi"])
        self.assertEqual(report["env"].get("NVIDIA_CTK_LIBCUDA_DIR"), LIB_DIR)
        for n in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"):
            self.assertIn(n, report["nodes"])
        # The specs run the plugin directory's copy of the shipped hook.
        copy = os.path.join(self.node.plugins_dir, driver, "nvidia-cdi-hook")
        hooks = self.spec_hooks()
        names = [h["args"][1] for h in hooks]
        for h in ("create-symlinks", "enable-cuda-compat", "update-ldcache", "disable-device-node-modification"):
            self.assertIn(h, names, hooks)
        self.assertEqual({h["path"] for h in hooks}, {copy})
        self.assertTrue(filecmp.cmp(copy, os.path.join(BIN, "nvdra-cdi-hook"), shallow=False))
        self.assertEqual(stat.S_IMODE(os.stat(copy).st_mode), 0o755)
        # create-symlinks made the links the spec asks for ...
        self.assertEqual(report["links"], {LIB_DIR + "/libcuda.so.1": "libcuda.so." + version,
                                           LIB_DIR + "/libcuda.so": "libcuda.so.1"})
        # ... and update-ldcache put them in the container's linker cache.
        self.assertTrue(any(l.startswith("libcuda.so.1 (") and l.endswith("=> %s/libcuda.so.1" % LIB_DIR)
                            for l in report["ldcache"]), report["ldcache"])
        return hooks

    def files_to_check(self, version):
        return [LIB_DIR + "/libcuda.so." + version, LIB_DIR + "/libnvidia-ml.so." + version,
                "/lib/firmware/nvidia/%s/gsp_ga10x.bin" % version, "/usr/bin/nvidia-smi"]

    def gpu_claim_ids(self, plugin, name, devices):
        claim = self.gpu_claim(name, devices)
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        return claim, cdi_ids(r[claim[2]])

    def inventory(self, profile):
        r = subprocess.run([os.path.join(os.environ.get("NVDRA_BIN_DIR", ""), "nvdra-discover"),
                            "--mock-hardware=" + profile], capture_output=True, text=True, check=True)
        return json.loads(r.stdout)["inventory"]

    def test_one_full_gpu(self):
        plugin = self.gpu_plugin().start()
        _, ids = self.gpu_claim_ids(plugin, "one-gpu", ["gpu-3"])
        v = DRIVER_VERSION["h100x8"]
        self.real_libcuda(GPU_DRIVER, v)
        report = self.run_container(GPU_DRIVER, ids, self.files_to_check(v))
        self.assertEqual(self.gpu_nodes(report), ["/dev/nvidia3"])
        self.assertIn("/dev/dri/card4", report["nodes"])
        self.assertIn("/dev/dri/renderD131", report["nodes"])
        self.assertNotIn("/dev/dri/card1", report["nodes"])
        gpus = self.inventory("h100x8")["gpus"]
        self.assertEqual(report["smi"], {"rc": 0, "lines": [
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: %s)" % gpus[3]["uuid"]]})
        hooks = self.assert_driver(report, GPU_DRIVER, v)
        self.assertIn(["nvidia-cdi-hook", "create-symlinks", "--link", "../card4::/dev/dri/by-path/pci-%s-card" %
                       gpus[3]["pciBusId"], "--link", "../renderD131::/dev/dri/by-path/pci-%s-render" %
                       gpus[3]["pciBusId"]], [h["args"] for h in hooks])

    def test_claim_prepared_before_a_driver_swap_gets_the_new_driver(self):
        """The driver is upgraded under the running plugin (mock swap, A -> gone -> B): a container
        started afterwards from a claim prepared on A gets B's libcuda, and none of A's."""
        plugin = self.gpu_plugin().start()
        _, ids = self.gpu_claim_ids(plugin, "before-swap", ["gpu-1"])
        a, b = DRIVER_VERSION["h100x8"], "580.65.06"
        spec = glob.glob(os.path.join(self.node.cdi_root, "*.json"))
        self.assertEqual(len(spec), 1)
        for version in ("gone", b):
            r = subprocess.run([os.path.join(BIN, "nvdra-discover"), "--mock-hardware", "h100x8", "--mock-root",
                                self.mock_root(GPU_DRIVER), "--mock-swap-driver", version],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            if version == "gone":
                wait_for(lambda: "went away" in plugin.read_log(), 10, "driver gone noticed")
        def rewritten():
            with open(spec[0]) as f:
                return "libcuda.so." + b in f.read()
        wait_for(rewritten, 10, "the claim's spec rewritten for B")
        self.real_libcuda(GPU_DRIVER, b)
        report = self.run_container(GPU_DRIVER, ids, self.files_to_check(b) + [LIB_DIR + "/libcuda.so." + a])
        self.assertEqual(self.gpu_nodes(report), ["/dev/nvidia1"])
        self.assert_driver(report, GPU_DRIVER, b)
        self.assertFalse(report["files"][LIB_DIR + "/libcuda.so." + a])

    def test_two_gpus_replacing_an_upstream_yaml_spec(self):
        plugin = self.gpu_plugin().start()
        claim = self.gpu_claim("two-gpus", ["gpu-1", "gpu-6"])
        # The upstream driver's spec of the same claim (same device names):
        # left in place, the runtime would refuse the duplicate devices.
        legacy = os.path.join(self.node.cdi_root, "k8s.gpu.nvidia.com-claim_%s.yaml" % claim[2])
        with open(legacy, "w") as f:
            f.write("---\ncdiVersion: 0.5.0\nkind: k8s.gpu.nvidia.com/claim\ndevices:\n"
                    "- name: %s-gpu-1\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia1\n" % claim[2])
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        ids = cdi_ids(r[claim[2]])
        self.assertEqual(len(ids), 2)
        self.assertFalse(os.path.exists(legacy))
        v = DRIVER_VERSION["h100x8"]
        self.real_libcuda(GPU_DRIVER, v)
        report = self.run_container(GPU_DRIVER, ids, self.files_to_check(v))
        self.assertEqual(self.gpu_nodes(report), ["/dev/nvidia1", "/dev/nvidia6"])
        gpus = self.inventory("h100x8")["gpus"]
        self.assertEqual(report["smi"]["lines"], [
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: %s)" % gpus[1]["uuid"],
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: %s)" % gpus[6]["uuid"]])
        self.assert_driver(report, GPU_DRIVER, v)

    def test_mig_device(self):
        plugin = self.gpu_plugin(profile="a100-mig").start()
        slices = wait_for(lambda: self.node.api.slices(GPU_DRIVER), what="GPU ResourceSlices")
        migs = sorted(d["name"] for s in slices for d in s["spec"]["devices"]
                      if d["attributes"]["type"]["string"] == "mig")
        self.assertTrue(migs)
        _, ids = self.gpu_claim_ids(plugin, "one-mig", [migs[0]])
        v = DRIVER_VERSION["a100-mig"]
        self.real_libcuda(GPU_DRIVER, v)
        report = self.run_container(GPU_DRIVER, ids, self.files_to_check(v))
        parent = int(migs[0].split("-")[1])
        self.assertEqual(self.gpu_nodes(report), ["/dev/nvidia%d" % parent])
        caps = [n for n in report["nodes"] if n.startswith("/dev/nvidia-caps/")]
        self.assertEqual(len(caps), 2, report["nodes"])  # the GI and the CI capability
        gpus = self.inventory("a100-mig")["gpus"]
        gpu = [g for g in gpus if g["minor"] == parent][0]
        mig = [m for m in gpu["migDevices"] if migs[0].endswith("-%d-%d" % (m["giProfileId"], m["placementStart"]))][0]
        self.assertEqual(report["smi"]["lines"], [
            "GPU 0: %s (UUID: %s)" % (gpu["productName"], gpu["uuid"]),
            "  MIG %s Device 0: (UUID: %s)" % (mig["profile"], mig["uuid"])])
        self.assert_driver(report, GPU_DRIVER, v)

    def test_hook_does_not_follow_links_out_of_the_root(self):
        """An image whose library directory and ld.so.conf.d are links to host
        directories (by their host paths): the hook works inside the
        container's root and leaves the host directories alone."""
        victim_lib = os.path.join(self.tmp, "host-lib")
        victim_conf = os.path.join(self.tmp, "host-ld.so.conf.d")
        for d in (victim_lib, victim_conf):
            os.makedirs(d)
        os.makedirs(os.path.join(self.rootfs, "usr", "lib"))
        os.symlink(victim_lib, os.path.join(self.rootfs, LIB_DIR.lstrip("/")))
        os.symlink(victim_conf, os.path.join(self.rootfs, "etc", "ld.so.conf.d"))
        plugin = self.gpu_plugin().start()
        _, ids = self.gpu_claim_ids(plugin, "hostile", ["gpu-0"])
        v = DRIVER_VERSION["h100x8"]
        self.real_libcuda(GPU_DRIVER, v)
        report = self.run_container(GPU_DRIVER, ids, self.files_to_check(v))
        self.assertEqual(os.listdir(victim_lib), [])
        self.assertEqual(os.listdir(victim_conf), [])
        # Inside the root the same paths were made and used.
        inside = os.path.join(self.rootfs, victim_lib.lstrip("/"))
        self.assertEqual(os.readlink(os.path.join(inside, "libcuda.so")), "libcuda.so.1")
        conf = os.path.join(self.rootfs, victim_conf.lstrip("/"), "00-nvcr-nvdra.conf")
        with open(conf) as f:
            self.assertIn(LIB_DIR + "\n", f.read())
        self.assertTrue(any(l.startswith("libcuda.so.1 (") for l in report["ldcache"]), report["ldcache"])

    def domain(self):
        uid = str(uuid.uuid4())
        self.node.api.load([{
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
            "metadata": {"name": "cd1", "namespace": "default", "uid": uid},
            "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "cd1-channel"}}},
            "status": {"status": "Ready", "nodes": [{"name": self.node.node_name, "status": "Ready",
                                                     "cliqueID": "x", "ipAddress": "10.0.0.1"}]},
        }])
        return uid

    def cd_runtime_plugin(self):
        """The ComputeDomain plugin with readiness from the domain's
        status.nodes (no clique objects here) and a daemon config template."""
        template = os.path.join(self.tmp, "imexd.cfg.tmpl")
        with open(template, "w") as f:
            f.write("IMEX_CMD_PORT=50005\n")
        return self.cd_plugin(extra_args=["--feature-gates", "ComputeDomainCliques=false",
                                          "--compute-domain-daemon-config-template", template])

    def cd_claim(self, name, device, kind, domain):
        req = "channel" if kind == "ComputeDomainChannelConfig" else "daemon"
        params = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": kind, "domainID": domain}
        c = make_claim(name, [{"request": req, "driver": CD_DRIVER, "pool": self.node.node_name, "device": device}],
                       configs=[opaque_config(CD_DRIVER, params, requests=[req])])
        self.node.api.load([c])
        return ("default", name, c["metadata"]["uid"])

    def test_imex_channel(self):
        domain = self.domain()
        plugin = self.cd_runtime_plugin().start()
        claim = self.cd_claim("chan", "channel-0", "ComputeDomainChannelConfig", domain)
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        report = self.run_container(CD_DRIVER, cdi_ids(r[claim[2]]))
        self.assertEqual([n for n in report["nodes"] if "imex" in n], ["/dev/nvidia-caps-imex-channels/channel0"])
        self.assertEqual(self.gpu_nodes(report), [])
        self.assertIsNone(report["smi"], "a channel brings no driver")

    def test_daemon(self):
        domain = self.domain()
        plugin = self.cd_runtime_plugin().start()
        claim = self.cd_claim("daemon", "daemon-0", "ComputeDomainDaemonConfig", domain)
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        ids = cdi_ids(r[claim[2]])
        self.assertEqual(ids, sorted(["k8s.compute-domain.nvidia.com/claim=%s-daemon-0" % claim[2],
                                      "k8s.compute-domain.nvidia.com/device=all"]))
        self.assertIn("k8s.compute-domain.nvidia.com-device_base.json", self.node.cdi_files())
        v = DRIVER_VERSION["gb200x4"]
        self.real_libcuda(CD_DRIVER, v)
        report = self.run_container(CD_DRIVER, ids, self.files_to_check(v))
        self.assertTrue(report["imexd"])
        self.assertEqual(report["env"].get("COMPUTE_DOMAIN_UUID"), domain)
        self.assertTrue(report["env"].get("CLIQUE_ID"))
        self.assertIn("/dev/nvidia-caps/nvidia-cap1", report["nodes"])
        # The base spec's management device: every GPU node, the driver,
        # and no GPU for the NVIDIA runtime to add on top.
        self.assertEqual(report["env"].get("NVIDIA_VISIBLE_DEVICES"), "void")
        self.assertEqual(self.gpu_nodes(report), ["/dev/nvidia%d" % i for i in range(4)])
        self.assertEqual(len(report["smi"]["lines"]), 4)
        self.assert_driver(report, CD_DRIVER, v)


if __name__ == "__main__":
    unittest.main()
