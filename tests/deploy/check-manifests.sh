#!/usr/bin/env bash
# Renders every kustomization under deploy/ with `kubectl kustomize` and
# validates each object (validate-manifests.mjs), validates deploy/examples,
# and proves the validator can fail: each file in broken/ and a few mutations
# of the rendered base must be rejected with the expected message.
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

if [ "$failed" -ne 0 ]; then
  echo "manifest validation failed"
  exit 1
fi
echo "manifest validation passed"
