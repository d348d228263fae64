{{/* Chart name, truncated to the 63 characters Kubernetes allows in names. */}}
{{- define "lakefs-mirror.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Resource name prefix: <release>-<chart>, unless the release name already holds it. */}}
{{- define "lakefs-mirror.fullname" -}}
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

{{/* Name of the replication resources. */}}
{{- define "lakefs-mirror.replicationName" -}}
{{- printf "%s-replication" (include "lakefs-mirror.fullname" . | trunc 51 | trimSuffix "-") }}
{{- end }}

{{- define "lakefs-mirror.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every resource. */}}
{{- define "lakefs-mirror.labels" -}}
helm.sh/chart: {{ include "lakefs-mirror.chart" . }}
app.kubernetes.io/name: {{ include "lakefs-mirror.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of the server pods. */}}
{{- define "lakefs-mirror.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lakefs-mirror.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{/* Selector labels of the replication pods. */}}
{{- define "lakefs-mirror.replicationSelectorLabels" -}}
app.kubernetes.io/name: {{ include "lakefs-mirror.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: replication
{{- end }}

{{/* Image of the server. */}}
{{- define "lakefs-mirror.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Image of the replication service: its own fields, else the server's. */}}
{{- define "lakefs-mirror.replicationImage" -}}
{{- $repo := default .Values.image.repository .Values.replication.image.repository }}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.replication.image.tag }}
{{- printf "%s:%s" $repo $tag }}
{{- end }}

{{/* Name of the Secret holding the server's sensitive settings, or "" if none. */}}
{{- define "lakefs-mirror.secretName" -}}
{{- if .Values.existingSecret }}
{{- .Values.existingSecret }}
{{- else if or .Values.secrets.authEncryptSecretKey .Values.secrets.databaseConnectionString .Values.secrets.dynamodbAccessKeyId .Values.secrets.dynamodbSecretAccessKey }}
{{- include "lakefs-mirror.fullname" . }}
{{- end }}
{{- end }}

{{/* In-cluster URL of the server Service. */}}
{{- define "lakefs-mirror.serverURL" -}}
{{- printf "http://%s.%s.svc.cluster.local:%d" (include "lakefs-mirror.fullname" .) .Release.Namespace (int .Values.service.port) }}
{{- end }}

{{/* In-cluster URL of the replication Service. */}}
{{- define "lakefs-mirror.replicationURL" -}}
{{- printf "http://%s.%s.svc.cluster.local:%d" (include "lakefs-mirror.replicationName" .) .Release.Namespace (int .Values.replication.port) }}
{{- end }}

{{/* The server's config.yaml: the config values plus what the chart decides. */}}
{{- define "lakefs-mirror.serverConfig" -}}
{{- $cfg := deepCopy (default dict .Values.config) }}
{{- $_ := set $cfg "listen_address" "0.0.0.0:8000" }}
{{- $_ := set $cfg "data_dir" "/var/lib/lakefs-mirror" }}
{{- if .Values.replication.enabled }}
{{- $_ := set $cfg "replication" (dict "endpoint" (include "lakefs-mirror.replicationURL" .)) }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The replication service's config.yaml: replication.config plus chart defaults.
The sidecar opens the server's own database (refstore_database) when it is shared:
postgres or dynamodb, its secrets from the server Secret (see the Deployment). */}}
{{- define "lakefs-mirror.replicationConfig" -}}
{{- $rep := .Values.replication }}
{{- $cfg := deepCopy (default dict $rep.config) }}
{{- $where := "replication.enabled is true, so replication.config" }}
{{- $_ := required (printf "%s.region is required (this installation's region, e.g. us-east-1)" $where) $cfg.region }}
{{- $_ := required (printf "%s.organization_id is required (the same on every installation)" $where) $cfg.organization_id }}
{{- $_ := required (printf "%s.dst_endpoints is required (a map of every other region to its lakeFS URL)" $where) $cfg.dst_endpoints }}
{{- $_ := required (printf "%s.mirrors_database is required (the database shared by all regions)" $where) $cfg.mirrors_database }}
{{- $auth := default dict $cfg.auth }}
{{- $encrypt := default dict $auth.encrypt }}
{{- if not (or $encrypt.secret_key $rep.extraEnvVarsSecret) }}
{{- fail "replication.enabled is true: set replication.extraEnvVarsSecret to a Secret with auth_encrypt_secret_key, source_lakefs_access_key_id and source_lakefs_secret_access_key (or set replication.config.auth.encrypt.secret_key)" }}
{{- end }}
{{- if not (or $cfg.source_lakefs $rep.extraEnvVarsSecret) }}
{{- fail "replication.enabled is true: set replication.extraEnvVarsSecret to a Secret with source_lakefs_access_key_id and source_lakefs_secret_access_key" }}
{{- end }}
{{- if not (hasKey $cfg "listen_address") }}
{{- $_ := set $cfg "listen_address" (printf "0.0.0.0:%d" (int $rep.port)) }}
{{- end }}
{{- if not (hasKey $cfg "regional_endpoint") }}
{{- $_ := set $cfg "regional_endpoint" (include "lakefs-mirror.serverURL" .) }}
{{- end }}
{{- if not (or (hasKey $cfg "blockstore") (hasKey $cfg "blockstores")) }}
{{- if .Values.config.blockstores }}
{{- $_ := set $cfg "blockstores" (deepCopy .Values.config.blockstores) }}
{{- else }}
{{- $_ := set $cfg "blockstore" (deepCopy (default (dict "type" "local") .Values.config.blockstore)) }}
{{- end }}
{{- end }}
{{- $db := default dict .Values.config.database }}
{{- if and (not (hasKey $cfg "refstore_database")) (has (toString $db.type) (list "postgres" "dynamodb")) }}
{{- $_ := set $cfg "refstore_database" (deepCopy $db) }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}
