#!/usr/bin/env python3
"""Checks the chart's renderings against facts of upstream's chart.

Usage: check_chart_values.py DEFAULTS.yaml UPSTREAM_VALUES.yaml RENDERED.yaml
                             PLUGINS_ONLY.yaml BETA.yaml

DEFAULTS.yaml is `helm template` of the chart with its defaults (and
gpuResourcesEnabledOverride); RENDERED.yaml the same with UPSTREAM_VALUES.yaml,
an operator's values file written for upstream's chart; PLUGINS_ONLY.yaml the
defaults with nvdra.pluginsOnly and --skip-crds; BETA.yaml the defaults with
resourceApiVersion resource.k8s.io/v1beta1.

For every key UPSTREAM_VALUES.yaml sets, the value must be where upstream's
chart (kubernetes-sigs/dra-driver-nvidia-gpu, deployments/helm/
dra-driver-nvidia-gpu at 95932046) puts it: which object, which field, which
environment variable. A key this table does not place fails the check, so a
new key in the file needs a new fact. The DeviceClasses must be upstream's
names and CEL selectors.
"""

import sys

import yaml

# Upstream's DeviceClasses: name -> CEL selector.
UPSTREAM_DEVICE_CLASSES = {
    "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    "vfio.gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'",
    "compute-domain-daemon.nvidia.com":
        "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'daemon'",
    "compute-domain-default-channel.nvidia.com":
        "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'channel'"
        " && device.attributes['compute-domain.nvidia.com'].id == 0",
}

# Object kinds and counts upstream's chart renders (with --include-crds):
# with its defaults plus gpuResourcesEnabledOverride=true, and with
# testdata/upstream-values.yaml.
UPSTREAM_COUNTS_DEFAULTS = {
    "ClusterRole": 3, "ClusterRoleBinding": 3, "CustomResourceDefinition": 2, "DaemonSet": 1, "Deployment": 1,
    "DeviceClass": 5, "Role": 2, "RoleBinding": 2, "ServiceAccount": 3, "ValidatingAdmissionPolicy": 1,
    "ValidatingAdmissionPolicyBinding": 1,
}
UPSTREAM_COUNTS_VALUES = {
    "ClusterRole": 3, "ClusterRoleBinding": 3, "CustomResourceDefinition": 2, "DaemonSet": 1, "Deployment": 2,
    "DeviceClass": 5, "NetworkPolicy": 2, "Role": 6, "RoleBinding": 6, "Service": 1, "ServiceAccount": 6,
    "ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1, "ValidatingWebhookConfiguration": 1,
}

# Keys upstream's chart renders into the compute-domains container that
# nvdra's compute-domain plugin does not read (none: it reads IMEX_MODE,
# IMEX_ISOLATION and IMEX_HOST_SOCKET_PATH as upstream's does).
NOT_IN_PLUGIN = set()

problems = []


def check(cond, what):
    if not cond:
        problems.append(what)


def is_hook(o):
    return "helm.sh/hook" in ((o.get("metadata") or {}).get("annotations") or {})


def load(path):
    """The release's objects: a hook (the uninstall hook's Job and its
    account) is made and deleted around `helm uninstall`, not installed."""
    return [d for d in yaml.safe_load_all(open(path)) if d and not is_hook(d)]


def hooks(path):
    return sorted((d["kind"], d["metadata"]["annotations"]["helm.sh/hook"])
                  for d in yaml.safe_load_all(open(path)) if d and is_hook(d))


def one(objs, kind, name_suffix):
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)]
    if len(found) != 1:
        raise SystemExit("expected one %s *%s, found %d" % (kind, name_suffix, len(found)))
    return found[0]


def env(container):
    out = {}
    for e in container.get("env", []):
        out[e["name"]] = e.get("value", e.get("valueFrom"))
    return out


def container(workload, name):
    spec = workload["spec"]["template"]["spec"]
    return next(c for c in spec.get("containers", []) + spec.get("initContainers", []) if c["name"] == name)


def flatten(values, prefix=""):
    """Leaf keys of a values tree; lists and empty maps are leaves."""
    out = {}
    for k, v in values.items():
        key = prefix + k
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def counts(objs):
    c = {}
    for o in objs:
        c[o["kind"]] = c.get(o["kind"], 0) + 1
    return c


