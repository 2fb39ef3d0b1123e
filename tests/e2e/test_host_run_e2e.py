"""The plugins run on a host as README.md's "Running the plugins" shows: with
the default --container-driver-root (/driver-root, where the DaemonSet
mounts the driver root) on a host that has none, the start fails with an
error that names the flag and says to pass / on the host.

Each plugin runs in a root of its own (localnode.chroot_command: this
machine's programs and libraries, nothing at /driver-root, no NVIDIA driver),
so the answer does not depend on what this machine has at /driver-root.
"""

import os
import subprocess
import tempfile
import unittest

import localnode
from localnode import BINARIES, CD_DRIVER, GPU_DRIVER

HINT = "running on the host, pass --container-driver-root /"
KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
"""


class HostRunTest(unittest.TestCase):
    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="nvdra-host-run-")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.workdir])

    def run_plugin(self, driver, extra):
        """The README's command line in a root without /driver-root; returns
        (exit status, output)."""
        root = os.path.join(self.workdir, "root-" + driver)
        os.makedirs(root)
        # A kubeconfig that parses (the plugins check it before anything
        # else); its server is never reached, the start failing first.
        conf = os.path.join(self.workdir, "conf-" + driver)
        os.makedirs(conf)
        with open(os.path.join(conf, "kubeconfig"), "w") as f:
            f.write(KUBECONFIG)
        binary = os.path.join(localnode.BIN, BINARIES[driver])
        cmd = ["/nvdra/" + BINARIES[driver], "--node-name", "node-1", "--kubeconfig", "/conf/kubeconfig",
               "--cdi-root", "/var/run/cdi",
               "--kubelet-plugins-directory-path", "/var/lib/kubelet/plugins",
               "--kubelet-registrar-directory-path", "/var/lib/kubelet/plugins_registry"] + extra
        r = subprocess.run(localnode.chroot_command(root, [(os.path.dirname(binary), "/nvdra"), (conf, "/conf")], cmd),
                           capture_output=True, text=True, timeout=60,
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        return r.returncode, r.stdout + r.stderr

    def test_default_container_driver_root_on_a_host_names_the_flag_and_slash(self):
        for driver in (GPU_DRIVER, CD_DRIVER):
            with self.subTest(driver=driver):
                code, out = self.run_plugin(driver, [])
                self.assertNotEqual(code, 0, out)
                self.assertIn("--container-driver-root (DRIVER_ROOT_CTR_PATH) is /driver-root, which does not "
                              "exist", out)
                self.assertIn(HINT, out)

    def test_slash_looks_for_the_driver_on_the_host(self):
        # With / the plugin looks in the host's own directories: here there is
        # no driver, and the error says where it looked, not to pass /.
        code, out = self.run_plugin(GPU_DRIVER, ["--container-driver-root", "/"])
        self.assertNotEqual(code, 0, out)
        self.assertIn("libnvidia-ml.so.1 not found under driver root /", out)
        self.assertNotIn(HINT, out)


if __name__ == "__main__":
    unittest.main()
