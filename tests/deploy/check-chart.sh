#!/usr/bin/env bash
# Checks the Helm chart deploy/helm/nvdra: `helm lint --strict`; `helm template` with
# the defaults, with an upstream operator's values file
# (testdata/upstream-values.yaml), plugins-only, and with beta DeviceClasses;
# every rendered object validated as check-manifests.sh validates the
# kustomize manifests (validate-manifests.mjs, with the plugins' --help);
# check_chart_values.py places each value where upstream's chart puts it and
# compares the DeviceClasses with upstream's; the webhook's cert-manager
# objects agree with its configuration; settings the chart must refuse fail
# rendering with their message; check_controller_gates.py checks the gates
# upstream's controller gets per release, check_chart_cases.py the CDI hook,
# GPU operator values, nvdra's image, the CRDs and the migration kit.
#
# Usage: check-chart.sh BUILD_DIR BIN_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:?usage: check-chart.sh BUILD_DIR BIN_DIR}
bin=${2:?usage: check-chart.sh BUILD_DIR BIN_DIR}
work=$build/chart-validation
chart=$src/deploy/helm/nvdra
values=$here/testdata/upstream-values.yaml
# nvdra's image is published by no registry: every render names one, as an
# operator must (the chart refuses to render without it, checked below).
img=(--set nvdra.image.repository=registry.example.com/nvdra)

helm=$here/tools/bin/helm
[ -x "$helm" ] || helm=$(command -v helm) || { echo "check-chart: helm not found (scripts/setup installs it into tests/deploy/tools/bin)" >&2; exit 1; }
case $("$helm" version --template '{{.Version}}') in
  v4.*) ;;
  *) echo "check-chart: $helm is not helm 4" >&2; exit 1 ;;
esac
for tool in node npm python3; do
  command -v "$tool" >/dev/null || { echo "check-chart: $tool not found (scripts/setup installs it)" >&2; exit 1; }
done

mkdir -p "$work"
if [ ! -d "$work/node_modules" ] || ! cmp -s "$here/package-lock.json" "$work/package-lock.json"; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
fi
cp "$here/validate-manifests.mjs" "$work/"
for plugin in gpus:nvdra-gpu-kubelet-plugin compute-domains:nvdra-compute-domain-kubelet-plugin webhook:nvdra-webhook; do
  "$bin/${plugin#*:}" --help > "$work/${plugin%%:*}.help"
done
validate() { node "$work/validate-manifests.mjs" --help-text "gpus=$work/gpus.help" --help-text "compute-domains=$work/compute-domains.help" \
  --help-text "webhook=$work/webhook.help" "$@"; }

failed=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failed=1; }

# lint NAME ARGS...
lint() {
  local name=$1; shift
  if "$helm" lint --strict "$chart" --namespace nvdra "${img[@]}" "$@" > "$work/lint.log" 2>&1; then ok "helm lint $name"
  else fail "helm lint $name:"; sed 's/^/     /' "$work/lint.log"; fi
}
lint "(defaults, gpuResourcesEnabledOverride)" --set gpuResourcesEnabledOverride=true
lint "(upstream values)" --values "$values"

# render NAME OUT ARGS...: helm template, then every object validated.
render() {
  local name=$1 out=$2; shift 2
  if ! "$helm" template "$@" "${img[@]}" > "$out" 2> "$out.err"; then
    fail "helm template $name: $(cat "$out.err")"; return
  fi
  if validate "$out" > "$out.log"; then ok "$name: $(tail -1 "$out.log")"
  else fail "$name:"; sed 's/^/     /' "$out.log"; fi
}
render "defaults" "$work/defaults.yaml" nvdra "$chart" --namespace nvdra --include-crds \
  --set gpuResourcesEnabledOverride=true
render "upstream values" "$work/upstream-values.yaml" gpu "$chart" --namespace gpu-operator --include-crds \
  --values "$values"
render "plugins only" "$work/plugins-only.yaml" nvdra "$chart" --namespace nvdra --skip-crds \
  --set gpuResourcesEnabledOverride=true --set nvdra.pluginsOnly=true
render "resourceApiVersion v1beta1" "$work/beta.yaml" nvdra "$chart" --namespace nvdra \
  --set gpuResourcesEnabledOverride=true --set resourceApiVersion=resource.k8s.io/v1beta1
render "gpus only, driver container root" "$work/gpus-only.yaml" nvdra "$chart" --namespace nvdra \
  --set gpuResourcesEnabledOverride=true --set resources.computeDomains.enabled=false \
  --set nvidiaDriverRoot=/run/nvidia/driver

render "GPU operator values" "$work/gpu-operator.yaml" nvdra "$chart" --namespace gpu-operator \
  --values "$here/testdata/gpu-operator-values.yaml"
