#!/usr/bin/env bash
# Renders every kustomization under deploy/ with `kubectl kustomize` and
# validates each object (validate-manifests.mjs), validates deploy/examples,
# and proves the validator can fail: each file in broken/ and a few mutations
# of the rendered base must be rejected with the expected message. Then: the
# base does not surge, and an overlay's `images:` entry reaches IMAGE_NAME.
#
# Usage: check-manifests.sh BUILD_DIR BIN_DIR
# The validator's npm dependencies (pinned in package-lock.json) are installed
# once into BUILD_DIR/manifest-validation and reused while the lock is unchanged.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:?usage: check-manifests.sh BUILD_DIR BIN_DIR}
bin=${2:?usage: check-manifests.sh BUILD_DIR BIN_DIR}
work=$build/manifest-validation

for tool in kubectl node npm; do
  command -v "$tool" >/dev/null || { echo "check-manifests: $tool not found (scripts/setup installs it)" >&2; exit 1; }
done

mkdir -p "$work"
if [ ! -d "$work/node_modules" ] || ! cmp -s "$here/package-lock.json" "$work/package-lock.json"; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
fi
# ES modules resolve packages next to the script, so it runs from $work.
cp "$here/validate-manifests.mjs" "$work/"
validate() { node "$work/validate-manifests.mjs" "$@"; }

for plugin in gpus:nvdra-gpu-kubelet-plugin compute-domains:nvdra-compute-domain-kubelet-plugin; do
  "$bin/${plugin#*:}" --help > "$work/${plugin%%:*}.help"
done
help_args=(--help-text "gpus=$work/gpus.help" --help-text "compute-domains=$work/compute-domains.help")
crd_args=()
for c in "$src"/deploy/base/crds/*.yaml; do crd_args+=(--crds "$c"); done

failed=0
rendered=0
while IFS= read -r k; do
  dir=$(dirname "$k")
  name=${dir#"$src"/}
  out="$work/$(echo "$name" | tr / _).yaml"
  if ! kubectl kustomize "$dir" > "$out" 2> "$out.err"; then
    echo "FAIL $name: kubectl kustomize: $(cat "$out.err")"
    failed=1
    continue
  fi
  if validate "${help_args[@]}" "$out" > "$out.log"; then
    echo "ok   $name: $(tail -1 "$out.log")"
  else
    echo "FAIL $name:"; sed 's/^/     /' "$out.log"
    failed=1
  fi
  rendered=$((rendered + 1))
done < <(find "$src/deploy" -name kustomization.yaml | sort)
[ "$rendered" -ge 2 ] || { echo "FAIL: expected the base and at least one overlay, rendered $rendered"; failed=1; }

if validate "${crd_args[@]}" "$src"/deploy/examples/*.yaml > "$work/examples.log"; then
  echo "ok   deploy/examples: $(tail -1 "$work/examples.log")"
else
  echo "FAIL deploy/examples:"; sed 's/^/     /' "$work/examples.log"; failed=1
fi

# expect_rejected NAME EXPECTED-SUBSTRING FILE [validator args...]
expect_rejected() {
  local name=$1 want=$2 file=$3
  shift 3
  if validate "$@" "$file" > "$work/neg.log"; then
    echo "FAIL $name: accepted, expected a rejection containing: $want"; failed=1
  elif ! grep -qF -- "$want" "$work/neg.log"; then
    echo "FAIL $name: rejected, but not with: $want"; sed 's/^/     /' "$work/neg.log"; failed=1
  else
    echo "ok   $name rejected"
  fi
}

for f in "$here"/broken/*.yaml; do
  want=$(sed -n '1s/^# expect: //p' "$f")
  expect_rejected "broken/$(basename "$f")" "$want" "$f" "${crd_args[@]}"
done

base="$work/deploy_base.yaml"
# Upstream's policy names the account without -kubeletplugin, which no pod uses.
sed 's/system:serviceaccount:nvdra:nvdra-service-account-kubeletplugin"/system:serviceaccount:nvdra:nvdra-service-account"/' "$base" > "$work/mut-policy.yaml"
expect_rejected "policy naming another account" \
  "matches system:serviceaccount:nvdra:nvdra-service-account, but the kubelet plugin pods run as" \
  "$work/mut-policy.yaml" "${help_args[@]}"
sed 's/- --rolling-update-id$/- --rolling-update-idx/' "$base" > "$work/mut-flag.yaml"
expect_rejected "plugin flag the binary lacks" "flag --rolling-update-idx does not exist" \
  "$work/mut-flag.yaml" "${help_args[@]}"
sed 's/name: HEALTHCHECK_PORT/name: HEALTH_CHECK_PORT/' "$base" > "$work/mut-env.yaml"
expect_rejected "plugin environment variable the binary lacks" "environment variable HEALTH_CHECK_PORT is read by nothing" \
  "$work/mut-env.yaml" "${help_args[@]}"

# deploy/base stops the old pod before it starts the new one: a kubelet older
# than 1.33 serves one plugin per driver, so a surged pod would not be served.
if python3 - "$base" > "$work/surge.log" <<'PY'
import sys, yaml
ds = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "DaemonSet")
strategy = ds["spec"]["updateStrategy"]
ru = strategy.get("rollingUpdate", {})
ok = strategy["type"] == "RollingUpdate" and str(ru.get("maxSurge", 0)) == "0" and str(ru.get("maxUnavailable")) == "1"
print(strategy)
sys.exit(0 if ok else 1)
PY
then echo "ok   deploy/base rolls one node at a time without surging: $(cat "$work/surge.log")"
else echo "FAIL deploy/base surges or rolls otherwise: $(cat "$work/surge.log")"; failed=1; fi

# An overlay that names its image the way docs/deploy.md shows also sets the
# MPS control daemons' image (IMAGE_NAME): they run what the plugins run.
overlay=$work/image-overlay
mkdir -p "$overlay"
cat > "$overlay/kustomization.yaml" <<EOF
resources:
- $(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$src/deploy/overlays/compute-domain-controller" "$overlay")
images:
- name: nvdra
  newName: registry.example.com/team/nvdra
  newTag: 0.1.0-rc1
EOF
if kubectl kustomize "$overlay" > "$work/image-overlay.yaml" 2> "$work/image-overlay.err" &&
   python3 - "$work/image-overlay.yaml" > "$work/image-overlay.log" <<'PY'
import sys, yaml
ds = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "DaemonSet")
spec = ds["spec"]["template"]["spec"]
want = "registry.example.com/team/nvdra:0.1.0-rc1"
images = {c["name"]: c["image"] for c in spec["initContainers"] + spec["containers"]}
gpus = next(c for c in spec["containers"] if c["name"] == "gpus")
image_name = {e["name"]: e.get("value") for e in gpus["env"]}.get("IMAGE_NAME")
print("images %s, IMAGE_NAME %s" % (sorted(set(images.values())), image_name))
sys.exit(0 if set(images.values()) == {want} and image_name == want else 1)
PY
then echo "ok   an overlay's images: entry sets the plugins' image and IMAGE_NAME alike: $(cat "$work/image-overlay.log")"
else echo "FAIL an overlay's images: entry: $(cat "$work/image-overlay.log" "$work/image-overlay.err" 2>/dev/null)"; failed=1; fi

if [ "$failed" -ne 0 ]; then
  echo "manifest validation failed"
  exit 1
fi
echo "manifest validation passed"
