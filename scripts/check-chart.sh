#!/usr/bin/env bash
# Lints and renders the Helm chart, and checks what the renders must hold:
# each service a Deployment, the scheduler with 2 replicas on the Kubernetes
# runtime with the RBAC it needs, etcd TLS mounted, the agent DaemonSet on
# GPU nodes when enabled (mutual TLS on its listener; in Kubernetes mode with runtime kubernetes), TLS on every service by default (the identity
# service among them), the gateway in front of them all, the metrics port, scrape annotations, the
# Grafana dashboard and the ServiceMonitor, the metrics service (Prometheus URL, S3 bucket and
# credentials) when enabled, the alerting rules (a ConfigMap; a PrometheusRule on request), and a clear failure without etcd endpoints.
# Usage: check-chart.sh HELM CHART_DIR
set -euo pipefail
helm=$1 chart=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "check-chart: $*" >&2; exit 1; }
has() { grep -qF -- "$2" "$1" || fail "$(basename "$1"): missing: $2"; }

"$helm" lint --strict "$chart" >"$out/lint" 2>&1 || { cat "$out/lint" >&2; fail "helm lint failed"; }
"$helm" template rw "$chart" --namespace runway-system >"$out/default.yaml"
"$helm" template rw "$chart" --set agent.enabled=true --set scheduler.runtime=local \
  --set etcd.tls.enabled=false --set 'etcd.endpoints={http://etcd:2379}' >"$out/local.yaml"
"$helm" template rw "$chart" --namespace runway-system --set agent.enabled=true >"$out/kubeagent.yaml"

d=$out/default.yaml
[ "$(grep -c '^kind: Deployment' "$d")" = 6 ] || fail "default: want 6 Deployments (identity, quota, workload, nodemanager, scheduler, gateway)"
grep -q '^kind: DaemonSet' "$d" && fail "default: the agent DaemonSet must be off with runtime kubernetes"
for s in identity quota workload nodemanager scheduler gateway; do has "$d" "name: rw-runway-$s"; done
[ "$(grep -c -- '- --tls-cert-file=/etc/runway/tls/tls.crt' "$d")" = 6 ] || fail "default: want TLS on the 5 services and the gateway"
# The gateway: one address for every service.
has "$d" "- gateway"
for s in identity quota workload scheduler nodemanager; do has "$d" "- --$s-server=rw-runway-$s:7070"; done
"$helm" template rw "$chart" --set 'gateway.trustedBy={10.244.0.0/16}' >"$out/trusted.yaml"
[ "$(grep -c -- '- --trusted-proxies=10.244.0.0/16' "$out/trusted.yaml")" = 5 ] || fail "gateway.trustedBy: want --trusted-proxies on the 5 services"
has "$d" "- --tls-ca-file=/etc/runway/tls/ca.crt"
has "$d" "secretName: runway-tls"
has "$d" "scheme: HTTPS"
has "$d" "replicas: 2"
has "$d" "- --runtime=kubernetes"
has "$d" "- --workload-server=rw-runway-workload:7070"
has "$d" "- --namespace=runway-workloads"
has "$d" "- --replica=\$(POD_NAME)"
has "$d" "- --quota-server=rw-runway-quota:7070"
has "$d" "- --etcd-endpoints=https://etcd-0.etcd:2379,https://etcd-1.etcd:2379,https://etcd-2.etcd:2379"
has "$d" "- --etcd-ca-file=/etc/runway/etcd/ca.crt"
has "$d" "secretName: runway-etcd-client"
has "$d" "resources: [pods/binding]"
# Node roles: the runtime labels nodes, and the services prefer system nodes.
grep -q -A2 'resources: \[nodes\]' "$d" && grep -A2 'resources: \[nodes\]' "$d" | grep -qF 'verbs: [get, list, watch, patch]' || fail "default: the runtime needs patch on nodes (node roles as labels)"
[ "$(grep -c -- '- key: node-role.kubernetes.io/runai-system' "$d")" = 6 ] || fail "default: want the 6 Deployments to prefer system nodes"
"$helm" template rw "$chart" --set systemNodes.preferred=false >"$out/nosystem.yaml"
grep -q 'runai-system' "$out/nosystem.yaml" && fail "systemNodes.preferred=false: the affinity is still rendered"
has "$d" "kind: ClusterRoleBinding"
has "$d" "namespace: runway-system"

