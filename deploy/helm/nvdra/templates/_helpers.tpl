{{/*
Names follow upstream's chart, so values that set nameOverride,
fullnameOverride, namespaceOverride or serviceAccount.name name the same
objects; the chart's own name is "nvdra".
*/}}

{{/* The short name: nameOverride or the chart's name. */}}
{{- define "nvdra.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release-qualified name: fullnameOverride, else the release name when it contains the short name, else <release>-<name>. */}}
{{- define "nvdra.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "nvdra.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "nvdra.chart" -}}
{{- printf "%s-%s" (default .Chart.Name .Values.nameOverride) .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "nvdra.labels" -}}
{{- if .Values.nvdra.helmLabels -}}
helm.sh/chart: {{ include "nvdra.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{ end -}}
{{ include "nvdra.templateLabels" . }}
{{- end }}

{{/* Labels of every pod template. */}}
{{- define "nvdra.templateLabels" -}}
app.kubernetes.io/name: {{ include "nvdra.name" . }}
{{- if .Values.nvdra.helmLabels }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
app.kubernetes.io/part-of: nvdra
{{- end }}

{{/* The one label that selects a component's pods: (dict "context" . "componentName" "kubelet-plugin"). */}}
{{- define "nvdra.selectorLabels" -}}
{{- if .context.Values.selectorLabelsOverride -}}
{{ toYaml .context.Values.selectorLabelsOverride }}
{{- else -}}
{{ default .context.Chart.Name .context.Values.nameOverride }}-component: {{ .componentName }}
{{- end }}
{{- end }}

{{/* Upstream's image: the controller and the IMEX daemons. */}}
{{- define "nvdra.upstreamImage" -}}
{{- .Values.image.repository -}}:{{- .Values.image.tag | default .Values.nvdra.upstreamVersion -}}
{{- end }}

{{/*
FEATURE_GATES of the controller (and, through it, of the IMEX daemons it
starts): the gates of featureGates that the controller image knows, in key
order; empty when none. The image knows nvdra.controllerFeatureGates when
set, else the row of files/upstream-feature-gates.yaml for its release
(image.tag, else nvdra.upstreamVersion) and the logging gates. Fails
rendering where the controller would exit on a gate (an image no row names)
or cannot serve one that is on.
*/}}
{{- define "nvdra.controllerFeatureGates" -}}
{{- $table := .Files.Get "files/upstream-feature-gates.yaml" | fromYaml -}}
{{- $release := .Values.image.tag | default .Values.nvdra.upstreamVersion -}}
{{- $image := include "nvdra.upstreamImage" . -}}
{{- $gates := .Values.featureGates | default dict -}}
{{- $hostManaged := include "nvdra.hostManagedIMEX" . -}}
{{- $known := list -}}
{{- $where := "" -}}
{{- if .Values.nvdra.controllerFeatureGates -}}
  {{- $known = .Values.nvdra.controllerFeatureGates -}}
  {{- $where = printf "the controller image %s (nvdra.controllerFeatureGates)" $image -}}
{{- else if hasKey $table.releases $release -}}
  {{- $known = concat (index $table.releases $release) $table.loggingGates -}}
  {{- $where = printf "upstream's release %s (the controller image %s)" $release $image -}}
{{- else if or $gates $hostManaged -}}
  {{- fail (printf "\nthe controller image %s is not an upstream release whose feature gates this chart knows (%s), and its binaries exit on a gate they do not parse: set nvdra.controllerFeatureGates to the gates that image knows" $image (keys $table.releases | sortAlpha | join ", ")) -}}
{{- end -}}
{{- range $gate := $table.needController -}}
  {{- $on := and (hasKey $gates $gate) (eq (toString (index $gates $gate)) "true") -}}
  {{- $mode := and (ne $hostManaged "") (eq $gate "HostManagedIMEXDaemon") -}}
  {{- if and (or $on $mode) (not (has $gate $known)) -}}
    {{- fail (printf "\n%sfeatureGates.%s=true needs a ComputeDomain controller that knows the %s gate, and %s does not. Name a controller image that has it (image.repository, image.tag) and list the gates that image knows in nvdra.controllerFeatureGates, or turn the gate off" (ternary "resources.computeDomains.imex.mode=hostManaged with " "" $mode) $gate $gate $where) -}}
  {{- end -}}
{{- end -}}
{{- range $key, $value := $gates -}}
  {{- if has $key $known }}{{ $key }}={{ $value }},{{ end -}}
{{- end -}}
{{- end -}}

{{/* nvdra's image: the kubelet plugins, the init container, the webhook, the MPS control daemons. */}}
{{- define "nvdra.image" -}}
{{- if not .Values.nvdra.image.repository -}}
{{- fail (printf "\nnvdra.image.repository is not set: nvdra's image is published by no registry. Build it and push it where the nodes pull from:\n\n    scripts/build-image --tag <registry>/nvdra:%[1]s && podman push <registry>/nvdra:%[1]s\n\nthen install with --set nvdra.image.repository=<registry>/nvdra (docs/deploy.md, the section Install with Helm)" (.Values.nvdra.image.tag | default .Chart.AppVersion)) -}}
{{- end -}}
{{- .Values.nvdra.image.repository -}}:{{- .Values.nvdra.image.tag | default .Chart.AppVersion -}}
{{- end }}

{{- define "nvdra.imagePullPolicy" -}}
{{- .Values.nvdra.image.pullPolicy | default .Values.image.pullPolicy -}}
{{- end }}

{{/* Base of the service account names; the kubelet plugins run as <this>-kubeletplugin, the controller as <this>-controller. */}}
{{- define "nvdra.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-service-account" (include "nvdra.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "nvdra.kubeletPluginServiceAccountName" -}}
{{ include "nvdra.serviceAccountName" . }}-kubeletplugin
{{- end }}

{{- define "nvdra.webhookServiceAccountName" -}}
{{- if .Values.webhook.serviceAccount.create }}
{{- default (printf "%s-webhook-service-account" (include "nvdra.fullname" .)) .Values.webhook.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.webhook.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* FEATURE_GATES as upstream writes it: Name=value, for every gate, in key order. */}}
{{- define "nvdra.featureGates" -}}
{{- range $key, $value := .Values.featureGates }}{{ $key }}={{ $value }},{{ end }}
{{- end }}

{{- define "nvdra.gateOn" -}}
{{- $gates := .context.Values.featureGates | default dict -}}
{{- if and (hasKey $gates .gate) (index $gates .gate) -}}true{{- end -}}
{{- end -}}

{{/* The driver's namespace and every namespace named in the controller's ADDITIONAL_NAMESPACES, comma-separated, without repeats. */}}
{{- define "nvdra.namespaces" -}}
{{- $namespaces := list (include "nvdra.namespace" .) -}}
{{- range .Values.controller.containers.computeDomain.env -}}
{{- if and (eq .name "ADDITIONAL_NAMESPACES") .value -}}
{{- range $raw := splitList "," .value -}}
{{- if trim $raw -}}
{{- $namespaces = append $namespaces (trim $raw) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join "," (uniq $namespaces) -}}
{{- end -}}

{{/* resourceApiVersion, else the newest resource.k8s.io version the cluster serves; empty when none. */}}
{{- define "nvdra.resourceApiVersion" -}}
{{- if .Values.resourceApiVersion -}}
{{- .Values.resourceApiVersion -}}
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1" -}}
resource.k8s.io/v1
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta2" -}}
resource.k8s.io/v1beta2
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta1" -}}
resource.k8s.io/v1beta1
{{- end -}}
{{- end -}}

{{/* featureGates.PassthroughSupport: the GPU plugin needs the host's root (modprobe), its modules and sysfs. */}}
{{- define "nvdra.passthrough" -}}
{{- if and .Values.featureGates (dig "PassthroughSupport" false .Values.featureGates) -}}true{{- end -}}
{{- end -}}

{{- define "nvdra.hostManagedIMEX" -}}
{{- if eq (toString (dig "mode" "" (.Values.resources.computeDomains.imex | default dict))) "hostManaged" -}}true{{- end -}}
{{- end -}}

{{/* Shared objects: DeviceClasses, the controller and the IMEX daemons' RBAC. */}}
{{- define "nvdra.deviceClasses" -}}
{{- if and .Values.nvdra.deviceClasses.enabled (not .Values.nvdra.pluginsOnly) -}}true{{- end -}}
{{- end -}}

{{- define "nvdra.controller" -}}
{{- if and .Values.resources.computeDomains.enabled .Values.nvdra.controller.enabled (not .Values.nvdra.pluginsOnly) -}}true{{- end -}}
{{- end -}}

{{/*
The namespace of the ComputeDomainCliques the compute-domains container reads
when not its own: nvdra.cliqueNamespace while the release runs no controller
of its own (beside an upstream release, whose IMEX daemons write the cliques
in that release's namespace). Once the release deploys the controller, its
daemons write them in the release's namespace and the setting no longer
applies, so a value kept by `helm upgrade --reuse-values` cannot point the
plugins at the namespace of an upstream release that is gone.
*/}}
{{- define "nvdra.cliqueNamespace" -}}
{{- if and .Values.nvdra.cliqueNamespace (not (include "nvdra.controller" .)) -}}
{{- .Values.nvdra.cliqueNamespace -}}
{{- end -}}
{{- end -}}

{{- define "nvdra.webhook" -}}
{{- if and .Values.webhook.enabled (not .Values.nvdra.pluginsOnly) -}}true{{- end -}}
{{- end -}}

{{/*
A host hook the plugins name in CDI specs (nvidiaCDIHookPath, upstream's
meaning); empty: none from the host, the plugins copy the image's hook into
their plugin directory at start.
*/}}
{{- define "nvdra.cdiHookPath" -}}
{{- .Values.nvidiaCDIHookPath -}}
{{- end -}}

{{/* The IMEX settings nvdra can serve; fails rendering otherwise (as upstream's chart does for what it cannot serve). */}}
{{- define "nvdra.validateIMEXConfig" -}}
{{- $imex := .Values.resources.computeDomains.imex | default dict -}}
{{- $mode := toString (dig "mode" "driverManaged" $imex) -}}
{{- $isolation := toString (dig "isolation" "domain" $imex) -}}
{{- if eq $mode "hostManaged" -}}
  {{- if not (include "nvdra.gateOn" (dict "context" . "gate" "HostManagedIMEXDaemon")) -}}
    {{- fail "resources.computeDomains.imex.mode=hostManaged requires featureGates.HostManagedIMEXDaemon=true" -}}
  {{- end -}}
{{- else if ne $mode "driverManaged" -}}
  {{- fail (printf "unknown resources.computeDomains.imex.mode %q: must be \"driverManaged\" or \"hostManaged\"" $mode) -}}
{{- end -}}
{{- if and (ne $isolation "") (ne $isolation "domain") -}}
  {{- if eq $isolation "channel" -}}
    {{- fail "resources.computeDomains.imex.isolation=channel is not supported (per-workload IMEX channels are not implemented): use \"domain\"" -}}
  {{- else -}}
    {{- fail (printf "unknown resources.computeDomains.imex.isolation %q: must be \"domain\" or \"channel\"" $isolation) -}}
  {{- end -}}
{{- end -}}
{{- end -}}

{{- define "nvdra.pullSecretNames" -}}
{{- $names := list -}}
{{- range .Values.imagePullSecrets }}{{ $names = append $names .name }}{{ end -}}
{{- join "," $names -}}
{{- end -}}

{{/* The environment both plugin containers share: (dict "context" . "container" <values> "httpEndpoint" <addr> "hook" <path>). */}}
{{- define "nvdra.pluginEnv" -}}
{{- $v := .context.Values -}}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_UID
  valueFrom:
    fieldRef:
      fieldPath: metadata.uid
# Passed as -v.
- name: LOG_VERBOSITY
  value: {{ $v.logVerbosity | toString | quote }}
- name: CDI_ROOT
  value: /var/run/cdi
# The host's driver root; it is mounted at /driver-root.
- name: NVIDIA_DRIVER_ROOT
  value: {{ $v.nvidiaDriverRoot | default "/" | quote }}
# Keep the NVIDIA container runtime, where installed, from handing GPUs to
# the plugin container itself.
- name: NVIDIA_VISIBLE_DEVICES
  value: void
# "true": the plugin hides the driver's device node creation from itself
# (ModifyDeviceFiles: 0 in its /proc/driver/nvidia/params) before NVML starts.
- name: MASK_NVIDIA_DRIVER_PARAMS
  value: {{ $v.maskNvidiaDriverParams | default false | toString | quote }}
- name: KUBELET_REGISTRAR_DIRECTORY_PATH
  value: {{ $v.kubeletPlugin.kubeletRegistrarDirectoryPath | quote }}
- name: KUBELET_PLUGINS_DIRECTORY_PATH
  value: {{ $v.kubeletPlugin.kubeletPluginsDirectoryPath | quote }}
{{- if .container.healthcheckPort }}
- name: HEALTHCHECK_PORT
  value: {{ .container.healthcheckPort | toString | quote }}
{{- end }}
{{- if $v.kubeletPlugin.metrics.enabled }}
- name: HTTP_ENDPOINT
  value: {{ .httpEndpoint | quote }}
- name: METRICS_PATH
  value: {{ $v.kubeletPlugin.metrics.metricsPath | quote }}
{{- end }}
{{- if .hook }}
- name: NVIDIA_CDI_HOOK_PATH
  value: {{ .hook | quote }}
{{- end }}
{{- with $v.featureGates }}
- name: FEATURE_GATES
  value: {{ include "nvdra.featureGates" $.context | quote }}
{{- end }}
{{- end -}}

{{/* Ports and probes: (dict "port" <healthcheckPort> "metrics" <bool> "endpoint" <addr> "prefix" <name> "livenessPeriod" <s>). */}}
{{- define "nvdra.pluginPorts" -}}
{{- $metricsPort := regexFind "[0-9]+$" (toString .endpoint) -}}
{{- $health := gt (int .port) 0 -}}
{{- if or $health (and .metrics $metricsPort) }}
ports:
{{- if and .metrics $metricsPort }}
- name: {{ .prefix }}-metrics
  containerPort: {{ $metricsPort }}
{{- end }}
{{- if $health }}
- name: {{ .prefix }}-health
  containerPort: {{ int .port }}
{{- end }}
{{- end }}
{{- if $health }}
# The plugin answers SERVING once its registration and DRA sockets answer.
startupProbe:
  grpc:
    port: {{ int .port }}
    service: liveness
  periodSeconds: 1
  failureThreshold: 600
  timeoutSeconds: 10
livenessProbe:
  grpc:
    port: {{ int .port }}
    service: liveness
  periodSeconds: {{ .livenessPeriod }}
  failureThreshold: 3
  timeoutSeconds: 10
# NOT_SERVING while the plugin's ResourceSlices are not published (the API
# server unreachable) or its device health monitor failed to start: the pod
# shows unready, and is not restarted for it.
readinessProbe:
  grpc:
    port: {{ int .port }}
    service: readiness
  periodSeconds: {{ .livenessPeriod }}
  failureThreshold: 1
  timeoutSeconds: 10
{{- end }}
{{- end -}}

{{/* Mounts both plugin containers share: (dict "context" . "hook" <path> "readOnlyRoot" <bool>). */}}
{{- define "nvdra.pluginMounts" -}}
{{- $v := .context.Values -}}
- name: plugins-registry
  mountPath: {{ $v.kubeletPlugin.kubeletRegistrarDirectoryPath }}
- name: plugins
  mountPath: {{ $v.kubeletPlugin.kubeletPluginsDirectoryPath }}
  mountPropagation: Bidirectional
- name: cdi
  mountPath: /var/run/cdi
- name: driver-root
  mountPath: /driver-root
  {{- if .readOnlyRoot }}
  readOnly: true
  {{- end }}
  mountPropagation: HostToContainer
{{- if .hook }}
- name: nvidia-cdi-hook
  mountPath: /usr/bin/nvidia-cdi-hook
  readOnly: true
{{- end }}
{{- end -}}
