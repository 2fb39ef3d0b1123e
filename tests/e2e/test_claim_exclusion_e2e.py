"""One claim, many calls: the kubelet's real sequences for a claim shared by
pods, and two plugin processes (an upgrade's old and new pod on one state
directory) racing prepare, unprepare and the orphan sweep on the same claims.
Nothing may be refused that the kubelet legitimately asks for, and nothing may
be left behind: no stray CDI spec, no time-slice setting nobody will reset, no
device held twice."""

import concurrent.futures
import os
import random
import unittest
import uuid

from e2e_base import GPU_DRIVER, NodeTestCase, opaque_config, wait_for

TIME_SLICING = ["--feature-gates", "TimeSlicingSettings=true"]
# The reconciler's orphan sweep would hide a stray spec within a second.
NO_RECONCILE = ["--reconcile-period", "3600"]

# A delay at every step of prepare and unprepare widens each window in which
# the other process could interleave; the longest are inside a prepare,
# between its ledger record, its device work and its CDI write.
EVERY_STEP_DELAYED = ";".join("%s=delay(%d)" % fp for fp in [
    ("ledger-after-started-write", 150), ("engine-after-device-prepare", 150), ("engine-after-cdi-write", 30),
    ("ledger-before-completed-write", 30), ("ledger-after-unprepare-write", 30),
    ("engine-after-device-unprepare", 30), ("ledger-before-tombstone-write", 30),
    ("engine-before-orphan-spec-remove", 30),
])


def pod(name):
    return (name, str(uuid.uuid4()))


def time_slicing_config():
    return opaque_config(GPU_DRIVER, {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                                      "sharing": {"strategy": "TimeSlicing",
                                                  "timeSlicingConfig": {"interval": "Long"}}})


class SharedClaimEndToEnd(NodeTestCase):
    """A claim reserved for several pods is prepared again for each one that
    the kubelet starts after an earlier one ended."""

    def test_claim_reserved_for_two_pods_is_prepared_for_the_second_after_the_first_ended(self):
        plugin = self.gpu_plugin().start()
        a, b = pod("pod-a"), pod("pod-b")
        claim = self.gpu_claim("shared-ab", ["gpu-0"], reserved_for=[a, b])
        first = plugin.prepare([claim])
        self.assertOk(first, claim[2])
        # Pod A ends before B is admitted on this node: the kubelet unprepares.
        self.assertOk(plugin.unprepare([claim]), claim[2])
        self.assertEqual(self.node.cdi_files(), [])
        # The resourceclaim controller drops A from reservedFor; B starts.
        self.gpu_claim("shared-ab", ["gpu-0"], reserved_for=[b], uid=claim[2])
        second = plugin.prepare([claim])
        self.assertOk(second, claim[2])
        self.assertEqual(second, first)
        self.assertOk(plugin.unprepare([claim]), claim[2])

    def test_claim_still_reserved_for_both_pods_is_prepared_again(self):
        plugin = self.gpu_plugin().start()
        claim = self.gpu_claim("shared-ab", ["gpu-0"], reserved_for=[pod("pod-a"), pod("pod-b")])
        self.assertOk(plugin.prepare([claim]), claim[2])
        self.assertOk(plugin.unprepare([claim]), claim[2])
        # reservedFor not yet updated when B is admitted: still legitimate.
        self.assertOk(plugin.prepare([claim]), claim[2])
        self.assertOk(plugin.unprepare([claim]), claim[2])

    def test_late_prepare_of_a_claim_reserved_for_nobody_is_refused(self):
        plugin = self.gpu_plugin().start()
        claim = self.gpu_claim("released", ["gpu-0"], reserved_for=[pod("pod-a")])
        self.assertOk(plugin.prepare([claim]), claim[2])
        self.assertOk(plugin.unprepare([claim]), claim[2])
        # The pod is gone and the claim reserved for nobody (not yet
        # deallocated): a Prepare now is a late retry, never a new pod.
        self.gpu_claim("released", ["gpu-0"], reserved_for=[], uid=claim[2])
        late = plugin.prepare([claim])
        self.assertIn("was unprepared recently", late[claim[2]]["error"])
        self.assertEqual(self.live_entries(plugin), [])
        self.assertEqual(self.node.cdi_files(), [])

    def test_one_claim_shared_by_15_pods_over_5_loops(self):
        plugin = self.gpu_plugin().start()
        claim = None
        for loop in range(5):
            pods = [pod("pod-%d-%d" % (loop, i)) for i in range(15)]
            # The same claim object every loop (a ResourceClaim, not a
            # template), reserved for this loop's pods; one of the previous
            # loop's pods is still listed on the first prepare.
            uid = claim[2] if claim else None
            reserved = pods if loop == 0 else [previous[-1]] + pods
            claim = self.gpu_claim("rc-shared-gpu", ["gpu-0"], reserved_for=reserved, uid=uid)
            with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
                results = list(pool.map(lambda _: plugin.prepare([claim]), range(15)))
            for r in results:
                self.assertOk(r, claim[2])
                self.assertEqual(r, results[0])
            self.assertOk(plugin.unprepare([claim]), claim[2])
            self.assertEqual(self.live_entries(plugin), [], "loop %d" % loop)
            previous = pods
        self.assertEqual(self.node.cdi_files(), [])