render "nvdractl Job with upstream values" "$work/nvdractl-job.yaml" nvdra "$chart" --namespace gpu-operator \
  --values "$values" --values "$here/testdata/nvdra-beside-upstream.yaml" \
  --show-only templates/nvdractl-job.yaml --set nvdra.nvdractlJob.nodeName=gpu-node-1

# No upstream release has a controller for host-managed IMEX daemons: the
# operator names one built from upstream's main and the gates it knows.
render "hostManaged IMEX" "$work/host-imex.yaml" nvdra "$chart" --namespace nvdra \
  --set gpuResourcesEnabledOverride=true --set resources.computeDomains.imex.mode=hostManaged \
  --set featureGates.HostManagedIMEXDaemon=true --set image.tag=main \
  --set 'nvdra.controllerFeatureGates={MPSSupport,HostManagedIMEXDaemon}'
if grep -q "name: IMEX_MODE" "$work/host-imex.yaml" && grep -q 'value: "hostManaged"' "$work/host-imex.yaml" &&
   ! grep -q "name: compute-domain-daemon.nvidia.com" "$work/host-imex.yaml"; then
  ok "hostManaged IMEX: the plugin gets IMEX_MODE=hostManaged, and no daemon DeviceClass is rendered"
else
  fail "hostManaged IMEX: IMEX_MODE not handed to the plugin, or the daemon DeviceClass rendered"
fi

render "PassthroughSupport" "$work/passthrough.yaml" nvdra "$chart" --namespace nvdra \
  --set gpuResourcesEnabledOverride=true --set featureGates.PassthroughSupport=true
if python3 - "$work/passthrough.yaml" "$work/defaults.yaml" <<'PY'
import sys, yaml
def plugin(path):
    for d in yaml.safe_load_all(open(path)):
        if d and d["kind"] == "DaemonSet" and "kubelet-plugin" in d["metadata"]["name"]:
            spec = d["spec"]["template"]["spec"]
            gpus = [c for c in spec["containers"] if c["name"] == "gpus"][0]
            return gpus, {v["name"]: v for v in spec["volumes"]}
    sys.exit("no kubelet plugin DaemonSet")
gpus, volumes = plugin(sys.argv[1])
env = {e["name"]: e.get("value") for e in gpus["env"]}
mounts = {m["name"]: m for m in gpus["volumeMounts"]}
assert env.get("HOST_ROOT") == "/host-root", env
assert mounts["host-root"]["mountPath"] == "/host-root" and mounts["host-root"]["readOnly"], mounts
assert volumes["host-root"]["hostPath"]["path"] == "/", volumes
assert mounts["lib-modules"]["mountPath"] == "/lib/modules" and mounts["sysfs"]["mountPath"] == "/sys", mounts
gpus, volumes = plugin(sys.argv[2])
assert "HOST_ROOT" not in {e["name"] for e in gpus["env"]} and "host-root" not in volumes
PY
then
  ok "PassthroughSupport: the GPU plugin gets HOST_ROOT and the host's root, modules and sysfs; not without it"
else
  fail "PassthroughSupport: HOST_ROOT or the host mounts missing, or present without the gate"
fi

render "plugins only beside an upstream release" "$work/beside.yaml" nvdra "$chart" --namespace gpu-operator \
  --skip-crds --values "$values" --values "$here/testdata/nvdra-beside-upstream.yaml"
# Nothing the upstream release (installed with upstream-values.yaml in the
# same namespace) owns or names: its names carry its chart's name or the
# values' serviceAccount.name, and the shared kinds are left out.
if python3 - "$work/beside.yaml" "$values" > "$work/beside.check" <<'PY'
import sys, yaml
objs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
sa = yaml.safe_load(open(sys.argv[2]))["serviceAccount"]["name"]
bad = [(o["kind"], o["metadata"]["name"]) for o in objs
       if o["kind"] in ("DeviceClass", "CustomResourceDefinition", "Deployment", "ValidatingWebhookConfiguration")
       or o["metadata"]["name"].startswith(("dra-driver-nvidia-gpu", "compute-domain-daemon", sa + "-"))]
