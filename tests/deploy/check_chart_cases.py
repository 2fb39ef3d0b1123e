#!/usr/bin/env python3
"""Renders the chart for the settings an operator meets first and checks what comes out.

Usage: check_chart_cases.py HELM SOURCE_DIR

Each case renders deploy/helm/nvdra with `helm template` and asserts on the
objects (or on the refusal), printing one "ok"/"FAIL" line per case:

* the CDI hook: by default no host hook (no hostPath under /usr/bin, no
  NVIDIA_CDI_HOOK_PATH); nvidiaCDIHookPath set mounts that host file and
  passes it, as upstream's chart;
* GPU operator nodes (testdata/gpu-operator-values.yaml): the driver root and
  its parent mounted as the operator lays them out, the init container
  waiting for the driver there, no hostPath under /usr/bin;
* nvdra's image: rendering without nvdra.image.repository fails saying how to
  build and push it; the default tag is the version scripts/build-image
  builds; README's "Deploying on a cluster" commands render as written;
* the ComputeDomain CRDs: numNodes optional, as upstream's since v0.4.0;
* the clique namespace follows the migration phase;
* the migration kit's Job follows the release's namespace, image and pull
  secrets;
* maskNvidiaDriverParams reaches both plugins as MASK_NVIDIA_DRIVER_PARAMS
  ("false" by default, as nvdra's plugins read it);
* webhook.scope: --scope=nvdra by default, upstream when asked, anything
  else refused.
"""

import os
import re
import shlex
import subprocess
import sys

import yaml

IMG = ["--set", "nvdra.image.repository=registry.example.com/nvdra"]
failed = False


def result(ok, name, detail=""):
    global failed
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail else ""))
    failed |= not ok


class Refused(Exception):
    pass


