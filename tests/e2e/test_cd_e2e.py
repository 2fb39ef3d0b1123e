"""End-to-end scenarios of the ComputeDomain plugin (IMEX channels and daemons),
mirroring the upstream ComputeDomain flow: the controller's daemon claim, the
node label that brings the IMEX daemon, the daemon's readiness in its
ComputeDomainClique, and the workload's channel claim."""

import json
import os
import threading
import time
import unittest
import uuid

from e2e_base import CD_DRIVER, NodeTestCase, cdi_ids, make_claim, opaque_config, wait_for

DRIVER_NS = "nvidia-dra-driver"
# The gb200x4 mock profile's clique.
CLIQUE = "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90.32766"
LABEL = "resource.nvidia.com/computeDomain"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
CLIQUE_LABEL_OWNER = "compute-domain.nvidia.com/gpu-clique-label-owner"
TEMPLATE = "IMEX_SERVER_PORT=50000\nIMEX_NODE_CONFIG_FILE=/imexd/nodes_config.cfg\n"


class ComputeDomainTestCase(NodeTestCase):
    profile = "gb200x4"
    extra_args = []
    # Where the IMEX daemons write their ComputeDomainCliques.
    clique_namespace = DRIVER_NS

    def setUp(self):
        super().setUp()
        self.template = os.path.join(self.node.workdir, "compute-domain-daemon-config.tmpl.cfg")
        with open(self.template, "w") as f:
            f.write(TEMPLATE)
        self.domain_uid = str(uuid.uuid4())
        self.set_domain(self.domain_uid, ready=True)
        self.set_clique(self.domain_uid, "Ready")
        self.plugin = self.start_plugin()

    def start_plugin(self, extra=None):
        args = ["--namespace", DRIVER_NS, "--compute-domain-daemon-config-template", self.template]
        return self.cd_plugin(self.profile, extra_args=args + self.extra_args + (extra or [])).start()

    # ---- what the controller and the IMEX daemons write ----
    def set_domain(self, uid, ready, name=None, namespace="default"):
        name = name or "cd-" + uid[:8]
        status = "Ready" if ready else "NotReady"
        self.node.api.load([{
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": name + "-channel"}}},
            "status": {"status": status,
                       "nodes": [{"name": self.node.node_name, "status": status, "cliqueID": CLIQUE,
                                  "ipAddress": "10.0.0.1", "index": 0}]},
        }])

    def set_clique(self, uid, daemon_status, namespace=None):
        """daemon_status: "Ready", "NotReady", or None (no daemon of this node listed)."""
        daemons = [{"nodeName": "other-node", "cliqueID": CLIQUE, "ipAddress": "10.0.0.2", "index": 1,
                    "status": "Ready"}]
        if daemon_status:
            daemons.append({"nodeName": self.node.node_name, "cliqueID": CLIQUE, "ipAddress": "10.0.0.1",
                            "index": 0, "status": daemon_status})
        self.node.api.load([{
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainClique",
            "metadata": {"name": "%s.%s" % (uid, CLIQUE), "namespace": namespace or self.clique_namespace},
            "daemons": daemons,
        }])

    # ---- claims as the controller's templates produce them ----
    def channel_claim(self, name, channel, domain=None, mode=None, extra=None, namespace="default"):
        params = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
                  "domainID": domain or self.domain_uid}
        if mode:
            params["allocationMode"] = mode
        params.update(extra or {})
        c = make_claim(name, [{"request": "channel", "driver": CD_DRIVER, "pool": self.node.node_name,
                               "device": "channel-%d" % channel}], namespace,
                       configs=[opaque_config(CD_DRIVER, params, requests=["channel"])])
        self.node.api.load([c])
        return (namespace, name, c["metadata"]["uid"])

    def daemon_claim(self, name, domain=None):
        params = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainDaemonConfig",
                  "domainID": domain or self.domain_uid}
        c = make_claim(name, [{"request": "daemon", "driver": CD_DRIVER, "pool": self.node.node_name,
                               "device": "daemon-0"}], DRIVER_NS,
                       configs=[opaque_config(CD_DRIVER, params, requests=["daemon"])])
        self.node.api.load([c])
        return (DRIVER_NS, name, c["metadata"]["uid"])

    # ---- what a test looks at ----
    def node_label(self):
        status, node = self.node.api.request("GET", "/api/v1/nodes/" + self.node.node_name)
        assert status == 200, node
        return (node["metadata"].get("labels") or {}).get(LABEL)

    def counts(self, clear=False):
        status, body = self.node.api.request("POST", "/_nvdra/counts", {"clear": clear})
        assert status == 200, body
        return body["counts"]

    def spec_text(self, uid):
        with open(os.path.join(self.node.cdi_root, "k8s.compute-domain.nvidia.com-claim_%s.json" % uid)) as f:
            return f.read()

    def domain_dir(self, uid):
        return os.path.join(self.plugin.plugin_dir, "domains", uid)

    def prepare_in_background(self, claim):
        """Starts a Prepare that is expected to wait; returns (thread, result dict)."""
        out = {}

        def run():
            out["result"] = self.plugin.prepare([claim])
            out["returned_at"] = time.monotonic()
        t = threading.Thread(target=run)
        t.start()
        self.addCleanup(t.join, 60)
        return t, out

    def wait_until_waiting(self, claim):
        """The plugin logs when a channel claim starts waiting for its domain."""
        wait_for(lambda: ("claim %s: waiting" % claim[2]) in self.plugin.read_log(),
                 what="the plugin to wait for the domain of claim " + claim[1])