ds = next(o for o in objs if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
if ds["nodeSelector"] != {"dra-driver": "nvdra"}:
    bad.append(("nodeSelector", ds["nodeSelector"]))
print("\n".join(map(str, bad)) or "%d objects, none the upstream release's" % len(objs))
sys.exit(1 if bad else 0)
PY
then ok "plugins only beside an upstream release: $(cat "$work/beside.check")"
else fail "plugins only beside an upstream release renders upstream's objects:"; sed 's/^/     /' "$work/beside.check"; fi

# The webhook with cert-manager (upstream's default TLS mode): the
# cert-manager objects have no schema here, so they are checked by name and
# reference, the rest validated as above.
for issuer in selfsigned clusterissuer; do
  out=$work/webhook-$issuer.yaml
  if ! "$helm" template nvdra "$chart" --namespace nvdra --set gpuResourcesEnabledOverride=true "${img[@]}" \
       --set webhook.enabled=true --set webhook.tls.certManager.issuerType=$issuer \
       --set webhook.tls.certManager.issuerName=corp-ca --set 'webhook.tls.certManager.dnsNames={webhook.example.com}' \
       > "$out" 2> "$out.err"; then
    fail "webhook with cert-manager ($issuer): $(cat "$out.err")"; continue
  fi
  if python3 - "$out" "$issuer" "$out.rest" > "$out.check" <<'PY'
import sys, yaml
objs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
issuer = sys.argv[2]
cm = {o["kind"]: o for o in objs if o["apiVersion"] == "cert-manager.io/v1"}
yaml.safe_dump_all([o for o in objs if o["apiVersion"] != "cert-manager.io/v1"], open(sys.argv[3], "w"))
bad = []
want_kinds = ["Certificate", "Issuer"] if issuer == "selfsigned" else ["Certificate"]
if sorted(cm) != want_kinds:
    bad.append("cert-manager objects %s, expected %s" % (sorted(cm), want_kinds))
cert = cm.get("Certificate", {}).get("spec", {})
if cert.get("dnsNames") != ["nvdra-webhook.nvdra.svc", "webhook.example.com"]:
    bad.append("dnsNames %s" % cert.get("dnsNames"))
ref = {"kind": "Issuer", "name": "nvdra-webhook-issuer"} if issuer == "selfsigned" else {"kind": "ClusterIssuer", "name": "corp-ca"}
if cert.get("issuerRef") != ref:
    bad.append("issuerRef %s, expected %s" % (cert.get("issuerRef"), ref))
vwc = next(o for o in objs if o["kind"] == "ValidatingWebhookConfiguration")
if vwc["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from") != "nvdra/nvdra-webhook-cert":
    bad.append("inject-ca-from %s" % vwc["metadata"].get("annotations"))
hook = vwc["webhooks"][0]
if hook["clientConfig"]["service"] != {"namespace": "nvdra", "name": "nvdra-webhook", "port": 443,
                                        "path": "/validate-resource-claim-parameters"} or hook["failurePolicy"] != "Fail":
    bad.append("webhook %s" % hook)
dep = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "nvdra-webhook")
if dep["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] != cert.get("secretName", "?"):
    bad.append("the webhook mounts %s, the certificate is stored in %s" % (
        dep["spec"]["template"]["spec"]["volumes"][0], cert.get("secretName")))
print("\n".join(bad) or "Certificate, issuer and webhook configuration agree")
sys.exit(1 if bad else 0)
PY
  then
    if validate "$out.rest" > "$out.log"; then ok "webhook with cert-manager ($issuer): $(cat "$out.check"); $(tail -1 "$out.log")"
    else fail "webhook with cert-manager ($issuer):"; sed 's/^/     /' "$out.log"; fi
  else
    fail "webhook with cert-manager ($issuer):"; sed 's/^/     /' "$out.check"
  fi
done

if python3 "$here/check_chart_values.py" "$work/defaults.yaml" "$values" "$work/upstream-values.yaml" \
     "$work/plugins-only.yaml" "$work/beta.yaml" > "$work/values.log"; then
  ok "upstream values placed as upstream's chart places them: $(tail -1 "$work/values.log")"
else
  fail "upstream values:"; sed 's/^/     /' "$work/values.log"
fi

# refused NAME EXPECTED-SUBSTRING ARGS...: rendering must fail with the message.
refused() {
  local name=$1 want=$2; shift 2
  if "$helm" template nvdra "$chart" --namespace nvdra "${img[@]}" "$@" > /dev/null 2> "$work/refused.err"; then
    fail "$name: rendered, expected a refusal containing: $want"
  elif ! grep -qF -- "$want" "$work/refused.err"; then
    fail "$name: refused, but not with: $want"; sed 's/^/     /' "$work/refused.err"
  else
    ok "$name refused"
  fi
}
refused "GPUs without gpuResourcesEnabledOverride (upstream's default guard)" \
  "cannot run beside the NVIDIA GPU device plugin"
refused "the default namespace" "allowDefaultNamespace=true" --namespace default --set gpuResourcesEnabledOverride=true
refused "hostManaged IMEX without its gate" "requires featureGates.HostManagedIMEXDaemon=true" \
  --set gpuResourcesEnabledOverride=true --set resources.computeDomains.imex.mode=hostManaged
refused "channel isolation" "isolation=channel is not supported" --set gpuResourcesEnabledOverride=true \
  --set resources.computeDomains.imex.isolation=channel
refused "nvidiaCtkPath" "nvidiaCtkPath is no longer a setting" --set gpuResourcesEnabledOverride=true \
  --set nvidiaCtkPath=/usr/bin/nvidia-ctk
refused "webhook secret mode without a secret" "webhook.tls.secret.name" --set gpuResourcesEnabledOverride=true \
  --set webhook.enabled=true --set webhook.tls.mode=secret
refused "a bad consumableShares" "consumableShares is \"some\"" --set gpuResourcesEnabledOverride=true \
  --set consumableShares=some

# The rendering of the driver-container root: the parent is mounted, the
# plugins see the root, and nothing names a host hook.
if grep -q "path: /run/nvidia$" "$work/gpus-only.yaml" && ! grep -q "nvidia-cdi-hook" "$work/gpus-only.yaml" &&
   ! grep -q "name: compute-domains" "$work/gpus-only.yaml"; then
  ok "gpus only, driver container root: parent /run/nvidia mounted, no hook, no compute-domains container"
else
  fail "gpus only, driver container root: $work/gpus-only.yaml"
fi

# A plugins-only release in its own namespace reading the cliques an upstream
# release's IMEX daemons write in that release's namespace: CLIQUE_NAMESPACE
# on the compute-domains container and read-only RBAC there, nothing else.
render "plugins only, cliques of another namespace" "$work/cliques.yaml" nvdra "$chart" --namespace nvdra \
  --skip-crds --set gpuResourcesEnabledOverride=true --set nvdra.pluginsOnly=true \
  --set nvdra.cliqueNamespace=gpu-operator
if python3 - "$work/cliques.yaml" > "$work/cliques.check" <<'PY'
import sys, yaml
objs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
bad = []
ds = next(o for o in objs if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
env = lambda name: {e["name"]: e.get("value") for e in next(c for c in ds["containers"] if c["name"] == name)["env"]}
if env("compute-domains").get("CLIQUE_NAMESPACE") != "gpu-operator" or "CLIQUE_NAMESPACE" in env("gpus"):
    bad.append("CLIQUE_NAMESPACE: compute-domains %r, gpus %r" % (env("compute-domains").get("CLIQUE_NAMESPACE"),
                                                                   env("gpus").get("CLIQUE_NAMESPACE")))
there = [o for o in objs if o["metadata"].get("namespace") == "gpu-operator"]
role = [o for o in there if o["kind"] == "Role"]
binding = [o for o in there if o["kind"] == "RoleBinding"]
if [o["kind"] for o in there] != ["Role", "RoleBinding"] or role[0]["rules"] != [
        {"apiGroups": ["resource.nvidia.com"], "resources": ["computedomaincliques"], "verbs": ["get", "list", "watch"]}]:
    bad.append("in gpu-operator: %s" % [(o["kind"], o["metadata"]["name"]) for o in there])
elif binding[0]["subjects"] != [{"kind": "ServiceAccount", "name": ds["serviceAccountName"], "namespace": "nvdra"}] \
        or binding[0]["roleRef"]["name"] != role[0]["metadata"]["name"]:
    bad.append("the RoleBinding binds %s to %s" % (binding[0]["subjects"], binding[0]["roleRef"]))
print("\n".join(bad) or "CLIQUE_NAMESPACE=gpu-operator, cliques readable there, nothing else there")
sys.exit(1 if bad else 0)
PY
then ok "plugins only, cliques of another namespace: $(cat "$work/cliques.check")"
else fail "plugins only, cliques of another namespace:"; sed 's/^/     /' "$work/cliques.check"; fi
if "$helm" template nvdra "$chart" --namespace nvdra --set gpuResourcesEnabledOverride=true "${img[@]}" \
     --set nvdra.cliqueNamespace=nvdra | grep -q "kubeletplugin-cliques\|CLIQUE_NAMESPACE: *$"; then
  fail "nvdra.cliqueNamespace set to the release's namespace renders a second clique Role"
else
  ok "nvdra.cliqueNamespace of the release's own namespace adds no Role"
fi

# The controller's feature gates per upstream release (and the refusals of
# gates it cannot serve), then the cases an operator meets first: the CDI
# hook, GPU operator nodes, nvdra's image, the CRDs, the clique namespace
# across the migration, the migration kit's Job.
if python3 "$here/check_controller_gates.py" "$helm" "$chart" > "$work/gates.log" 2>&1; then
  ok "controller feature gates: $(tail -1 "$work/gates.log")"
else
  fail "controller feature gates:"; sed 's/^/     /' "$work/gates.log"
fi
python3 "$here/check_chart_cases.py" "$helm" "$src" > "$work/cases.log" 2>&1 || failed=1
cat "$work/cases.log"

if [ "$failed" -ne 0 ]; then
  echo "chart checks failed"
  exit 1
fi
echo "chart checks passed"