def check_device_classes(objs, where, api):
    classes = {o["metadata"]["name"]: o for o in objs if o["kind"] == "DeviceClass"}
    check(sorted(classes) == sorted(UPSTREAM_DEVICE_CLASSES),
          "%s: DeviceClasses %s, upstream's are %s" % (where, sorted(classes), sorted(UPSTREAM_DEVICE_CLASSES)))
    for name, cel in UPSTREAM_DEVICE_CLASSES.items():
        if name not in classes:
            continue
        dc = classes[name]
        got = [s["cel"]["expression"] for s in dc["spec"]["selectors"]]
        check(got == [cel], "%s: DeviceClass %s selects %s, upstream's %s" % (where, name, got, [cel]))
        check(dc["apiVersion"] == api, "%s: DeviceClass %s is %s, expected %s" % (where, name, dc["apiVersion"], api))
        # Upstream sets extendedResourceName on gpu.nvidia.com, in v1 only.
        want = "nvidia.com/gpu" if name == "gpu.nvidia.com" and api == "resource.k8s.io/v1" else None
        check(dc["spec"].get("extendedResourceName") == want,
              "%s: DeviceClass %s extendedResourceName %r, expected %r"
              % (where, name, dc["spec"].get("extendedResourceName"), want))


def main():
    defaults, values_file, rendered, plugins_only, beta = sys.argv[1:6]
    values = yaml.safe_load(open(values_file))
    objs = load(rendered)
    dobjs = load(defaults)

    check(counts(dobjs) == UPSTREAM_COUNTS_DEFAULTS,
          "defaults: objects %s, upstream's chart renders %s" % (counts(dobjs), UPSTREAM_COUNTS_DEFAULTS))
    check(counts(objs) == UPSTREAM_COUNTS_VALUES,
          "upstream values: objects %s, upstream's chart renders %s" % (counts(objs), UPSTREAM_COUNTS_VALUES))
    # The one hook: the uninstall Job that removes nvdra's clique labels.
    want_hooks = sorted([("ClusterRole", "pre-delete"), ("ClusterRoleBinding", "pre-delete"),
                         ("Job", "pre-delete"), ("ServiceAccount", "pre-delete")])
    check(hooks(defaults) == want_hooks, "defaults: hooks %s, expected %s" % (hooks(defaults), want_hooks))
    check_device_classes(dobjs, "defaults", "resource.k8s.io/v1")
    check_device_classes(objs, "upstream values", values["resourceApiVersion"])
    check_device_classes(load(beta), "resourceApiVersion v1beta1", "resource.k8s.io/v1beta1")

    # Defaults: upstream's DaemonSet shape.
    dds = one(dobjs, "DaemonSet", "-kubelet-plugin")
    dspec = dds["spec"]["template"]["spec"]
    terms = dspec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    check([t["matchExpressions"][0]["key"] for t in terms] == [
        "feature.node.kubernetes.io/pci-10de.present", "feature.node.kubernetes.io/pci-0302_10de.present",
        "feature.node.kubernetes.io/pci-0300_10de.present", "feature.node.kubernetes.io/cpu-model.vendor_id",
        "nvidia.com/gpu.present"], "defaults: affinity terms are not upstream's five: %s" % terms)
    check(dds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
          "defaults: updateStrategy %s is not upstream's" % dds["spec"]["updateStrategy"])
    check(dspec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
          "defaults: tolerations %s" % dspec["tolerations"])
    check(dspec["priorityClassName"] == "system-node-critical", "defaults: priorityClassName")
    vols = {v["name"]: v["hostPath"] for v in dspec["volumes"]}
    check(vols["driver-root"] == {"path": "/", "type": "DirectoryOrCreate"}, "defaults: driver-root %s" % vols)
    check(vols["driver-root-parent"] == {"path": "/", "type": "DirectoryOrCreate"}, "defaults: driver-root-parent")
    init = container(dds, "init-container")
    check({m["name"] for m in init["volumeMounts"]} == {"driver-root-parent"}, "defaults: init container mounts")
    for c, port, ep in (("gpus", "51516", ":8080"), ("compute-domains", "51515", ":8081")):
        e = env(container(dds, c))
        check(e.get("HEALTHCHECK_PORT") == port and e.get("HTTP_ENDPOINT") == ep and e.get("LOG_VERBOSITY") == "4",
              "defaults: %s env %s" % (c, e))
        check("FEATURE_GATES" not in e and "CONSUMABLE_SHARES" not in e, "defaults: %s sets gates" % c)
        # nvidiaCDIHookPath empty: no host hook; the plugins copy the image's.
        check("NVIDIA_CDI_HOOK_PATH" not in e, "defaults: %s hook %s" % (c, e.get("NVIDIA_CDI_HOOK_PATH")))
    check("nvidia-cdi-hook" not in vols, "defaults: a hook is mounted from the host: %s" % vols.get("nvidia-cdi-hook"))
    dctl = one(dobjs, "Deployment", "-controller")
    check(container(dctl, "compute-domain")["image"] ==
          "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1", "defaults: controller image")

    # Plugins only: nothing another release shares.
    pobjs = load(plugins_only)
    shared = [(o["kind"], o["metadata"]["name"]) for o in pobjs if o["kind"] in (
        "DeviceClass", "CustomResourceDefinition", "Deployment", "ValidatingWebhookConfiguration")
        or o["metadata"]["name"].startswith("compute-domain-daemon")]
    check(not shared, "plugins only: renders shared objects %s" % shared)
    check(sorted(counts(pobjs)) == ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "Role", "RoleBinding",
                                    "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"],
          "plugins only: kinds %s" % sorted(counts(pobjs)))

    # The upstream operator's values, key by key.
    ds = one(objs, "DaemonSet", "-kubelet-plugin")
    spec = ds["spec"]["template"]["spec"]
    gpus, cds, init = container(ds, "gpus"), container(ds, "compute-domains"), container(ds, "init-container")
    ge, ce = env(gpus), env(cds)
    ctl = one(objs, "Deployment", "-controller")
    ctlspec = ctl["spec"]["template"]["spec"]
    ctlc = container(ctl, "compute-domain")
    cte = env(ctlc)
    wh = one(objs, "Deployment", "-webhook")
    whspec = wh["spec"]["template"]["spec"]
    whc = container(wh, "webhook")
    vwc = one(objs, "ValidatingWebhookConfiguration", "-webhook-config")
    svc = one(objs, "Service", "-webhook")
    vols = {v["name"]: v["hostPath"] for v in spec["volumes"]}
    mounts = lambda c: {m["name"]: m for m in c["volumeMounts"]}
    kp = values["kubeletPlugin"]
    gates = ",".join("%s=%s" % (k, str(v).lower()) for k, v in sorted(values["featureGates"].items())) + ","
    # The controller (image.tag v25.12.0) gets the gates its release parses:
    # not ConsumableShares, which is newer (check_controller_gates.py checks
    # the table).
    ctl_gates = ",".join("%s=%s" % (k, str(v).lower()) for k, v in sorted(values["featureGates"].items())
                         if k != "ConsumableShares") + ","
    sa_base = values["serviceAccount"]["name"]
    accounts = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ServiceAccount"}
    image = "%s:%s" % (values["image"]["repository"], values["image"]["tag"])
    namespaces = ["gpu-operator", "team-a", "team-b"]

    facts = {
        "nvidiaDriverRoot": lambda v: ge["NVIDIA_DRIVER_ROOT"] == ce["NVIDIA_DRIVER_ROOT"] == env(init)[
            "NVIDIA_DRIVER_ROOT"] == v and vols["driver-root"] == {"path": v, "type": "DirectoryOrCreate"}
            and vols["driver-root-parent"] == {"path": v.rstrip("/").rsplit("/", 1)[0], "type": "DirectoryOrCreate"}
            and mounts(init)["driver-root-parent"].get("mountPropagation") == "HostToContainer",
        "nvidiaCDIHookPath": lambda v: ge["NVIDIA_CDI_HOOK_PATH"] == ce["NVIDIA_CDI_HOOK_PATH"] == v
            and vols["nvidia-cdi-hook"] == {"path": v, "type": "File"},
        "altProcDevices": lambda v: ce["ALT_PROC_DEVICES_PATH"] == "/alt-proc-devices"
            and vols["alt-proc-devices"] == {"path": v, "type": "File"}
            and mounts(cds)["alt-proc-devices"]["mountPath"] == "/alt-proc-devices"
            and "ALT_PROC_DEVICES_PATH" not in ge,
        "maskNvidiaDriverParams": lambda v: ge["MASK_NVIDIA_DRIVER_PARAMS"] == ce["MASK_NVIDIA_DRIVER_PARAMS"]
            == str(v).lower(),
        "gpuResourcesEnabledOverride": lambda v: v is True and any(c["name"] == "gpus" for c in spec["containers"]),
        "consumableShares": lambda v: ge["CONSUMABLE_SHARES"] == v and "CONSUMABLE_SHARES" not in ce,
        "resourceApiVersion": lambda v: all(o["apiVersion"] == v for o in objs if o["kind"] == "DeviceClass"),
        "imagePullSecrets": lambda v: spec["imagePullSecrets"] == ctlspec["imagePullSecrets"] ==
            whspec["imagePullSecrets"] == v and ge["IMAGE_PULL_SECRETS"] == "regcred,mirror-cred"
            and cte["CD_DAEMON_IMAGE_PULL_SECRET_NAMES"] == "regcred,mirror-cred",
        # image.* is upstream's image: the controller and the IMEX daemons it
        # starts run it; nvdra's plugins and webhook run nvdra.image.
        "image.repository": lambda v: ctlc["image"] == cte["IMAGE_NAME"] == image
            and whc["image"] == gpus["image"] != image,
        "image.tag": lambda v: ctlc["image"].endswith(":" + v),
        "image.pullPolicy": lambda v: ctlc["imagePullPolicy"] == whc["imagePullPolicy"] == gpus["imagePullPolicy"]
            == cds["imagePullPolicy"] == init["imagePullPolicy"] == ge["IMAGE_PULL_POLICY"] == v,
        "serviceAccount.create": lambda v: sa_base + "-kubeletplugin" in accounts and sa_base + "-controller" in accounts,
        "serviceAccount.annotations": lambda v: accounts[sa_base + "-kubeletplugin"]["metadata"]["annotations"] == v
            and accounts[sa_base + "-controller"]["metadata"]["annotations"] == v,
        "serviceAccount.name": lambda v: spec["serviceAccountName"] == v + "-kubeletplugin"
            and ctlspec["serviceAccountName"] == v + "-controller",
        "resources.gpus.enabled": lambda v: any(c["name"] == "gpus" for c in spec["containers"]),
        "resources.computeDomains.enabled": lambda v: any(c["name"] == "compute-domains" for c in spec["containers"]),
        "resources.computeDomains.imex.mode": lambda v: cte["IMEX_MODE"] == ce["IMEX_MODE"] == v,
        "resources.computeDomains.imex.isolation": lambda v: cte["IMEX_ISOLATION"] == ce["IMEX_ISOLATION"] == v,
        "resources.computeDomains.imex.hostSocketPath": lambda v: ce["IMEX_HOST_SOCKET_PATH"] == v,
        "featureGates.TimeSlicingSettings": lambda v: ge["FEATURE_GATES"] == ce["FEATURE_GATES"] ==
            env(whc)["FEATURE_GATES"] == gates and cte["FEATURE_GATES"] == ctl_gates,
        "featureGates.MPSSupport": lambda v: "MPSSupport=true," in ge["FEATURE_GATES"]
            and "MPSSupport=true," in cte["FEATURE_GATES"],
        "featureGates.ConsumableShares": lambda v: "ConsumableShares=true," in ge["FEATURE_GATES"]
            and "ConsumableShares" not in cte["FEATURE_GATES"],
        "logVerbosity": lambda v: ge["LOG_VERBOSITY"] == ce["LOG_VERBOSITY"] == cte["LOG_VERBOSITY"] ==
            cte["LOG_VERBOSITY_CD_DAEMON"] == v and gpus["args"][:2] == ["-v", "$(LOG_VERBOSITY)"],
        "webhook.enabled": lambda v: whc["command"] == ["nvdra-webhook"]
            and whc["args"][:2] == ["--tls-cert-file=/cert/tls.crt", "--tls-private-key-file=/cert/tls.key"]
            and "-v=%s" % values["logVerbosity"] in whc["args"],
        "webhook.replicas": lambda v: wh["spec"]["replicas"] == v,
        "webhook.servicePort": lambda v: svc["spec"]["ports"][0]["port"] == v
            and vwc["webhooks"][0]["clientConfig"]["service"]["port"] == v,
        "webhook.containerPort": lambda v: whc["ports"][0]["containerPort"] == v and "--port=%d" % v in whc["args"],
        "webhook.priorityClassName": lambda v: whspec["priorityClassName"] == v,
        "webhook.podAnnotations": lambda v: wh["spec"]["template"]["metadata"]["annotations"] == v,
        "webhook.nodeSelector": lambda v: whspec["nodeSelector"] == v,
        "webhook.failurePolicy": lambda v: vwc["webhooks"][0]["failurePolicy"] == v,
        "webhook.tls.mode": lambda v: not [o for o in objs if o["apiVersion"].startswith("cert-manager.io/")],
        "webhook.tls.secret.name": lambda v: whspec["volumes"][0]["secret"]["secretName"] == v,
        "webhook.tls.secret.caBundle": lambda v: vwc["webhooks"][0]["clientConfig"]["caBundle"] == v,
        "controller.replicas": lambda v: ctl["spec"]["replicas"] == v,
        "controller.leaderElection.enabled": lambda v: cte["LEADER_ELECTION_ENABLED"] == str(v).lower(),
        "controller.leaderElection.leaseDuration": lambda v: cte["LEADER_ELECTION_LEASE_DURATION"] == v,
        "controller.leaderElection.renewDeadline": lambda v: cte["LEADER_ELECTION_RENEW_DEADLINE"] == v,
        "controller.leaderElection.retryPeriod": lambda v: cte["LEADER_ELECTION_RETRY_PERIOD"] == v,
        "controller.metrics.enabled": lambda v: "HTTP_ENDPOINT" in cte,
        "controller.metrics.httpEndpoint": lambda v: cte["HTTP_ENDPOINT"] == v,
        "controller.metrics.metricsPath": lambda v: cte["METRICS_PATH"] == v,
        "controller.priorityClassName": lambda v: ctlspec["priorityClassName"] == v,
        "controller.podAnnotations": lambda v: ctl["spec"]["template"]["metadata"]["annotations"] == v,
        "controller.nodeSelector": lambda v: ctlspec["nodeSelector"] == v,
        "controller.containers.computeDomain.env": lambda v: all(cte.get(e["name"]) == e["value"] for e in v)
            and sorted(o["metadata"]["namespace"] for o in objs if o["kind"] == "Role"
                       and o["metadata"]["name"].endswith("-role-controller")) == namespaces
            and sorted(o["metadata"]["namespace"] for o in objs if o["kind"] == "Role"
                       and o["metadata"]["name"].endswith("-role-kubeletplugin")) == namespaces
            and sorted(o["metadata"]["namespace"] for o in objs if o["kind"] == "ServiceAccount"
                       and o["metadata"]["name"] == "compute-domain-daemon-service-account") == namespaces,
        "controller.containers.computeDomain.resources": lambda v: ctlc["resources"] == v,
        "controller.networkPolicy.enabled": lambda v: one(objs, "NetworkPolicy", "-controller")["spec"][
            "podSelector"] == ctl["spec"]["selector"],
        "kubeletPlugin.metrics.enabled": lambda v: "HTTP_ENDPOINT" in ge and "HTTP_ENDPOINT" in ce,
        "kubeletPlugin.metrics.gpuHttpEndpoint": lambda v: ge["HTTP_ENDPOINT"] == v,
        "kubeletPlugin.metrics.computeDomainHttpEndpoint": lambda v: ce["HTTP_ENDPOINT"] == v,
        "kubeletPlugin.metrics.metricsPath": lambda v: ge["METRICS_PATH"] == ce["METRICS_PATH"] == v,
        "kubeletPlugin.priorityClassName": lambda v: spec["priorityClassName"] == v,
        "kubeletPlugin.updateStrategy.type": lambda v: ds["spec"]["updateStrategy"]["type"] == v,
        "kubeletPlugin.updateStrategy.rollingUpdate.maxUnavailable": lambda v:
            ds["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": v},
        "kubeletPlugin.podAnnotations": lambda v: ds["spec"]["template"]["metadata"]["annotations"] == v,
        "kubeletPlugin.podSecurityContext": lambda v: spec["securityContext"] == v,
        "kubeletPlugin.nodeSelector": lambda v: spec["nodeSelector"] == v,
        "kubeletPlugin.tolerations": lambda v: spec["tolerations"] == v,
        "kubeletPlugin.kubeletRegistrarDirectoryPath": lambda v: ge["KUBELET_REGISTRAR_DIRECTORY_PATH"] ==
            ce["KUBELET_REGISTRAR_DIRECTORY_PATH"] == vols["plugins-registry"]["path"] ==
            mounts(gpus)["plugins-registry"]["mountPath"] == mounts(cds)["plugins-registry"]["mountPath"] == v,
        "kubeletPlugin.kubeletPluginsDirectoryPath": lambda v: ge["KUBELET_PLUGINS_DIRECTORY_PATH"] ==
            ce["KUBELET_PLUGINS_DIRECTORY_PATH"] == vols["plugins"]["path"] ==
            mounts(gpus)["plugins"]["mountPath"] == mounts(cds)["plugins"]["mountPath"] == v,
        "kubeletPlugin.containers.init.resources": lambda v: init["resources"] == v,
        "kubeletPlugin.containers.gpus.env": lambda v: gpus["env"][-len(v):] == v,
        "kubeletPlugin.containers.gpus.resources": lambda v: gpus["resources"] == v,
        "kubeletPlugin.containers.gpus.healthcheckPort": lambda v: ge["HEALTHCHECK_PORT"] == str(v)
            and gpus["livenessProbe"]["grpc"]["port"] == gpus["startupProbe"]["grpc"]["port"] == v
            and gpus["livenessProbe"]["periodSeconds"] == 30,
        "kubeletPlugin.containers.computeDomains.env": lambda v: cds["env"][-len(v):] == v,
        "kubeletPlugin.containers.computeDomains.resources": lambda v: cds["resources"] == v,
        "kubeletPlugin.containers.computeDomains.healthcheckPort": lambda v: ce["HEALTHCHECK_PORT"] == str(v)
            and cds["livenessProbe"]["grpc"]["port"] == cds["startupProbe"]["grpc"]["port"] == v
            and cds["livenessProbe"]["periodSeconds"] == 10,
        "kubeletPlugin.containers.computeDomains.gpuCliqueLabelEnabled": lambda v:
            ce["GPU_CLIQUE_LABEL_ENABLED"] == str(v).lower(),
        "kubeletPlugin.affinity": lambda v: spec["affinity"] == v,
        "kubeletPlugin.networkPolicy.enabled": lambda v: one(objs, "NetworkPolicy", "-kubelet-plugin")["spec"][
            "podSelector"] == ds["spec"]["selector"],
    }
    # Maps set as a whole (a leaf of flatten() below them is checked by the
    # map's fact).
    whole = ("kubeletPlugin.affinity", "serviceAccount.annotations", "kubeletPlugin.podAnnotations",
             "kubeletPlugin.podSecurityContext", "kubeletPlugin.nodeSelector", "webhook.podAnnotations",
             "webhook.nodeSelector", "controller.podAnnotations", "controller.nodeSelector",
             "controller.containers.computeDomain.resources", "kubeletPlugin.containers.init.resources",
             "kubeletPlugin.containers.gpus.resources", "kubeletPlugin.containers.computeDomains.resources")
    keys = set()
    for key in flatten(values):
        keys.add(next((w for w in whole if key.startswith(w + ".")), key))
    for key in sorted(keys):
        v = values
        for part in key.split("."):
            v = v[part]
        fact = facts.get(key)
        if fact is None:
            problems.append("%s: the values file sets it, but no fact says where upstream's chart puts it" % key)
            continue
        try:
            ok = fact(v)
        except (KeyError, IndexError, TypeError, StopIteration) as e:
            ok = False
            key = "%s (%s: %s)" % (key, type(e).__name__, e)
        check(ok, "%s=%r is not where upstream's chart puts it" % (key, v))
    check(NOT_IN_PLUGIN <= keys, "the values file no longer sets %s" % sorted(NOT_IN_PLUGIN - keys))

    for p in problems:
        print("FAIL " + p)
    print("%d value(s) of %s checked, %d problem(s)" % (len(keys), values_file.rsplit("/", 1)[-1], len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