class ComputeDomainEndToEnd(ComputeDomainTestCase):
    def test_upstream_flow_daemon_then_channel(self):
        # The controller's daemon claim is prepared first, and the IMEX daemon
        # has not reported yet: the clique does not list this node.
        self.set_clique(self.domain_uid, None)
        d = self.daemon_claim("imex-daemon")
        rd = self.plugin.prepare([d])
        self.assertOk(rd, d[2])
        self.assertIn("k8s.compute-domain.nvidia.com/claim=%s-daemon-0" % d[2], cdi_ids(rd[d[2]]))
        spec = self.spec_text(d[2])
        for want in ('"/imexd"', "COMPUTE_DOMAIN_UUID=" + self.domain_uid, "CLIQUE_ID=" + CLIQUE,
                     "COMPUTE_DOMAIN_NAMESPACE=default", "/dev/nvidia-caps/nvidia-cap"):
            self.assertIn(want, spec)
        with open(os.path.join(self.domain_dir(self.domain_uid), "imexd.cfg.tmpl")) as f:
            self.assertEqual(f.read(), TEMPLATE)
        log = self.plugin.read_log()
        self.assertIn("identified fabric clique: " + CLIQUE, log)
        self.assertIn("driver version validation", log)

        # The workload's channel claim labels the node (which is what brings
        # the IMEX daemon here) and waits until the daemon reports Ready.
        c = self.channel_claim("workload-channel", 0)
        t, out = self.prepare_in_background(c)
        wait_for(lambda: self.node_label() == self.domain_uid, what="the node label")
        self.wait_until_waiting(c)
        self.assertTrue(t.is_alive())
        ready_at = time.monotonic()
        self.set_clique(self.domain_uid, "Ready")
        t.join(60)
        self.assertGreaterEqual(out["returned_at"], ready_at)
        self.assertOk(out["result"], c[2])
        self.assertEqual(cdi_ids(out["result"][c[2]]), ["k8s.compute-domain.nvidia.com/claim=%s-channel-0" % c[2]])
        self.assertIn("/dev/nvidia-caps-imex-channels/channel0", self.spec_text(c[2]))

        # Unprepare of the channel claim removes the label; the daemon
        # claim's Unprepare leaves the domain directory to the reconciler.
        self.assertOk(self.plugin.unprepare([c]), c[2])
        self.assertIsNone(self.node_label())
        self.assertOk(self.plugin.unprepare([d]), d[2])
        self.assertTrue(os.path.exists(self.domain_dir(self.domain_uid)))

    def test_more_waiting_channel_claims_than_claim_workers_do_not_hold_up_the_daemons_claim(self):
        # A job's pods start together: more channel claims wait for the
        # IMEX daemon than the plugin has claim workers (2 by default), and
        # the daemon's own claim, which the daemon needs to start, comes
        # after them. Each waiting claim steps aside for the queued ones.
        self.set_clique(self.domain_uid, None)
        waiting = [self.channel_claim("chan-%d" % i, i) for i in range(4)]
        background = [self.prepare_in_background(c) for c in waiting]
        for c in waiting:
            self.wait_until_waiting(c)
        d = self.daemon_claim("imex-daemon")
        self.assertOk(self.plugin.prepare([d]), d[2])
        self.assertTrue(all(t.is_alive() for t, _ in background))
        self.set_clique(self.domain_uid, "Ready")
        for (t, out), c in zip(background, waiting):
            t.join(60)
            self.assertOk(out["result"], c[2])

    def test_daemon_restart_makes_a_new_channel_claim_wait_until_ready_again(self):
        a = self.channel_claim("chan-a", 0)
        self.assertOk(self.plugin.prepare([a]), a[2])
        self.set_clique(self.domain_uid, "NotReady")  # the IMEX daemon restarts
        b = self.channel_claim("chan-b", 1)
        t, out = self.prepare_in_background(b)
        self.wait_until_waiting(b)
        # Other claims are not delayed by the waiting one: the restarted
        # daemon's own claim is prepared meanwhile.
        d = self.daemon_claim("imex-daemon")
        self.assertOk(self.plugin.prepare([d]), d[2])
        self.assertTrue(t.is_alive())
        ready_at = time.monotonic()
        self.set_clique(self.domain_uid, "Ready")
        t.join(60)
        self.assertGreaterEqual(out["returned_at"], ready_at)
        self.assertOk(out["result"], b[2])
        # The prepared claim stayed prepared throughout: a repeat answers the same.
        self.assertEqual(self.plugin.prepare([a])[a[2]]["error"], "")

    def test_channel_claims_of_two_domains_on_one_node(self):
        a = self.channel_claim("chan-a", 0)
        self.assertOk(self.plugin.prepare([a]), a[2])
        other = str(uuid.uuid4())
        self.set_domain(other, ready=True)
        self.set_clique(other, "Ready")
        b = self.channel_claim("chan-b", 1, domain=other)
        rb = self.plugin.prepare([b])
        self.assertIn("label already exists for a different ComputeDomain", rb[b[2]]["error"])
        self.assertEqual(self.node_label(), self.domain_uid)
        # Once the first domain's claim is gone the node can serve the other.
        self.assertOk(self.plugin.unprepare([a]), a[2])
        self.assertIsNone(self.node_label())
        self.assertOk(self.plugin.prepare([b]), b[2])
        self.assertEqual(self.node_label(), other)

    def test_label_is_reference_counted_and_survives_a_restart(self):
        a = self.channel_claim("chan-a", 0)
        b = self.channel_claim("chan-b", 1)
        self.assertOk(self.plugin.prepare([a]), a[2])
        self.assertOk(self.plugin.prepare([b]), b[2])
        self.plugin.stop()
        self.plugin = self.start_plugin()
        self.assertOk(self.plugin.unprepare([a]), a[2])
        self.assertEqual(self.node_label(), self.domain_uid)  # b still holds it
        self.assertOk(self.plugin.unprepare([b]), b[2])
        self.assertIsNone(self.node_label())

    def test_a_label_removed_while_a_claim_holds_it_is_repaired(self):
        a = self.channel_claim("chan-a", 0)
        self.assertOk(self.plugin.prepare([a]), a[2])
        status, node = self.node.api.request("GET", "/api/v1/nodes/" + self.node.node_name)
        del node["metadata"]["labels"][LABEL]
        status, body = self.node.api.request("PUT", "/api/v1/nodes/" + self.node.node_name, node)
        self.assertEqual(status, 200, body)
        wait_for(lambda: self.node_label() == self.domain_uid, what="the reconciler to repair the label")

    def test_not_ready_past_the_deadline_is_retryable_and_names_what_is_missing(self):
        self.plugin.stop()
        self.plugin = self.start_plugin(["--claim-timeout", "3"])
        self.set_clique(self.domain_uid, None)
        a = self.channel_claim("chan-wait", 0)
        r = self.plugin.prepare([a])
        self.assertIn("not ready", r[a[2]]["error"])
        self.assertIn("ComputeDomainClique %s/%s.%s" % (DRIVER_NS, self.domain_uid, CLIQUE), r[a[2]]["error"])
        self.assertIn("node-1", r[a[2]]["error"])
        self.assertEqual(self.live_entries(self.plugin), [])
        self.set_clique(self.domain_uid, "Ready")
        self.assertOk(self.plugin.prepare([a]), a[2])

    def test_deleted_domain_directory_removed_and_stale_claims_cleaned(self):
        self.plugin.stop()
        self.plugin = self.start_plugin(["--completed-claim-grace", "1"])
        d = self.daemon_claim("imex-daemon")
        c = self.channel_claim("chan", 0)
        self.assertOk(self.plugin.prepare([d]), d[2])
        self.assertOk(self.plugin.prepare([c]), c[2])
        self.assertTrue(os.path.isdir(self.domain_dir(self.domain_uid)))
        # The user deletes the ComputeDomain: the controller deletes its
        # claims; the pods are force-deleted so the kubelet never unprepares.
        self.node.api.delete("computedomains", "default", "cd-" + self.domain_uid[:8])
        self.node.api.delete("resourceclaims", DRIVER_NS, "imex-daemon")
        self.node.api.delete("resourceclaims", "default", "chan")
        wait_for(lambda: not os.path.exists(self.domain_dir(self.domain_uid)), what="the domain directory removed")
        # Prepared claims are checked against the API server every 10th
        # reconciler pass, and unprepared once gone past the grace period.
        wait_for(lambda: self.live_entries(self.plugin) == [], timeout=60, what="the stale claims unprepared")
        wait_for(lambda: self.node_label() is None, what="the label of the stale claim removed")

    def open_watches(self):
        return sorted(w["resource"] for w in self.node.api.request("POST", "/_nvdra/watches", {})[1]["active"])

    def test_an_idle_node_watches_no_compute_domain_until_its_first_claim(self):
        # Started with no ComputeDomain claim: only its slices are watched,
        # and nothing of ComputeDomains, cliques or the Node was listed.
        wait_for(lambda: self.open_watches() == ["resourceslices"], what="the slice watch alone")
        counts = self.counts()
        for resource in ("computedomains", "computedomaincliques", "nodes"):
            self.assertNotIn(resource, counts.get("list", {}))
            self.assertNotIn(resource, counts.get("watch", {}))
        # The first channel claim opens them, and is prepared from them.
        c = self.channel_claim("chan", 0)
        self.assertOk(self.plugin.prepare([c]), c[2])
        wait_for(lambda: self.open_watches() == ["computedomaincliques", "computedomains", "nodes", "resourceslices"],
                 what="the ComputeDomain, clique and Node watches")
        self.assertEqual(self.counts()["list"]["computedomains"], 1)
        # A restart with the claim still prepared opens them at start.
        self.plugin.stop()
        wait_for(lambda: self.open_watches() == [], what="the stopped plugin's watches closed")
        self.plugin = self.start_plugin()
        this_start = self.plugin.read_log().rsplit("==== start", 1)[-1]
        self.assertIn("opening the ComputeDomain watches", this_start)
        wait_for(lambda: self.open_watches() == ["computedomaincliques", "computedomains", "nodes", "resourceslices"],
                 what="the watches of a node that holds a channel claim")
        self.assertOk(self.plugin.unprepare([c]), c[2])
        self.assertIsNone(self.node_label())

    def test_compute_domain_watch_dropped_and_resumed(self):
        # A first claim opens the watches; they stay open after it.
        first = self.channel_claim("first", 1)
        self.assertOk(self.plugin.prepare([first]), first[2])
        self.assertOk(self.plugin.unprepare([first]), first[2])
        wait_for(lambda: "computedomains" in self.open_watches(), what="the ComputeDomain watch")
        status, body = self.node.api.request("POST", "/_nvdra/watches", {"action": "drop", "resource": "computedomains"})
        self.assertEqual(body["affected"], 1)
        other = str(uuid.uuid4())
        self.set_domain(other, ready=True)  # created while the watch is down
        self.set_clique(other, "Ready")
        c = self.channel_claim("chan", 0, domain=other)
        self.assertOk(self.plugin.prepare([c]), c[2])
        counts = self.counts()
        self.assertEqual(counts["list"]["computedomains"], 1)  # resumed, not relisted
        self.assertGreaterEqual(counts["watch"]["computedomains"], 2)

    def test_a_channel_prepare_among_1000_domains_makes_no_list_call(self):
        # No reconciler or maintenance pass in the measured window.
        self.plugin.stop()
        self.plugin = self.start_plugin(["--reconcile-period", "3600"])
        domains = []
        for i in range(1000):
            uid = str(uuid.uuid4())
            domains.append({
                "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                "metadata": {"name": "cd-%04d" % i, "namespace": "ns-%d" % (i % 20), "uid": uid},
                "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "t-%d" % i}}},
                "status": {"status": "Ready", "nodes": [{"name": "node-%d" % i, "status": "Ready",
                                                         "cliqueID": CLIQUE, "ipAddress": "10.1.0.1"}]},
            })
        self.node.api.load(domains)
        # A first claim opens the watches (one LIST of the 1,000) and goes.
        first = self.channel_claim("first", 1)
        self.assertOk(self.plugin.prepare([first]), first[2])
        self.assertOk(self.plugin.unprepare([first]), first[2])
        self.assertIsNone(self.node_label())
        c = self.channel_claim("chan", 0)
        self.counts(clear=True)
        self.assertOk(self.plugin.prepare([c]), c[2])
        counts = self.counts()
        # (The slice publisher's periodic resync is its own business.)
        self.assertEqual(set(counts.get("list", {})) - {"resourceslices"}, set())
        # One GET of the claim, and one write: the label was missing.
        self.assertEqual(counts.get("get", {}), {"resourceclaims": 1})
        self.assertEqual(counts.get("patch", {}), {"nodes": 1})
        self.assertEqual(set(counts) - {"watch", "list"}, {"get", "patch"})
        # A second channel claim of the domain: the label is there, one GET.
        d = self.channel_claim("chan-2", 1)
        self.counts(clear=True)
        self.assertOk(self.plugin.prepare([d]), d[2])
        counts = self.counts()
        self.assertEqual(counts.get("get", {}), {"resourceclaims": 1})
        self.assertNotIn("patch", counts)
        self.assertNotIn("update", counts)

    # ---- behaviour kept from before the watch-backed lookups ----
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

    def test_daemon_device_held_twice_is_refused_in_upstreams_overlap_words(self):
        # Channels conflict by id (upstream's checkpoint check, above); the
        # daemon device by its name, as upstream's overlap check says it.
        self.set_clique(self.domain_uid, None)
        first = self.daemon_claim("imex-daemon-1")
        self.assertOk(self.plugin.prepare([first]), first[2])
        second = self.daemon_claim("imex-daemon-2")
        self.assertIn("requested device daemon-0 is already allocated to different claim " + first[2],
                      self.plugin.prepare([second])[second[2]]["error"])

    def test_all_channels_mode_holds_every_channel(self):
        a = self.channel_claim("chan-all", 0, mode="All")
        self.assertOk(self.plugin.prepare([a]), a[2])
        self.assertIn("channel2047", self.spec_text(a[2]))
        b = self.channel_claim("chan-5", 5)
        self.assertIn("channel 5 already allocated by claim %s (according to checkpoint)" % a[2],
                      self.plugin.prepare([b])[b[2]]["error"])

    def test_unknown_field_is_permanent_and_leaves_no_entry(self):
        a = self.channel_claim("batssuite-rc-bad-opaque-config", 0, extra={"unexpectedField": "foo"})
        r = self.plugin.prepare([a])
        self.assertIn('strict decoding error: unknown field "unexpectedField"', r[a[2]]["error"])
        self.assertEqual(self.live_entries(self.plugin), [])
        self.assertIsNone(self.node_label())

    def test_prepared_claim_stays_prepared_when_the_domain_flaps(self):
        a = self.channel_claim("chan-flap", 2)
        first = self.plugin.prepare([a])
        self.assertOk(first, a[2])
        self.set_clique(self.domain_uid, "NotReady")
        # A repeated Prepare (another pod, a kubelet restart) returns the recorded devices.
        self.assertEqual(self.plugin.prepare([a]), first)

    def test_published_devices(self):
        slices = wait_for(lambda: self.node.api.slices(CD_DRIVER), what="ComputeDomain slices")
        names = sorted(d["name"] for s in slices for d in s["spec"]["devices"])
        self.assertEqual(names, ["channel-0", "daemon-0"])


