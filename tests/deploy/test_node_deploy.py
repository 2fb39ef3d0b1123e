#!/usr/bin/env python3
"""The kubelet plugins in a container, run the way deploy/base runs them.

The image is made as scripts/build-image makes it, from this build's
binaries: scripts/image-rootfs and the Containerfile's runtime stage (no base
image); its OCI labels must say what its binaries' --version says, and it
must stay within 70 MiB. The container
gets the DaemonSet's command, arguments, environment and host mounts, read
from deploy/base/daemonset.yaml, with every host path moved under a temporary
"host" directory; the mock driver root lives in that host's driver root. The
test API server runs on loopback and the container uses the host network.
From the host, nvdractl registers the plugin and prepares a claim; the CDI
spec must appear on the host naming host paths, its hooks the copy of the
image's hook the plugin put in its plugin directory (no host hook is
mounted); SIGTERM must stop the plugin and remove its sockets. The init
container waits until a driver appears under the driver root. The
compute-domain plugin prepares an IMEX daemon claim with the daemon config
template the image carries at its default path.
"""

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import unittest
import uuid

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

import localnode  # noqa: E402
from localnode import CD_DRIVER, GPU_DRIVER, make_claim, opaque_config, wait_for  # noqa: E402

BUILD = os.environ.get("NVDRA_BUILD_DIR", os.path.join(ROOT, "build"))
BIN = localnode.BIN
# Only for scripts/podman-conf's probe: the image itself has no base.
BASE_IMAGE = "debian:bookworm-slim"
TEST_IMAGE = "localhost/nvdra-node-test:latest"
IMAGE_SOURCE = "https://example.com/nvdra.git"
# The most the image may take (uncompressed, as podman reports it).
MAX_IMAGE_BYTES = 70 * 1024 * 1024
DAEMON_TEMPLATE = os.path.join(ROOT, "templates", "compute-domain-daemon-config.tmpl.cfg")


