{{/* The chart's name, or nameOverride. */}}
{{- define "punctual.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's object names: "<release>-punctual", or the release name if it says punctual. */}}
{{- define "punctual.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "punctual.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "punctual.selectorLabels" -}}
app.kubernetes.io/name: {{ include "punctual.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "punctual.labels" -}}
helm.sh/chart: {{ include "punctual.chart" . }}
{{ include "punctual.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: punctual
{{- end }}

{{- define "punctual.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "punctual.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "punctual.leaseName" -}}
{{- default (printf "%s-leader" (include "punctual.fullname" .)) .Values.leaderElection.leaseName }}
{{- end }}

{{/* The Fence the leader raises beside its Lease (the operator's name for it). */}}
{{/*
The label value of this release's Jobs (punctual.dev/installation): 16 hex of the sha256 of
"<lease namespace>/<lease name>", as the operator computes it (core.jobs.installation_label).
*/}}
{{- define "punctual.installationLabel" -}}
{{- printf "%s/%s" .Release.Namespace (include "punctual.leaseName" .) | sha256sum | trunc 16 }}
{{- end }}

{{- define "punctual.fenceName" -}}
punctual-fence
{{- end }}

{{/* The fencing ValidatingAdmissionPolicy, from crds/fencing.punctual.dev.yaml. */}}
{{- define "punctual.fencingPolicyName" -}}
punctual-fencing.punctual.dev
{{- end }}

{{- define "punctual.metricsServiceName" -}}
{{- printf "%s-metrics" (include "punctual.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{- define "punctual.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* PromQL: this release's series, by the ServiceMonitor's job label. With honorLabels a
per-schedule series keeps its schedule's namespace label, so only the job is matched. */}}
{{- define "punctual.promJob" -}}
job="{{ include "punctual.metricsServiceName" . }}"
{{- end }}

{{/* PromQL: this release's pods' own series (no namespace label of their own). */}}
{{- define "punctual.promPods" -}}
{{ include "punctual.promJob" . }},namespace="{{ .Release.Namespace }}"
{{- end }}

{{/* Values that the schema cannot check. */}}
{{- define "punctual.validate" -}}
{{- $le := .Values.leaderElection }}
{{- if ge (float64 $le.renewDeadline) (float64 $le.leaseDuration) }}
{{- fail "leaderElection.renewDeadline must be less than leaderElection.leaseDuration" }}
{{- end }}
{{- if ge (float64 $le.retryPeriod) (float64 $le.renewDeadline) }}
{{- fail "leaderElection.retryPeriod must be less than leaderElection.renewDeadline" }}
{{- end }}
{{- if ne (len .Values.watchNamespaces) (len (uniq .Values.watchNamespaces)) }}
{{- fail "watchNamespaces lists a namespace twice" }}
{{- end }}
{{- end }}

{{/* The operator's rules on the namespaced resources it manages (in a Role or ClusterRole). */}}
{{- define "punctual.scheduleRules" -}}
# Watched by every replica (kept in in-memory indices); get re-reads after a 409.
- apiGroups: [punctual.dev]
  resources: [cronschedules]
  verbs: [get, list, watch]
# The leader's fenced claims: PUT of the status subresource with a resourceVersion.
- apiGroups: [punctual.dev]
  resources: [cronschedules/status]
  verbs: [update]
# Jobs carry an ownerReference with blockOwnerDeletion: true, which needs this where the
# OwnerReferencesPermissionEnforcement admission plugin is on.
- apiGroups: [punctual.dev]
  resources: [cronschedules/finalizers]
  verbs: [update]
# FreezeWindows hold selected schedules: watched, listed by the leader, their status
# (schedules held, the current window) patched by it.
- apiGroups: [punctual.dev]
  resources: [freezewindows]
  verbs: [get, list, watch]
- apiGroups: [punctual.dev]
  resources: [freezewindows/status]
  verbs: [patch]
# ConcurrencyGroups: each group's limit, watched; who holds it and who waits, patched into
# its status by the leader deciding its members.
- apiGroups: [punctual.dev]
  resources: [concurrencygroups]
  verbs: [get, list, watch]
- apiGroups: [punctual.dev]
  resources: [concurrencygroups/status]
  verbs: [patch]
# Watched by every replica; the leader creates one per tick, reads one back on 409
# AlreadyExists, deletes them for history limits and concurrencyPolicy Replace, and
# patches one to remove its punctual.dev/record-firing finalizer once its firing is
# recorded (the finalizer keeps a Job from vanishing before that).
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, delete, patch]
# spec.pendingTimeoutSeconds: the pods of a Job stuck pending are read (list) for their
# waiting reasons (ImagePullBackOff, Unschedulable), recorded with its failure.
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
{{- range .Values.workloadKinds }}
{{- $kind := splitn "." 3 . }}
# workloadKinds {{ . }}: created per tick (spec.workloadTemplate) and kept like a
# Job: watched, read back on 409, deleted for history limits and Replace, patched to
# remove the punctual.dev/record-firing finalizer.
- apiGroups: [{{ $kind._2 | quote }}]
  resources: [{{ $kind._0 | quote }}]
  verbs: [get, list, watch, create, delete, patch]
{{- end }}
# An Event for every decision (Created, Skipped, Missed, Replaced, ...).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end }}