class WithoutCliquesGate(ComputeDomainTestCase):
    """Readiness from the domain's status.nodes, as with ComputeDomainCliques off."""
    extra_args = ["--feature-gates", "ComputeDomainCliques=false"]

    def test_status_nodes_decides(self):
        self.set_domain(self.domain_uid, ready=False)
        a = self.channel_claim("chan", 0)
        t, out = self.prepare_in_background(a)
        self.wait_until_waiting(a)
        self.set_domain(self.domain_uid, ready=True)
        t.join(60)
        self.assertOk(out["result"], a[2])
        self.assertNotIn("computedomaincliques", self.counts().get("list", {}))


class NodeWithoutClique(ComputeDomainTestCase):
    """An H100 node has no multi-node NVLink fabric: daemon claims still get
    the domain directory, /imexd and the env (CLIQUE_ID empty), as upstream."""
    profile = "h100x8"
    # Its 550 driver is below what IMEX daemons with DNS names need (upstream
    # refuses to start then), and cliques need DNS names.
    extra_args = ["--feature-gates", "IMEXDaemonsWithDNSNames=false,ComputeDomainCliques=false"]

    def test_daemon_claim_without_a_clique(self):
        d = self.daemon_claim("imex-daemon")
        r = self.plugin.prepare([d])
        self.assertOk(r, d[2])
        spec = self.spec_text(d[2])
        self.assertIn('"/imexd"', spec)
        self.assertIn('"CLIQUE_ID="', spec)
        self.assertIn("COMPUTE_DOMAIN_UUID=" + self.domain_uid, spec)
        self.assertNotIn("nvidia-cap", spec)
        self.assertTrue(os.path.exists(os.path.join(self.domain_dir(self.domain_uid), "imexd.cfg.tmpl")))