def template(helm, chart, *args, namespace="nvdra", release="nvdra"):
    p = subprocess.run([helm, "template", release, chart, "--namespace", namespace] + list(args),
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise Refused(" ".join(p.stderr.split()))
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def plugin_ds(objs):
    return next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"].endswith("-kubelet-plugin"))


def containers(ds):
    spec = ds["spec"]["template"]["spec"]
    return {c["name"]: c for c in spec.get("initContainers", []) + spec["containers"]}


def env(c):
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def host_paths(objs):
    out = []
    for o in objs:
        spec = o.get("spec", {}).get("template", {}).get("spec", {})
        for v in spec.get("volumes", []):
            if "hostPath" in v:
                out.append((o["metadata"]["name"], v["name"], v["hostPath"]["path"], v["hostPath"].get("type")))
    return out


def case(name):
    def wrap(fn):
        def run(*a):
            try:
                problems = fn(*a)
            except (Refused, KeyError, StopIteration, AssertionError) as e:
                problems = ["%s: %s" % (type(e).__name__, e)]
            result(not problems, name, "; ".join(problems) if problems else "")
        run.__name__ = fn.__name__
        return run
    return wrap


@case("CDI hook: none from the host by default; nvidiaCDIHookPath mounts and passes the host's")
def hook(helm, chart, src):
    bad = []
    base = ["--set", "gpuResourcesEnabledOverride=true"] + IMG
    objs = template(helm, chart, *base)
    ds = plugin_ds(objs)
    under_bin = [h for h in host_paths(objs) if h[2].startswith("/usr/bin")]
    if under_bin:
        bad.append("defaults mount %s" % under_bin)
    for name, c in containers(ds).items():
        if "NVIDIA_CDI_HOOK_PATH" in env(c):
            bad.append("defaults: %s gets NVIDIA_CDI_HOOK_PATH" % name)
        if any("--nvidia-cdi-hook-path" in a for a in c.get("args", []) + c.get("command", [])):
            bad.append("defaults: %s gets --nvidia-cdi-hook-path" % name)
        if any(m["name"] == "nvidia-cdi-hook" for m in c.get("volumeMounts", [])):
            bad.append("defaults: %s mounts a hook" % name)
    hook_path = "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    objs = template(helm, chart, *(base + ["--set", "nvidiaCDIHookPath=" + hook_path]))
    ds = plugin_ds(objs)
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    if vols.get("nvidia-cdi-hook", {}).get("hostPath") != {"path": hook_path, "type": "File"}:
        bad.append("set: the hook volume is %s" % vols.get("nvidia-cdi-hook"))
    for name in ("gpus", "compute-domains"):
        c = containers(ds)[name]
        if env(c).get("NVIDIA_CDI_HOOK_PATH") != hook_path:
            bad.append("set: %s NVIDIA_CDI_HOOK_PATH %s" % (name, env(c).get("NVIDIA_CDI_HOOK_PATH")))
        if not any(m["name"] == "nvidia-cdi-hook" and m.get("readOnly") for m in c["volumeMounts"]):
            bad.append("set: %s does not mount the hook read-only" % name)
    return bad


@case("GPU operator values: driver root mounts, the init container waits there, no hostPath under /usr/bin")
def gpu_operator(helm, chart, src):
    bad = []
    values = os.path.join(src, "tests", "deploy", "testdata", "gpu-operator-values.yaml")
    v = yaml.safe_load(open(values))
    if v.get("nvidiaDriverRoot") != "/run/nvidia/driver" or v.get("nvidiaCDIHookPath", "") != "":
        bad.append("the values file is not the GPU operator's layout: %s" % v)
    objs = template(helm, chart, "--values", values, namespace="gpu-operator")
    ds = plugin_ds(objs)
    spec = ds["spec"]["template"]["spec"]
    vols = {x["name"]: x.get("hostPath") for x in spec["volumes"]}
    if vols.get("driver-root") != {"path": "/run/nvidia/driver", "type": "DirectoryOrCreate"}:
        bad.append("driver-root %s" % vols.get("driver-root"))
    if vols.get("driver-root-parent") != {"path": "/run/nvidia", "type": "DirectoryOrCreate"}:
        bad.append("driver-root-parent %s" % vols.get("driver-root-parent"))
    under_bin = [h for h in host_paths(objs) if h[2].startswith("/usr/bin")]
    if under_bin:
        bad.append("hostPaths under /usr/bin: %s" % under_bin)
    cs = containers(ds)
    init = cs["init-container"]
    script = " ".join(init.get("command", []) + init.get("args", []))
    if env(init).get("NVIDIA_DRIVER_ROOT") != "/run/nvidia/driver":
        bad.append("the init container's NVIDIA_DRIVER_ROOT is %s" % env(init).get("NVIDIA_DRIVER_ROOT"))
    for want in ("nvidia-smi", "libnvidia-ml.so.1", "/driver-root-parent"):
        if want not in script:
            bad.append("the init container's script does not look for %s" % want)
    mounts = {m["name"]: m for m in init["volumeMounts"]}
    if mounts.get("driver-root-parent", {}).get("mountPropagation") != "HostToContainer":
        bad.append("the init container sees the driver container's later mount only with HostToContainer: %s"
                   % mounts.get("driver-root-parent"))
    if spec["initContainers"][0]["name"] != "init-container":
        bad.append("the driver wait is not the first init container")
    for name in ("gpus", "compute-domains"):
        e = env(cs[name])
        m = {x["name"]: x for x in cs[name]["volumeMounts"]}
        if e.get("NVIDIA_DRIVER_ROOT") != "/run/nvidia/driver" or "NVIDIA_CDI_HOOK_PATH" in e:
            bad.append("%s env %s" % (name, {k: e.get(k) for k in ("NVIDIA_DRIVER_ROOT", "NVIDIA_CDI_HOOK_PATH")}))
        if m.get("driver-root", {}).get("mountPath") != "/driver-root" or \
                m["driver-root"].get("mountPropagation") != "HostToContainer":
            bad.append("%s driver-root mount %s" % (name, m.get("driver-root")))
    return bad


@case("nvdra's image: no repository refuses with how to build and push it; the default tag is the built version")
def image(helm, chart, src):
    bad = []
    try:
        template(helm, chart, "--set", "gpuResourcesEnabledOverride=true")
        bad.append("rendered without nvdra.image.repository")
    except Refused as e:
        msg = e.args[0]
        for want in ("nvdra.image.repository is not set", "scripts/build-image --tag <registry>/nvdra:",
                     "podman push <registry>/nvdra:", "--set nvdra.image.repository=<registry>/nvdra"):
            if want not in msg:
                bad.append("the refusal lacks %r: %s" % (want, msg))
    chart_yaml = yaml.safe_load(open(os.path.join(chart, "Chart.yaml")))
    cmake = open(os.path.join(src, "CMakeLists.txt")).read()
    version = re.search(r"^project\(nvdra VERSION (\S+)", cmake, re.M).group(1)
    if str(chart_yaml["appVersion"]) != version:
        bad.append("appVersion %s, but scripts/build-image tags the image %s" % (chart_yaml["appVersion"], version))
    objs = template(helm, chart, "--set", "gpuResourcesEnabledOverride=true", *IMG)
    images = {c["image"] for c in containers(plugin_ds(objs)).values()}
    if images != {"registry.example.com/nvdra:" + version}:
        bad.append("the plugin pod runs %s" % images)
    return bad


@case("README's 'Deploying on a cluster' renders as written")
def readme(helm, chart, src):
    bad = []
    text = open(os.path.join(src, "README.md")).read()
    section = text.split("## Deploying on a cluster", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = block.replace("\\\n", " ").splitlines()
    build = [ln for ln in lines if ln.startswith("scripts/build-image")]
    install = [ln for ln in lines if ln.startswith("helm install")]
    if len(build) != 1 or len(install) != 1:
        return ["expected one scripts/build-image and one helm install line in %r" % block]
    words = shlex.split(build[0].split("#")[0])
    tag = words[words.index("--tag") + 1]
    if "podman push " + tag not in build[0]:
        bad.append("the build step does not push %s: %s" % (tag, build[0]))
    words = shlex.split(install[0].split("#")[0])
    assert words[:4] == ["helm", "install", "nvdra", "deploy/helm/nvdra"], words
    args = words[4:]
    args = [os.path.join(src, "tests/deploy/testdata/upstream-values.yaml") if a == "upstream-values.yaml" else a
            for a in args]
    ns = args[args.index("--namespace") + 1]
    args = args[:args.index("--namespace")] + args[args.index("--namespace") + 2:]
    objs = template(helm, chart, *args, namespace=ns)
    images = {c["image"] for c in containers(plugin_ds(objs)).values()}
    if images != {tag}:
        bad.append("the README builds %s, the install runs %s" % (tag, images))
    return bad


@case("ComputeDomain CRD: numNodes optional (v0.4.x), in the chart and deploy/base alike")
def crds(helm, chart, src):
    bad = []
    name = "resource.nvidia.com_computedomains.yaml"
    crd = yaml.safe_load(open(os.path.join(chart, "crds", name)))
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    if "numNodes" not in spec["properties"] or "numNodes" in spec.get("required", []):
        bad.append("spec.required %s" % spec.get("required"))
    if spec["properties"]["numNodes"].get("default") != 0:
        bad.append("numNodes default %s" % spec["properties"]["numNodes"].get("default"))
    for n in os.listdir(os.path.join(chart, "crds")):
        if open(os.path.join(chart, "crds", n)).read() != open(os.path.join(src, "deploy", "base", "crds", n)).read():
            bad.append("deploy/base/crds/%s differs from the chart's" % n)
    return bad


@case("clique namespace: read from nvdra.cliqueNamespace beside an upstream release, not once the release runs the controller")
def cliques(helm, chart, src):
    bad = []
    beside = ["--skip-crds", "--set", "gpuResourcesEnabledOverride=true", "--set", "nvdra.cliqueNamespace=gpu-operator"]
    # Phase 1, beside the upstream release: plugins only.
    objs = template(helm, chart, *(beside + IMG + ["--set", "nvdra.pluginsOnly=true"]))
    cds = containers(plugin_ds(objs))["compute-domains"]
    if env(cds).get("CLIQUE_NAMESPACE") != "gpu-operator":
        bad.append("plugins only: CLIQUE_NAMESPACE %s" % env(cds).get("CLIQUE_NAMESPACE"))
    if not [o for o in objs if o["kind"] == "Role" and o["metadata"]["namespace"] == "gpu-operator"]:
        bad.append("plugins only: no Role for the cliques in gpu-operator")
    # Phase 3, the upstream release gone: `helm upgrade --reuse-values --set
    # nvdra.pluginsOnly=false` keeps cliqueNamespace, and the release's own
    # controller serves the domains; its daemons write the cliques here.
    objs = template(helm, chart, *(beside + IMG + ["--set", "nvdra.pluginsOnly=false"]))
    cds = containers(plugin_ds(objs))["compute-domains"]
    if "CLIQUE_NAMESPACE" in env(cds):
        bad.append("with the controller: CLIQUE_NAMESPACE %s kept" % env(cds)["CLIQUE_NAMESPACE"])
    there = [(o["kind"], o["metadata"]["name"]) for o in objs if o["metadata"].get("namespace") == "gpu-operator"]
    if there:
        bad.append("with the controller: objects in the old namespace %s" % there)
    if not [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "nvdra-controller"]:
        bad.append("with the controller: no controller rendered")
    # A controller from elsewhere (nvdra.controller.enabled=false): applies.
    objs = template(helm, chart, *(beside + IMG + ["--set", "nvdra.controller.enabled=false"]))
    if env(containers(plugin_ds(objs))["compute-domains"]).get("CLIQUE_NAMESPACE") != "gpu-operator":
        bad.append("controller from elsewhere: CLIQUE_NAMESPACE not set")
    return bad


@case("migration kit's Job: the release's namespace, image, pull secrets and tolerations; rendered only on request")
def job(helm, chart, src):
    bad = []
    td = os.path.join(src, "tests", "deploy", "testdata")
    values = ["--values", os.path.join(td, "upstream-values.yaml"), "--values", os.path.join(td, "nvdra-beside-upstream.yaml")]
    objs = template(helm, chart, *(values + ["--skip-crds"]), namespace="gpu-operator")
    if [o for o in objs if o["kind"] == "Job" and "helm.sh/hook" not in o["metadata"].get("annotations", {})]:
        bad.append("a Job rendered without nvdra.nvdractlJob.nodeName")
    objs = template(helm, chart, *(values + ["--show-only", "templates/nvdractl-job.yaml",
                                             "--set", "nvdra.nvdractlJob.nodeName=gpu-node-7"]), namespace="gpu-operator")
    upstream = yaml.safe_load(open(os.path.join(td, "upstream-values.yaml")))
    beside = yaml.safe_load(open(os.path.join(td, "nvdra-beside-upstream.yaml")))
    if [o["kind"] for o in objs] != ["Job"]:
        return ["--show-only rendered %s" % [o["kind"] for o in objs]]
    j = objs[0]
    spec = j["spec"]["template"]["spec"]
    c = spec["containers"][0]
    want_image = "%s:%s" % (beside["nvdra"]["image"]["repository"], beside["nvdra"]["image"]["tag"])
    checks = {
        "namespace": (j["metadata"]["namespace"], "gpu-operator"),
        "nodeName": (spec["nodeName"], "gpu-node-7"),
        "imagePullSecrets": (spec.get("imagePullSecrets"), upstream["imagePullSecrets"]),
        "image": (c["image"], want_image),
        "imagePullPolicy": (c["imagePullPolicy"], upstream["image"]["pullPolicy"]),
        "tolerations": (spec.get("tolerations"), upstream["kubeletPlugin"]["tolerations"]),
        "plugin directory": (spec["volumes"][0]["hostPath"]["path"], upstream["kubeletPlugin"]["kubeletPluginsDirectoryPath"]),
    }
    for what, (got, want) in checks.items():
        if got != want:
            bad.append("%s %r, expected %r" % (what, got, want))
    script = c["args"][0]
    if "%s/$d --retire-ledger" % upstream["kubeletPlugin"]["kubeletPluginsDirectoryPath"] not in script:
        bad.append("the script exports another directory: %s" % script)
    # The checkpoint is for the controller's release, and the claims' CDI
    # specs are handed over in the CDI directory the Job mounts.
    chart_values = yaml.safe_load(open(os.path.join(chart, "values.yaml")))
    want_target = beside.get("nvdra", {}).get("upstreamVersion") or chart_values["nvdra"]["upstreamVersion"]
    if "--target %s --cdi-root /var/run/cdi" % want_target not in script:
        bad.append("the script exports for another release or leaves the CDI specs: %s" % script)
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    cdi = [v for v in spec["volumes"] if v["name"] == mounts.get("/var/run/cdi")]
    if not cdi or cdi[0]["hostPath"]["path"] != "/var/run/cdi":
        bad.append("the Job does not mount the node's /var/run/cdi: %s" % spec["volumes"])
    objs = template(helm, chart, *(values + ["--show-only", "templates/nvdractl-job.yaml",
                                             "--set", "nvdra.nvdractlJob.nodeName=gpu-node-7",
                                             "--set", "nvdra.nvdractlJob.upstreamTarget=main"]), namespace="gpu-operator")
    if "--target main " not in objs[0]["spec"]["template"]["spec"]["containers"][0]["args"][0]:
        bad.append("nvdra.nvdractlJob.upstreamTarget=main does not reach --target")
    # The example for kustomize installs is the same template, without a
    # namespace so that `kubectl -n` places it.
    example = [d for d in yaml.safe_load_all(open(os.path.join(src, "deploy", "examples", "nvdractl-job.yaml"))) if d]
    if [d["kind"] for d in example] != ["Job"] or "namespace" in example[0]["metadata"]:
        bad.append("deploy/examples/nvdractl-job.yaml names a namespace or is not one Job")
    return bad


@case("maskNvidiaDriverParams: MASK_NVIDIA_DRIVER_PARAMS of both plugins, false by default")
def mask(helm, chart, src):
    bad = []
    base = ["--set", "gpuResourcesEnabledOverride=true"] + IMG
    for extra, want in (([], "false"), (["--set", "maskNvidiaDriverParams=true"], "true"),
                        (["--set", "maskNvidiaDriverParams=false"], "false")):
        cs = containers(plugin_ds(template(helm, chart, *(base + extra))))
        for name in ("gpus", "compute-domains"):
            got = env(cs[name]).get("MASK_NVIDIA_DRIVER_PARAMS")
            if got != want:
                bad.append("%s: %s gets %r, not %r" % (extra or "defaults", name, got, want))
        if "MASK_NVIDIA_DRIVER_PARAMS" in env(cs["init-container"]):
            bad.append("the init container gets MASK_NVIDIA_DRIVER_PARAMS")
    return bad


@case("webhook.scope: --scope=nvdra by default, upstream when asked, anything else refused")
def webhook_scope(helm, chart, src):
    bad = []
    base = ["--set", "gpuResourcesEnabledOverride=true", "--set", "webhook.enabled=true"] + IMG

    def scope_args(*extra):
        objs = template(helm, chart, *(base + list(extra)))
        dep = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-webhook"))
        c = dep["spec"]["template"]["spec"]["containers"][0]
        return [a for a in c["args"] if a.startswith("--scope")]

    if scope_args() != ["--scope=nvdra"]:
        bad.append("defaults: %s" % scope_args())
    if scope_args("--set", "webhook.scope=upstream") != ["--scope=upstream"]:
        bad.append("upstream: %s" % scope_args("--set", "webhook.scope=upstream"))
    try:
        template(helm, chart, *(base + ["--set", "webhook.scope=lenient"]))
        bad.append("webhook.scope=lenient rendered")
    except Refused as e:
        if "webhook.scope is \"lenient\": it must be 'nvdra' or 'upstream'" not in str(e):
            bad.append("webhook.scope=lenient refused with: %s" % e)
    return bad


@case("uninstall hook: nvdractl node remove-clique-labels before helm uninstall, with Node get/list/patch only")
def uninstall_hook(helm, chart, src):
    bad = []
    objs = template(helm, chart, *(IMG + ["--set", "gpuResourcesEnabledOverride=true"]))
    hooked = {o["kind"]: o for o in objs if "helm.sh/hook" in o["metadata"].get("annotations", {})}
    if sorted(hooked) != ["ClusterRole", "ClusterRoleBinding", "Job", "ServiceAccount"]:
        return ["hook objects %s" % sorted(hooked)]
    for kind, o in hooked.items():
        a = o["metadata"]["annotations"]
        if a["helm.sh/hook"] != "pre-delete" or "hook-succeeded" not in a.get("helm.sh/hook-delete-policy", ""):
            bad.append("%s annotations %s" % (kind, a))
    # The account and its rights exist before the Job runs.
    if not int(hooked["ClusterRole"]["metadata"]["annotations"]["helm.sh/hook-weight"]) < \
            int(hooked["Job"]["metadata"]["annotations"]["helm.sh/hook-weight"]):
        bad.append("the Job's hook weight does not come after its RBAC's")
    if hooked["ClusterRole"]["rules"] != [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]:
        bad.append("ClusterRole rules %s" % hooked["ClusterRole"]["rules"])
    spec = hooked["Job"]["spec"]["template"]["spec"]
    c = spec["containers"][0]
    if c["command"] != ["nvdractl", "node", "remove-clique-labels"] or c["image"] != "registry.example.com/nvdra:" + \
            yaml.safe_load(open(os.path.join(chart, "Chart.yaml")))["appVersion"]:
        bad.append("Job runs %s from %s" % (c["command"], c["image"]))
    if spec["serviceAccountName"] != hooked["ServiceAccount"]["metadata"]["name"] or \
            hooked["ClusterRoleBinding"]["subjects"][0]["name"] != spec["serviceAccountName"]:
        bad.append("the Job's account is not the one bound")
    if "activeDeadlineSeconds" not in hooked["Job"]["spec"]:
        bad.append("an uninstall could wait on the Job for ever")
    # Off on request, and without compute domains.
    for extra in (["--set", "nvdra.removeCliqueLabelsOnUninstall=false"],
                  ["--set", "resources.computeDomains.enabled=false"]):
        objs = template(helm, chart, *(IMG + ["--set", "gpuResourcesEnabledOverride=true"] + extra))
        if [o for o in objs if "helm.sh/hook" in o["metadata"].get("annotations", {})]:
            bad.append("hooks rendered with %s" % extra)
    return bad


def main():
    helm, src = sys.argv[1:3]
    chart = os.path.join(src, "deploy", "helm", "nvdra")
    for check in (hook, gpu_operator, image, readme, crds, cliques, job, mask, webhook_scope, uninstall_hook):
        check(helm, chart, src)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
