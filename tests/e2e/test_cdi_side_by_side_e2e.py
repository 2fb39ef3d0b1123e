"""The CDI specs nvdra writes for a full GPU, a MIG device, an IMEX channel and
an IMEX daemon claim, side by side with the spec the upstream Go driver (and
the NVIDIA Container Toolkit's nvcdi it uses) writes for the same mock node and
claim. The upstream spec is built here from upstream's rules, applied to the
mock node's files; each part says which rule it comes from. Every difference
nvdra keeps is applied to that spec by name (docs/devices.md, "Differences
from upstream's CDI specs"), so a new difference, or one that went away, fails
the test."""

import fnmatch
import json
import os
import re
import stat
import unittest

from e2e_base import CD_DRIVER, GPU_DRIVER, NodeTestCase
from test_cd_e2e import CLIQUE, ComputeDomainTestCase

LIB_DIR = "/usr/lib/x86_64-linux-gnu"
# a100-mig's gpu-2-mig-3g20gb-9-0: GPU instance 2, compute instance 0
# (src/devices/mock/builtin_mock_profiles.cc).
MIG_3G20GB = (2, 0)
HOOK = "<plugin dir>/nvidia-cdi-hook"


def hook(*args):
    # internal/discover/hooks.go: createContainer, args[0] the hook's name,
    # NVIDIA_CTK_DEBUG=false.
    return {"hookName": "createContainer", "path": HOOK, "args": ["nvidia-cdi-hook"] + list(args),
            "env": ["NVIDIA_CTK_DEBUG=false"]}


def stat_node(root, path, fields):
    """What internal/edits/device.go records of a node it can stat:
    major, minor, fileMode (mode with type bits), permissions "rwm"."""
    st = os.stat(root + path)
    if not stat.S_ISCHR(st.st_mode):
        return fields
    fields.update({"major": os.major(st.st_rdev), "minor": os.minor(st.st_rdev),
                   "fileMode": st.st_mode & 0o777,
                   "permissions": "rwm"})
    return fields


def nvcap(path, major, minor, mode):
    """internal/common/nvcaps.go CDICharDevNode: type c, major, minor,
    fileMode; no hostPath, which the host-root transform then sets to the
    path (the toolkit's host-root transform, transformDeviceNode)."""
    return {"path": path, "hostPath": path, "type": "c", "major": major, "minor": minor, "fileMode": mode}


def proc_major(root, name):
    with open(os.path.join(root, "proc/devices")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[1] == name:
                return int(parts[0])
    raise AssertionError("no %s in the mock's /proc/devices" % name)


def cap_access(root, rel):
    out = {}
    with open(os.path.join(root, "proc/driver/nvidia/capabilities", rel)) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k.strip()] = v.strip()
    return int(out["DeviceFileMinor"]), int(out["DeviceFileMode"])


