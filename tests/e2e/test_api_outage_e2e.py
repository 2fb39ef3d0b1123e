"""The plugins' start as an operator meets it: an API server that is down
or failing (not ready, no ResourceSlices, liveness still SERVING, the slices
written about a second after the server answers again), a kubeconfig that
cannot be used (the start stops before anything is written to disk), and
every -v level klog takes."""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

from e2e_base import CD_DRIVER, GPU_DRIVER, NodeTestCase, wait_for
from localnode import BIN, BINARIES, EXEC_WRAPPER, ApiServer

# How soon after the API server answers again the slices must be there: the
# plugin retries a second after a failed sync; the rest is slack for a busy
# CI machine. The measured time is printed.
PUBLISH_BOUND_S = 3.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiOutageAtStart(NodeTestCase):
    def start_plugin(self, driver, env=None):
        self.health_port, self.metrics_port = free_port(), free_port()
        args = ["--healthcheck-port", str(self.health_port), "--http-endpoint", "127.0.0.1:%d" % self.metrics_port]
        start = self.gpu_plugin if driver == GPU_DRIVER else self.cd_plugin
        return start(name=driver.split(".")[0] + "-outage", extra_args=args).start(env=env)

    def probe(self, service):
        r = self.node.ctl(["probe", "--address", "127.0.0.1:%d" % self.health_port, "--service", service],
                          check=False)
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
        return json.loads(r.stdout)["status"]

    def metric(self, name, driver, labels=""):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=10) as resp:
            text = resp.read().decode()
        series = '%s{driver="%s"%s}' % (name, driver, labels)
        m = re.search("^" + re.escape(series) + r" (\S+)$", text, re.M)
        self.assertIsNotNone(m, "no %s in\n%s" % (series, text))
        return float(m.group(1))

    def stored_slices(self, driver):
        """The slices the test API server holds, read past its injected faults."""
        status, body = self.node.api.request("GET", "/_nvdra/objects?resource=resourceslices")
        self.assertEqual(status, 200, body)
        return [s for s in body["items"] if s["spec"]["driver"] == driver]

    def set_faults(self, rules):
        status, body = self.node.api.request("POST", "/_nvdra/faults", {"clear": True, "rules": rules})
        self.assertEqual(status, 200, body)

    def assert_not_ready_and_says_why(self, plugin, driver):
        self.assertEqual(self.probe("liveness"), "SERVING")  # the kubelet must not restart it for this
        self.assertEqual(self.probe("readiness"), "NOT_SERVING")
        self.assertEqual(self.metric("nvdra_resource_slices_published", driver), 0)
        wait_for(lambda: self.metric("nvdra_slice_sync_total", driver, ',result="error"') >= 2, 30,
                 "failed slice syncs to be counted")
        errors = [line for line in plugin.read_log().splitlines()
                  if "ResourceSlices of driver %s are not published" % driver in line]
        self.assertEqual(len(errors), 1, plugin.read_log())  # at most one a minute
        self.assertTrue(errors[0].startswith("E"), errors[0])
        self.assertIn("readiness answers NOT_SERVING", errors[0])
        self.assertEqual(self.stored_slices(driver), [])

    def assert_published_promptly(self, plugin, driver, api_back_at):
        wait_for(lambda: self.stored_slices(driver), PUBLISH_BOUND_S + 30, "ResourceSlices of " + driver,
                 max_delay=0.01)
        elapsed = time.monotonic() - api_back_at
        print("\n%s: ResourceSlices published %.3f s after the API server answered again" % (driver, elapsed))
        self.assertLess(elapsed, PUBLISH_BOUND_S)
        wait_for(lambda: self.probe("readiness") == "SERVING", 10, "readiness")
        self.assertEqual(self.metric("nvdra_resource_slices_published", driver), 1)
        self.assertIn("ResourceSlices of driver %s published after" % driver, plugin.read_log())

    def outage_by_503(self, driver):
        self.set_faults([{"status": 503, "count": -1}])
        plugin = self.start_plugin(driver)
        self.assert_not_ready_and_says_why(plugin, driver)
        self.set_faults([])
        self.assert_published_promptly(plugin, driver, time.monotonic())

    def test_gpu_plugin_answering_503_is_alive_not_ready_then_publishes_within_a_second(self):
        self.outage_by_503(GPU_DRIVER)

    def test_cd_plugin_answering_503_is_alive_not_ready_then_publishes_within_a_second(self):
        self.outage_by_503(CD_DRIVER)

    def test_gpu_plugin_with_the_api_server_down_publishes_once_it_listens_again(self):
        port = self.node.api.port
        self.node.api.stop()
        plugin = self.start_plugin(GPU_DRIVER)
        self.assert_not_ready_and_says_why_while_down(plugin)
        self.node.api = ApiServer(self.node.workdir, self.node.node_name, port=port)
        self.assert_published_promptly(plugin, GPU_DRIVER, time.monotonic())

    def assert_not_ready_and_says_why_while_down(self, plugin):
        self.assertEqual(self.probe("liveness"), "SERVING")
        self.assertEqual(self.probe("readiness"), "NOT_SERVING")
        self.assertEqual(self.metric("nvdra_resource_slices_published", GPU_DRIVER), 0)
        wait_for(lambda: self.metric("nvdra_slice_sync_total", GPU_DRIVER, ',result="error"') >= 2, 30,
                 "failed slice syncs to be counted")
        errors = [line for line in plugin.read_log().splitlines() if "are not published" in line]
        self.assertEqual(len(errors), 1, plugin.read_log())
        self.assertIn("the API server does not answer", errors[0])


