package hostile

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/pkg/runner/kubelet"
	"github.com/runwayhq/runway/services/nodemanager/agent"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// nkKey is node's key as the NodeManagerService gives it to token's
// holder, failing the test when it does not.
func (e *nkEnv) key(t *testing.T, token, node string) []byte {
	t.Helper()
	k, err := e.nodeManager(t, token).GetNodeMarkKey(t.Context(), &nodemanagerv1.GetNodeMarkKeyRequest{KubernetesNode: node})
	if err != nil {
		t.Fatalf("the agent of %s asking for its own key: %v", node, err)
	}
	if k.GetKubernetesNode() != node || len(k.GetKey()) != sha256.Size {
		t.Fatalf("the key of %s: %q, %d bytes", node, k.GetKubernetesNode(), len(k.GetKey()))
	}
	return k.GetKey()
}

// refused checks that GetNodeMarkKey(node) with token fails with code and,
// for PERMISSION_DENIED, why.
func (e *nkEnv) refused(t *testing.T, who, token, node string, code codes.Code, why string) {
	t.Helper()
	k, err := e.nodeManager(t, token).GetNodeMarkKey(t.Context(), &nodemanagerv1.GetNodeMarkKeyRequest{KubernetesNode: node})
	if apierr.Code(err) != code {
		t.Errorf("%s asking for %s's key: %v (key %d bytes), want %v", who, node, err, len(k.GetKey()), code)
		return
	}
	if why != "" && apierr.Info(err).GetMetadata()["why"] != why {
		t.Errorf("%s asking for %s's key: refused with %v (metadata %v), want why %q", who, node, err, apierr.Info(err).GetMetadata(), why)
	}
}