def run(args, **kw):
    kw.setdefault("check", True)
    kw.setdefault("text", True)
    return subprocess.run(args, **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def version_of(binary):
    """What `binary --version` prints: {"version", "commit", "date"}."""
    out = run([binary, "--version"], capture_output=True).stdout.splitlines()
    return {"version": out[0].split()[-1], "commit": out[1].split()[-1], "date": out[2].split()[-1]}


def runtime_stage():
    """The Containerfile's last stage, its files taken from the context's rootfs/."""
    with open(os.path.join(ROOT, "Containerfile")) as f:
        text = f.read()
    stage = text[text.rindex("\nFROM scratch\n") + 1:]
    if "COPY --from=build /out/ /\n" not in stage:
        raise RuntimeError("the Containerfile's last stage no longer copies /out of the build stage")
    return stage.replace("COPY --from=build /out/ /\n", "COPY rootfs/ /\n")


def build_test_image(cache):
    """The image as scripts/build-image makes it, from this build's binaries:
    scripts/image-rootfs and the Containerfile's runtime stage with its build
    arguments, only without the build stage."""
    run(["bash", os.path.join(ROOT, "scripts", "debian-base-image"), BASE_IMAGE, "slim", cache])
    conf = run(["bash", os.path.join(ROOT, "scripts", "podman-conf"), cache, BASE_IMAGE], capture_output=True).stdout
    for line in conf.splitlines():
        if line.startswith("export CONTAINERS_CONF="):
            os.environ["CONTAINERS_CONF"] = line.split("=", 1)[1]
    ctx = os.path.join(BUILD, "deploy-test-image")
    shutil.rmtree(ctx, ignore_errors=True)
    os.makedirs(ctx)
    run(["bash", os.path.join(ROOT, "scripts", "image-rootfs"), os.path.join(ctx, "rootfs"), BIN],
        stdout=subprocess.DEVNULL)
    with open(os.path.join(ctx, "Containerfile"), "w") as f:
        f.write(runtime_stage())
    built = version_of(os.path.join(BIN, "nvdra-gpu-kubelet-plugin"))
    build_args = {"NVDRA_VERSION": built["version"], "NVDRA_BUILD_COMMIT": built["commit"],
                  "NVDRA_BUILD_DATE": built["date"], "NVDRA_SOURCE": IMAGE_SOURCE}
    previous = run(["podman", "image", "inspect", "--format", "{{.Id}}", TEST_IMAGE], check=False,
                   capture_output=True).stdout.strip()
    args = ["podman", "build", "--quiet", "--pull=never", "--network=host", "--tag", TEST_IMAGE]
    for k, v in build_args.items():
        args += ["--build-arg", "%s=%s" % (k, v)]
    run(args + [ctx], stdout=subprocess.DEVNULL)
    # The last run's image lost its tag to this one: don't let them pile up.
    current = run(["podman", "image", "inspect", "--format", "{{.Id}}", TEST_IMAGE], capture_output=True).stdout.strip()
    if previous and previous != current:
        run(["podman", "rmi", previous], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def daemonset_container(name):
    with open(os.path.join(ROOT, "deploy", "base", "daemonset.yaml")) as f:
        ds = yaml.safe_load(f)
    spec = ds["spec"]["template"]["spec"]
    ctr = next(c for c in spec["containers"] if c["name"] == name)
    volumes = {v["name"]: v for v in spec["volumes"]}
    return ctr, volumes, spec["serviceAccountName"]


class NodeDeployTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("podman", "mmdebstrap"):
            if shutil.which(tool) is None:
                raise RuntimeError("%s not found (scripts/setup installs it)" % tool)
        build_test_image(os.path.join(BUILD, "image-cache"))

    def setUp(self):
        self.node = localnode.LocalNode()
        # Short: socket paths below it carry a pod UID, and a Unix socket path
        # has 107 bytes (a real node's longest, the compute-domain
        # registration socket, takes 105 of them).
        self.host = None
        while self.host is None:
            path = "/tmp/%05x" % random.getrandbits(20)
            try:
                os.mkdir(path, 0o755)
                self.host = path
            except FileExistsError:
                pass
        self.container = "nvdra-node-test-%d" % os.getpid()
        self.pod_uid = str(uuid.uuid4())

    def tearDown(self):
        run(["podman", "rm", "--force", "--time", "0", self.container], check=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.node.close()
        shutil.rmtree(self.host, ignore_errors=True)

    def on_host(self, path):
        return os.path.join(self.host, path.lstrip("/")).rstrip("/") or self.host

    def podman_args(self, container="gpus", profile="h100x8"):
        """podman run arguments for a container of the DaemonSet, as it has them."""
        ctr, volumes, spec_account = daemonset_container(container)
        args = ["podman", "run", "--detach", "--name", self.container, "--network=host"]
        if ctr.get("securityContext", {}).get("privileged"):
            args.append("--privileged")
        propagation = {"Bidirectional": "rshared", "HostToContainer": "rslave", None: "rprivate"}
        # Directories the DaemonSet mounts at their host path (the kubelet's
        # and the CDI directories: paths in sockets and specs mean the same
        # on both sides) keep that property here, at their place in the
        # temporary host; the settings naming them move along.
        same_path = {}
        for m in ctr["volumeMounts"]:
            host_path = volumes[m["name"]]["hostPath"]["path"]
            src = self.on_host(host_path)
            dst = m["mountPath"]
            if dst == host_path:
                dst = same_path[host_path] = src
            if volumes[m["name"]]["hostPath"].get("type") == "File":
                # A file the node has (nvidia-cdi-hook): an empty stand-in.
                os.makedirs(os.path.dirname(src), exist_ok=True)
                open(src, "a").close()
            else:
                os.makedirs(src, exist_ok=True)
            opts = [propagation[m.get("mountPropagation")]] + (["ro"] if m.get("readOnly") else [])
            args += ["--volume", "%s:%s:%s" % (src, dst, ",".join(opts))]
        downward = {"spec.nodeName": self.node.node_name, "metadata.namespace": "nvdra",
                    "metadata.uid": self.pod_uid, "spec.serviceAccountName": spec_account}
        env = {}
        for e in ctr["env"]:
            env[e["name"]] = e["value"] if "value" in e else downward[e["valueFrom"]["fieldRef"]["fieldPath"]]
        for k, v in env.items():
            if v in same_path:
                env[k] = same_path[v]
        # The host's driver root is where this host keeps it; ports must not
        # collide with anything else on the (shared) host network.
        env["NVIDIA_DRIVER_ROOT"] = self.on_host(env["NVIDIA_DRIVER_ROOT"])
        self.health_port = free_port()
        env["HEALTHCHECK_PORT"] = str(self.health_port)
        env["HTTP_ENDPOINT"] = "127.0.0.1:%d" % free_port()
        for k, v in sorted(env.items()):
            args += ["--env", "%s=%s" % (k, v)]
        args += ["--volume", "%s:/etc/nvdra/kubeconfig:ro" % self.node.api.kubeconfig]
        words = []
        for w in ctr["command"] + ctr["args"]:
            for k, v in env.items():
                w = w.replace("$(%s)" % k, v)
            words.append(w)
        # The mock hardware keeps its driver root where the real one is mounted.
        # The compute-domains container mounts it read-only (as upstream's
        # does): there the mock builds its own inside the container.
        state = "/driver-root" if container == "gpus" else "/var/lib/nvdra-mock"
        words += ["--mock-hardware", profile, "--mock-state-dir", state, "--kubeconfig", "/etc/nvdra/kubeconfig"]
        return args + ["--entrypoint", words[0], TEST_IMAGE] + words[1:], env

    def logs(self):
        return run(["podman", "logs", self.container], check=False, stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT).stdout

    def alive(self):
        out = run(["podman", "inspect", "--format", "{{.State.Running}}", self.container], check=False,
                  capture_output=True).stdout.strip()
        if out != "true":
            raise AssertionError("the plugin container stopped:\n" + self.logs())
        return True

    def test_gpu_plugin_runs_like_the_daemonset(self):
        args, env = self.podman_args()
        run(args, stdout=subprocess.DEVNULL)
        reg = self.on_host("/var/lib/kubelet/plugins_registry/%s-%s-reg.sock" % (GPU_DRIVER, self.pod_uid))
        dra = self.on_host("/var/lib/kubelet/plugins/%s/dra-%s.sock" % (GPU_DRIVER, self.pod_uid))
        wait_for(lambda: self.alive() and os.path.exists(reg), 60, "the registration socket on the host")

        # Register from the host, as the kubelet's plugin watcher does.
        r = self.node.ctl(["register", "--socket", reg, "--driver", GPU_DRIVER])
        info = json.loads(r.stdout)
        self.assertTrue(info["registered"], r.stdout)
        self.assertEqual(info["info"]["endpoint"], dra)
        self.assertEqual(env["KUBELET_PLUGINS_DIRECTORY_PATH"], self.on_host("/var/lib/kubelet/plugins"))

        # The plugin reached the API server over the host network.
        slices = wait_for(lambda: self.node.api.slices(GPU_DRIVER), 60, "ResourceSlices")
        devices = [d["name"] for s in slices for d in s["spec"]["devices"]]
        self.assertEqual(len(devices), 8, devices)

        claim = make_claim("in-container", [{"request": "gpu", "driver": GPU_DRIVER, "pool": self.node.node_name,
                                             "device": devices[0]}])
        self.node.api.load([claim])
        res = self.node.kubelet_call("prepare", dra, [("default", "in-container", claim["metadata"]["uid"])], "v1")
        got = res[claim["metadata"]["uid"]]
        self.assertEqual(got["error"], "", self.logs())
        self.assertEqual([d["device_name"] for d in got["devices"]], [devices[0]])

        # The CDI spec is on the host, naming host paths that exist there.
        cdi_dir = self.on_host("/var/run/cdi")
        specs = [f for f in os.listdir(cdi_dir) if claim["metadata"]["uid"] in f]
        self.assertEqual(len(specs), 1, os.listdir(cdi_dir))
        with open(os.path.join(cdi_dir, specs[0])) as f:
            spec = yaml.safe_load(f)
        nodes = [n for d in spec["devices"] for n in d["containerEdits"].get("deviceNodes", [])]
        nodes += spec.get("containerEdits", {}).get("deviceNodes", [])
        self.assertTrue(nodes, spec)
        for n in nodes:
            host_path = n.get("hostPath", n["path"])
            self.assertTrue(host_path.startswith(env["NVIDIA_DRIVER_ROOT"] + "/"), n)
            self.assertTrue(os.path.exists(host_path), n)
        # No host hook is mounted or named (nvidiaCDIHookPath is empty): the
        # plugin copies the image's hook (under the mock, its stand-in) into
        # its plugin directory, the same path on the host, and names the copy.
        self.assertNotIn("NVIDIA_CDI_HOOK_PATH", env)
        hooks = [h for d in spec["devices"] for h in d["containerEdits"].get("hooks", [])]
        hooks += spec.get("containerEdits", {}).get("hooks", [])
        self.assertTrue(hooks, spec)
        plugin_dir = os.path.join(env["KUBELET_PLUGINS_DIRECTORY_PATH"], GPU_DRIVER)
        for h in hooks:
            self.assertEqual(os.path.dirname(h["path"]), plugin_dir, h)
            self.assertTrue(os.path.isfile(h["path"]) and os.access(h["path"], os.X_OK), h)

        # SIGTERM (podman stop) ends it cleanly and takes the sockets along.
        run(["podman", "stop", "--time", "30", self.container], stdout=subprocess.DEVNULL)
        code = run(["podman", "inspect", "--format", "{{.State.ExitCode}}", self.container],
                   capture_output=True).stdout.strip()
        logs = self.logs()
        self.assertEqual(code, "0", logs)
        self.assertRegex(logs, r"\nI\d{4} [0-9:.]+ +\d+ plugin_runner\.cc:\d+\] shutdown\n")
        self.assertFalse(os.path.exists(reg), os.listdir(os.path.dirname(reg)))
        self.assertFalse(os.path.exists(dra), os.listdir(os.path.dirname(dra)))

    def test_init_container_waits_for_the_driver(self):
        # The init container as the DaemonSet has it, the driver root's parent
        # (the host's /) being this test's host directory: it must wait while
        # no driver is there and leave once nvidia-smi and libnvidia-ml.so.1
        # appear under the driver root and `nvidia-smi --version` succeeds.
        with open(os.path.join(ROOT, "deploy", "base", "daemonset.yaml")) as f:
            spec = yaml.safe_load(f)["spec"]["template"]["spec"]
        init = next(c for c in spec["initContainers"] if c["name"] == "init-container")
        volumes = {v["name"]: v for v in spec["volumes"]}
        args = ["podman", "run", "--detach", "--name", self.container, "--privileged"]
        for m in init["volumeMounts"]:
            self.assertEqual(volumes[m["name"]]["hostPath"]["path"], "/", m)
            args += ["--volume", "%s:%s:%s" % (self.host, m["mountPath"], "ro" if m.get("readOnly") else "rw")]
        env = {e["name"]: e["value"] for e in init["env"]}
        self.assertEqual(env["NVIDIA_DRIVER_ROOT"], "/")
        for k, v in sorted(env.items()):
            args += ["--env", "%s=%s" % (k, v)]
        args += ["--entrypoint", init["command"][0], TEST_IMAGE] + init["command"][1:] + init["args"]
        run(args, stdout=subprocess.DEVNULL)
        wait_for(lambda: "nvidia-smi: not found, libnvidia-ml.so.1: not found" in self.logs(), 30,
                 "the init container's first look")
        self.assertTrue(self.alive())
        self.assertIn("The NVIDIA driver is not ready", self.logs())

        smi = os.path.join(self.host, "usr", "bin", "nvidia-smi")
        nvml = os.path.join(self.host, "usr", "lib", "x86_64-linux-gnu", "libnvidia-ml.so.1")
        for path in (smi, nvml):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(nvml, "wb") as f:
            f.write(b"not an ELF file: ld.so ignores it as a preload")
        with open(smi + ".new", "w") as f:
            f.write('#!/bin/sh\n[ "$1" = --version ] && echo "NVIDIA-SMI version  : 570.158.01"\n')
        os.chmod(smi + ".new", 0o755)
        os.rename(smi + ".new", smi)

        def exited():
            out = run(["podman", "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", self.container],
                      capture_output=True).stdout.split()
            return out if out[0] == "false" else None
        state = wait_for(exited, 60, "the init container to leave once the driver is there:\n" + self.logs())
        logs = self.logs()
        self.assertEqual(state[1], "0", logs)
        self.assertIn("nvidia-smi: /driver-root/usr/bin/nvidia-smi, libnvidia-ml.so.1: "
                      "/driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", logs)
        self.assertIn("NVIDIA-SMI version  : 570.158.01", logs)
        self.assertIn("the driver works: starting the plugins", logs)

    def test_image_labels_say_what_its_binaries_say_and_it_stays_small(self):
        inspect = json.loads(run(["podman", "image", "inspect", TEST_IMAGE], capture_output=True).stdout)[0]
        labels = inspect.get("Labels") or inspect["Config"].get("Labels") or {}
        # The entrypoint's --version in the image, line by line; the other
        # programs run there, the servers of the same version (their commits
        # are the one image build's in scripts/build-image, while a
        # developer's build tree may hold programs linked at other commits).
        out = run(["podman", "run", "--rm", TEST_IMAGE, "--version"], capture_output=True).stdout.splitlines()
        self.assertEqual(out[:3], ["nvdra " + labels["org.opencontainers.image.version"],
                                   "commit: " + labels["org.opencontainers.image.revision"],
                                   "date: " + labels["org.opencontainers.image.created"]])
        for program in ("nvdra-compute-domain-kubelet-plugin", "nvdra-webhook"):
            other = run(["podman", "run", "--rm", "--entrypoint", program, TEST_IMAGE, "--version"],
                        capture_output=True).stdout.splitlines()
            self.assertEqual(other[0], out[0], program)
        for program in ("nvdractl", "nvdra-discover"):
            usage = run(["podman", "run", "--rm", "--entrypoint", program, TEST_IMAGE, "--help"],
                        capture_output=True).stdout
            self.assertIn("Usage: " + program, usage)
        # The static CDI hook the plugins copy onto the node.
        hook = run(["podman", "run", "--rm", "--entrypoint", "nvdra-cdi-hook", TEST_IMAGE, "--help"],
                   capture_output=True)
        self.assertIn("Usage: nvdra-cdi-hook", hook.stdout + hook.stderr)
        # A checkout's build knows its commit.
        self.assertRegex(labels["org.opencontainers.image.revision"], r"^[0-9a-f]{12}$")
        self.assertRegex(labels["org.opencontainers.image.created"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
        self.assertEqual(labels["org.opencontainers.image.source"], IMAGE_SOURCE)
        size = int(inspect["Size"])
        self.assertLessEqual(size, MAX_IMAGE_BYTES, "the image takes %.1f MiB" % (size / 1048576))
        # No base image: the only files are what scripts/image-rootfs put there.
        self.assertEqual(len(inspect["RootFS"]["Layers"]), 1)
        # The Job example's and the init container's shell and tools work.
        out = run(["podman", "run", "--rm", "--entrypoint", "sh", TEST_IMAGE, "-c",
                   "ln -sfn /tmp /tmp/t && ls /tmp/t/ >/dev/null && date -u +%Y && env -i A=1 env && sleep 0 && "
                   "[ -e /var/none ] || echo absent"], capture_output=True).stdout.splitlines()
        self.assertEqual(out[1:], ["A=1", "absent"])
        self.assertRegex(out[0], r"^\d{4}$")

    def test_compute_domain_plugin_copies_the_images_daemon_template(self):
        # Its registration socket's name is 105 bytes on a real node: under
        # this test's host directory a pod UID would not fit, a shorter
        # rolling-update id does.
        self.pod_uid = self.pod_uid[:8]
        args, env = self.podman_args("compute-domains", "gb200x4")
        run(args, stdout=subprocess.DEVNULL)
        reg = self.on_host("/var/lib/kubelet/plugins_registry/%s-%s-reg.sock" % (CD_DRIVER, self.pod_uid))
        dra = self.on_host("/var/lib/kubelet/plugins/%s/dra-%s.sock" % (CD_DRIVER, self.pod_uid))
        wait_for(lambda: self.alive() and os.path.exists(reg), 60, "the registration socket on the host")
        domain = str(uuid.uuid4())
        self.node.api.load([{
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
            "metadata": {"name": "cd1", "namespace": "default", "uid": domain},
            "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "cd1-channel"}}},
        }])
        params = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainDaemonConfig",
                  "domainID": domain}
        claim = make_claim("daemon", [{"request": "daemon", "driver": CD_DRIVER, "pool": self.node.node_name,
                                       "device": "daemon-0"}],
                           configs=[opaque_config(CD_DRIVER, params, requests=["daemon"])])
        self.node.api.load([claim])
        uid = claim["metadata"]["uid"]
        # The plugin's ComputeDomain watch may not have seen the domain yet:
        # retry as the kubelet does.
        got = wait_for(lambda: (lambda r: r if r["error"] == "" else None)(
            self.node.kubelet_call("prepare", dra, [("default", "daemon", uid)], "v1")[uid]), 60,
            "the daemon claim prepared:\n" + self.logs())
        self.assertEqual([d["device_name"] for d in got["devices"]], ["daemon-0"])
        copied = self.on_host("/var/lib/kubelet/plugins/%s/domains/%s/imexd.cfg.tmpl" % (CD_DRIVER, domain))
        with open(copied) as f, open(DAEMON_TEMPLATE) as want:
            self.assertEqual(f.read(), want.read())


if __name__ == "__main__":
    unittest.main()
