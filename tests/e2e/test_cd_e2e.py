"""End-to-end scenarios of the ComputeDomain plugin (IMEX channels)."""

import os
import unittest
import uuid

from e2e_base import CD_DRIVER, NodeTestCase, cdi_ids, make_claim, opaque_config, wait_for


class ComputeDomainEndToEnd(NodeTestCase):
    def setUp(self):
        super().setUp()
        self.domain_uid = str(uuid.uuid4())
        self.set_domain(ready=True)
        self.plugin = self.cd_plugin().start()

    def set_domain(self, ready):
        self.node.api.load([{
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
            "metadata": {"name": "imex-channel-injection", "namespace": "default", "uid": self.domain_uid},
            "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "imex-channel-0"}}},
            "status": {"status": "Ready" if ready else "NotReady",
                       "nodes": [{"name": self.node.node_name, "status": "Ready" if ready else "NotReady",
                                  "cliqueID": "x", "ipAddress": "10.0.0.1"}]},
        }])

    def channel_claim(self, name, channel, mode=None, extra=None):
        params = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
                  "domainID": self.domain_uid}
        if mode:
            params["allocationMode"] = mode
        params.update(extra or {})
        c = make_claim(name, [{"request": "channel", "driver": CD_DRIVER, "pool": self.node.node_name,
                               "device": "channel-%d" % channel}],
                       configs=[opaque_config(CD_DRIVER, params, requests=["channel"])])
        self.node.api.load([c])
        return ("default", name, c["metadata"]["uid"])

    def test_channel_conflict_names_the_holder_and_clears_on_release(self):
        a = self.channel_claim("chan-a", 0)
        b = self.channel_claim("chan-b", 0)
        c = self.channel_claim("chan-c", 1)
        ra = self.plugin.prepare([a])
        self.assertOk(ra, a[2])
        self.assertEqual(cdi_ids(ra[a[2]]), ["k8s.compute-domain.nvidia.com/claim=%s-channel-0" % a[2]])
        rb = self.plugin.prepare([b])
        self.assertIn("channel 0 already allocated by claim %s (according to checkpoint)" % a[2], rb[b[2]]["error"])
        self.assertOk(self.plugin.prepare([c]), c[2])  # different channels coexist
        self.assertOk(self.plugin.unprepare([a]), a[2])
        self.assertOk(self.plugin.prepare([b]), b[2])

    def test_channel_spec_carries_the_device_node(self):
        a = self.channel_claim("chan-node", 3)
        self.assertOk(self.plugin.prepare([a]), a[2])
        with open(os.path.join(self.node.cdi_root, "k8s.compute-domain.nvidia.com-claim_%s.json" % a[2])) as f:
            text = f.read()
        self.assertIn("/dev/nvidia-caps-imex-channels/channel3", text)

    def test_all_channels_mode_holds_every_channel(self):
        a = self.channel_claim("chan-all", 0, mode="All")
        self.assertOk(self.plugin.prepare([a]), a[2])
        with open(os.path.join(self.node.cdi_root, "k8s.compute-domain.nvidia.com-claim_%s.json" % a[2])) as f:
            text = f.read()
        self.assertIn("channel2047", text)
        b = self.channel_claim("chan-5", 5)
        self.assertIn("already allocated by claim " + a[2], self.plugin.prepare([b])[b[2]]["error"])

    def test_unknown_field_is_permanent_and_leaves_no_entry(self):
        a = self.channel_claim("batssuite-rc-bad-opaque-config", 0, extra={"unexpectedField": "foo"})
        r = self.plugin.prepare([a])
        self.assertIn('strict decoding error: unknown field "unexpectedField"', r[a[2]]["error"])
        self.assertEqual(self.live_entries(self.plugin), [])

    def test_not_ready_domain_is_retryable_and_does_not_block_others(self):
        self.set_domain(ready=False)
        a = self.channel_claim("chan-wait", 0)
        r = self.plugin.prepare([a])
        self.assertIn("not ready", r[a[2]]["error"])
        self.assertEqual(self.live_entries(self.plugin), [])
        self.set_domain(ready=True)
        self.assertOk(self.plugin.prepare([a]), a[2])

    def test_prepared_claim_stays_prepared_when_the_domain_flaps(self):
        a = self.channel_claim("chan-flap", 2)
        first = self.plugin.prepare([a])
        self.assertOk(first, a[2])
        self.set_domain(ready=False)
        # A repeated Prepare (another pod, a kubelet restart) returns the recorded devices.
        self.assertEqual(self.plugin.prepare([a]), first)

    def test_published_devices(self):
        slices = wait_for(lambda: self.node.api.slices(CD_DRIVER), what="ComputeDomain slices")
        names = sorted(d["name"] for s in slices for d in s["spec"]["devices"])
        self.assertEqual(names, ["channel-0", "daemon-0"])


if __name__ == "__main__":
    unittest.main()