// TestHostileNodeKeyOnlyTheAgentsOwn: root on node nk-a holds what nk-a's
// agent holds, its service account token (bound to its pod, for Runway's
// audience). With it the NodeManagerService gives nk-a's key and refuses
// nk-b's (PERMISSION_DENIED: the pod runs on another node). Tokens of
// another account, unbound, for another audience, of a deleted pod, none
// at all, and Runway's own administrator token get no key. The running
// agent reads nothing in etcd that holds the mark key, and no key it could
// get is the mark key; the mark key is nowhere in etcd.
func TestHostileNodeKeyOnlyTheAgentsOwn(t *testing.T) {
	e := nkStart(t)
	podA, tokA := e.agent(t, "nk-a")
	_, tokB := e.agent(t, "nk-b")
	keyA, keyB := e.key(t, tokA, "nk-a"), e.key(t, tokB, "nk-b")
	if bytes.Equal(keyA, keyB) {
		t.Fatal("nk-a and nk-b were given the same key")
	}
	e.refused(t, "nk-a's agent", tokA, "nk-b", codes.PermissionDenied, "the agent's pod runs on another node")
	e.refused(t, "nk-b's agent", tokB, "nk-a", codes.PermissionDenied, "the agent's pod runs on another node")
	e.logged(t, "the refusal", "node mark key not given", `node"=nk-b`, "runs on another node")

	// Another account's pod on nk-b (a tenant's, or any workload's there).
	_, intruder, err := e.kc.AgentPod(t.Context(), e.ns, "intruder", "nk-b")
	if err != nil {
		t.Fatal(err)
	}
	e.refused(t, "another account's pod on nk-b", intruder, "nk-b", codes.PermissionDenied, "the token is not the node agents' service account's")
	// The agents' account, but a token bound to no pod: it names no node.
	unbound, err := e.kc.Kube.CoreV1().ServiceAccounts(e.ns).CreateToken(t.Context(), podA.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{kube.DefaultNodeKeyAudience}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.refused(t, "an unbound token of the agents' account", unbound.Status.Token, "nk-a", codes.PermissionDenied, "the token is not bound to the agent's pod")
	// nk-a's pod's token for another audience (one the kubelet mounts for the apiserver).
	other, err := e.kc.Token(t.Context(), podA, "https://kubernetes.default.svc")
	if err != nil {
		t.Fatal(err)
	}
	e.refused(t, "nk-a's token for another audience", other, "nk-a", codes.Unauthenticated, "")
	e.refused(t, "a caller without a token", "", "nk-a", codes.Unauthenticated, "")
	e.refused(t, "Runway's administrator", e.dev.token, "nk-a", codes.Unauthenticated, "")
	e.refused(t, "a forged token", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJub2RlIn0.", "nk-a", codes.Unauthenticated, "")

	// The mark key is in its Secret (which no agent's account reads), in no
	// answer, and nowhere in etcd, whose credential the agents hold.
	secret, err := e.kc.Kube.CoreV1().Secrets(e.ns).Get(t.Context(), kube.MarkKeySecret, metav1.GetOptions{})
	if err != nil || len(secret.Data["key"]) != 32 {
		t.Fatalf("the mark key's Secret: %v, %v", secret, err)
	}
	master := secret.Data["key"]
	for name, k := range map[string][]byte{"nk-a": keyA, "nk-b": keyB} {
		if bytes.Equal(k, master) {
			t.Errorf("%s's key is the mark key", name)
		}
	}
	all, err := e.etcd.Get(t.Context(), "\x00", clientv3.WithFromKey())
	if err != nil || len(all.Kvs) == 0 {
		t.Fatalf("etcd's keys: %v, %v", all, err)
	}
	for _, kv := range all.Kvs {
		if bytes.Contains(kv.Value, master) || string(kv.Key) == etcdstore.KeyKubePodMark {
			t.Errorf("etcd's %s holds the mark key", kv.Key)
		}
	}

	// nk-a's agent, run as `runway agent --runtime kubernetes` runs it,
	// with every etcd read it makes recorded: it gets its key from the
	// service and reads nothing in etcd that holds the mark key.
	reads := &nkReads{}
	cli := e.etcdClient(t)
	reads.record(cli)
	agentLog := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- agent.Run(ctx, agent.Config{Node: kube.NodeID("nk-a"), Backend: simulated.New(simulated.Config{Count: 0}), Client: cli,
			Logger: slog.New(slog.NewTextHandler(agentLog, nil)), Kube: &agent.KubeMode{Client: e.kc.Kube, NodeName: "nk-a", Namespace: e.ns,
				NodeManager: e.nodeManager(t, tokA), Procs: kubelet.Config{ProcRoot: t.TempDir(), CgroupRoot: t.TempDir()}}})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !nkHasAll(agentLog.String(), "node agent: Kubernetes mode") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("nk-a's agent did not start: %s", agentLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-ran; err != context.Canceled {
		t.Errorf("agent.Run = %v, want context.Canceled", err)
	}
	if got := reads.covering(etcdstore.KeyKubePodMark); len(got) != 0 {
		t.Errorf("nk-a's agent read the mark key from etcd: %v", got)
	}
	e.logged(t, "nk-a's agent given its key", "node mark key given to the node's agent", `node"=nk-a`)

	// A deleted agent pod's token is dead with it.
	zero := int64(0)
	if err := e.kc.Kube.CoreV1().Pods(e.ns).Delete(t.Context(), podA.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, "nk-a's deleted pod's token refused", func() error {
		_, err := e.nodeManager(t, tokA).GetNodeMarkKey(t.Context(), &nodemanagerv1.GetNodeMarkKeyRequest{KubernetesNode: "nk-a"})
		if c := apierr.Code(err); c != codes.Unauthenticated && c != codes.PermissionDenied {
			return fmt.Errorf("GetNodeMarkKey = %v, want refused", err)
		}
		return nil
	})
}

// TestHostileNodeKeyMarkForAnotherNode: root on nk-a, holding nk-a's key,
// goes for a workload on nk-b. A copy of its pod on nk-b marked with nk-a's
// key is not Runway's (the runtime logs why, takes its GPU off nk-b's
// offer and leaves it alone), and nk-b's agent, with its own key, does not
// take it for Runway's; findings signed with nk-a's key on the real pod
// (ended for going over its memory, idle two hours) are not counted (the
// runtime logs why; the pod stays RUNNING, idle 0); a pod on nk-a, marked
// with nk-a's key (its own node's), that claims the binding of nk-b's pod
// is not Runway's either: its phase and findings are not that pod's. The
// control: nk-b's
// own key (its agent's) takes the runtime's mark on the real pod, and
// findings it signs are counted (idle one hour).
func TestHostileNodeKeyMarkForAnotherNode(t *testing.T) {
	e := nkStart(t)
	_, tokA := e.agent(t, "nk-a")
	_, tokB := e.agent(t, "nk-b")
	keyA, keyB := e.key(t, tokA, "nk-a"), e.key(t, tokB, "nk-b")

	rw := e.dev.admin
	deserved := int64(2000)
	if _, err := quotav1.NewQuotaServiceClient(rw).CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: "team-k",
		Project: &quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
			Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}}}}); err != nil {
		t.Fatal(err)
	}
	wl := workloadv1.NewWorkloadServiceClient(rw)
	if _, err := wl.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-k", WorkloadId: "train",
		Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, Spec: &workloadv1.WorkloadSpec{
			Image: "busybox", Command: []string{"sleep", "3600"}, Pods: 1, MilliCpu: 100, MemoryBytes: 100 << 20,
			Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	ns := kube.ProjectNamespace("team-k")
	var real corev1.Pod
	apiEventually(t, "train's pod running on nk-b", func() error {
		l, err := e.kc.Kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: kube.LabelWorkload + "=train"})
		if err != nil || len(l.Items) != 1 || l.Items[0].Status.Phase != corev1.PodRunning {
			return fmt.Errorf("train's pods: %v, %v", l, err)
		}
		real = l.Items[0]
		return nil
	})
	if real.Spec.NodeName != "nk-b" {
		t.Fatalf("train's pod on %q, want nk-b (the only node with GPUs)", real.Spec.NodeName)
	}
	status := func() *workloadv1.PodStatus {
		w, err := wl.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-k/workloads/train"})
		if err != nil || len(w.GetStatus().GetPods()) != 1 {
			t.Fatalf("train: %v, %v", w, err)
		}
		return w.GetStatus().GetPods()[0]
	}
	apiEventually(t, "train RUNNING", func() error {
		if s := status(); s.GetState() != workloadv1.PodState_POD_STATE_RUNNING {
			return fmt.Errorf("train's pod %v", s)
		}
		return nil
	})

	// Marks: the runtime's on the real pod are nk-b's key's, not nk-a's.
	marksA, err := kube.NewMarks("nk-b", keyA) // nk-a's key, claiming nk-b
	if err != nil {
		t.Fatal(err)
	}
	marksB, err := kube.NewMarks("nk-b", keyB)
	if err != nil {
		t.Fatal(err)
	}
	if !marksB.Ours(&real, e.ns) || marksA.Ours(&real, e.ns) {
		t.Errorf("the runtime's mark on nk-b's pod: under nk-b's key %v, under nk-a's %v; want nk-b's alone",
			marksB.Ours(&real, e.ns), marksA.Ours(&real, e.ns))
	}
	// A copy of the real pod on nk-b, marked with nk-a's key.
	a := real.Annotations
	forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forged-b", Namespace: ns, Labels: real.Labels,
		Annotations: map[string]string{kube.AnnotationBinding: a[kube.AnnotationBinding], kube.AnnotationBindingRev: a[kube.AnnotationBindingRev],
			kube.AnnotationDevices: a[kube.AnnotationDevices]}},
		Spec: *real.Spec.DeepCopy()}
	forged.Annotations[kube.AnnotationMark] = nkMark(keyA, ns, forged.Name, "nk-b", a[kube.AnnotationBinding], a[kube.AnnotationBindingRev], a[kube.AnnotationDevices], "")
	if forged, err = e.kc.Kube.CoreV1().Pods(ns).Create(t.Context(), forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.logged(t, "the forged pod not taken for Runway's", "not its mark; not Runway's", "pod="+ns+"/forged-b")
	if marksB.Ours(forged, e.ns) {
		t.Error("nk-b's agent takes the pod marked with nk-a's key for Runway's")
	}
	apiEventually(t, "the forged pod's GPU off nk-b's offer", func() error {
		n, err := nodemanagerv1.NewNodeManagerServiceClient(rw).GetNode(t.Context(), &nodemanagerv1.GetNodeRequest{Name: "nodes/" + kube.NodeID("nk-b")})
		if err != nil || n.GetAllocatable().GetMilliGpus() != 1000 {
			return fmt.Errorf("nk-b: %v, %v; want 1000 mGPU allocatable (2 less the forged pod's)", n.GetAllocatable(), err)
		}
		return nil
	})
	if p, err := e.kc.Kube.CoreV1().Pods(ns).Get(t.Context(), "forged-b", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the forged pod: %v, deleting %v; want it left to its author", err, p.GetDeletionTimestamp())
	}
	if ws, err := wl.ListWorkloads(t.Context(), &workloadv1.ListWorkloadsRequest{Parent: "projects/team-k"}); err != nil || len(ws.GetWorkloads()) != 1 {
		t.Errorf("team-k's workloads: %v, %v; want train's alone", ws, err)
	}

	// Findings on the real pod signed with nk-a's key.
	patch := func(m kube.Marks, ended, idle string) {
		t.Helper()
		ann := map[string]any{kube.AnnotationGPUIdleSeconds: idle, kube.AnnotationEndedByAgent: nil,
			kube.AnnotationAgentReportMAC: m.SignAgentReport(ns, real.Name, string(real.UID), ended, idle, time.Now())}
		if ended != "" {
			ann[kube.AnnotationEndedByAgent] = ended
		}
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		if _, err := e.kc.Kube.CoreV1().Pods(ns).Patch(t.Context(), real.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(marksA, "Out of GPU memory: forged by nk-a", "7200")
	e.logged(t, "nk-a's findings not counted", "not signed with the key of its node; not counted", "pod="+ns+"/"+real.Name, "node=nk-b")
	time.Sleep(time.Second) // the workload controller folds any report within this
	if s := status(); s.GetState() != workloadv1.PodState_POD_STATE_RUNNING || s.GetGpuIdleTime().AsDuration() != 0 {
		t.Fatalf("train's pod after nk-a's findings: %v; want RUNNING, idle 0", s)
	}
	// nk-a's key on a pod of nk-a's own (which it may mark) claiming the
	// binding of nk-b's pod: its phase and findings are not nk-b's pod's.
	marksOwn, err := kube.NewMarks("nk-a", keyA)
	if err != nil {
		t.Fatal(err)
	}
	onA := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "claims-b", Namespace: ns, Labels: real.Labels,
		Annotations: map[string]string{kube.AnnotationBinding: a[kube.AnnotationBinding], kube.AnnotationBindingRev: a[kube.AnnotationBindingRev],
			kube.AnnotationDevices: a[kube.AnnotationDevices], kube.AnnotationGPUIdleSeconds: "5400"}},
		Spec: *real.Spec.DeepCopy()}
	onA.Spec.NodeName = "nk-a"
	onA.Annotations[kube.AnnotationMark] = nkMark(keyA, ns, onA.Name, "nk-a", a[kube.AnnotationBinding], a[kube.AnnotationBindingRev], a[kube.AnnotationDevices], "")
	if onA, err = e.kc.Kube.CoreV1().Pods(ns).Create(t.Context(), onA, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ended := "Out of GPU memory: forged by nk-a on its own node"
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{kube.AnnotationEndedByAgent: ended,
		kube.AnnotationAgentReportMAC: marksOwn.SignAgentReport(ns, onA.Name, string(onA.UID), ended, "5400", time.Now())}}})
	if onA, err = e.kc.Kube.CoreV1().Pods(ns).Patch(t.Context(), onA.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.logged(t, "nk-a's pod claiming nk-b's binding not taken for Runway's", "not its mark; not Runway's", "pod="+ns+"/claims-b")
	time.Sleep(time.Second)
	if s := status(); s.GetState() != workloadv1.PodState_POD_STATE_RUNNING || s.GetGpuIdleTime().AsDuration() != 0 {
		t.Fatalf("train's pod after nk-a's pod claimed its binding: %v; want RUNNING, idle 0", s)
	}
	if marksOwn.Ours(onA, e.ns) {
		t.Error("nk-a's agent takes its pod claiming nk-b's binding for Runway's")
	}
	// The control: nk-b's agent's findings count.
	patch(marksB, "", "3600")
	apiEventually(t, "nk-b's findings counted", func() error {
		if s := status(); s.GetState() != workloadv1.PodState_POD_STATE_RUNNING || s.GetGpuIdleTime().AsDuration() != time.Hour {
			return fmt.Errorf("train's pod %v; want RUNNING, idle 1h", s)
		}
		return nil
	})
}

