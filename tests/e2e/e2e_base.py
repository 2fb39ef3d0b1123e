"""Shared set-up for the end-to-end tests: one local node per test."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))

import localnode  # noqa: E402
from localnode import CD_DRIVER, GPU_DRIVER, make_claim, opaque_config, wait_for  # noqa: F401,E402


def device_names(result):
    return sorted(d["device_name"] for d in result["devices"])


def cdi_ids(result):
    out = []
    for d in result["devices"]:
        out += d.get("cdi_device_ids", [])
    return sorted(out)


class NodeTestCase(unittest.TestCase):
    def setUp(self):
        self.node = localnode.LocalNode()
        self.addCleanup(self.node.close)

    def gpu_plugin(self, profile="h100x8", **kw):
        return self.node.plugin(GPU_DRIVER, profile, **kw)

    def cd_plugin(self, profile="gb200x4", **kw):
        return self.node.plugin(CD_DRIVER, profile, **kw)

    def gpu_claim(self, name, devices, namespace="default", configs=None, reserved_for=None, uid=None):
        """Stores the claim (again, when uid names an existing one: e.g. its
        reservedFor changed) and returns (namespace, name, uid)."""
        results = [{"request": "gpu%d" % i if len(devices) > 1 else "gpu", "driver": GPU_DRIVER,
                    "pool": self.node.node_name, "device": d} for i, d in enumerate(devices)]
        c = make_claim(name, results, namespace, configs, uid=uid, reserved_for=reserved_for)
        self.node.api.load([c])
        return (namespace, name, c["metadata"]["uid"])

    def live_entries(self, plugin):
        data = plugin.ledger()
        claims = data.get("claims", data) if isinstance(data, dict) else data
        if isinstance(claims, dict):
            claims = list(claims.values())
        return [c for c in claims if c.get("state") != "Tombstone"]

    def assertOk(self, result, uid):
        self.assertIn(uid, result)
        self.assertEqual(result[uid]["error"], "", result[uid]["error"])
