"""Both kubelet plugins on a node laid out as the NVIDIA GPU operator lays it
out: the driver container's files under /run/nvidia/driver, device nodes on
the host's /dev, no toolkit in /usr/bin (nvdra needs none: each plugin copies
its own nvdra-cdi-hook into its plugin directory), the validator's marker in
/run/nvidia/validations.

The mock node's root stands for the host's "/". The plugins get what the
chart renders for such a node (testdata/gpu-operator.values.yaml): its
environment, with host paths moved under the node root, and its driver-root
mount, made with `mount --bind` in a mount namespace of their own at a path
standing for the container's /driver-root. The chart's init container runs
its own script in a chroot with the chart's mount of /run/nvidia.
"""

import json
import os
import shutil
import subprocess
import unittest
import uuid

import yaml

from e2e_base import CD_DRIVER, GPU_DRIVER, make_claim, opaque_config, wait_for
import localnode

ROOT = localnode.ROOT
CHART = os.path.join(ROOT, "deploy", "helm", "nvdra")
VALUES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata", "gpu-operator.values.yaml")
PROFILE = "gb200x4"
DRIVER_NS = "nvidia-dra-driver"
# The gb200x4 mock profile's clique.
CLIQUE = "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90.32766"
# The plugins' default --container-driver-root, where the chart mounts the
# driver root when it sets no DRIVER_ROOT_CTR_PATH.
DEFAULT_CONTAINER_DRIVER_ROOT = "/driver-root"
# Binds the driver root where the plugin's container has it, read-only as
# the chart says, then runs the plugin: sh -c SCRIPT sh SOURCE TARGET ro|rw PLUGIN...
MOUNT_AND_RUN = ('mount --bind "$1" "$2" && { [ "$3" = rw ] || mount -o remount,bind,ro "$2"; } && '
                 'shift 3 && exec "$@"')