// nkMark is what root on a node computes with a node key it holds: the
// mark of a pod (the runtime's format, which the source shows).
func nkMark(key []byte, parts ...string) string {
	h := hmac.New(sha256.New, key)
	for _, p := range append([]string{"runway pod mark"}, parts...) {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// TestHostileNodeKeyWithoutKubernetesRuntime: a NodeManagerService with no
// Kubernetes runtime gives no key to anyone, its administrator included.
func TestHostileNodeKeyWithoutKubernetesRuntime(t *testing.T) {
	d := apiStartDev(t, nil)
	for who, token := range map[string]string{"the administrator": d.token, "a caller without a token": ""} {
		_, err := nodemanagerv1.NewNodeManagerServiceClient(d.conn(t, token)).GetNodeMarkKey(t.Context(),
			&nodemanagerv1.GetNodeMarkKeyRequest{KubernetesNode: "n1"})
		if apierr.Code(err) != codes.PermissionDenied || !strings.Contains(apierr.Info(err).GetMetadata()["why"], "no Kubernetes runtime") {
			t.Errorf("%s asking for a node key of runway dev without Kubernetes: %v, want PERMISSION_DENIED (no Kubernetes runtime)", who, err)
		}
	}
}

// TestHostileNodeAgentTokenOnlyTheAgentsOwn: the same proof (the agents'
// service account token bound to its pod) gets a node agent its Runway
// token, for its own node only: with nk-a's token, nk-a's agent's and
// never nk-b's; with a tenant's pod's token, none. The token it gets opens
// the credentials of nk-a's pods only and is no administrator's.
func TestHostileNodeAgentTokenOnlyTheAgentsOwn(t *testing.T) {
	e := nkStart(t)
	_, tokA := e.agent(t, "nk-a")
	issued, err := e.nodeManager(t, tokA).IssueNodeAgentToken(t.Context(), &nodemanagerv1.IssueNodeAgentTokenRequest{KubernetesNode: "nk-a"})
	if err != nil {
		t.Fatalf("nk-a's agent asking for its token: %v", err)
	}
	if issued.GetNode() != "nodes/"+kube.NodeID("nk-a") || issued.GetToken() == "" || time.Until(issued.GetExpireTime().AsTime()) > 2*time.Hour {
		t.Fatalf("nk-a's token: %v", issued)
	}
	if _, err := e.nodeManager(t, tokA).IssueNodeAgentToken(t.Context(), &nodemanagerv1.IssueNodeAgentTokenRequest{KubernetesNode: "nk-b"}); apierr.Code(err) != codes.PermissionDenied {
		t.Errorf("nk-a's agent asking for nk-b's token: %v, want PermissionDenied", err)
	}
	_, intruder, err := e.kc.AgentPod(t.Context(), e.ns, "intruder-token", "nk-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.nodeManager(t, intruder).IssueNodeAgentToken(t.Context(), &nodemanagerv1.IssueNodeAgentTokenRequest{KubernetesNode: "nk-a"}); apierr.Code(err) != codes.PermissionDenied {
		t.Errorf("another account's pod on nk-a asking for nk-a's token: %v, want PermissionDenied", err)
	}
	if _, err := e.nodeManager(t, e.dev.token).IssueNodeAgentToken(t.Context(), &nodemanagerv1.IssueNodeAgentTokenRequest{KubernetesNode: "nk-a"}); apierr.Code(err) != codes.Unauthenticated {
		t.Errorf("Runway's administrator asking for nk-a's token: %v, want Unauthenticated", err)
	}
	// What the token is worth: nothing but its own node's pods' credentials.
	if _, err := e.nodeManager(t, issued.GetToken()).DrainNode(t.Context(), &nodemanagerv1.DrainNodeRequest{Name: issued.GetNode()}); apierr.Code(err) != codes.PermissionDenied {
		t.Errorf("nk-a's agent's token drains its node: %v, want PermissionDenied", err)
	}
}
