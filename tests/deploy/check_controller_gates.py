#!/usr/bin/env python3
"""Checks which feature gates the chart hands upstream's ComputeDomain controller.

Usage: check_controller_gates.py HELM CHART WORKDIR

Upstream's controller, and the IMEX daemons it starts with its own gates,
exit on a gate name their release does not parse, even one set to false. The
chart must hand them only the gates of their release, while nvdra's plugins
get every gate. This renders the chart for each release with each gate on
and off, with every gate on and off at once, and with an explicit gate list
for an image no release table row names, and checks the controller's
FEATURE_GATES against the release table below (written from upstream's
sources, independently of the chart's files/upstream-feature-gates.yaml).
A gate the controller must act on (HostManagedIMEXDaemon, and
imex.mode=hostManaged) turned on with a release that lacks it must fail the
render with a message naming the gate and the release.
"""

import concurrent.futures
import os
import subprocess
import sys
import threading

import yaml

V25_12 = ["TimeSlicingSettings", "MPSSupport", "IMEXDaemonsWithDNSNames", "PassthroughSupport",
          "NVMLDeviceHealthCheck", "DynamicMIG", "ComputeDomainCliques", "CrashOnNVLinkFabricErrors"]
V0_4 = V25_12 + ["DeviceMetadata"]
# Upstream's main only: no release parses these.
NEWER = ["FabricManagerPartitioning", "HostManagedIMEXDaemon", "DRAListTypeAttributes", "ConsumableShares"]
# component-base's logging gates, which every upstream binary registers.
LOGGING = ["ContextualLogging", "LoggingAlphaOptions", "LoggingBetaOptions"]
RELEASES = {"v25.12.0": V25_12, "v0.4.0": V0_4, "v0.4.1": V0_4}
ALL = V0_4 + NEWER + LOGGING
DEFAULT_RELEASE = "v0.4.1"
IMAGE = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu"

problems = []
renders = 0
lock = threading.Lock()


def check(cond, what):
    if not cond:
        problems.append(what)


class Refused(Exception):
    pass


def render(helm, chart, *args):
    global renders
    with lock:
        renders += 1
    cmd = [helm, "template", "nvdra", chart, "--namespace", "nvdra", "--set", "gpuResourcesEnabledOverride=true",
           "--set", "nvdra.image.repository=registry.example.com/nvdra"] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise Refused(p.stderr)
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def gates_of(container):
    for e in container.get("env", []):
        if e["name"] == "FEATURE_GATES":
            return e["value"]
    return None


def parse(value):
    """FEATURE_GATES "A=true,B=false," as a dict; None (no variable) as {}."""
    if value is None:
        return {}
    check(value.endswith(","), "FEATURE_GATES %r does not end with a comma as upstream's chart writes it" % value)
    return dict(kv.split("=") for kv in value.rstrip(",").split(","))


def components(objs):
    out = {}
    for o in objs:
        if o["kind"] not in ("Deployment", "DaemonSet"):
            continue
        for c in o["spec"]["template"]["spec"]["containers"]:
            out["%s/%s" % (o["metadata"]["name"], c["name"])] = c
    return out


def set_args(gates):
    args = []
    for g, v in gates.items():
        args += ["--set", "featureGates.%s=%s" % (g, str(v).lower())]
    return args


def check_render_now(helm, chart, where, gates, known, extra=()):
    objs = render(helm, chart, *(set_args(gates) + list(extra)))
    comps = components(objs)
    want_all = {g: str(v).lower() for g, v in gates.items()}
    want_ctl = {g: v for g, v in want_all.items() if g in known}
    ctl = comps["nvdra-controller/compute-domain"]
    got = parse(gates_of(ctl))
    check(got == want_ctl, "%s: controller FEATURE_GATES %s, expected %s" % (where, got, want_ctl))
    if not want_ctl:
        check(gates_of(ctl) is None, "%s: controller has an empty FEATURE_GATES" % where)
    for name in ("nvdra-kubelet-plugin/gpus", "nvdra-kubelet-plugin/compute-domains"):
        got = parse(gates_of(comps[name]))
        check(got == want_all, "%s: %s FEATURE_GATES %s, expected every gate %s" % (where, name, got, want_all))
    return ctl


def expect_refusal_now(helm, chart, where, words, *args):
    try:
        render(helm, chart, *args)
    except Refused as e:
        msg = " ".join(e.args[0].split())
        missing = [w for w in words if w not in msg]
        check(not missing, "%s: refused, but the message lacks %s: %s" % (where, missing, msg))
        return
    problems.append("%s: rendered, expected a refusal naming %s" % (where, words))


