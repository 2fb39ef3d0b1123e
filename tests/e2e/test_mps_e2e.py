"""MPS control daemons (the MPSSupport gate) with the real GPU plugin.

The test API server plays the deployment controller (a Deployment gets a pod
whose one container is ready, or stays pending), and each plugin runs in a
private mount namespace (unshare -m) so that the shm tmpfs it mounts is real
and goes away with it. The mounts are read from the plugin's
/proc/<pid>/mountinfo.
"""

import json
import os
import signal
import subprocess

import yaml

import localnode
from e2e_base import GPU_DRIVER, NodeTestCase, make_claim, opaque_config, wait_for

TEMPLATE = os.path.join(localnode.ROOT, "templates", "mps-control-daemon.tmpl.yaml")
SPECS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures", "upstream-user-specs")
IMAGE = "registry.example/nvdra:test"
MPS_ARGS = ["--feature-gates", "MPSSupport=true", "--image-name", IMAGE,
            "--mps-control-daemon-template", TEMPLATE, "--namespace", "nvdra"]
# Fault points of an MPS prepare, in the order it passes them.
MPS_FAILPOINTS = ["mps-after-directories", "mps-after-shm-mount", "mps-after-compute-mode",
                  "mps-after-deployment-create", "engine-after-await-ready"]


def mps_config(**mps):
    return opaque_config(GPU_DRIVER, {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                                      "sharing": {"strategy": "MPS", "mpsConfig": mps}})


