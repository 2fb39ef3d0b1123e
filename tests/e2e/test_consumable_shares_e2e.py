"""Consumable shares end to end: the real GPU plugin with --consumable-shares,
its ResourceSlice, claims allocated as the scheduler allocates shares of one
GPU, and upstream's consumable-share demo specs."""

import os
import re
import uuid

import yaml

import localnode
from e2e_base import GPU_DRIVER, NodeTestCase, opaque_config, wait_for

GATE = ["--feature-gates", "ConsumableShares=true"]
DEMO_SPECS = os.path.join(os.path.dirname(__file__), "testdata", "consumable-shares")
SUFFIXES = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text):
    """An integer Kubernetes quantity ("4Gi", "81559Mi", "1") as a number."""
    m = re.fullmatch(r"([0-9]+)([kMGT]i?|Ki)?", text)
    assert m, text
    return int(m.group(1)) * SUFFIXES[m.group(2) or ""]


def consumed_capacity(device, requests):
    """consumedCapacity as the scheduler fills it in for a device that allows
    multiple allocations: every capacity of the device, the amount asked for
    rounded up to the policy's step, else the policy's default, else (no
    policy) all of it."""
    out = {}
    for name, cap in device["capacity"].items():
        policy = cap.get("requestPolicy")
        if name in requests:
            amount = quantity(requests[name])
            step = quantity(policy["validRange"]["step"]) if policy else 1
            amount = -(-amount // step) * step
        elif policy:
            amount = quantity(policy["default"])
        else:
            amount = quantity(cap["value"])
        out[name] = str(amount)
    return out


class ConsumableSharesEndToEnd(NodeTestCase):
    def start(self, mode, name="gpu-shares", env=None):
        args = GATE + (["--consumable-shares", mode] if env is None else [])
        self.plugin = self.gpu_plugin(name=name, extra_args=args, env=env).start()
        wait_for(lambda: self.published_for(mode), 30, "the GPU slice of mode %s" % mode)

    def published_for(self, mode):
        """Whether gpu-0 is published as `mode` publishes it (a restarted
        plugin replaces the slice of the previous mode)."""
        d = self.published("gpu-0")
        if d is None or not d.get("allowMultipleAllocations"):
            return False
        cap = d["capacity"]
        policy = cap["memory"].get("requestPolicy", {})
        if mode == "memory":
            return policy.get("default") == cap["memory"]["value"]
        if mode == "unlimited":
            return policy.get("default") == "0" and "shares" not in cap
        return cap.get("shares", {}).get("value") == mode

    def published(self, device):
        for s in self.node.api.slices(GPU_DRIVER):
            for d in s["spec"]["devices"]:
                if d["name"] == device:
                    return d
        return None

    def share_claim(self, name, device, requests=None, namespace="default", consumed=None):
        """A claim as the API server shows it once the scheduler allocated it
        a share of `device` and a pod reserved it (`consumed`: the
        consumedCapacity as given, in place of the scheduler's). Returns
        (ns, name, uid)."""
        uid = str(uuid.uuid4())
        request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
        if requests:
            request["exactly"]["capacity"] = {"requests": requests}
        claim = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"devices": {"requests": [request]}},
            "status": {
                "allocation": {"devices": {"results": [{
                    "request": "gpu", "driver": GPU_DRIVER, "pool": self.node.node_name, "device": device,
                    "shareID": str(uuid.uuid4()),
                    "consumedCapacity": consumed if consumed is not None
                    else consumed_capacity(self.published(device), requests or {}),
                }], "config": []}},
                "reservedFor": [{"resource": "pods", "name": name + "-pod", "uid": str(uuid.uuid4())}],
            },
        }
        self.node.api.load([claim])
        return (namespace, name, uid)

    def share_id_of(self, claim):
        status, body = self.node.api.request(
            "GET", "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s" % (claim[0], claim[1]))
        self.assertEqual(status, 200, body)
        self.assertTrue(body["metadata"].get("resourceVersion"), "claims are read as the API server shows them")
        return body["status"]["allocation"]["devices"]["results"][0]["shareID"]

    def test_memory_shares_of_one_gpu_are_prepared_together_and_one_over_capacity_is_refused(self):
        self.start("memory")
        gpu = self.published("gpu-0")
        self.assertTrue(gpu["allowMultipleAllocations"])
        self.assertEqual(gpu["capacity"]["memory"], {"value": "81559Mi", "requestPolicy": {
            "default": "81559Mi", "validRange": {"min": "1Mi", "max": "81559Mi", "step": "1Mi"}}})
        a = self.share_claim("share-a", "gpu-0", {"memory": "40Gi"})
        b = self.share_claim("share-b", "gpu-0", {"memory": "39Gi"})
        r = self.plugin.prepare([a, b])
        self.assertOk(r, a[2])
        self.assertOk(r, b[2])
        for c in (a, b):
            devices = r[c[2]]["devices"]
            self.assertEqual([d["device_name"] for d in devices], ["gpu-0"])
            self.assertEqual(devices[0]["share_id"], self.share_id_of(c))
            self.assertEqual(devices[0]["cdi_device_ids"], ["k8s.gpu.nvidia.com/claim=%s-gpu-0" % c[2]])
        # v1beta1 has no share_id: the same devices, without it.
        old = self.plugin.prepare([a], api="v1beta1")
        self.assertOk(old, a[2])
        self.assertNotIn("share_id", old[a[2]]["devices"][0])
        # 79Gi of 81559Mi are taken: 1Gi more is refused, naming what is used.
        c = self.share_claim("share-c", "gpu-0", {"memory": "1Gi"})
        refused = self.plugin.prepare([c])[c[2]]["error"]
        self.assertIn("requested device gpu-0 has no room for claim %s: it publishes memory 85520809984, claims %s "
                      "already consume 84825604096" % (c[2], ", ".join(sorted([a[2], b[2]]))), refused)
        self.assertNotIn("k8s.gpu.nvidia.com-claim_%s.json" % c[2], self.node.cdi_files())
        # Both shares are in the ledger, with what they consume.
        shares = {e["uid"]: e.get("shares") for e in self.live_entries(self.plugin)}
        self.assertEqual(sorted(shares), sorted([a[2], b[2]]))
        self.assertEqual(shares[a[2]][0]["consumed"], {"memory": 40 * 2**30})
        # Released shares make room.
        self.assertOk(self.plugin.unprepare([a]), a[2])
        self.assertOk(self.plugin.prepare([c]), c[2])

    def test_every_amount_is_range_checked_alone_or_beside_other_shares(self):
        # Amounts no scheduler gives, as a damaged or forged allocation might
        # carry them: each one checked against the GPU, with or without
        # other holders.
        self.start("memory")
        neg = self.share_claim("share-neg", "gpu-0", consumed={"memory": "-81559Mi"})
        a = self.share_claim("share-a", "gpu-0", consumed={"memory": "81559Mi"})
        b = self.share_claim("share-b", "gpu-0", consumed={"memory": "81559Mi"})
        r = self.plugin.prepare([neg])
        self.assertIn("requested device gpu-0: claim %s consumes memory -85520809984, a negative amount" % neg[2],
                      r[neg[2]]["error"])
        self.assertOk(self.plugin.prepare([a]), a[2])
        r = self.plugin.prepare([b])
        self.assertIn("requested device gpu-0 has no room for claim %s: it publishes memory 85520809984, claims %s "
                      "already consume 85520809984" % (b[2], a[2]), r[b[2]]["error"])
        zero = self.share_claim("share-zero", "gpu-1", consumed={"memory": "0"})
        self.assertIn("requested device gpu-1: claim %s consumes memory 0, below the least share of it the device "
                      "admits (1048576)" % zero[2], self.plugin.prepare([zero])[zero[2]]["error"])
        huge = self.share_claim("share-huge", "gpu-1", consumed={"memory": "4Ei"})
        self.assertIn("requested device gpu-1 has no room for claim %s: it publishes memory 85520809984 and this "
                      "claim consumes 4611686018427387904" % huge[2], self.plugin.prepare([huge])[huge[2]]["error"])
        self.assertEqual([e["uid"] for e in self.live_entries(self.plugin)], [a[2]])
        self.assertEqual(self.node.cdi_files(), ["k8s.gpu.nvidia.com-claim_%s.json" % a[2]])

    def test_shares_survive_a_restart_and_a_claim_without_a_share_is_refused(self):
        self.start("4")
        claims = [self.share_claim("share-%d" % i, "gpu-1") for i in range(4)]
        r = self.plugin.prepare(claims)
        for c in claims:
            self.assertOk(r, c[2])
        self.assertEqual(self.plugin.stop(), 0)
        self.start("4", name="gpu-shares-again")
        fifth = self.share_claim("share-4", "gpu-1")
        self.assertIn("requested device gpu-1 has no room for claim %s: it publishes shares 4" % fifth[2],
                      self.plugin.prepare([fifth])[fifth[2]]["error"])
        alone = self.gpu_claim("exclusive", ["gpu-1"], reserved_for=[("p", str(uuid.uuid4()))])
        self.assertIn("requested device gpu-1 is already allocated to different claim",
                      self.plugin.prepare([alone])[alone[2]]["error"])

    def test_the_flag_is_validated_as_upstream(self):
        for args, message in (
                (["--consumable-shares", "memory"],
                 "--consumable-shares requires feature gate ConsumableShares to be enabled"),
                (GATE + ["--consumable-shares", "0"],
                 "invalid value for --consumable-shares: \"0\" (must be 'disabled', 'memory', 'unlimited', "
                 "or a positive integer)")):
            p = self.gpu_plugin(name="gpu-bad-%d" % len(args), extra_args=args).start(wait=False)
            self.assertNotEqual(p.wait_exit(60), 0)
            self.assertIn(message, p.read_log())
        # CONSUMABLE_SHARES is the flag's environment variable.
        self.start("unlimited", name="gpu-env", env={"CONSUMABLE_SHARES": "unlimited"})
        self.assertEqual(self.published("gpu-0")["capacity"]["memory"]["requestPolicy"]["default"], "0")

    def test_an_mps_claim_is_refused_while_shares_are_on(self):
        template = os.path.join(localnode.ROOT, "templates", "mps-control-daemon.tmpl.yaml")
        self.plugin = self.gpu_plugin(name="gpu-mps-shares", extra_args=[
            "--feature-gates", "ConsumableShares=true,MPSSupport=true", "--consumable-shares", "unlimited",
            "--image-name", "registry.example/nvdra:test", "--mps-control-daemon-template", template,
            "--namespace", "nvdra"]).start()
        mps = opaque_config(GPU_DRIVER, {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                                         "sharing": {"strategy": "MPS", "mpsConfig": {}}})
        claim = self.gpu_claim("mps-shared", ["gpu-0"], configs=[mps], reserved_for=[("p", str(uuid.uuid4()))])
        self.assertIn("MPS sharing is not supported when consumable shares is enabled",
                      self.plugin.prepare([claim])[claim[2]]["error"])
        self.assertEqual(self.live_entries(self.plugin), [])

    def test_upstream_demo_specs_parse_and_prepare(self):
        modes = {"unlimited-sharing.yaml": "unlimited", "memory-sharing.yaml": "memory",
                 "integer-sharing.yaml": "4"}
        self.assertEqual(sorted(os.listdir(DEMO_SPECS)), sorted(modes))
        for spec, mode in sorted(modes.items()):
            with self.subTest(spec=spec):
                with open(os.path.join(DEMO_SPECS, spec)) as f:
                    docs = [d for d in yaml.safe_load_all(f) if d]
                template = next(d for d in docs if d["kind"] == "ResourceClaimTemplate")
                deployment = next(d for d in docs if d["kind"] == "Deployment")
                [request] = template["spec"]["spec"]["devices"]["requests"]
                self.assertEqual(request["exactly"]["deviceClassName"], "gpu.nvidia.com")
                self.start(mode, name="gpu-" + spec.split(".")[0])
                ns = template["metadata"]["namespace"]
                asked = request["exactly"].get("capacity", {}).get("requests")
                # One claim per replica, as the template makes them, all on one GPU.
                claims = [self.share_claim("%s-%d" % (template["metadata"]["name"], i), "gpu-5", asked, ns)
                          for i in range(deployment["spec"]["replicas"])]
                r = self.plugin.prepare(claims)
                share_ids = set()
                for c in claims:
                    self.assertOk(r, c[2])
                    share_ids.add(r[c[2]]["devices"][0]["share_id"])
                self.assertEqual(len(share_ids), len(claims))
                self.assertOk(self.plugin.unprepare(claims), claims[0][2])
                self.assertEqual(self.live_entries(self.plugin), [])
                self.assertEqual(self.plugin.stop(), 0)