def main():
    helm, chart = sys.argv[1:3]
    # The renders are independent: run them side by side.
    tasks = []
    check_render = lambda *a: tasks.append((check_render_now, a))  # noqa: E731
    expect_refusal = lambda *a: tasks.append((expect_refusal_now, a))  # noqa: E731

    # The default release and its image.
    ctl = check_render_now(helm, chart, "defaults", {}, RELEASES[DEFAULT_RELEASE] + LOGGING)
    check(ctl["image"] == "%s:%s" % (IMAGE, DEFAULT_RELEASE), "defaults: controller image %s" % ctl["image"])
    env = {e["name"]: e.get("value") for e in ctl["env"]}
    check(env.get("IMAGE_NAME") == ctl["image"], "defaults: IMAGE_NAME %s differs from the image" % env.get("IMAGE_NAME"))

    for release, gates in sorted(RELEASES.items()):
        known = set(gates + LOGGING)
        pick = ["--set", "image.tag=" + release]
        for gate in ALL:
            for value in (True, False):
                where = "%s, %s=%s" % (release, gate, value)
                if gate == "HostManagedIMEXDaemon" and value:
                    expect_refusal(helm, chart, where, ["HostManagedIMEXDaemon", release, "nvdra.controllerFeatureGates"],
                                   *(set_args({gate: True}) + pick))
                    continue
                check_render(helm, chart, where, {gate: value}, known, pick)
        # Every gate at once, off; then on, but for the one that needs the
        # controller.
        check_render(helm, chart, release + ", every gate off", {g: False for g in ALL}, known, pick)
        check_render(helm, chart, release + ", every gate on but HostManagedIMEXDaemon",
                     {g: g != "HostManagedIMEXDaemon" for g in ALL}, known, pick)
        expect_refusal(helm, chart, release + ", every gate on", ["HostManagedIMEXDaemon", release],
                       *(set_args({g: True for g in ALL}) + pick))
        expect_refusal(helm, chart, release + ", imex.mode=hostManaged",
                       ["imex.mode=hostManaged", "HostManagedIMEXDaemon", release],
                       *(set_args({"HostManagedIMEXDaemon": True}) + pick +
                         ["--set", "resources.computeDomains.imex.mode=hostManaged"]))
        # nvdra.upstreamVersion picks the release as image.tag does.
        check_render(helm, chart, release + " by nvdra.upstreamVersion", {"DeviceMetadata": True, "MPSSupport": True},
                     known, ["--set", "nvdra.upstreamVersion=" + release])

    # A controller image no row names: refused while any gate is set, since its
    # binaries may exit on any of them; with the gates it knows listed, those
    # pass, and HostManagedIMEXDaemon with imex.mode=hostManaged renders.
    custom = ["--set", "image.repository=registry.example.com/dra-driver-nvidia-gpu", "--set", "image.tag=main-2026-08"]
    check_render(helm, chart, "unlisted image, no gates", {}, set(), custom)
    expect_refusal(helm, chart, "unlisted image with a gate", ["main-2026-08", "nvdra.controllerFeatureGates"],
                   *(set_args({"MPSSupport": True}) + custom))
    main_gates = V0_4 + NEWER + LOGGING
    listed = custom + ["--set", "nvdra.controllerFeatureGates={%s}" % ",".join(main_gates)]
    check_render(helm, chart, "unlisted image, gates listed", {g: True for g in ALL}, set(main_gates), listed)
    check_render(helm, chart, "unlisted image, hostManaged", {"HostManagedIMEXDaemon": True, "MPSSupport": False},
                 set(main_gates), listed + ["--set", "resources.computeDomains.imex.mode=hostManaged"])
    # A list overrides the table, also for a listed release's tag.
    check_render(helm, chart, "v0.4.1 with an explicit list", {"MPSSupport": True, "DeviceMetadata": True},
                 {"MPSSupport"}, ["--set", "nvdra.controllerFeatureGates={MPSSupport}"])
    expect_refusal(helm, chart, "explicit list without HostManagedIMEXDaemon", ["HostManagedIMEXDaemon",
                   "nvdra.controllerFeatureGates"], "--set", "nvdra.controllerFeatureGates={MPSSupport}",
                   "--set", "featureGates.HostManagedIMEXDaemon=true")
    # No controller in this release (beside an upstream release): nothing to
    # check against, the plugins get the gate.
    objs = render(helm, chart, "--set", "nvdra.pluginsOnly=true", "--set", "featureGates.HostManagedIMEXDaemon=true")
    comps = components(objs)
    check(not [n for n in comps if n.startswith("nvdra-controller")], "plugins only: a controller rendered")
    check(parse(gates_of(comps["nvdra-kubelet-plugin/compute-domains"])) == {"HostManagedIMEXDaemon": "true"},
          "plugins only: the compute-domains container lacks HostManagedIMEXDaemon")

    # helm's run is short and mostly waiting to start: more renders than
    # cores at a time.
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for f in [pool.submit(fn, *a) for fn, a in tasks]:
            f.result()

    for p in problems:
        print("FAIL " + p)
    print("%d renders for %d releases and %d gates, %d problem(s)" % (renders, len(RELEASES), len(ALL), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
