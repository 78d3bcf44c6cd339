{{- define "runway.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "runway.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "runway.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "runway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ default (include "runway.fullname" .) .Values.serviceAccount.name }}
{{- else -}}
{{ required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{/* The etcd flags every Runway process takes. */}}
{{- define "runway.etcdArgs" -}}
- --etcd-endpoints={{ required "etcd.endpoints is required" .Values.etcd.endpoints | join "," }}
{{- if .Values.etcd.tls.enabled }}
- --etcd-ca-file=/etc/runway/etcd/ca.crt
- --etcd-cert-file=/etc/runway/etcd/tls.crt
- --etcd-key-file=/etc/runway/etcd/tls.key
{{- end }}
{{- end -}}

{{/* The TLS flags of a service's listener and of its calls to the others. */}}
{{- define "runway.tlsArgs" -}}
{{- if .Values.tls.enabled }}
- --tls-cert-file=/etc/runway/tls/tls.crt
- --tls-key-file=/etc/runway/tls/tls.key
- --tls-ca-file=/etc/runway/tls/ca.crt
{{- if .Values.tls.mutual }}
- --tls-client-ca-file=/etc/runway/tls/ca.crt
{{- end }}
{{- end }}
{{- end -}}

{{/* A service's volumes and mounts: etcd's client certificate, its own TLS,
the metrics token. */}}
{{/* A service's volumes (and their mounts): etcd's and the services' TLS,
the metrics token, and for the metrics service the S3 credentials and CA.
Called with (dict "root" $ "name" SERVICE). */}}
{{- define "runway.serviceVolumeMounts" -}}
{{- $v := .root.Values -}}
{{- $s3 := eq .name "metrics" -}}
{{- $hook := and (eq .name "scheduler") $v.scheduler.admissionWebhook.enabled -}}
{{- $keys := and (eq .name "workload") $v.workload.credentialsKeySecret -}}
{{- if or $v.etcd.tls.enabled $v.tls.enabled $v.metrics.enabled $s3 $hook $keys }}
volumeMounts:
{{- if $v.etcd.tls.enabled }}
  - name: etcd-tls
    mountPath: /etc/runway/etcd
    readOnly: true
{{- end }}
{{- if $v.tls.enabled }}
  - name: runway-tls
    mountPath: /etc/runway/tls
    readOnly: true
{{- end }}
{{- if $v.metrics.enabled }}
  - name: metrics-token
    mountPath: /etc/runway/metrics
    readOnly: true
{{- end }}
{{- if $hook }}
  - name: webhook-tls
    mountPath: /etc/runway/webhook
    readOnly: true
{{- end }}
{{- if $keys }}
  - name: credentials-key
    mountPath: /etc/runway/credentials
    readOnly: true
{{- end }}
{{- if $s3 }}
  - name: s3-credentials
    mountPath: /etc/runway/s3
    readOnly: true
{{- if $v.metricsService.s3.caSecret }}
  - name: s3-ca
    mountPath: /etc/runway/s3-ca
    readOnly: true
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "runway.serviceVolumes" -}}
{{- $v := .root.Values -}}
{{- $s3 := eq .name "metrics" -}}
{{- $hook := and (eq .name "scheduler") $v.scheduler.admissionWebhook.enabled -}}
{{- $keys := and (eq .name "workload") $v.workload.credentialsKeySecret -}}
{{- if or $v.etcd.tls.enabled $v.tls.enabled $v.metrics.enabled $s3 $hook $keys }}
volumes:
{{- if $v.etcd.tls.enabled }}
  - name: etcd-tls
    secret:
      secretName: {{ required "etcd.tls.secretName is required with etcd.tls.enabled" $v.etcd.tls.secretName }}
{{- end }}
{{- if $v.tls.enabled }}
  - name: runway-tls
    secret:
      secretName: {{ required "tls.secretName is required with tls.enabled" $v.tls.secretName }}
{{- end }}
{{- if $v.metrics.enabled }}
  - name: metrics-token
    secret:
      secretName: {{ required "metrics.tokenSecret is required with metrics.enabled" $v.metrics.tokenSecret }}
{{- end }}
{{- if $hook }}
  - name: webhook-tls
    secret:
      secretName: {{ required "scheduler.admissionWebhook.certSecret is required with it enabled" $v.scheduler.admissionWebhook.certSecret }}
{{- end }}
{{- if $keys }}
  - name: credentials-key
    secret:
      secretName: {{ $keys }}
      {{- /* The service refuses a key file others may read. */}}
      defaultMode: 0400
{{- end }}
{{- if $s3 }}
  - name: s3-credentials
    secret:
      secretName: {{ required "metricsService.s3.credentialsSecret is required with metricsService.enabled" $v.metricsService.s3.credentialsSecret }}
{{- if $v.metricsService.s3.caSecret }}
  - name: s3-ca
    secret:
      secretName: {{ $v.metricsService.s3.caSecret }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Readiness: gRPC health in plaintext; over TLS the HTTPS /healthz (the
kubelet's gRPC probe speaks no TLS); with mutual TLS the port (the kubelet
has no client certificate). */}}
{{- define "runway.readiness" -}}
readinessProbe:
{{- if not .Values.tls.enabled }}
  grpc:
    port: {{ .Values.port }}
{{- else if .Values.tls.mutual }}
  tcpSocket:
    port: api
{{- else }}
  httpGet:
    path: /healthz
    port: api
    scheme: HTTPS
{{- end }}
{{- end -}}

{{/* Runway's own services prefer the nodes an administrator made system
nodes (the node-role.kubernetes.io/runai-system label, which `runway node
role set NODE --system` writes in Kubernetes mode): preferred, so that a
cluster with none still runs them anywhere. */}}
{{- define "runway.systemNodeAffinity" -}}
affinity:
  nodeAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        preference:
          matchExpressions:
            - key: node-role.kubernetes.io/runai-system
              operator: Exists
{{- end -}}