def normalize_edits(e, plugin_dir):
    nodes = []
    for n in e.get("deviceNodes") or []:
        d = {k: n[k] for k in ("path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "gid")
             if n.get(k) not in (None, "")}
        nodes.append(d)
    hooks = []
    for h in e.get("hooks") or []:
        h = dict(h)
        if h.get("path") == os.path.join(plugin_dir, "nvidia-cdi-hook"):
            h["path"] = HOOK
        args = h.get("args") or []
        if len(args) > 1 and args[1] == "create-symlinks":
            # Each link is made on its own (no link names another's
            # directory), so their order is not compared: upstream's follows
            # its ldcache lookup, nvdra's its discovery.
            links = sorted(args[i + 1] for i in range(2, len(args) - 1, 2) if args[i] == "--link")
            h["args"] = args[:2] + [a for link in links for a in ("--link", link)]
        hooks.append(h)
    mounts = [{k: m[k] for k in ("hostPath", "containerPath", "options", "type") if k in m}
              for m in e.get("mounts") or []]
    # upstream's spec builder sorts nodes and mounts (transform/sorter.go);
    # the runtime applies them whatever the order: compared as sets.
    return {"env": list(e.get("env") or []),
            "deviceNodes": sorted(nodes, key=lambda n: n["path"]),
            "mounts": sorted(mounts, key=lambda m: m["containerPath"]),
            "hooks": hooks}


def normalize(spec, plugin_dir):
    return {"kind": spec["kind"],
            "containerEdits": normalize_edits(spec.get("containerEdits") or {}, plugin_dir),
            "devices": {d["name"]: normalize_edits(d["containerEdits"], plugin_dir) for d in spec["devices"]}}


class UpstreamGpuSpec:
    """The spec upstream's GPU plugin writes (cmd/gpu-kubelet-plugin/cdi.go
    CreateClaimSpecFile) on a node whose driver lives at `root` (the
    plugin's container driver root and the host driver root are the same
    directory here, so the host-root transform keeps every path)."""

    def __init__(self, root, version):
        self.root = root
        self.version = version

    def node(self, path):
        # nvcdi nodes: hostPath is the node under the dev root; equal paths
        # are cleared (edits/device.go) and set again by the transform.
        return stat_node(self.root, path, {"path": path, "hostPath": self.root + path})

    def libraries(self):
        # driver-nvml.go getVersionLibs: "*.so.<version>" in the driver's
        # library directories and their vdpau/ subdirectory.
        out = []
        for sub in ("", "/vdpau"):
            d = self.root + LIB_DIR + sub
            if os.path.isdir(d):
                out += [LIB_DIR + sub + "/" + f for f in sorted(os.listdir(d))
                        if fnmatch.fnmatch(f, "*.so." + self.version) and not os.path.islink(os.path.join(d, f))]
        return out

    def mount(self, path, options=("ro", "nosuid", "nodev", "rbind", "rprivate")):
        # internal/edits/mount.go: the toolkit's bind options.
        return {"hostPath": self.root + path, "containerPath": path, "options": list(options)}

    def common(self):
        libs = self.libraries()
        mounts = [self.mount(p) for p in libs]
        # discover/ipc.go ipcMountOptions: the persistenced socket, writable
        # and noexec.
        sock = "/run/nvidia-persistenced/socket"
        if os.path.exists(self.root + sock):
            mounts.append(self.mount(sock, ("nosuid", "nodev", "rbind", "rprivate", "noexec")))
        # driver-nvml.go newDriverFirmwareDiscoverer: nvidia/<version>/gsp*.bin.
        fw = "/lib/firmware/nvidia/%s" % self.version
        if os.path.isdir(self.root + fw):
            mounts += [self.mount(fw + "/" + f) for f in sorted(os.listdir(self.root + fw))
                       if fnmatch.fnmatch(f, "gsp*.bin")]
        # driver-nvml.go newDriverBinariesDiscoverer, nvidia-imex-ctl included.
        for b in ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
                  "nvidia-cuda-mps-server", "nvidia-imex", "nvidia-imex-ctl"):
            if os.path.exists(self.root + "/usr/bin/" + b):
                mounts.append(self.mount("/usr/bin/" + b))
        # discover/symlinks.go WithDriverDotSoSymlinks: each library's soname
        # link and its .so link where the driver has one, plus libcuda.so and
        # libGLX_indirect.so.0.
        links = []
        for p in libs:
            d, name = os.path.dirname(p), os.path.basename(p)
            for entry in sorted(os.listdir(self.root + d)):
                full = self.root + d + "/" + entry
                if os.path.islink(full) and os.readlink(full) == name:
                    links.append("%s::%s/%s" % (name, d, entry))
                    for dev in sorted(os.listdir(self.root + d)):
                        fdev = self.root + d + "/" + dev
                        if os.path.islink(fdev) and os.readlink(fdev) == entry and dev.endswith(".so"):
                            links.append("%s::%s/%s" % (entry, d, dev))
            if name.startswith("libcuda.so."):
                links.insert(0, "libcuda.so.1::%s/libcuda.so" % d)
            if name.startswith("libGLX_nvidia.so."):
                links.append("%s::%s/libGLX_indirect.so.0" % (name, d))
        # additionalSymlinks.Hooks: each link once.
        link_args = []
        for entry in links:
            if entry not in link_args:
                link_args += ["--link", entry]
        hooks = []
        # discover/graphics.go graphicsDriverLibraries.Hooks: GBM's backend
        # link next to libnvidia-allocator, ahead of the driver's hooks
        # (common-nvml.go merges graphics before driver files).
        for p in libs:
            if fnmatch.fnmatch(os.path.basename(p), "libnvidia-allocator.so.*.*"):
                hooks.append(hook("create-symlinks", "--link",
                                  "../libnvidia-allocator.so.1::%s/gbm/nvidia-drm_gbm.so" % os.path.dirname(p)))
        folders = []
        for p in libs:
            if os.path.dirname(p) not in folders:
                folders.append(os.path.dirname(p))
        folder_args = []
        for f in folders:
            folder_args += ["--folder", f]
        hooks += [hook("create-symlinks", *link_args),
                  # discover/compat_libs.go, ldconfig.go, and the
                  # disable-device-node-modification hook, in
                  # NewDriverLibraryDiscoverer's order.
                  hook("enable-cuda-compat", "--host-driver-version=" + self.version),
                  hook("update-ldcache", *folder_args),
                  hook("disable-device-node-modification")]
        # common-nvml.go controlDeviceNodeDiscoverer.
        nodes = [self.node(p) for p in ("/dev/nvidia-modeset", "/dev/nvidia-uvm-tools", "/dev/nvidia-uvm",
                                        "/dev/nvidiactl") if os.path.exists(self.root + p)]
        # driver-nvml.go NVIDIA_CTK_LIBCUDA_DIR; wrapper.go GetCommonEdits
        # appends NVIDIA_VISIBLE_DEVICES=void.
        env = ["NVIDIA_CTK_LIBCUDA_DIR=" + LIB_DIR, "NVIDIA_VISIBLE_DEVICES=void"]
        return {"env": env, "deviceNodes": sorted(nodes, key=lambda n: n["path"]),
                "mounts": sorted(mounts, key=lambda m: m["containerPath"]), "hooks": hooks}

    def full_gpu(self, minor, bus_id):
        # platform-support/dgpu/nvml.go newNvmlDGPUDiscoverer: /dev/nvidia<minor>,
        # the DRM nodes of the bus id, and by-path-hooks.go's create-symlinks
        # of their /dev/dri/by-path links.
        nodes = [self.node("/dev/nvidia%d" % minor)]
        links = []
        for kind in ("card", "render"):
            link = "/dev/dri/by-path/pci-%s-%s" % (bus_id, kind)
            target = os.readlink(self.root + link)
            nodes.append(self.node(os.path.normpath(os.path.join("/dev/dri/by-path", target))))
            links += ["--link", "%s::%s" % (target, link)]
        return {"env": [], "deviceNodes": sorted(nodes, key=lambda n: n["path"]), "mounts": [],
                "hooks": [hook("create-symlinks", *links)]}

    def mig(self, parent_minor, bus_id, gi, ci):
        # cdi.go: the parent's full device spec plus GetDevNodesForMigDevice's
        # GI and CI nvcap nodes from /proc/driver/nvidia/capabilities.
        e = self.full_gpu(parent_minor, bus_id)
        major = proc_major(self.root, "nvidia-caps")
        for rel in ("gpu%d/mig/gi%d/access" % (parent_minor, gi), "gpu%d/mig/gi%d/ci%d/access" % (parent_minor, gi, ci)):
            minor, mode = cap_access(self.root, rel)
            e["deviceNodes"].append(nvcap("/dev/nvidia-caps/nvidia-cap%d" % minor, major, minor, mode))
        e["deviceNodes"].sort(key=lambda n: n["path"])
        return e