l=$out/local.yaml
has "$l" "kind: DaemonSet"
has "$l" "nvidia.com/gpu.present: \"true\""
has "$l" "- --node=\$(NODE_NAME)"
has "$l" "- --runtime=local"
has "$l" "- --etcd-endpoints=http://etcd:2379"
grep -q -- '--etcd-ca-file' "$l" && fail "local: TLS flags rendered with etcd.tls.enabled=false"
[ "$(grep -c -- '--workload-server' "$l")" = 2 ] || fail "local: --workload-server rendered on the scheduler with runtime local (the gateway's and the agents', for credentials, alone are expected)"
# The agents serve mutual TLS on the pod's IP; the workload service checks
# their one certificate name.
has "$l" "- --listen=0.0.0.0:7072"
has "$l" "- --advertise-address=\$(POD_IP)"
has "$l" "- --tls-client-ca-file=/etc/runway/tls/ca.crt"
has "$l" "- --tls-agent-server-name=rw-runway-agent"
[ "$(grep -c -- '- --tls-cert-file=/etc/runway/tls/tls.crt' "$l")" = 7 ] || fail "local: want TLS on the 5 services, the gateway and the agent"
grep -q -- '--tls-agent-server-name' "$d" && fail "default: --tls-agent-server-name rendered without agents"
# The local agent runs pods beside its credentials: its Secrets 0400 and
# covered in every pod's mount namespace (services/e2e/hostile checks each
# Secret volume of the rendered agent).
has "$l" "- --hide-from-pods=/etc/runway"
has "$l" "defaultMode: 0400"

# The agent in Kubernetes mode (runtime kubernetes): the host's pids and
# cgroup tree, the kubelet's logs read-only, not privileged, a
# ServiceAccount that reads and annotates pods (Runway's, in the projects'
# namespaces; an admission policy narrows it to its node's); no data
# directory; its listener with mutual TLS as the local agent's.
k=$out/kubeagent.yaml
has "$k" "kind: DaemonSet"
for a in "- --runtime=kubernetes" "- --namespace=runway-workloads" "- --cgroup-root=/host/sys/fs/cgroup" \
  "- --log-root=/host/var/log/pods" "path: /var/log/pods" "path: /var/lib/kubelet/pod-resources" \
  "- --pod-resources=/host/var/lib/kubelet/pod-resources/kubelet.sock" "hostPID: true" "privileged: false" "path: /sys/fs/cgroup" \
  "serviceAccountName: rw-runway-agent" "verbs: [get, list, watch, patch]" "- --listen=0.0.0.0:7072" \
  "- --tls-client-ca-file=/etc/runway/tls/ca.crt" "- --tls-agent-server-name=rw-runway-agent"; do has "$k" "$a"; done
grep -q -- "--data-dir" "$k" && fail "kubernetes-mode agent: --data-dir rendered"
[ "$(grep -c '^kind: Role$' "$k")" = 3 ] || fail "kubernetes-mode agent: want three Roles: the reservation pods', the mark key's and the nodemanager's"
for r in runway-gpu-reservation rw-runway-mark-key rw-runway-nodemanager; do has "$k" "name: $r"; done
[ "$(grep -c '^kind: ClusterRole$' "$k")" = 3 ] || fail "kubernetes-mode agent: want the scheduler's, the agent's and the nodemanager's ClusterRoles (Runway's pods are in every project's namespace; the nodemanager reviews agents' tokens)"
for r in rw-runway-agent rw-runway-nodemanager rw-runway-scheduler; do has "$k" "name: $r"; done
has "$k" "kind: ValidatingAdmissionPolicy"
has "$k" "kind: ValidatingAdmissionPolicyBinding"
has "$k" 'request.userInfo.username == "system:serviceaccount:runway-system:rw-runway-agent"'
grep -q 'system:serviceaccount:runway-system:rw-runway-agent' "$out/local.yaml" && fail "local: the Kubernetes-mode agent's admission policy rendered"