class HostManagedImex(ComputeDomainTestCase):
    """--imex-mode=hostManaged (HostManagedIMEXDaemon): the node's
    administrator runs nvidia-imex. A channel claim is ready when the host
    daemon answers READY on its socket (nvidia-imex-ctl -q), waits for no
    daemon of the domain, and leaves the node unlabelled; daemon claims are
    refused and the daemon device is not published."""
    extra_args = ["--feature-gates", "HostManagedIMEXDaemon=true", "--imex-mode", "hostManaged"]

    def host_imex(self, state):
        """state: None (no daemon: no socket), or what nvidia-imex-ctl -q prints."""
        etc = os.path.join(self.node.workdir, "mock-" + CD_DRIVER, "etc", "nvidia-imex")
        os.makedirs(etc, exist_ok=True)
        sock = os.path.join(etc, "imex_ctrl.sock")
        if state is None:
            if os.path.exists(sock):
                os.remove(sock)
            return
        open(sock, "w").close()
        with open(os.path.join(etc, "mock-state"), "w") as f:
            f.write(state + "\n")

    def test_published_devices(self):
        slices = wait_for(lambda: self.node.api.slices(CD_DRIVER), what="ComputeDomain slices")
        names = sorted(d["name"] for s in slices for d in s["spec"]["devices"])
        self.assertEqual(names, ["channel-0"])

    def test_a_channel_claim_is_ready_when_the_host_daemon_is(self):
        # No daemon of the domain runs anywhere: host-managed IMEX needs none.
        self.set_domain(self.domain_uid, ready=False)
        self.set_clique(self.domain_uid, None)
        a = self.channel_claim("chan", 0, mode="All")
        self.host_imex(None)
        err = self.plugin.prepare([a])[a[2]]["error"]
        self.assertIn("host nvidia-imex daemon readiness check failed: error running nvidia-imex-ctl", err)
        self.host_imex("UNAVAILABLE")
        err = self.plugin.prepare([a])[a[2]]["error"]
        self.assertIn("host nvidia-imex daemon not ready: UNAVAILABLE", err)
        self.host_imex("READY")
        r = self.plugin.prepare([a])
        self.assertOk(r, a[2])
        spec = self.spec_text(a[2])
        self.assertIn("/dev/nvidia-caps-imex-channels/channel0", spec)
        self.assertNotIn("/dev/nvidia-caps-imex-channels/channel1\"", spec, "allocationMode All is not looked at")
        self.assertIsNone(self.node_label(), "host-managed IMEX labels no node")
        self.assertOk(self.plugin.unprepare([a]), a[2])
        self.assertIsNone(self.node_label())

    def test_a_daemon_claim_is_refused_for_good(self):
        d = self.daemon_claim("imex-daemon")
        err = self.plugin.prepare([d])[d[2]]["error"]
        self.assertIn("ComputeDomain daemon claims are not supported when imex.mode=hostManaged", err)
        self.assertEqual([c for c in self.live_entries(self.plugin) if c.get("uid") == d[2]], [])

    def test_host_managed_needs_its_gate_and_isolation_channel_is_refused(self):
        for args, message in (
                (["--imex-mode", "hostManaged"],
                 'imex configuration validation failed: imex.mode="hostManaged" requires the '
                 "HostManagedIMEXDaemon feature gate to be enabled"),
                (["--imex-isolation", "channel"],
                 'imex configuration validation failed: imex.isolation="channel" is not supported yet')):
            # Beside the running plugin: its own sockets, so only the IMEX settings can stop it.
            p = self.cd_plugin(self.profile, name="cd-bad-%d" % len(args[1]), rolling_update_id="bad%d" % len(args[1]),
                               extra_args=args).start(wait=False)
            self.assertNotEqual(p.wait_exit(60), 0)
            self.assertIn(message, p.read_log())