class TwoProcessExclusionEndToEnd(NodeTestCase):
    """Two plugin processes (different --rolling-update-id, one state
    directory) never interleave their work on one claim."""

    def two_plugins(self, old_env=None, new_env=None, old_args=(), new_args=()):
        old = self.gpu_plugin(rolling_update_id="old-pod", extra_args=TIME_SLICING + list(old_args),
                              env=old_env or {}).start()
        new = self.gpu_plugin(rolling_update_id="new-pod", extra_args=TIME_SLICING + list(new_args),
                              env=new_env or {}).start()
        return old, new

    def time_slice_settings(self):
        """GPU uuid -> the last time-slice interval the mock hardware was set to."""
        path = os.path.join(self.node.workdir, "mock-" + GPU_DRIVER, "state", "control.log")
        last = {}
        if os.path.exists(path):
            with open(path) as f:
                for line in f.read().splitlines():
                    parts = line.split()
                    if parts and parts[0] == "SetTimeSlice":
                        last[parts[1]] = parts[2]
        return last

    def assert_nothing_left_behind(self, plugin):
        self.assertEqual(self.live_entries(plugin), [])
        self.assertEqual(self.node.cdi_files(), [])
        leaked = {u: v for u, v in self.time_slice_settings().items() if v != "0"}
        self.assertEqual(leaked, {}, "time-slice settings nobody will reset")

    def test_unprepare_waits_for_a_prepare_in_flight_in_the_other_process(self):
        # The old pod stops inside its prepare, after PrepareStarted and again
        # after the device work, before the CDI spec is written.
        slow = "ledger-after-started-write=delay(1200);engine-after-device-prepare=delay(1200)"
        old, new = self.two_plugins(old_env={"NVDRA_FAILPOINTS": slow}, old_args=NO_RECONCILE,
                                    new_args=NO_RECONCILE)
        claim = self.gpu_claim("ts", ["gpu-1"], configs=[time_slicing_config()], reserved_for=[pod("pod-a")])
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            prepared = pool.submit(old.prepare, [claim])
            wait_for(lambda: "failpoint ledger-after-started-write: delaying" in old.read_log(), 20,
                     "the old pod to be inside its prepare")
            unprepared = new.unprepare([claim])
            prepared = prepared.result()
        self.assertOk(unprepared, claim[2])
        self.assertOk(prepared, claim[2])
        # The unprepare came after the prepare finished, so it undid all of it.
        self.assert_nothing_left_behind(new)

    def test_orphan_sweep_never_deletes_a_spec_the_other_process_just_wrote(self):
        preparer = self.gpu_plugin(rolling_update_id="new-pod", extra_args=NO_RECONCILE).start()
        claim = self.gpu_claim("swept", ["gpu-2"], reserved_for=[pod("pod-a")])
        # A spec left behind for this claim (say, by a crash before the ledger
        # knew the claim): the sweeper finds it and is about to delete it.
        stray = os.path.join(self.node.cdi_root, "k8s.gpu.nvidia.com-claim_%s.json" % claim[2])
        with open(stray, "w") as f:
            f.write('{"cdiVersion": "0.5.0", "kind": "k8s.gpu.nvidia.com/claim", "devices": []}\n')
        sweeper = self.gpu_plugin(rolling_update_id="old-pod",
                                  env={"NVDRA_FAILPOINTS": "engine-before-orphan-spec-remove=delay(5000)*1"})
        sweeper.start(wait=False)
        wait_for(lambda: "failpoint engine-before-orphan-spec-remove: delaying" in sweeper.read_log(), 30,
                 "the sweeper to decide the spec is an orphan")
        r = preparer.prepare([claim])
        self.assertOk(r, claim[2])
        wait_for(lambda: "removed orphan CDI spec of claim " + claim[2] in sweeper.read_log(), 30,
                 "the sweeper to finish its removal")
        self.assertTrue(os.path.exists(stray), "the sweep deleted the spec of a prepared claim")
        self.assertEqual([e["state"] for e in self.live_entries(preparer)], ["PrepareCompleted"])
        self.assertOk(preparer.unprepare([claim]), claim[2])
        self.assertEqual(self.node.cdi_files(), [])

    def test_two_processes_race_prepare_and_unprepare_with_delays_at_every_step(self):
        env = {"NVDRA_FAILPOINTS": EVERY_STEP_DELAYED}
        # The old pod reconciles (and sweeps orphan specs) every second while
        # the storm runs; the new pod's sweep would hide a stray spec.
        old, new = self.two_plugins(old_env=env, new_env=env, new_args=NO_RECONCILE)
        claims = [self.gpu_claim("race-%d" % i, ["gpu-%d" % i], configs=[time_slicing_config()],
                                 reserved_for=[pod("pod-%d" % i)]) for i in range(2)]
        rng = random.Random(12)

        def worker(seed):
            local = random.Random(seed)
            for _ in range(12):
                c = local.choice(claims)
                p = local.choice([old, new])
                if local.random() < 0.55:
                    p.prepare([c])
                else:
                    p.unprepare([c])

        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(worker, [rng.random() for _ in range(8)]))
        # Every claim the ledger holds has its spec; every spec has its claim;
        # no device is held twice.
        live = self.live_entries(old)
        held = [d for e in live for d in e.get("held", [])]
        self.assertEqual(len(held), len(set(held)), live)
        completed = sorted(e["uid"] for e in live if e["state"] == "PrepareCompleted")
        specs = sorted(f[len("k8s.gpu.nvidia.com-claim_"):-len(".json")] for f in self.node.cdi_files())
        self.assertEqual(specs, completed)
        # The kubelet releases every claim (through either process).
        for c in claims:
            self.assertOk(rng.choice([old, new]).unprepare([c]), c[2])
        self.assert_nothing_left_behind(new)


if __name__ == "__main__":
    unittest.main()