# ---- the differences nvdra keeps (docs/devices.md, "Differences from
# upstream's CDI specs"), each applied to upstream's spec ----

def keep_nodes_to_the_runtime(edits):
    """1. nvdra writes a node's path and hostPath only; the runtime reads
    type, major and minor from hostPath when the container is made.
    Upstream's stat of the node (major, minor, fileMode, permissions) is
    dropped; nvcap nodes, which need not exist on the host, keep theirs."""
    for n in edits["deviceNodes"]:
        if n.get("type") != "c":
            for k in ("major", "minor", "fileMode", "permissions", "gid"):
                n.pop(k, None)


def add_extra_libraries(edits, root):
    """3. nvdra mounts, as the toolkit does under its
    enable-explicit-driver-libraries feature flag (which upstream's plugin
    leaves off), the driver's unversioned graphics and API libraries
    (libnvidia-egl-xcb and the rest of the toolkit's list, symlinks
    resolved, with their .so link), and the legacy NVVM library
    libnvidia-nvvm70.so.<N>, which no version suffix finds: CUDA programs
    that JIT-link with NVVM 7.0 and EGL/GLX programs then run in the
    claim's containers as they do on the host."""
    d = root + LIB_DIR
    extra = []
    for name in sorted(os.listdir(d)):
        if fnmatch.fnmatch(name, "libnvidia-nvvm70.so.*") and not os.path.islink(os.path.join(d, name)):
            extra.append(name)
    links = []
    for name in ("libEGL.so", "libGL.so", "libGLESv1_CM.so", "libGLESv2.so", "libGLX.so", "libGLdispatch.so",
                 "libOpenCL.so", "libOpenGL.so", "libnvidia-api.so", "libnvidia-egl-xcb.so", "libnvidia-egl-xlib.so"):
        if not os.path.exists(os.path.join(d, name)):
            continue
        target = os.path.basename(os.path.realpath(os.path.join(d, name)))
        if target not in extra:
            extra.append(target)
        if os.path.islink(os.path.join(d, name)):
            links.append("%s::%s/%s" % (os.readlink(os.path.join(d, name)), LIB_DIR, name))
    for name in extra:
        edits["mounts"].append({"hostPath": d + "/" + name, "containerPath": LIB_DIR + "/" + name,
                                "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]})
    edits["mounts"].sort(key=lambda m: m["containerPath"])
    for h in edits["hooks"]:
        if h["args"][1] == "create-symlinks" and "libcuda.so.1::%s/libcuda.so" % LIB_DIR in h["args"]:
            for link in links:
                h["args"] += ["--link", link]
    return bool(extra)


def nvcaps_under_the_dev_root(edits, root):
    """4. A capability node's (MIG, fabric-imex-mgmt) and an IMEX channel's
    hostPath is found under the dev root, as every other node nvdra writes;
    upstream writes the path itself (its host-root transform sets hostPath
    to path). Where the dev root is the host's /dev the two are the same
    string."""
    for n in edits["deviceNodes"]:
        if n["path"].startswith(("/dev/nvidia-caps/", "/dev/nvidia-caps-imex-channels/")):
            n["hostPath"] = root + n["path"]


def add_claim_env(edits, uid, ns, name):
    """2. NVDRA_CLAIM_<uid>=<ns>/<name> at spec level: the spec names its
    claim, so a claim whose ledger entry was lost is rebuilt from it."""
    edits["env"].append("NVDRA_CLAIM_%s=%s/%s" % (uid.replace("-", "_"), ns, name))


class DifferencesMatter:
    def assertDifferencesMatter(self, upstream, nvdra_expected):
        self.assertNotEqual(upstream, nvdra_expected, "a listed difference no longer changes the spec")


class SideBySide(DifferencesMatter, NodeTestCase):
    maxDiff = None

    def read_spec(self, vendor, uid):
        with open(os.path.join(self.node.cdi_root, "%s-claim_%s.json" % (vendor, uid))) as f:
            return json.load(f)

    def gpu_root(self, plugin):
        # The mock state directory is the mock node's driver root.
        return os.path.realpath(self.node.mock_state_dir(GPU_DRIVER))

    def check_gpu_claim(self, profile, device, build):
        plugin = self.gpu_plugin(profile).start()
        root = self.gpu_root(plugin)
        claim = self.gpu_claim("side-" + device, [device])
        r = plugin.prepare([claim])
        self.assertOk(r, claim[2])
        ours = normalize(self.read_spec("k8s.gpu.nvidia.com", claim[2]), plugin.plugin_dir)
        # The driver's version as nvcdi takes it from NVML, here from
        # libcuda.so.<version>.
        version = [f[len("libcuda.so."):] for f in os.listdir(root + LIB_DIR)
                   if re.fullmatch(r"libcuda\.so\.\d+\.\d+(\.\d+)?", f)][0]
        up = UpstreamGpuSpec(root, version)
        dev = build(up)
        upstream = {"kind": "k8s.gpu.nvidia.com/claim", "containerEdits": up.common(),
                    "devices": {"%s-%s" % (claim[2], device): dev}}
        expected = json.loads(json.dumps(upstream))
        keep_nodes_to_the_runtime(expected["containerEdits"])
        for d in expected["devices"].values():
            keep_nodes_to_the_runtime(d)
            nvcaps_under_the_dev_root(d, root)
        self.assertTrue(add_extra_libraries(expected["containerEdits"], root))
        add_claim_env(expected["containerEdits"], claim[2], claim[0], claim[1])
        # What the runtime sees is compared, not the order of links.
        expected["containerEdits"] = normalize_edits(expected["containerEdits"], plugin.plugin_dir)
        self.assertDifferencesMatter(upstream, expected)
        self.assertEqual(ours, expected)

    def test_full_gpu(self):
        # a100-mig's gpu-0: minor 0, bus 0000:07:00.0 (docs/devices.md).
        self.check_gpu_claim("a100-mig", "gpu-0", lambda up: up.full_gpu(0, "0000:07:00.0"))

    def test_mig_device(self):
        # Upstream's MIG spec: the parent gpu-2 (minor 2, bus 0000:47:00.0)
        # and the GI/CI capability nodes.
        self.check_gpu_claim("a100-mig", "gpu-2-mig-3g20gb-9-0", lambda up: up.mig(2, "0000:47:00.0", *MIG_3G20GB))


class UpstreamComputeDomainSpec:
    """The claim specs upstream's compute-domain plugin writes
    (cmd/compute-domain-kubelet-plugin/cdi.go CreateClaimSpecFile): device
    edits only, from its config state; the host-root transform gives a node
    without hostPath its path."""

    def __init__(self, root):
        self.root = root

    def channel(self, channel):
        # nvlib.go getNVCapIMEXChannelDeviceInfo: the nvidia-caps-imex-channels
        # major, the channel as minor, mode 0666.
        path = "/dev/nvidia-caps-imex-channels/channel%d" % channel
        node = nvcap(path, proc_major(self.root, "nvidia-caps-imex-channels"), channel, 0o666)
        return {"env": [], "deviceNodes": [node], "mounts": [], "hooks": []}

    def daemon(self, domain, domains_dir):
        # computedomain.go GetCDIContainerEditsCommon and, with a clique ID,
        # GetCDIContainerEditsForImex: the fabric-imex-mgmt capability node.
        minor, mode = cap_access(self.root, "fabric-imex-mgmt")
        node = nvcap("/dev/nvidia-caps/nvidia-cap%d" % minor, proc_major(self.root, "nvidia-caps"), minor, mode)
        env = ["CLIQUE_ID=" + CLIQUE, "COMPUTE_DOMAIN_UUID=" + domain["uid"],
               "COMPUTE_DOMAIN_NAME=" + domain["name"], "COMPUTE_DOMAIN_NAMESPACE=" + domain["namespace"]]
        mount = {"hostPath": os.path.join(domains_dir, domain["uid"]), "containerPath": "/imexd",
                 "options": ["rw", "nosuid", "nodev", "bind"]}
        return {"env": env, "deviceNodes": [node], "mounts": [mount], "hooks": []}


class ComputeDomainSideBySide(DifferencesMatter, ComputeDomainTestCase):
    maxDiff = None

    def check(self, claim, device, upstream_edits):
        root = os.path.realpath(self.node.mock_state_dir(CD_DRIVER))
        with open(os.path.join(self.node.cdi_root, "k8s.compute-domain.nvidia.com-claim_%s.json" % claim[2])) as f:
            ours = normalize(json.load(f), self.plugin.plugin_dir)
        upstream = {"kind": "k8s.compute-domain.nvidia.com/claim",
                    "containerEdits": normalize_edits({}, self.plugin.plugin_dir),
                    "devices": {"%s-%s" % (claim[2], device): upstream_edits}}
        expected = json.loads(json.dumps(upstream))
        for d in expected["devices"].values():
            nvcaps_under_the_dev_root(d, root)
        add_claim_env(expected["containerEdits"], claim[2], claim[0], claim[1])
        self.assertDifferencesMatter(upstream, expected)
        self.assertEqual(ours, expected)
        return root

    def test_imex_channel(self):
        c = self.channel_claim("side-channel", 0)
        self.assertOk(self.plugin.prepare([c]), c[2])
        root = os.path.realpath(self.node.mock_state_dir(CD_DRIVER))
        self.check(c, "channel-0", UpstreamComputeDomainSpec(root).channel(0))

    def test_imex_daemon(self):
        d = self.daemon_claim("side-daemon")
        self.assertOk(self.plugin.prepare([d]), d[2])
        root = os.path.realpath(self.node.mock_state_dir(CD_DRIVER))
        domain = {"uid": self.domain_uid, "name": "cd-" + self.domain_uid[:8], "namespace": "default"}
        self.check(d, "daemon-0", UpstreamComputeDomainSpec(root).daemon(
            domain, os.path.join(self.plugin.plugin_dir, "domains")))


if __name__ == "__main__":
    unittest.main()