class MpsEndToEnd(NodeTestCase):
    def setUp(self):
        super().setUp()
        self.controller("ready")

    def controller(self, mode):
        status, body = self.node.api.request("POST", "/_nvdra/deployments", {"controller": mode})
        self.assertEqual(status, 200, body)

    def mps_plugin(self, extra_args=(), **kw):
        return self.gpu_plugin(extra_args=list(MPS_ARGS) + list(extra_args), wrapper=["unshare", "-m"], **kw)

    def objects(self, resource):
        status, body = self.node.api.request("GET", "/_nvdra/objects?resource=" + resource)
        self.assertEqual(status, 200, body)
        return body["items"]

    def deployments(self):
        return {d["metadata"]["name"]: d for d in self.objects("deployments")}

    def mps_dirs(self, plugin):
        root = os.path.join(plugin.plugin_dir, "mps")
        return sorted(os.listdir(root)) if os.path.isdir(root) else []

    def tmpfs_mounts(self, plugin):
        with open("/proc/%d/mountinfo" % plugin.proc.pid) as f:
            return [line.split()[4] for line in f if " - tmpfs " in line and "/mps/" in line.split()[4]]

    def control_calls(self):
        path = os.path.join(self.node.workdir, "mock-" + GPU_DRIVER, "state", "control.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [line.split() for line in f.read().splitlines()]

    def uuid_of(self, plugin, device):
        slices = self.node.api.slices(GPU_DRIVER)
        for s in slices:
            for d in s["spec"]["devices"]:
                if d["name"] == device:
                    return d["attributes"]["uuid"]["string"]
        raise AssertionError("no device %s in the slices" % device)

    def test_a_claim_is_prepared_once_its_daemon_is_ready_and_unprepare_removes_everything(self):
        plugin = self.mps_plugin().start()
        claim = self.gpu_claim("mps", ["gpu-0", "gpu-1"],
                               configs=[mps_config(defaultActiveThreadPercentage=50,
                                                   defaultPinnedDeviceMemoryLimit="10Gi")])
        res = plugin.prepare([claim])
        self.assertOk(res, claim[2])
        deps = self.deployments()
        self.assertEqual(len(deps), 1, list(deps))
        name, dep = deps.popitem()
        self.assertTrue(name.startswith("mps-control-daemon-" + claim[2] + "-"), name)
        daemon_id = name[len("mps-control-daemon-"):]
        self.assertEqual(len(daemon_id), len(claim[2]) + 6)
        self.assertEqual(dep["metadata"]["namespace"], "nvdra")
        self.assertEqual(dep["metadata"]["labels"]["app"], name)
        self.assertEqual(dep["metadata"]["labels"]["gpu.nvidia.com/mps-control-daemon-node"], self.node.node_name)
        self.assertEqual(dep["metadata"]["labels"]["gpu.nvidia.com/mps-control-daemon-claim"], claim[2])
        pod = dep["spec"]["template"]["spec"]
        self.assertEqual(pod["nodeName"], self.node.node_name)
        ctr = pod["containers"][0]
        self.assertEqual(ctr["image"], IMAGE)
        uuids = sorted([self.uuid_of(plugin, "gpu-0"), self.uuid_of(plugin, "gpu-1")])
        env = {e["name"]: e["value"] for e in ctr["env"]}
        self.assertEqual(env["CUDA_VISIBLE_DEVICES"], ",".join(uuids))
        self.assertIn("MPSSupport=true,", env["FEATURE_GATES"])
        script = ctr["args"][0]
        self.assertIn("set_default_active_thread_percentage 50 |", script)
        for u in uuids:
            self.assertIn("set_default_device_pinned_mem_limit %s 10240M |" % u, script)
        root = os.path.join(plugin.plugin_dir, "mps", daemon_id)
        volumes = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
        self.assertEqual(volumes["mps-shm-directory"], os.path.join(root, "shm"))
        self.assertEqual(volumes["mps-pipe-directory"], os.path.join(root, "pipe"))
        # The shm is a tmpfs in the plugin's mount namespace; the GPUs are
        # in EXCLUSIVE_PROCESS mode.
        self.assertEqual(self.tmpfs_mounts(plugin), [os.path.join(root, "shm")])
        self.assertEqual(sorted(c[1] for c in self.control_calls() if c[2] == "EXCLUSIVE_PROCESS"), uuids)
        # Every container of the claim gets the pipe directory and the mounts.
        spec = [f for f in self.node.cdi_files() if claim[2] in f]
        self.assertEqual(len(spec), 1, self.node.cdi_files())
        with open(os.path.join(self.node.cdi_root, spec[0])) as f:
            text = f.read()
        doc = yaml.safe_load(text) if not text.lstrip().startswith("{") else json.loads(text)
        for dev in doc["devices"]:
            edits = dev["containerEdits"]
            self.assertIn("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", edits["env"])
            mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"] if m["containerPath"] in
                      ("/dev/shm", "/tmp/nvidia-mps")}
            self.assertEqual(mounts, {"/dev/shm": os.path.join(root, "shm"),
                                      "/tmp/nvidia-mps": os.path.join(root, "pipe")})
        # A repeated Prepare answers the same and creates nothing new.
        self.assertEqual(plugin.prepare([claim]), res)
        self.assertEqual(list(self.deployments()), [name])

        self.assertOk(plugin.unprepare([claim]), claim[2])
        self.assertEqual(self.deployments(), {})
        self.assertEqual(self.objects("pods"), [])
        self.assertEqual(self.mps_dirs(plugin), [])
        self.assertEqual(self.tmpfs_mounts(plugin), [])
        self.assertEqual(sorted(c[1] for c in self.control_calls() if c[2] == "DEFAULT"), uuids)
        self.assertEqual(self.live_entries(plugin), [])

    def test_a_daemon_that_never_becomes_ready_fails_the_claim_retryably_naming_its_deployment(self):
        self.controller("pending")
        # The claim's deadline (the plugin's, within the kubelet's 45 s call)
        # shortened to 3 s.
        plugin = self.mps_plugin(extra_args=["--claim-timeout", "3"]).start()
        claim = self.gpu_claim("mps-slow", ["gpu-2"], configs=[mps_config()], reserved_for=[("pod-a", "uid-a")])
        res = plugin.prepare([claim])
        self.assertIn("MPS control daemon is not yet ready: Deployment nvdra/mps-control-daemon-" + claim[2],
                      res[claim[2]]["error"])
        self.assertIn("waiting for MPS control daemon to come online", res[claim[2]]["error"])
        self.assertEqual([e["state"] for e in self.live_entries(plugin)], ["PrepareStarted"])
        # The kubelet gives up on the pod: Unprepare removes the half-started daemon.
        self.assertOk(plugin.unprepare([claim]), claim[2])
        self.assertEqual(self.deployments(), {})
        self.assertEqual(self.mps_dirs(plugin), [])
        # Once the controller catches up, a Prepare for the next pod succeeds.
        self.controller("ready")
        self.assertOk(plugin.prepare([claim]), claim[2])
        self.assertEqual(len(self.deployments()), 1)

    def test_a_plugin_killed_while_waiting_whose_claim_is_then_deleted_leaves_no_daemon_after_restart(self):
        self.controller("pending")
        plugin = self.mps_plugin().start()
        claim = self.gpu_claim("mps-killed", ["gpu-3"], configs=[mps_config()])
        call = subprocess.Popen([os.path.join(localnode.BIN, "nvdractl"), "prepare", "--socket", plugin.dra_socket,
                                 "--timeout", "60", "%s/%s/%s" % claim],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(call.wait)
        wait_for(lambda: len(self.deployments()) == 1, 30, "the daemon's Deployment")
        plugin.proc.send_signal(signal.SIGKILL)
        plugin.wait_exit()
        call.wait(30)
        self.node.api.delete("resourceclaims", "default", "mps-killed")
        plugin.start()
        wait_for(lambda: self.live_entries(plugin) == [] and self.deployments() == {} and self.mps_dirs(plugin) == [],
                 30, "the reconciler to roll the claim back")
        self.assertEqual(self.node.cdi_files(), [])

    def test_a_kill_at_every_mps_step_then_the_kubelets_retry_converges(self):
        plugin = self.mps_plugin()
        for i, fp in enumerate(MPS_FAILPOINTS):
            with self.subTest(failpoint=fp):
                claim = self.gpu_claim("mps-crash-%d" % i, ["gpu-%d" % i], configs=[mps_config()])
                plugin.start(env={"NVDRA_FAILPOINTS": fp + "=crash"})
                r = self.node.ctl(["prepare", "--socket", plugin.dra_socket, "%s/%s/%s" % claim], check=False)
                self.assertNotEqual(r.returncode, 0)
                plugin.wait_exit()
                plugin.start()
                self.assertOk(plugin.prepare([claim]), claim[2])
                self.assertEqual(len(self.deployments()), 1)
                self.assertEqual(len(self.tmpfs_mounts(plugin)), 1)
                self.assertOk(plugin.unprepare([claim]), claim[2])
                self.assertEqual(self.deployments(), {})
                self.assertEqual(self.mps_dirs(plugin), [])
                self.assertEqual(self.live_entries(plugin), [])
                plugin.stop()

    def test_a_daemon_of_this_node_that_no_claim_owns_is_deleted_and_other_nodes_daemons_are_kept(self):
        def daemon(name, node):
            return {"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": name, "namespace": "nvdra",
                                 "labels": {"gpu.nvidia.com/mps-control-daemon-node": node}},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                             "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": []}}}}
        self.node.api.load([daemon("mps-control-daemon-orphan", self.node.node_name),
                            daemon("mps-control-daemon-elsewhere", "node-2")])
        plugin = self.mps_plugin().start()
        wait_for(lambda: "mps-control-daemon-orphan" not in self.deployments(), 30, "the orphan's deletion")
        self.assertIn("mps-control-daemon-elsewhere", self.deployments())
        self.assertIn("Deleted MPS control daemon nvdra/mps-control-daemon-orphan", plugin.read_log())

    def test_without_the_gate_an_mps_claim_is_refused_naming_it(self):
        plugin = self.gpu_plugin().start()
        claim = self.gpu_claim("mps-off", ["gpu-0"], configs=[mps_config()])
        res = plugin.prepare([claim])
        self.assertIn('"MPS" is selected as the GPU sharing strategy, but the "MPSSupport" feature gate is not '
                      "enabled", res[claim[2]]["error"])
        self.assertEqual(self.deployments(), {})

    def test_the_gate_without_an_image_refuses_to_start(self):
        plugin = self.gpu_plugin(extra_args=["--feature-gates", "MPSSupport=true"])
        with self.assertRaises(RuntimeError) as e:
            plugin.start()
        self.assertIn("--image-name (IMAGE_NAME) is required with featureGates.MPSSupport=true", str(e.exception))

    def test_upstreams_mps_user_spec_prepares(self):
        with open(os.path.join(SPECS, "gpu-test-mps.yaml")) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        template = next(d for d in docs if d["kind"] == "ResourceClaimTemplate")
        pod = next(d for d in docs if d["kind"] == "Pod")
        devices = template["spec"]["spec"]["devices"]
        results = [{"request": r["name"], "driver": GPU_DRIVER, "pool": self.node.node_name, "device": "gpu-4"}
                   for r in devices["requests"]]
        configs = [dict(c, source="FromClaim") for c in devices["config"]]
        claim = make_claim("test-pod-shared-gpu", results, namespace=pod["metadata"]["namespace"], configs=configs,
                           reserved_for=[(pod["metadata"]["name"], "pod-uid-1")])
        self.node.api.load([claim])
        ref = (claim["metadata"]["namespace"], claim["metadata"]["name"], claim["metadata"]["uid"])
        plugin = self.mps_plugin().start()
        self.assertOk(plugin.prepare([ref]), ref[2])
        script = next(iter(self.deployments().values()))["spec"]["template"]["spec"]["containers"][0]["args"][0]
        self.assertIn("set_default_active_thread_percentage 50 |", script)
        self.assertIn(" 10240M |", script)
        self.assertOk(plugin.unprepare([ref]), ref[2])
        self.assertEqual(self.deployments(), {})
