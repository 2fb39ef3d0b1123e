"""A GPU driver upgrade under a running ComputeDomain plugin, on the mock
GB200 node: the driver is swapped from version A to B (nvdra-discover
--mock-swap-driver), the new module giving the IMEX channels another major.
The plugin refuses channel and daemon claims while the driver is gone,
keeps unpreparing, and on B rewrites the base spec and the prepared
claims' specs with the channels' new major, under the same CDI ids, without
a restart. Prints the swap's timeline in milliseconds."""

import json
import os
import subprocess
import time
import unittest

from e2e_base import CD_DRIVER, cdi_ids, wait_for
from localnode import BIN
from test_cd_e2e import ComputeDomainTestCase

NEW_VERSION = "580.65.06"
OLD_MAJOR = 235  # the mock's nvidia-caps-imex-channels major at start
NEW_MAJOR = 241
KEY = CD_DRIVER + "/driver-reloading"
BASE_SPEC = "k8s.compute-domain.nvidia.com-device_base.json"


def tainted(slices):
    devs = [d for s in slices for d in s["spec"].get("devices", [])]
    return bool(devs) and all(any(t["key"] == KEY for t in d.get("taints", [])) for d in devs)


def untainted(slices):
    devs = [d for s in slices for d in s["spec"].get("devices", [])]
    return bool(devs) and not any(t["key"] == KEY for d in devs for t in d.get("taints", []))


def channel_majors(spec_text):
    spec = json.loads(spec_text)
    return sorted({n["major"] for d in spec["devices"] for n in d["containerEdits"].get("deviceNodes", [])
                   if "imex-channels" in n["path"]})


class ComputeDomainDriverReloadEndToEnd(ComputeDomainTestCase):
    def setUp(self):
        super().setUp()
        self.root = self.node.mock_state_dir(CD_DRIVER)
        with open(os.path.join(self.root, "proc/driver/nvidia/version")) as f:
            self.old = f.read().split("Kernel Module")[1].split()[0]
        self.slices = lambda: self.node.api.slices(CD_DRIVER)
        wait_for(lambda: untainted(self.slices()), what="slices")

    def swap(self, version, major=None):
        args = [os.path.join(BIN, "nvdra-discover"), "--mock-hardware", self.profile, "--mock-root", self.root,
                "--mock-swap-driver", version]
        if major:
            args += ["--mock-imex-channels-major", str(major)]
        r = subprocess.run(args, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)

    def base_spec(self):
        with open(os.path.join(self.node.cdi_root, BASE_SPEC)) as f:
            return f.read()

    def wait_log(self, text, start, what, max_delay=0.2):
        try:
            wait_for(lambda: text in self.plugin.read_log()[start:], 10, what, max_delay=max_delay)
        except TimeoutError:
            self.fail("%s: no \"%s\" in the plugin's log:\n%s" % (what, text, self.plugin.read_log()[start:][-6000:]))

    def wait_or_fail(self, cond, what, start):
        try:
            wait_for(cond, 10, what, max_delay=0.01)
        except TimeoutError:
            self.fail("%s; plugin log:\n%s" % (what, self.plugin.read_log()[start:][-6000:]))

    def test_swap_from_a_to_b_with_a_new_channel_major(self):
        a = self.channel_claim("before", 0)
        d = self.daemon_claim("imex-daemon")
        r = self.plugin.prepare([a, d])
        self.assertOk(r, a[2])
        self.assertOk(r, d[2])
        ids_before = cdi_ids(r[a[2]])
        self.assertEqual(channel_majors(self.spec_text(a[2])), [OLD_MAJOR])
        self.assertIn("libcuda.so." + self.old, self.base_spec())
        log_start = len(self.plugin.read_log())
        timeline = {}

        # Gone.
        t0 = time.monotonic()
        self.swap("gone")
        self.wait_log("went away", log_start, "driver gone noticed", max_delay=0.01)
        timeline["gone noticed"] = (time.monotonic() - t0) * 1000
        self.wait_or_fail(lambda: tainted(self.slices()), "devices tainted", log_start)
        timeline["devices tainted"] = (time.monotonic() - t0) * 1000

        # Prepare in the gap: channel and daemon claims, a retryable error
        # that says why; the daemon claim prepared before unprepares.
        c = self.channel_claim("during", 1)
        r = self.plugin.prepare([c])
        self.assertIn("driver is reloading", r[c[2]]["error"])
        self.assertOk(self.plugin.unprepare([d]), d[2])
        self.assertNotIn("k8s.compute-domain.nvidia.com-claim_%s.json" % d[2], self.node.cdi_files())
        d2 = self.daemon_claim("imex-daemon-2")
        r = self.plugin.prepare([d2])
        self.assertIn("driver is reloading", r[d2[2]]["error"])

        # Back, on B, whose module gave the channels another major.
        t1 = time.monotonic()
        self.swap(NEW_VERSION, NEW_MAJOR)
        self.wait_log("is back (was", log_start, "driver back noticed", max_delay=0.01)
        timeline["back noticed"] = (time.monotonic() - t1) * 1000
        self.wait_or_fail(lambda: channel_majors(self.spec_text(a[2])) == [NEW_MAJOR], "spec rewritten", log_start)
        timeline["specs rewritten"] = (time.monotonic() - t1) * 1000
        self.wait_or_fail(lambda: untainted(self.slices()), "slices republished", log_start)
        timeline["slices republished"] = (time.monotonic() - t1) * 1000

        base = self.base_spec()
        self.assertIn("libcuda.so." + NEW_VERSION, base)
        self.assertNotIn("libcuda.so." + self.old, base)
        spec = json.loads(self.spec_text(a[2]))
        self.assertEqual(["%s-channel-0" % a[2]], [x["name"] for x in spec["devices"]])
        if os.geteuid() == 0:
            st = os.stat(os.path.join(self.root, "dev/nvidia-caps-imex-channels/channel0"))
            self.assertEqual(os.major(st.st_rdev), NEW_MAJOR, "the stale channel node is made again")
        # The kubelet's retries: same ids for the claim prepared before, and
        # the claims refused in the gap are prepared on the new major.
        r = self.plugin.prepare([a])
        self.assertEqual(cdi_ids(r[a[2]]), ids_before)
        r = self.plugin.prepare([c, d2])
        self.assertOk(r, c[2])
        self.assertOk(r, d2[2])
        self.assertEqual(channel_majors(self.spec_text(c[2])), [NEW_MAJOR])
        self.assertOk(self.plugin.unprepare([a, c, d2]), a[2])
        self.assertEqual(self.node.cdi_files(), [BASE_SPEC])

        status, body = self.node.api.request("GET", "/_nvdra/objects?resource=events")
        reloads = [e for e in body["items"] if e.get("reason") == "NvidiaDriverReloaded"]
        self.assertEqual(len(reloads), 1, body)
        self.assertIn(self.old, reloads[0]["message"])
        self.assertIn(NEW_VERSION, reloads[0]["message"])
        log = self.plugin.read_log()[log_start:]
        self.assertIn("NVIDIA driver %s replaced by %s" % (self.old, NEW_VERSION), log)
        self.assertIn("nvidia-caps-imex-channels has major %d now (was %d)" % (NEW_MAJOR, OLD_MAJOR), log)
        print("\ncompute-domain swap timeline (ms after the swap's gone / back step):")
        for k, v in timeline.items():
            print("  %-20s %7.1f" % (k, v))
        for line in log.splitlines():
            if "driver reload timeline" in line:
                print("  plugin: " + line[line.find("driver reload timeline"):])


if __name__ == "__main__":
    unittest.main()