class CliqueNamespaceEndToEnd(ComputeDomainTestCase):
    """Beside an upstream release: its IMEX daemons write the cliques in the
    release's namespace, which --clique-namespace names, while the plugin's
    own namespace is another."""
    clique_namespace = "dra-upstream"
    extra_args = ["--clique-namespace", "dra-upstream"]

    def test_a_channel_claim_is_ready_by_the_clique_of_the_named_namespace(self):
        a = self.channel_claim("chan-a", 0)
        self.assertOk(self.plugin.prepare([a]), a[2])
        self.assertEqual(self.node_label(), self.domain_uid)

    def test_a_clique_in_the_plugins_own_namespace_does_not_count(self):
        self.plugin.stop()
        self.plugin = self.start_plugin(["--claim-timeout", "3"])
        other = str(uuid.uuid4())
        self.set_domain(other, ready=True)
        self.set_clique(other, "Ready", namespace=DRIVER_NS)
        self.set_clique(other, None)
        b = self.channel_claim("chan-b", 1, domain=other)
        r = self.plugin.prepare([b])
        self.assertIn("ComputeDomainClique dra-upstream/%s.%s" % (other, CLIQUE), r[b[2]]["error"])
        self.set_clique(other, "Ready")
        self.assertOk(self.plugin.prepare([b]), b[2])


