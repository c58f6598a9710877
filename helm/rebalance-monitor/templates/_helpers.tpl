{{/* Names and labels. */}}
{{- define "rebalance-monitor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rebalance-monitor.fullname" -}}
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

{{- define "rebalance-monitor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rebalance-monitor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rebalance-monitor.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "rebalance-monitor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The pod that serves /metrics: the Deployment's pod or the Spark driver. */}}
{{- define "rebalance-monitor.monitorPodLabels" -}}
{{ include "rebalance-monitor.selectorLabels" . }}
app.kubernetes.io/component: monitor
{{- end }}

{{- define "rebalance-monitor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rebalance-monitor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "rebalance-monitor.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "rebalance-monitor.validate" -}}
{{- if not (has .Values.mode (list "sparkApplication" "deployment")) }}
{{- fail (printf "mode must be sparkApplication or deployment, not %q" .Values.mode) }}
{{- end }}
{{- if and .Values.kafkaSecrets.tls.enabled (not .Values.kafkaSecrets.tls.caSecret.name) }}
{{- fail "kafkaSecrets.tls.enabled needs kafkaSecrets.tls.caSecret.name (an existing Secret with the CA certificate)" }}
{{- end }}
{{- if and .Values.kafkaSecrets.tls.clientCert.enabled (not .Values.kafkaSecrets.tls.clientCert.secretName) }}
{{- fail "kafkaSecrets.tls.clientCert.enabled needs kafkaSecrets.tls.clientCert.secretName" }}
{{- end }}
{{- if and .Values.kafkaSecrets.sasl.enabled (not .Values.kafkaSecrets.sasl.passwordSecret.name) }}
{{- fail "kafkaSecrets.sasl.enabled needs kafkaSecrets.sasl.passwordSecret.name (an existing Secret with the password)" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled .Values.podMonitor.enabled }}
{{- fail "enable either podMonitor or serviceMonitor, not both (Prometheus would scrape the monitor twice)" }}
{{- end }}
{{- end }}

{{/* Mount points. Secrets are mounted from existing Secrets, never copied into the chart. */}}
{{- define "rebalance-monitor.paths" -}}
config: /etc/rebalance-monitor
data: /var/lib/rebalance-monitor
ca: /etc/rebalance-monitor/kafka/ca
clientCert: /etc/rebalance-monitor/kafka/client
sasl: /etc/rebalance-monitor/kafka/sasl
sparkLocal: /var/data/spark-local
tmp: /tmp
{{- end }}

{{/*
monitor.toml as a dict (docs/configuration.md): .Values.config plus what the chart owns
(metrics address, checkpoint and event paths on the volume, Kafka TLS/SASL file paths).
*/}}
{{- define "rebalance-monitor.monitorToml" -}}
{{- $p := include "rebalance-monitor.paths" . | fromYaml -}}
{{- $cfg := deepCopy (omit .Values.config "kafka" "extra") }}
{{- $_ := set $cfg "metrics_host" "0.0.0.0" }}
{{- $_ := set $cfg "metrics_port" (int .Values.metrics.port) }}
{{- $_ := set $cfg "checkpoint_location" (default (printf "%s/checkpoint" $p.data) .Values.persistence.checkpointLocation) }}
{{- $_ := set $cfg "events_dir" (printf "%s/events" $p.data) }}
{{- if eq .Values.mode "deployment" }}
{{- $_ := set $cfg "spark_master" .Values.deployment.sparkMaster }}
{{- $_ := set $cfg "driver_memory" .Values.deployment.driverMemory }}
{{- end }}
{{- range $key := list "max_groups" "shuffle_partitions" "state_buckets" }}
{{- if hasKey $cfg $key }}{{ $_ := set $cfg $key (int (get $cfg $key)) }}{{ end }}
{{- end }}
{{- if not $cfg.duration_buckets }}{{ $_ := unset $cfg "duration_buckets" }}{{ end }}
{{- $cfg = mergeOverwrite $cfg (deepCopy .Values.config.extra) }}
{{- $kafka := deepCopy .Values.config.kafka }}
{{- if hasKey $kafka "max_rows_per_batch" }}
{{- if $kafka.max_rows_per_batch }}{{ $_ := set $kafka "max_rows_per_batch" (int $kafka.max_rows_per_batch) }}{{ else }}{{ $_ := unset $kafka "max_rows_per_batch" }}{{ end }}
{{- end }}
{{- $client := deepCopy (default dict $kafka.client) }}
{{- $secretFiles := dict }}
{{- $spark := deepCopy (default dict $kafka.spark_options) }}
{{- $tls := .Values.kafkaSecrets.tls }}
{{- $sasl := .Values.kafkaSecrets.sasl }}
{{- if or $tls.enabled $sasl.enabled }}
{{- $protocol := ternary (ternary "SASL_SSL" "SSL" $sasl.enabled) "SASL_PLAINTEXT" $tls.enabled }}
{{- $_ := set $client "security_protocol" $protocol }}
{{- $_ := set $spark "kafka.security.protocol" $protocol }}
{{- end }}
{{- if $tls.enabled }}
{{- $ca := printf "%s/%s" $p.ca $tls.caSecret.key }}
{{- $_ := set $client "ssl_cafile" $ca }}
{{- $_ := set $spark "kafka.ssl.truststore.type" "PEM" }}
{{- $_ := set $spark "kafka.ssl.truststore.location" $ca }}
{{- if $tls.clientCert.enabled }}
{{- $_ := set $client "ssl_certfile" (printf "%s/%s" $p.clientCert $tls.clientCert.certKey) }}
{{- $_ := set $client "ssl_keyfile" (printf "%s/%s" $p.clientCert $tls.clientCert.keyKey) }}
{{- $_ := set $spark "kafka.ssl.keystore.type" "PEM" }}
{{- $_ := set $spark "kafka.ssl.keystore.certificate.chain" (printf "%s/%s" $p.clientCert $tls.clientCert.certKey) }}
{{- $_ := set $spark "kafka.ssl.keystore.key" (printf "%s/%s" $p.clientCert $tls.clientCert.keyKey) }}
{{- end }}
{{- end }}
{{- if $sasl.enabled }}
{{- $_ := set $client "sasl_mechanism" $sasl.mechanism }}
{{- $_ := set $client "sasl_plain_username" $sasl.username }}
{{- $_ := set $secretFiles "sasl_plain_password" (printf "%s/%s" $p.sasl $sasl.passwordSecret.key) }}
{{- $module := ternary "org.apache.kafka.common.security.plain.PlainLoginModule" "org.apache.kafka.common.security.scram.ScramLoginModule" (eq $sasl.mechanism "PLAIN") }}
{{- $_ := set $spark "kafka.sasl.mechanism" $sasl.mechanism }}
{{- $_ := set $spark "kafka.config.providers" "dir" }}
{{- $_ := set $spark "kafka.config.providers.dir.class" "org.apache.kafka.common.config.provider.DirectoryConfigProvider" }}
{{- $_ := set $spark "kafka.sasl.jaas.config" (printf "%s required username=\"%s\" password=\"${dir:%s:%s}\";" $module $sasl.username $p.sasl $sasl.passwordSecret.key) }}
{{- end }}
{{- if $client }}{{ $_ := set $kafka "client" $client }}{{ else }}{{ $_ := unset $kafka "client" }}{{ end }}
{{- if $spark }}{{ $_ := set $kafka "spark_options" $spark }}{{ else }}{{ $_ := unset $kafka "spark_options" }}{{ end }}
{{- if $secretFiles }}{{ $_ := set $kafka "client_secret_files" $secretFiles }}{{ end }}
{{- $_ := set $cfg "kafka" $kafka }}
{{- toToml $cfg }}
{{- end }}

{{/* Volumes shared by both modes. */}}
{{- define "rebalance-monitor.volumes" -}}
- name: config
  configMap:
    name: {{ include "rebalance-monitor.fullname" . }}
- name: data
{{- if .Values.persistence.enabled }}
  persistentVolumeClaim:
    claimName: {{ default (printf "%s-data" (include "rebalance-monitor.fullname" .)) .Values.persistence.existingClaim }}
{{- else }}
  emptyDir: {}
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
- name: spark-local-dir-1
  emptyDir:
    sizeLimit: {{ .Values.sparkLocalDirSizeLimit }}
{{- with .Values.kafkaSecrets.tls }}
{{- if .enabled }}
- name: kafka-ca
  secret:
    secretName: {{ .caSecret.name }}
    items:
      - key: {{ .caSecret.key }}
        path: {{ .caSecret.key }}
{{- if .clientCert.enabled }}
- name: kafka-client-cert
  secret:
    secretName: {{ .clientCert.secretName }}
    items:
      - key: {{ .clientCert.certKey }}
        path: {{ .clientCert.certKey }}
      - key: {{ .clientCert.keyKey }}
        path: {{ .clientCert.keyKey }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.kafkaSecrets.sasl }}
{{- if .enabled }}
- name: kafka-sasl
  secret:
    secretName: {{ .passwordSecret.name }}
    items:
      - key: {{ .passwordSecret.key }}
        path: {{ .passwordSecret.key }}
{{- end }}
{{- end }}
{{- end }}

{{/* Mounts of the monitor's container (driver or Deployment pod): the config plus the shared ones. */}}
{{- define "rebalance-monitor.volumeMounts" -}}
{{- $p := include "rebalance-monitor.paths" . | fromYaml -}}
- name: config
  mountPath: {{ $p.config }}/monitor.toml
  subPath: monitor.toml
  readOnly: true
{{ include "rebalance-monitor.sharedVolumeMounts" . }}
{{- end }}

{{/* Mounts that Spark executors need too: they read Kafka (TLS/SASL files) and write state
     store files under the checkpoint. */}}
{{- define "rebalance-monitor.sharedVolumeMounts" -}}
{{- $p := include "rebalance-monitor.paths" . | fromYaml -}}
- name: data
  mountPath: {{ $p.data }}
- name: tmp
  mountPath: {{ $p.tmp }}
- name: spark-local-dir-1
  mountPath: {{ $p.sparkLocal }}
{{- if .Values.kafkaSecrets.tls.enabled }}
- name: kafka-ca
  mountPath: {{ $p.ca }}
  readOnly: true
{{- if .Values.kafkaSecrets.tls.clientCert.enabled }}
- name: kafka-client-cert
  mountPath: {{ $p.clientCert }}
  readOnly: true
{{- end }}
{{- end }}
{{- if .Values.kafkaSecrets.sasl.enabled }}
- name: kafka-sasl
  mountPath: {{ $p.sasl }}
  readOnly: true
{{- end }}
{{- end }}

{{- define "rebalance-monitor.containerSecurityContext" -}}
{{- toYaml .Values.securityContext }}
{{- end }}