class RunOnce(unittest.TestCase):
    """The real binaries run once with a command line that must stop them."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="nvdra-flags-")
        self.addCleanup(shutil.rmtree, self.root, True)

    def run_plugin(self, driver, args, env=None):
        r = os.path.join(self.root, "node")
        cmd = EXEC_WRAPPER + [os.path.join(BIN, BINARIES[driver]), "--node-name", "node-1",
                              "--cdi-root", os.path.join(r, "cdi"),
                              "--kubelet-plugins-directory-path", os.path.join(r, "plugins"),
                              "--kubelet-registrar-directory-path", os.path.join(r, "plugins_registry"),
                              "--mock-hardware", "h100x8" if driver == GPU_DRIVER else "gb200x4",
                              "--mock-state-dir", os.path.join(r, "mock")] + args
        e = dict(os.environ)
        for var in ("KUBECONFIG", "V", "NVDRA_FAILPOINTS"):
            e.pop(var, None)
        e.update(env or {})
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=e)

    def files_left(self):
        out = []
        for d, _, files in os.walk(self.root):
            out += [os.path.relpath(os.path.join(d, f), self.root) for f in files]
        return sorted(out)

    def test_a_bad_kubeconfig_stops_the_start_before_anything_is_written(self):
        garbage = os.path.join(self.root, "garbage.kubeconfig")
        with open(garbage, "w") as f:
            f.write("apiVersion: v1\nclusters: [ {\n")
        cases = [(os.path.join(self.root, "missing.kubeconfig"), "missing.kubeconfig"),
                 (garbage, "garbage.kubeconfig")]
        for driver in (GPU_DRIVER, CD_DRIVER):
            for path, named in cases:
                with self.subTest(driver=driver, kubeconfig=named):
                    r = self.run_plugin(driver, ["--kubeconfig", path])
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    errors = [l for l in r.stderr.splitlines() if l.startswith("E")]
                    self.assertEqual(len(errors), 1, r.stderr)
                    self.assertIn("Kubernetes client configuration", errors[0])
                    self.assertIn(named, errors[0])
                    self.assertEqual(self.files_left(), ["garbage.kubeconfig"])  # no ledger.log, no CDI root
                    self.assertFalse(os.path.exists(os.path.join(self.root, "node")))

    def test_a_kind_flag_that_needs_a_gate_is_checked_before_anything_is_written(self):
        kubeconfig = ["--kubeconfig", os.path.join(self.root, "missing.kubeconfig")]
        for args, said in ((["--feature-gates", "MPSSupport=true"], "--image-name (IMAGE_NAME) is required"),
                           (["--consumable-shares", "memory"], "--consumable-shares requires feature gate")):
            with self.subTest(args=args):
                r = self.run_plugin(GPU_DRIVER, args + kubeconfig)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(said, r.stderr)
                self.assertNotIn("Kubernetes client configuration", r.stderr)  # stopped before
                self.assertEqual(self.files_left(), [])
                self.assertFalse(os.path.exists(os.path.join(self.root, "node")))

    def test_every_level_klog_takes_starts_the_plugin(self):
        # A level the plugins once refused (above 10) gets as far as the
        # kubeconfig: the flag was taken.
        missing = ["--kubeconfig", os.path.join(self.root, "missing.kubeconfig")]
        for driver in (GPU_DRIVER, CD_DRIVER):
            for args, env in ((["-v=20"], None), (["--v", "11"], None), ([], {"V": "12"}),
                              (["-v", "2147483647"], None)):
                with self.subTest(driver=driver, args=args, env=env):
                    r = self.run_plugin(driver, args + missing, env)
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    self.assertIn("Kubernetes client configuration", r.stderr)
            for bad in ("-1", "abc", "2147483648"):
                with self.subTest(driver=driver, v=bad):
                    r = self.run_plugin(driver, ["-v=" + bad] + missing)
                    self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                    self.assertIn('"%s" is not a log verbosity: expected a whole number from 0 to 2147483647' % bad,
                                  r.stderr)
                    self.assertEqual(self.files_left(), [])


class VerbosityEndToEnd(NodeTestCase):
    def test_a_plugin_at_v20_serves_and_logs_every_health_check(self):
        port = free_port()
        plugin = self.gpu_plugin(name="gpu-v20", extra_args=["-v=20", "--healthcheck-port", str(port)]).start()
        r = self.node.ctl(["probe", "--address", "127.0.0.1:%d" % port], check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        wait_for(lambda: "liveness check: serving" in plugin.read_log(), 10, "the V(7) line of the health check")


if __name__ == "__main__":
    unittest.main()