# Observability: every service's operations port behind the metrics token,
# scrape annotations, the Grafana dashboard; the ServiceMonitor on request.
[ "$(grep -c -- '- --metrics-listen=0.0.0.0:9464' "$d")" = 6 ] || fail "default: want --metrics-listen on the 5 services and the gateway"
has "$d" "- --metrics-token-file=/etc/runway/metrics/token"
has "$d" "secretName: runway-metrics-token"
has "$d" 'prometheus.io/scrape: "true"'
has "$d" 'prometheus.io/port: "9464"'
has "$d" "name: rw-runway-dashboard"
has "$d" '"uid": "runway-overview"'
grep -q '^kind: ServiceMonitor' "$d" && fail "default: the ServiceMonitor must be off unless asked for"
"$helm" template rw "$chart" --set metrics.serviceMonitor.enabled=true >"$out/monitor.yaml"
has "$out/monitor.yaml" "kind: ServiceMonitor"
has "$out/monitor.yaml" "- port: metrics"
"$helm" template rw "$chart" --set metrics.enabled=false --set metrics.grafanaDashboard.enabled=false >"$out/nometrics.yaml"
grep -q -- '--metrics-listen' "$out/nometrics.yaml" && fail "metrics.enabled=false: --metrics-listen rendered"

# Alerting rules for the notifications' conditions: a ConfigMap with the
# rule file by default (the values filled in), a PrometheusRule on request.
has "$d" "name: rw-runway-alert-rules"
for a in "alert: RunwayWorkloadFailed" "alert: RunwayWorkloadsPreempted" "alert: RunwayWorkloadsPendingTooLong" \
  "alert: RunwayWorkloadGPUsIdle" "alert: RunwayNodeLost" "alert: RunwayGPUUnhealthy" "alert: RunwayProjectOverQuota" \
  "alert: RunwayDepartmentOverQuota" "for: 1h" "> 1800" "(1 + 20 / 100)"; do has "$d" "$a"; done
grep -qF '[[ ' "$d" && fail "default: an alerts placeholder left unfilled"
grep -q '^kind: PrometheusRule' "$d" && fail "default: the PrometheusRule must be off unless asked for"
"$helm" template rw "$chart" --set alerts.prometheusRule.enabled=true --set alerts.departmentOverQuotaPercent=50 >"$out/rules.yaml"
has "$out/rules.yaml" "kind: PrometheusRule"
has "$out/rules.yaml" "(1 + 50 / 100)"
"$helm" template rw "$chart" --set alerts.enabled=false >"$out/norules.yaml"
grep -q 'alert-rules' "$out/norules.yaml" && fail "alerts.enabled=false: the rules rendered"

# The metrics service, on request: its Prometheus, its S3 bucket with the
# credentials and CA mounted from Secrets; refused without either.
"$helm" template rw "$chart" --set metricsService.enabled=true --set metricsService.prometheusUrl=http://prometheus:9090 \
  --set metricsService.s3.endpoint=https://s3.example.com --set metricsService.s3.caSecret=s3-ca >"$out/metricssvc.yaml"
m=$out/metricssvc.yaml
[ "$(grep -c '^kind: Deployment' "$m")" = 7 ] || fail "metricsService: want 7 Deployments (6 services and the gateway)"
has "$m" "name: rw-runway-metrics"
for a in "- metrics" "- --prometheus-url=http://prometheus:9090" "- --blob-s3-endpoint=https://s3.example.com" \
  "- --blob-s3-bucket=runway-reports" "- --blob-s3-access-key-file=/etc/runway/s3/access-key" \
  "- --blob-s3-secret-key-file=/etc/runway/s3/secret-key" "- --blob-s3-ca-file=/etc/runway/s3-ca/ca.crt" \
  "secretName: runway-s3-credentials" "secretName: s3-ca"; do has "$m" "$a"; done
[ "$(grep -c -- '- --metrics-listen=0.0.0.0:9464' "$m")" = 7 ] || fail "metricsService: want --metrics-listen on the 6 services and the gateway"
grep -q -- '--blob-s3' "$d" && fail "default: the metrics service must be off unless asked for"
for missing in "metricsService.prometheusUrl" "metricsService.s3.endpoint"; do
  set -- --set metricsService.enabled=true --set metricsService.prometheusUrl=http://p:9090 --set metricsService.s3.endpoint=https://s3
  if "$helm" template rw "$chart" "$@" --set "$missing=" >"$out/nometricssvc" 2>&1; then
    fail "metricsService without $missing must fail"
  fi
  has "$out/nometricssvc" "$missing is required"
done

if "$helm" template rw "$chart" --set 'etcd.endpoints=null' >"$out/none" 2>&1; then
  fail "rendering without etcd.endpoints must fail"
fi
has "$out/none" "etcd.endpoints is required"
echo "check-chart: $chart lints and renders (default: runtime kubernetes, TLS, metrics; local: agent DaemonSet; the metrics service with S3)"
