"""End-to-end scenarios of the GPU plugin, mirroring the upstream suites."""

import concurrent.futures
import json
import os
import unittest

from e2e_base import GPU_DRIVER, NodeTestCase, cdi_ids, device_names, opaque_config, wait_for

UPSTREAM_GPU_ATTRIBUTES = {
    "architecture", "brand", "cudaComputeCapability", "cudaDriverVersion", "driverVersion", "productName",
    "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode",
    "type", "uuid", "addressingMode",
}


class GpuEndToEnd(NodeTestCase):
    def setUp(self):
        super().setUp()
        self.plugin = self.gpu_plugin().start()

    def test_one_pod_one_gpu(self):
        claim = self.gpu_claim("pod1-gpu", ["gpu-0"])
        r = self.plugin.prepare([claim])
        self.assertOk(r, claim[2])
        self.assertEqual(device_names(r[claim[2]]), ["gpu-0"])
        self.assertEqual(cdi_ids(r[claim[2]]), ["k8s.gpu.nvidia.com/claim=%s-gpu-0" % claim[2]])
        spec_file = "k8s.gpu.nvidia.com-claim_%s.json" % claim[2]
        self.assertIn(spec_file, self.node.cdi_files())
        with open(os.path.join(self.node.cdi_root, spec_file)) as f:
            spec = json.load(f)
        self.assertEqual(spec["kind"], "k8s.gpu.nvidia.com/claim")
        self.assertLessEqual(tuple(int(x) for x in spec["cdiVersion"].split(".")), (0, 5, 0))
        self.assertEqual([d["name"] for d in spec["devices"]], ["%s-gpu-0" % claim[2]])
        self.assertOk(self.plugin.unprepare([claim]), claim[2])
        self.assertNotIn(spec_file, self.node.cdi_files())
        self.assertEqual(self.live_entries(self.plugin), [])
        # SIGTERM: a clean exit that removes our sockets.
        self.assertEqual(self.plugin.stop(), 0)
        self.assertFalse(os.path.exists(self.plugin.dra_socket))
        self.assertFalse(os.path.exists(self.plugin.reg_socket))

    def test_two_pods_one_gpu_each(self):
        a = self.gpu_claim("pod1-gpu", ["gpu-0"])
        b = self.gpu_claim("pod2-gpu", ["gpu-1"])
        r = self.plugin.prepare([a, b])
        self.assertOk(r, a[2])
        self.assertOk(r, b[2])
        self.assertNotEqual(device_names(r[a[2]]), device_names(r[b[2]]))

    def test_two_pods_share_one_claim(self):
        claim = self.gpu_claim("shared", ["gpu-2"])
        first = self.plugin.prepare([claim])
        second = self.plugin.prepare([claim])
        self.assertOk(first, claim[2])
        self.assertEqual(first, second)
        self.assertEqual(len(self.live_entries(self.plugin)), 1)

    def test_one_pod_two_containers_share_a_claim_from_a_template(self):
        claim = self.gpu_claim("pod-gpu-template-xyz12", ["gpu-3"])
        r = self.plugin.prepare([claim])
        self.assertOk(r, claim[2])
        # Both containers reference the same CDI ids: one device, one spec.
        self.assertEqual(len(cdi_ids(r[claim[2]])), 1)

    def test_shared_claim_across_15_pods_5_loops(self):
        for loop in range(5):
            claim = self.gpu_claim("rc-shared-gpu", ["gpu-0"])
            with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
                results = list(pool.map(lambda _: self.plugin.prepare([claim]), range(15)))
            for r in results:
                self.assertOk(r, claim[2])
                self.assertEqual(r, results[0])
            self.assertOk(self.plugin.unprepare([claim]), claim[2])
            self.node.api.delete("resourceclaims", "default", "rc-shared-gpu")
            self.assertEqual(self.live_entries(self.plugin), [], "loop %d" % loop)
        self.assertEqual(self.node.cdi_files(), [])

    def test_unknown_config_field_is_a_permanent_error_and_leaves_no_entry(self):
        cfg = opaque_config(GPU_DRIVER, {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                                         "unexpectedField": "foo"})
        claim = self.gpu_claim("bad-config", ["gpu-0"], configs=[cfg])
        r = self.plugin.prepare([claim])
        self.assertIn('strict decoding error: unknown field "unexpectedField"', r[claim[2]]["error"])
        self.assertEqual(self.live_entries(self.plugin), [])
        # One log line for the failed claim, at Error, with its keys.
        lines = [line for line in self.plugin.read_log().splitlines() if claim[2] in line]
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith("E"), lines[0])
        self.assertIn('] "Permanent error preparing claim" claim="default/bad-config" uid="%s" err=' % claim[2],
                      lines[0])
        # The user sees it on the claim, as an Event.
        status, body = self.node.api.request("GET", "/_nvdra/objects?resource=events")
        self.assertEqual(status, 200)
        events = [e for e in body["items"] if e.get("involvedObject", {}).get("uid") == claim[2]]
        self.assertEqual(len(events), 1, body)
        self.assertEqual(events[0]["reason"], "FailedPrepareDynamicResources")
        self.assertIn("strict decoding error", events[0]["message"])

    def test_unknown_config_source_is_refused_in_upstreams_words(self):
        # A source of neither kind, even on another driver's config, is not
        # taken for a claim config: the claim is refused and nothing is held.
        cfg = opaque_config("other.example.com", {"apiVersion": "v1", "kind": "Anything"},
                            source="FromElsewhere")
        claim = self.gpu_claim("odd-source", ["gpu-0"], configs=[cfg])
        r = self.plugin.prepare([claim])
        self.assertIn("error getting opaque device configs: invalid config source: FromElsewhere",
                      r[claim[2]]["error"])
        self.assertEqual(self.live_entries(self.plugin), [])
        unknown = self.gpu_claim("unpublished", ["gpu-99"])
        self.assertIn("requested device is not allocatable: gpu-99",
                      self.plugin.prepare([unknown])[unknown[2]]["error"])

    def test_time_slicing_config_is_applied_and_undone(self):
        self.plugin.stop()
        self.plugin = self.gpu_plugin(name="gpu-ts", extra_args=["--feature-gates", "TimeSlicingSettings=true"]).start()
        cfg = opaque_config(GPU_DRIVER, {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                                         "sharing": {"strategy": "TimeSlicing",
                                                     "timeSlicingConfig": {"interval": "Long"}}})
        claim = self.gpu_claim("ts", ["gpu-1"], configs=[cfg])
        self.assertOk(self.plugin.prepare([claim]), claim[2])
        self.assertOk(self.plugin.unprepare([claim]), claim[2])
        log_path = os.path.join(self.node.workdir, "mock-" + GPU_DRIVER, "state", "control.log")
        with open(log_path) as f:
            calls = [line.split() for line in f.read().splitlines()]
        uuids = {c[1] for c in calls}
        self.assertEqual(len(uuids), 1, calls)
        uuid = uuids.pop()
        # Prepare: compute mode DEFAULT, then interval Long (3); Unprepare: back to Default (0).
        self.assertEqual(calls, [["SetComputeMode", uuid, "DEFAULT"], ["SetTimeSlice", uuid, "3"],
                                 ["SetTimeSlice", uuid, "0"]])

    def test_a_time_slice_reset_that_keeps_failing_releases_the_claim_and_taints_the_gpu(self):
        self.plugin.stop()
        self.plugin = self.gpu_plugin(name="gpu-ts-fail", extra_args=[
            "--feature-gates", "TimeSlicingSettings=true", "--health-streaming",
            "--time-slice-reset-attempts", "2", "--time-slice-reset-retry-period", "1"]).start()
        cfg = opaque_config(GPU_DRIVER, {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                                         "sharing": {"strategy": "TimeSlicing",
                                                     "timeSlicingConfig": {"interval": "Short"}}})
        claim = self.gpu_claim("ts-stuck", ["gpu-5"], configs=[cfg])
        self.assertOk(self.plugin.prepare([claim]), claim[2])
        mock = os.path.join(self.node.workdir, "mock-" + GPU_DRIVER)
        with open(os.path.join(mock, "state", "control.log")) as f:
            uuid = f.read().split()[1]
        failures = os.path.join(mock, "control-failures")
        with open(failures, "w") as f:
            f.write(uuid + "\n")
        # The first attempt fails for the kubelet to retry; the last releases the claim.
        first = self.plugin.unprepare([claim])
        self.assertIn("attempt 1 of 2", first[claim[2]]["error"])
        self.assertTrue(self.live_entries(self.plugin), "the claim is kept for the retry")
        self.assertOk(self.plugin.unprepare([claim]), claim[2])
        self.assertEqual(self.live_entries(self.plugin), [])
        self.assertNotIn("k8s.gpu.nvidia.com-claim_%s.json" % claim[2], self.node.cdi_files())

        def gpu5_taint_keys():
            for s in self.node.api.slices(GPU_DRIVER):
                for dev in s["spec"]["devices"]:
                    if dev["name"] == "gpu-5":
                        return [t["key"] for t in dev.get("taints", [])]
            return None
        wait_for(lambda: gpu5_taint_keys() == ["gpu.nvidia.com/time-slice-reset-failed"], 30,
                 "a time-slice-reset taint on gpu-5")

        def gpu5_health(state):
            r = self.node.ctl(["watch-health", "--socket", self.plugin.dra_socket, "--count", "1",
                               "--timeout", "5"], check=False)
            for line in r.stdout.splitlines():
                for d in json.loads(line).get("devices", []):
                    if d["device_name"] == "gpu-5" and d["health"] == state:
                        return d
            return None
        wait_for(lambda: gpu5_health("UNHEALTHY"), 30, "gpu-5 to be reported UNHEALTHY")
        # Once nvidia-smi works again the background retry resets the GPU and clears both.
        os.remove(failures)
        wait_for(lambda: gpu5_taint_keys() == [], 30, "the taint on gpu-5 to be cleared")
        wait_for(lambda: gpu5_health("HEALTHY"), 30, "gpu-5 to be reported HEALTHY again")
        with open(os.path.join(mock, "state", "control.log")) as f:
            self.assertEqual(f.read().splitlines()[-1], "SetTimeSlice %s 0" % uuid)

    def test_published_slices_carry_the_upstream_attribute_set(self):
        slices = wait_for(lambda: self.node.api.slices(GPU_DRIVER), what="GPU ResourceSlices")
        devices = [d for s in slices for d in s["spec"]["devices"]]
        self.assertEqual(len(devices), 8)
        self.assertEqual(sorted(d["name"] for d in devices), ["gpu-%d" % i for i in range(8)])
        for d in devices:
            self.assertEqual(set(d["attributes"].keys()), UPSTREAM_GPU_ATTRIBUTES, d["name"])
            self.assertIn("memory", d["capacity"])
        # The h100x8 mock's fake sysfs: GPUs 0-3 on NUMA node 0, 4-7 on 1.
        by_name = {d["name"]: d for d in devices}
        self.assertEqual(by_name["gpu-0"]["attributes"]["resource.kubernetes.io/numaNode"], {"int": 0})
        self.assertEqual(by_name["gpu-7"]["attributes"]["resource.kubernetes.io/numaNode"], {"int": 1})
        self.assertEqual(by_name["gpu-0"]["attributes"]["resource.kubernetes.io/pcieRoot"], {"string": "pci0000:15"})
        self.assertEqual(slices[0]["spec"]["pool"]["name"], self.node.node_name)

    def test_reboot_restores_cdi_spec_and_returns_same_ids(self):
        claim = self.gpu_claim("survivor", ["gpu-4"])
        before = self.plugin.prepare([claim])
        self.assertOk(before, claim[2])
        self.plugin.stop()
        for f in self.node.cdi_files():
            os.remove(os.path.join(self.node.cdi_root, f))
        self.node.set_boot_id("rebooted-boot-id")
        self.plugin.start()
        after = self.plugin.prepare([claim])
        self.assertEqual(before, after)
        self.assertIn("k8s.gpu.nvidia.com-claim_%s.json" % claim[2], self.node.cdi_files())

    def test_device_health_reaches_the_kubelet_stream(self):
        self.plugin.stop()
        self.plugin = self.gpu_plugin(name="gpu-health", extra_args=["--health-streaming"]).start()
        events = os.path.join(self.node.workdir, "mock-" + GPU_DRIVER, "health-events")
        with open(events, "a") as f:
            f.write("gpu-6 79\n")

        def gpu6_unhealthy():
            r = self.node.ctl(["watch-health", "--socket", self.plugin.dra_socket, "--count", "1",
                               "--timeout", "5"], check=False)
            for line in r.stdout.splitlines():
                for d in json.loads(line).get("devices", []):
                    if d["device_name"] == "gpu-6" and d["health"] == "UNHEALTHY":
                        return d
            return None
        d = wait_for(gpu6_unhealthy, 30, "gpu-6 to be reported UNHEALTHY")
        self.assertEqual(d["pool_name"], self.node.node_name)
        self.assertIn("79", d["message"])

        # The scheduler sees it too: the device is tainted in the published slice.
        def gpu6_taints():
            for s in self.node.api.slices(GPU_DRIVER):
                for dev in s["spec"]["devices"]:
                    if dev["name"] == "gpu-6" and dev.get("taints"):
                        return dev["taints"]
            return None
        taints = wait_for(gpu6_taints, 30, "a taint on gpu-6")
        self.assertEqual([(t["key"], t.get("value"), t["effect"]) for t in taints],
                         [("gpu.nvidia.com/xid", "79", "NoSchedule")])

        # An ignored XID after it clears nothing: gpu-6 keeps its critical taint
        # and stays UNHEALTHY, while on a healthy gpu-7 it is a taint of effect
        # None. The events are handled in order, so once gpu-7's taint is
        # published, gpu-6's 13 has been handled too.
        with open(events, "a") as f:
            f.write("gpu-6 13\ngpu-7 13\n")

        def taints_of(name):
            for s in self.node.api.slices(GPU_DRIVER):
                for dev in s["spec"]["devices"]:
                    if dev["name"] == name and dev.get("taints"):
                        return [(t["key"], t.get("value"), t["effect"]) for t in dev["taints"]]
            return None
        self.assertEqual(wait_for(lambda: taints_of("gpu-7"), 30, "an informational taint on gpu-7"),
                         [("gpu.nvidia.com/xid", "13", "None")])
        self.assertEqual(taints_of("gpu-6"), [("gpu.nvidia.com/xid", "79", "NoSchedule")])
        self.assertIsNotNone(gpu6_unhealthy(), "gpu-6 is still reported UNHEALTHY")

    def test_metrics_endpoint_counts_requests(self):
        import socket
        import urllib.request
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.plugin.stop()
        self.plugin = self.gpu_plugin(name="gpu-metrics",
                                      extra_args=["--http-endpoint", "127.0.0.1:%d" % port]).start()
        claim = self.gpu_claim("metered", ["gpu-7"])
        self.assertOk(self.plugin.prepare([claim]), claim[2])
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as resp:
            text = resp.read().decode()
        self.assertIn('nvidia_dra_requests_total{driver="gpu.nvidia.com",operation="prepare"} 1', text)
        self.assertIn('nvidia_dra_prepared_devices{node="%s",driver="gpu.nvidia.com",device_type="gpu"} 1'
                      % self.node.node_name, text)
        self.assertNotIn('nvdra_ledger_bytes{driver="gpu.nvidia.com"} 0\n', text)

    def test_liveness_probe_answers_like_the_kubelet_expects(self):
        # The real binary's liveness endpoint, probed as the Helm chart's
        # gRPC probes do: SERVING while both sockets are the plugin's, then
        # NOT_SERVING once its DRA socket is gone.
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.plugin.stop()
        self.plugin = self.gpu_plugin(name="gpu-liveness", extra_args=["--healthcheck-port", str(port)]).start()
        probe = ["probe", "--address", "127.0.0.1:%d" % port]
        ok = self.node.ctl(probe, check=False)
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        self.assertEqual(json.loads(ok.stdout)["status"], "SERVING")
        claim = self.gpu_claim("alive", ["gpu-6"])
        self.assertOk(self.plugin.prepare([claim]), claim[2])  # serving claims and probes alike
        # Ready once the node's ResourceSlices are published too.
        wait_for(lambda: self.node.ctl(probe + ["--service", "readiness"], check=False).returncode == 0, 30,
                 "readiness")
        os.remove(self.plugin.dra_socket)
        gone = self.node.ctl(probe, check=False)
        self.assertEqual(gone.returncode, 1, gone.stdout + gone.stderr)
        self.assertEqual(json.loads(gone.stdout)["status"], "NOT_SERVING")
        not_ready = self.node.ctl(probe + ["--service", "readiness"], check=False)
        self.assertEqual(not_ready.returncode, 1, not_ready.stdout + not_ready.stderr)
        unknown = self.node.ctl(probe + ["--service", "startup"], check=False)
        self.assertEqual(unknown.returncode, 2, unknown.stdout + unknown.stderr)

    def test_health_monitor_that_fails_to_start_leaves_claims_served_and_says_so(self):
        # Upstream exits; nvdra serves claims without device health and says
        # so at Error, in a metric and in its readiness answer. The flags are
        # spelled as Go's flag package takes them (one dash, value attached).
        import socket
        import urllib.request
        ports = []
        for _ in range(2):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                ports.append(s.getsockname()[1])
        self.plugin.stop()
        self.plugin = self.gpu_plugin(
            name="gpu-no-health",
            extra_args=["-feature-gates=NVMLDeviceHealthCheck=true", "-healthcheck-port=%d" % ports[0],
                        "-http-endpoint", "127.0.0.1:%d" % ports[1]],
            env={"NVDRA_FAILPOINTS": "plugin-health-monitor-start=error"}).start()
        errors = [line for line in self.plugin.read_log().splitlines()
                  if "device health monitoring failed to start" in line]
        self.assertEqual(len(errors), 1, self.plugin.read_log())
        self.assertTrue(errors[0].startswith("E"), errors[0])
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % ports[1], timeout=10) as resp:
            text = resp.read().decode()
        self.assertIn('nvdra_device_health_monitor{driver="gpu.nvidia.com",state="failed"} 1\n', text)
        self.assertIn('nvdra_device_health_monitor{driver="gpu.nvidia.com",state="running"} 0\n', text)
        probe = ["probe", "--address", "127.0.0.1:%d" % ports[0]]
        alive = self.node.ctl(probe, check=False)
        self.assertEqual(alive.returncode, 0, alive.stdout + alive.stderr)
        ready = self.node.ctl(probe + ["--service", "readiness"], check=False)
        self.assertEqual(ready.returncode, 1, ready.stdout + ready.stderr)
        self.assertEqual(json.loads(ready.stdout)["status"], "NOT_SERVING")
        claim = self.gpu_claim("served-anyway", ["gpu-3"])
        self.assertOk(self.plugin.prepare([claim]), claim[2])
        self.assertOk(self.plugin.unprepare([claim]), claim[2])

    def test_forbidden_slice_publish_posts_a_node_event_and_counts_an_error(self):
        import socket
        import urllib.request
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.plugin.stop()
        # A restarted kubelet wipes the node's slices; the plugin's first
        # create is then refused the way a missing RBAC rule refuses it.
        for item in self.node.api.slices(GPU_DRIVER):
            self.node.api.delete("resourceslices", "", item["metadata"]["name"])
        status, body = self.node.api.request("POST", "/_nvdra/faults", {"rules": [
            {"status": 403, "method": "POST", "path_prefix": "/apis/resource.k8s.io/", "count": 1}]})
        self.assertEqual(status, 200, body)
        self.plugin = self.gpu_plugin(name="gpu-forbidden",
                                      extra_args=["--http-endpoint", "127.0.0.1:%d" % port]).start()

        def node_events():
            status, body = self.node.api.request("GET", "/_nvdra/objects?resource=events")
            self.assertEqual(status, 200, body)
            return [e for e in body["items"] if e.get("involvedObject", {}).get("kind") == "Node"
                    and e.get("reason") == "ResourceSlicePublishFailed"]
        events = wait_for(node_events, 30, "a ResourceSlicePublishFailed event on the Node")
        self.assertEqual(events[0]["involvedObject"]["name"], self.node.node_name)
        self.assertEqual(events[0]["type"], "Warning")
        # The retry after the refusal publishes the pool, and both syncs are counted.
        wait_for(lambda: self.node.api.slices(GPU_DRIVER), 30, "the republished slices")

        def scrape():
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as resp:
                text = resp.read().decode()
            return text if 'result="success"} 0\n' not in text else None
        text = wait_for(scrape, 30, "a successful slice sync in the metrics")
        self.assertIn('nvdra_slice_sync_total{driver="gpu.nvidia.com",result="error"} 1\n', text)

    def test_v1beta1_kubelet_gets_the_same_devices(self):
        claim = self.gpu_claim("old-kubelet", ["gpu-5"])
        r = self.plugin.prepare([claim], api="v1beta1")
        self.assertOk(r, claim[2])
        self.assertEqual(device_names(r[claim[2]]), ["gpu-5"])
        self.assertOk(self.plugin.unprepare([claim], api="v1beta1"), claim[2])



class DynamicMigProfileEndToEnd(NodeTestCase):
    """The dynamic-mig mock (H100 and A100, MIG mode off and on, no MIG
    devices) with the gate off: served as today, nothing partitionable
    (with the gate: test_dynamic_mig_e2e)."""

    def test_without_the_gate_mig_capable_gpus_are_served_as_today(self):
        plugin = self.gpu_plugin("dynamic-mig").start()
        slices = wait_for(lambda: self.node.api.slices(GPU_DRIVER), what="GPU ResourceSlices")
        devices = [d for s in slices for d in s["spec"]["devices"]]
        self.assertEqual(sorted(d["name"] for d in devices), ["gpu-0", "gpu-2"])
        self.assertFalse(any("consumesCounters" in d for d in devices))
        self.assertFalse(any("sharedCounters" in s["spec"] for s in slices))
        claim = self.gpu_claim("full", ["gpu-0"])
        self.assertOk(plugin.prepare([claim]), claim[2])
        self.assertOk(plugin.unprepare([claim]), claim[2])


if __name__ == "__main__":
    unittest.main()