class CliqueLabelAfterUninstall(ComputeDomainTestCase):
    """With GPU_CLIQUE_LABEL_ENABLED the plugin labels its node
    nvidia.com/gpu.clique. A plugin that stops cannot tell an uninstall from
    a restart, so the label stays; the chart's pre-delete hook runs
    `nvdractl node remove-clique-labels`, which removes every label nvdra
    wrote and leaves gpu-feature-discovery's."""
    extra_args = ["--gpu-clique-label-enabled", "true"]

    def node_object(self, name):
        status, node = self.node.api.request("GET", "/api/v1/nodes/" + name)
        assert status == 200, node
        return node["metadata"]

    def test_the_uninstall_hook_removes_the_labels_nvdra_wrote_and_no_other(self):
        self.node.api.load([{"apiVersion": "v1", "kind": "Node",
                             "metadata": {"name": "gfd-node", "uid": str(uuid.uuid4()),
                                          "labels": {CLIQUE_LABEL: "gfd.7"}}}])
        wait_for(lambda: (self.node_object(self.node.node_name).get("labels") or {}).get(CLIQUE_LABEL) == CLIQUE,
                 what="the plugin to label its node with its clique")
        self.plugin.stop()
        # Stopped, as in a restart: the label stays.
        self.assertEqual(self.node_object(self.node.node_name)["labels"][CLIQUE_LABEL], CLIQUE)
        r = self.node.ctl(["node", "remove-clique-labels", "--kubeconfig", self.node.api.kubeconfig])
        self.assertEqual(json.loads(r.stdout), {"removed": [self.node.node_name]})
        mine = self.node_object(self.node.node_name)
        self.assertNotIn(CLIQUE_LABEL, mine.get("labels") or {})
        self.assertNotIn(CLIQUE_LABEL_OWNER, mine.get("annotations") or {})
        self.assertEqual(self.node_object("gfd-node")["labels"][CLIQUE_LABEL], "gfd.7")
        # Run again (a retried hook): nothing left, still success.
        r = self.node.ctl(["node", "remove-clique-labels", "--kubeconfig", self.node.api.kubeconfig])
        self.assertEqual(json.loads(r.stdout), {"removed": []})

    def test_no_api_server_is_exit_status_2(self):
        r = self.node.ctl(["node", "remove-clique-labels", "--kubeconfig",
                           os.path.join(self.node.workdir, "missing-kubeconfig")], check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("missing-kubeconfig", r.stderr)


if __name__ == "__main__":
    unittest.main()