def helm():
    for candidate in (os.path.join(ROOT, "tests", "deploy", "tools", "bin", "helm"), shutil.which("helm")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise AssertionError("helm not found (scripts/setup installs it into tests/deploy/tools/bin)")


def render_kubelet_plugin():
    out = subprocess.run([helm(), "template", "nvdra", CHART, "--namespace", "nvdra", "--values", VALUES],
                         capture_output=True, text=True, check=True).stdout
    for d in yaml.safe_load_all(out):
        if d and d["kind"] == "DaemonSet" and d["metadata"]["name"].endswith("kubelet-plugin"):
            return d["spec"]["template"]["spec"]
    raise AssertionError("the chart rendered no kubelet plugin DaemonSet")


def plain_env(container):
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def load_spec(path):
    with open(path) as f:
        return json.load(f)


def spec_edits(spec):
    """Every containerEdits of a CDI spec: the spec's and its devices'."""
    return [spec.get("containerEdits", {})] + [d["containerEdits"] for d in spec["devices"]]


class GpuOperatorNodeTest(unittest.TestCase):
    def setUp(self):
        self.node = localnode.LocalNode(mock_layout="gpu-operator")
        self.addCleanup(self.node.close)
        self.root = self.node.mock_root
        self.pod = render_kubelet_plugin()
        self.volumes = {v["name"]: v for v in self.pod["volumes"]}

    def on_host(self, path):
        """A host path of the chart's, on this test's node."""
        return self.root + path

    def container(self, name):
        return next(c for c in self.pod["initContainers"] + self.pod["containers"] if c["name"] == name)

    # ---- the chart's init container ----

    def test_init_container_waits_for_the_operators_driver(self):
        init = self.container("init-container")
        env = plain_env(init)
        self.assertEqual(env["NVIDIA_DRIVER_ROOT"], "/run/nvidia/driver")
        # The operator has not started its driver container yet: /run/nvidia
        # is there (the chart's DirectoryOrCreate), the driver is not.
        os.makedirs(self.on_host("/run/nvidia"))
        mounts = []
        for m in init["volumeMounts"]:
            host = self.volumes[m["name"]]["hostPath"]["path"]
            mounts += [self.on_host(host), m["mountPath"]]
        self.assertEqual(mounts, [self.on_host("/run/nvidia"), "/driver-root-parent"])
        log_path = os.path.join(self.node.workdir, "init-container.log")
        chroot = os.path.join(self.node.workdir, "init-root")
        os.makedirs(chroot)
        # A root of its own with the chart's mounts: the script links
        # /driver-root there.
        command = localnode.chroot_command(chroot, list(zip(mounts[::2], mounts[1::2])),
                                           init["command"] + init["args"])
        log = open(log_path, "w")
        self.addCleanup(log.close)
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(env, PATH="/usr/sbin:/usr/bin:/sbin:/bin"))

        def stop():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        self.addCleanup(stop)

        def read_log():
            with open(log_path) as f:
                return f.read()
        wait_for(lambda: "nvidia-smi: not found, libnvidia-ml.so.1: not found" in read_log() or proc.poll() is not None,
                 30, "the init container's first look")
        self.assertIsNone(proc.poll(), read_log())
        self.assertIn("/run/nvidia/driver is the GPU operator's driver container", read_log())
        self.assertFalse(os.path.exists(self.on_host("/run/nvidia/validations/driver-ready")))

        # The driver container comes up and the validator passes it: the
        # mock lays the node out, marker last.
        self.node.build_mock_node(PROFILE)
        self.assertTrue(os.path.isfile(self.on_host("/run/nvidia/validations/driver-ready")))
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            self.fail("the init container did not leave once the driver was there:\n" + read_log())
        out = read_log()
        self.assertEqual(code, 0, out)
        self.assertIn("nvidia-smi: /driver-root/usr/bin/nvidia-smi, libnvidia-ml.so.1: "
                      "/driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", out)
        self.assertIn("NVIDIA-SMI 570.158.01 (nvdra mock)", out)
        self.assertIn("the driver works: starting the plugins", out)

    # ---- the plugins ----

    def start_plugin(self, container_name, driver, extra_args=None):
        """Starts the plugin of `container_name` with the chart's environment
        and driver-root mount for it."""
        c = self.container(container_name)
        env = plain_env(c)
        host_root = env["NVIDIA_DRIVER_ROOT"]
        self.assertEqual(host_root, "/run/nvidia/driver")
        inside = env.get("DRIVER_ROOT_CTR_PATH", DEFAULT_CONTAINER_DRIVER_ROOT)
        mount = next(m for m in c["volumeMounts"] if m["mountPath"] == inside)
        self.assertEqual(self.volumes[mount["name"]]["hostPath"]["path"], host_root)
        view = os.path.join(self.node.workdir, "ctr-" + container_name) + inside
        os.makedirs(view)
        run_env = {"NVIDIA_DRIVER_ROOT": self.on_host(host_root), "DRIVER_ROOT_CTR_PATH": view}
        if "NVIDIA_CDI_HOOK_PATH" in env:
            run_env["NVIDIA_CDI_HOOK_PATH"] = self.on_host(env["NVIDIA_CDI_HOOK_PATH"])
        wrapper = ["unshare", "-m", "--propagation", "private", "sh", "-c", MOUNT_AND_RUN, "sh",
                   self.on_host(host_root), view, "ro" if mount.get("readOnly") else "rw"]
        plugin = self.node.plugin(driver, PROFILE, env=run_env, wrapper=wrapper, extra_args=extra_args)
        plugin.view = view
        return plugin.start()

    def set_domain_and_clique(self, uid):
        """A ready ComputeDomain with this node's IMEX daemon ready in its
        clique, as the controller and the daemons leave them."""
        self.node.api.load([{
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
            "metadata": {"name": "cd1", "namespace": "default", "uid": uid},
            "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "cd1-channel"}}},
            "status": {"status": "Ready",
                       "nodes": [{"name": self.node.node_name, "status": "Ready", "cliqueID": CLIQUE,
                                  "ipAddress": "10.0.0.1", "index": 0}]},
        }, {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainClique",
            "metadata": {"name": "%s.%s" % (uid, CLIQUE), "namespace": DRIVER_NS},
            "daemons": [{"nodeName": self.node.node_name, "cliqueID": CLIQUE, "ipAddress": "10.0.0.1",
                         "index": 0, "status": "Ready"}],
        }])

    def assert_host_paths(self, spec, plugin):
        """Driver files come from the driver root, device nodes from the
        node's /dev: host paths that exist on the node, none of the plugin's
        container view."""
        driver_root = self.on_host("/run/nvidia/driver") + "/"
        nodes, mounts = [], []
        for e in spec_edits(spec):
            nodes += e.get("deviceNodes", [])
            mounts += e.get("mounts", [])
        self.assertTrue(nodes, spec)
        for n in nodes:
            host = n.get("hostPath", n["path"])
            self.assertTrue(host.startswith(self.on_host("/dev/")), n)
            self.assertEqual(host, self.on_host(n["path"]), n)
            self.assertTrue(os.path.exists(host), n)
        for m in mounts:
            self.assertTrue(m["hostPath"].startswith(driver_root), m)
            self.assertTrue(os.path.exists(m["hostPath"]), m)
        self.assertNotIn(plugin.view, json.dumps(spec))
        return nodes, mounts

    def test_plugins_start_publish_and_prepare_with_the_charts_settings(self):
        self.node.build_mock_node(PROFILE)
        # The layout: the driver under the driver root, its nodes on the
        # node's /dev, no toolkit hook in /usr/bin.
        drv = self.on_host("/run/nvidia/driver")
        for p in ("/usr/bin/nvidia-smi", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/etc/ld.so.cache"):
            self.assertTrue(os.path.exists(drv + p), p)
        for p in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-caps-imex-channels/channel0"):
            self.assertTrue(os.path.exists(self.on_host(p)), p)
            self.assertFalse(os.path.exists(drv + p), p)
        self.assertFalse(os.path.exists(self.on_host("/usr/bin/nvidia-cdi-hook")))
        with open(self.on_host("/run/nvidia/validations/driver-ready")) as f:
            self.assertIn("NVIDIA_DRIVER_ROOT=/run/nvidia/driver\n", f.read())

        template = os.path.join(self.node.workdir, "compute-domain-daemon-config.tmpl.cfg")
        with open(template, "w") as f:
            f.write("IMEX_SERVER_PORT=50000\n")
        gpu = self.start_plugin("gpus", GPU_DRIVER)
        cd = self.start_plugin("compute-domains", CD_DRIVER, extra_args=[
            "--namespace", DRIVER_NS, "--compute-domain-daemon-config-template", template])

        gpu_slices = wait_for(lambda: self.node.api.slices(GPU_DRIVER), 30, "the GPU plugin's ResourceSlices")
        self.assertEqual(sorted(d["name"] for s in gpu_slices for d in s["spec"]["devices"]),
                         ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])
        cd_slices = wait_for(lambda: self.node.api.slices(CD_DRIVER), 30, "the ComputeDomain plugin's ResourceSlices")
        cd_devices = {d["name"] for s in cd_slices for d in s["spec"]["devices"]}
        self.assertIn("channel-0", cd_devices)
        self.assertIn("daemon-0", cd_devices)

        # A GPU claim: its spec names the driver's files under the driver
        # root and the GPU's nodes on the node's /dev, hooks the plugin's own
        # copy of nvdra-cdi-hook (the chart mounts no host hook by default).
        claim = make_claim("gpu", [{"request": "gpu", "driver": GPU_DRIVER, "pool": self.node.node_name,
                                    "device": "gpu-1"}])
        self.node.api.load([claim])
        uid = claim["metadata"]["uid"]
        got = gpu.prepare([("default", "gpu", uid)])[uid]
        self.assertEqual(got["error"], "", gpu.read_log())
        spec_file = os.path.join(self.node.cdi_root, "k8s.gpu.nvidia.com-claim_%s.json" % uid)
        spec = load_spec(spec_file)
        nodes, mounts = self.assert_host_paths(spec, gpu)
        self.assertIn(self.on_host("/dev/nvidia1"), [n["hostPath"] for n in nodes])
        self.assertIn(self.on_host("/dev/nvidiactl"), [n["hostPath"] for n in nodes])
        self.assertIn(drv + "/usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01", [m["hostPath"] for m in mounts])
        self.assertIn(drv + "/usr/bin/nvidia-smi", [m["hostPath"] for m in mounts])
        hooks = [h for e in spec_edits(spec) for h in e.get("hooks", [])]
        self.assertTrue(hooks, spec)
        copy = os.path.join(gpu.plugin_dir, "nvidia-cdi-hook")
        for h in hooks:
            self.assertEqual(h["path"], copy, h)
        self.assertTrue(os.access(copy, os.X_OK), copy)
        with open(copy, "rb") as a, open(os.path.join(localnode.BIN, "nvdra-cdi-hook"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual(gpu.unprepare([("default", "gpu", uid)])[uid]["error"], "")
        self.assertFalse(os.path.exists(spec_file))

        # An IMEX channel claim: the channel's node on the node's /dev.
        domain = str(uuid.uuid4())
        self.set_domain_and_clique(domain)
        params = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
                  "domainID": domain}
        channel = make_claim("channel", [{"request": "channel", "driver": CD_DRIVER, "pool": self.node.node_name,
                                          "device": "channel-0"}],
                             configs=[opaque_config(CD_DRIVER, params, requests=["channel"])])
        self.node.api.load([channel])
        cuid = channel["metadata"]["uid"]
        # The plugin's ComputeDomain watch may not have seen the domain yet:
        # retry as the kubelet does.
        wait_for(lambda: cd.prepare([("default", "channel", cuid)])[cuid]["error"] == "", 30,
                 "the channel claim prepared:\n" + cd.read_log())
        cd_spec_file = os.path.join(self.node.cdi_root, "k8s.compute-domain.nvidia.com-claim_%s.json" % cuid)
        cd_spec = load_spec(cd_spec_file)
        nodes, _ = self.assert_host_paths(cd_spec, cd)
        self.assertEqual([n["path"] for n in nodes], ["/dev/nvidia-caps-imex-channels/channel0"])
        self.assertEqual(cd.unprepare([("default", "channel", cuid)])[cuid]["error"], "")
        self.assertFalse(os.path.exists(cd_spec_file))

        for p in (gpu, cd):
            self.assertEqual(p.stop(), 0, p.read_log())


if __name__ == "__main__":
    unittest.main()
