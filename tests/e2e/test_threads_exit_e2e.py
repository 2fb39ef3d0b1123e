"""Threads and exit of a real plugin process: claims arriving together are
served on a fixed set of threads (the count, read from /proc/<pid>/task,
stays under a bound during a burst and is back to its idle value soon
after), and SIGTERM ends the process promptly, its sockets removed and its
ledger left whole, with or without a call in flight.

The bounds are generous on purpose (CI machines are small and loaded); the
figures each run measured are printed so a regression shows before it fails.
"""

import json
import os
import signal
import statistics
import subprocess
import time
import unittest

from e2e_base import CD_DRIVER, GPU_DRIVER, NodeTestCase, wait_for
from localnode import BIN, make_claim

# The plugin's threads at any instant, idle or not (docs/architecture.md,
# "Threads").
MAX_THREADS = 12
# After a burst the count is back to its idle value within this long.
SETTLE_S = 5.0
# SIGTERM to exit with no call in flight: a bound for a loaded 2-core
# machine; the plugin takes a few milliseconds.
IDLE_EXIT_S = 0.5
EXIT_RUNS = 5


def threads(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def h100_profile(workdir, count):
    path = os.path.join(workdir, "h100x%d.json" % count)
    with open(path, "w") as f:
        json.dump({"driverVersion": "570.158.01", "cudaDriverVersion": "12.8",
                   "gpus": [{"count": count, "productName": "NVIDIA H100 80GB HBM3", "brand": "Nvidia",
                             "architecture": "Hopper", "cudaComputeCapability": "9.0",
                             "memoryBytes": 85520809984, "addressingMode": "HMM",
                             "pciBusIds": ["0000:%02x:00.0" % (i + 1) for i in range(count)],
                             "pcieRoots": ["pci0000:%02x" % (i + 1) for i in range(count)]}]}, f)
    return path


def timed_sigterm(plugin):
    """SIGTERM to process exit, in seconds."""
    t0 = time.monotonic()
    plugin.proc.send_signal(signal.SIGTERM)
    plugin.proc.wait(30)
    elapsed = time.monotonic() - t0
    plugin.log.close()
    return elapsed


class ThreadsAndExitEndToEnd(NodeTestCase):
    def claims(self, prefix, count):
        objs, refs = [], []
        for i in range(count):
            c = make_claim("%s-%d" % (prefix, i), [{"request": "gpu", "driver": GPU_DRIVER,
                                                    "pool": self.node.node_name, "device": "gpu-%d" % i}])
            objs.append(c)
            refs.append("default/%s-%d/%s" % (prefix, i, c["metadata"]["uid"]))
        self.node.api.load(objs)
        return refs

    def idle_threads(self, pid, still=0.5):
        """The count once it has held still for `still` seconds (startup's
        threads, such as the first slice sync, have ended)."""
        seen = {"count": threads(pid), "since": time.monotonic()}

        def settled():
            n = threads(pid)
            if n != seen["count"]:
                seen.update(count=n, since=time.monotonic())
            return time.monotonic() - seen["since"] >= still

        wait_for(settled, 20, "the plugin's thread count to settle", max_delay=0.05)
        return seen["count"]

    def burst(self, plugin, refs, *flags):
        """nvdractl cycle with every claim in flight together; the most
        threads the plugin had meanwhile."""
        cmd = [os.path.join(BIN, "nvdractl"), "cycle", "--socket", plugin.dra_socket,
               "--concurrency", str(len(refs))] + list(flags) + refs
        client = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        most = 0
        while client.poll() is None:
            most = max(most, threads(plugin.proc.pid))
        out, err = client.communicate()
        self.assertEqual(client.returncode, 0, out + err)
        self.assertEqual(json.loads(out)["errors"], [])
        return most

    def settle_time(self, pid, idle):
        """Seconds until the count is back to `idle` (fails after SETTLE_S)."""
        t0 = time.monotonic()
        wait_for(lambda: threads(pid) <= idle, SETTLE_S,
                 "the plugin to be back to its %d idle threads (has %d)" % (idle, threads(pid)), max_delay=0.05)
        return time.monotonic() - t0

    def test_bursts_of_8_and_64_claims_stay_within_the_thread_bound(self):
        # As the Helm chart runs it: the liveness port and the metrics
        # endpoint are on.
        gpu = self.gpu_plugin(profile=h100_profile(self.node.workdir, 64), reconcile_period=3600,
                              extra_args=["--kube-api-qps", "1000", "--kube-api-burst", "2000",
                                          "--healthcheck-port", "0", "--http-endpoint", "127.0.0.1:0"]).start()
        wait_for(lambda: self.node.api.slices(GPU_DRIVER), what="slices")
        pid = gpu.proc.pid
        # Idle as a plugin that has served calls is: one claim first, so
        # whatever a first call starts for good is counted as idle.
        self.burst(gpu, self.claims("warm", 1))
        # Still for longer than a claim worker waits for work (2 s) before it ends.
        idle = self.idle_threads(pid, still=3.0)
        self.assertLessEqual(idle, MAX_THREADS)
        report = {"idle": idle}
        for together in (8, 64):
            for round_ in range(3):
                refs = self.claims("t%d-%d" % (together, round_), together)
                most = max(self.burst(gpu, refs, "--prepare-only"), self.burst(gpu, refs, "--unprepare-only"))
                self.assertLessEqual(most, MAX_THREADS, "%d claims together" % together)
                settle = self.settle_time(pid, idle)
                report.setdefault("burst_%d" % together, []).append({"max": most, "settle_s": round(settle, 3)})
        print("threads: %s" % json.dumps(report))
        self.assertEqual(self.live_entries(gpu), [])

    def assert_stopped_cleanly(self, plugin):
        self.assertEqual(plugin.proc.returncode, 0, plugin.read_log()[-3000:])
        self.assertFalse(os.path.exists(plugin.dra_socket), "DRA socket left behind")
        self.assertFalse(os.path.exists(plugin.reg_socket), "registration socket left behind")
        # The ledger opens and verifies: nothing was torn on the way out.
        r = self.node.ctl(["ledger", "verify", plugin.plugin_dir], check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def idle_exit_times(self, make_plugin):
        times = []
        for _ in range(EXIT_RUNS):
            plugin = make_plugin().start()
            self.idle_threads(plugin.proc.pid)
            times.append(timed_sigterm(plugin))
            self.assert_stopped_cleanly(plugin)
        return times

    def test_sigterm_with_no_call_in_flight_exits_promptly(self):
        for name, make in (("gpu", lambda: self.gpu_plugin(extra_args=["--healthcheck-port", "0"])),
                           ("compute-domain", lambda: self.cd_plugin(extra_args=["--healthcheck-port", "0"]))):
            times = self.idle_exit_times(make)
            median = statistics.median(times)
            print("%s plugin SIGTERM to exit: median %.1f ms, runs %s" % (
                name, median * 1000, ", ".join("%.1f" % (t * 1000) for t in times)))
            self.assertLess(median, IDLE_EXIT_S, name)

    def test_sigterm_with_a_call_in_flight_answers_it_and_exits_within_the_claim_timeout(self):
        claim_timeout = 10
        gpu = self.gpu_plugin(extra_args=["--claim-timeout", str(claim_timeout)],
                              env={"NVDRA_FAILPOINTS": "engine-after-device-prepare=delay(2000)"}).start()
        (ref,) = self.claims("inflight", 1)
        uid = ref.split("/")[2]
        call = subprocess.Popen([os.path.join(BIN, "nvdractl"), "prepare", "--socket", gpu.dra_socket, ref],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def started():
            entries = {c.get("uid"): c.get("state") for c in self.live_entries(gpu)}
            return entries.get(uid) == "PrepareStarted"

        wait_for(started, 20, "the prepare to be under way")
        elapsed = timed_sigterm(gpu)
        out, err = call.communicate(timeout=30)
        print("SIGTERM to exit with a prepare in flight: %.1f ms" % (elapsed * 1000))
        self.assertLess(elapsed, claim_timeout)
        self.assert_stopped_cleanly(gpu)
        # Answered: prepared, or a retryable error (the kubelet retries any
        # per-claim error and any call that failed as UNAVAILABLE).
        if call.returncode == 0:
            self.assertIn(uid, out)
        else:
            self.assertTrue("shutting down" in out + err or "UNAVAILABLE" in (out + err).upper(), out + err)


if __name__ == "__main__":
    unittest.main()
