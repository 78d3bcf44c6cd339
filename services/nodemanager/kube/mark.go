package kube

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/nodemanager"
)

// Runway's pods share their project's namespace with the project's users,
// who may create, label and annotate pods there as they like. So a pod
// outside Runway's own namespace is Runway's only when it carries
// AnnotationMark: an HMAC-SHA256, under the key of the pod's node
// (HMAC of a key only Runway holds, MarkKeySecret, made once,
// and the node's name: a node's agent holds its own node's, which NodeKeys
// gives to that node's agent alone), over the pod's
// namespace, name, node, the binding it runs and the devices it holds, and its GPU request
// must match those devices (resources cannot change after creation). A
// user cannot make one: a pod with
// Runway's name and labels but no valid mark is never taken for Runway's
// (it holds no device, reports nothing, is not adopted), and its conflict
// is logged. The names of Runway's pods end in a keyed hash too, so a user
// cannot take one before Runway creates it.

// AnnotationMark is a pod's mark (mark.go).
const AnnotationMark = "runway.io/mark"

// marker makes and checks marks with the key. It never signs a mark or a
// finding with the key itself: each node's are under that node's key
// (forNode), so that a node agent holds the key of its own node only, and
// a pod or finding signed with one node's key counts on that node alone.
type marker struct{ key []byte }

// nodeMarker makes and checks the marks and findings of the pods on one
// node, with that node's key.
type nodeMarker struct {
	node string
	key  []byte
}

// MarkKeySecret is the Secret in Runway's namespace that holds the mark
// key (data "key"): the runtime's and the NodeManagerService's accounts
// read it, and no node agent's. It is not in etcd, whose credential the
// node agents hold.
const MarkKeySecret = "runway-pod-mark-key"

// loadMarker reads the mark key from MarkKeySecret in namespace, making it
// the first time. A key that an older Runway kept in etcd
// (etcdstore.KeyKubePodMark) is moved into the Secret, so that the pods it
// marked stay Runway's, and deleted from etcd (again at each load, should
// an older replica write it back).
func loadMarker(ctx context.Context, kc kubernetes.Interface, namespace string, etcd *clientv3.Client) (marker, error) {
	secrets := kc.CoreV1().Secrets(namespace)
	s, err := secrets.Get(ctx, MarkKeySecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		var key []byte
		if key, err = legacyMarkKey(ctx, etcd); err != nil {
			return marker{}, err
		}
		immutable := true
		s, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: MarkKeySecret},
			Type: corev1.SecretTypeOpaque, Immutable: &immutable, Data: map[string][]byte{"key": key}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // another replica made it first
			s, err = secrets.Get(ctx, MarkKeySecret, metav1.GetOptions{})
		}
	}
	if err != nil {
		return marker{}, fmt.Errorf("kube: the pods' mark key (secret %s/%s): %w", namespace, MarkKeySecret, err)
	}
	if len(s.Data["key"]) < 32 {
		return marker{}, fmt.Errorf("kube: the pods' mark key (secret %s/%s) is unreadable", namespace, MarkKeySecret)
	}
	if _, err := etcd.Delete(ctx, etcdstore.KeyKubePodMark); err != nil {
		return marker{}, fmt.Errorf("kube: delete the pods' mark key from etcd (%s): %w", etcdstore.KeyKubePodMark, err)
	}
	return marker{key: s.Data["key"]}, nil
}

// legacyMarkKey is the mark key an older Runway kept in etcd, else a new
// one.
func legacyMarkKey(ctx context.Context, etcd *clientv3.Client) ([]byte, error) {
	resp, err := etcd.Get(ctx, etcdstore.KeyKubePodMark)
	if err != nil {
		return nil, fmt.Errorf("kube: read the pods' former mark key %s: %w", etcdstore.KeyKubePodMark, err)
	}
	if len(resp.Kvs) == 1 && len(resp.Kvs[0].Value) >= 32 {
		return resp.Kvs[0].Value, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("kube: mark key: %w", err)
	}
	return key, nil
}

func keyedSum(key []byte, parts ...string) []byte {
	h := hmac.New(sha256.New, key)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

func (m marker) sum(parts ...string) []byte { return keyedSum(m.key, parts...) }

// forNode is node's marker: its key is HMAC(key, node), which gives no
// other node's.
func (m marker) forNode(node string) nodeMarker {
	return nodeMarker{node: node, key: m.sum("runway node key", node)}
}

// mark is the mark of a pod namespace/name on node running the binding
// (key, rev) on the devices (AnnotationDevices and
// AnnotationFractionMilli; both empty on a user's pod).
func (m marker) mark(namespace, name, node, binding, rev, devices, fraction string) string {
	return m.forNode(node).mark(namespace, name, binding, rev, devices, fraction)
}

// marked says whether the pod carries the mark of its node's key (marked).
func (m marker) marked(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && m.forNode(p.Spec.NodeName).marked(p)
}

// agentReport is the findings on p signed with its node's key.
func (m marker) agentReport(p *corev1.Pod) (ended string, idle time.Duration, at int64, ok bool) {
	if p.Spec.NodeName == "" {
		return "", 0, 0, false
	}
	return m.forNode(p.Spec.NodeName).agentReport(p)
}

func (n nodeMarker) mark(namespace, name, binding, rev, devices, fraction string) string {
	return base64.RawURLEncoding.EncodeToString(keyedSum(n.key, "runway pod mark", namespace, name, n.node, binding, rev, devices, fraction))
}

// marked says whether the pod is on n's node, runs a binding of that node,
// and carries the mark of its namespace, name, node and annotations, and
// requests the GPUs they name:
// a copy of one of Runway's pods (a user may read them) holds no more than
// Runway placed.
func (n nodeMarker) marked(p *corev1.Pod) bool {
	got, a := p.Annotations[AnnotationMark], p.Annotations
	if got == "" || p.Spec.NodeName != n.node || a[AnnotationBinding] == "" {
		return false
	}
	// A node's key marks the bindings of that node alone: root on one node
	// (which holds its key) cannot make its own pod another node's pod.
	if bnode, _, _ := strings.Cut(a[AnnotationBinding], "/"); bnode != nodeID(n.node) {
		return false
	}
	want := n.mark(p.Namespace, p.Name, a[AnnotationBinding], a[AnnotationBindingRev], a[AnnotationDevices], a[AnnotationFractionMilli])
	if !hmac.Equal([]byte(got), []byte(want)) {
		return false
	}
	if a[AnnotationDevices] == "" {
		return true // a user's pod: its request is what its workload was made from
	}
	whole := int64(strings.Count(a[AnnotationDevices], ",") + 1)
	if a[AnnotationFractionMilli] != "" {
		whole = 0 // shares devices its reservation pods hold
	}
	return podGPUs(p) == whole
}

// podName is the name of the pod Runway creates for a binding. The
// binding's create revision makes it unique: a gracefully deleted pod can
// stay terminating for a while (until its kubelet confirms), and the pod
// that replaces it (same workload and index, bound again) must not collide.
// The hash is keyed, so no user can create a pod of that name first.
func (m marker) podName(b nodemanager.Binding, rev int64) string {
	base := b.Workload + "-" + strconv.Itoa(b.Pod)
	h := m.sum("runway pod name", b.Node, b.Project, b.Workload, strconv.Itoa(b.Pod), strconv.FormatInt(rev, 10))
	return trimName(base, 63-9) + "-" + hex.EncodeToString(h[:4])
}

// ours says whether Runway placed the pod: one of Runway's own namespace
// (no one else makes pods there), or a marked one.
func (r *runtime) ours(p *corev1.Pod) bool {
	return p.Spec.SchedulerName == SchedulerName && (p.Namespace == r.cfg.Namespace || r.marker.marked(p))
}

// Marks checks the marks on Runway's pods of one node and signs the node
// agent's findings on them, with that node's key: the node agent in
// Kubernetes mode (services/nodemanager/agent) holds it, given by
// NodeKeys to that node's agent alone, and the runtime counts a mark or a
// finding only under the key of the pod's own node. So root on one node
// can mark, or sign findings for, that node's pods alone.
type Marks struct{ n nodeMarker }

// NewMarks is node's Marks with its key, as NodeKeys gives it.
func NewMarks(node string, key []byte) (Marks, error) {
	if node == "" {
		return Marks{}, fmt.Errorf("kube: the pods' marks need the node's name")
	}
	if len(key) != sha256.Size {
		return Marks{}, fmt.Errorf("kube: node %s's mark key is %d bytes, want %d", node, len(key), sha256.Size)
	}
	return Marks{n: nodeMarker{node: node, key: key}}, nil
}

// Ours says whether Runway placed p: a pod of Runway's namespace ns (no one
// else makes pods there) or one marked with the node's key, on the node.
func (k Marks) Ours(p *corev1.Pod, ns string) bool {
	return p.Spec.SchedulerName == SchedulerName && (p.Namespace == ns || k.n.marked(p))
}

// SignAgentReport is AnnotationAgentReportMAC for the agent's findings on
// the pod namespace/name of that uid on the node at time at: why it ended the pod (AnnotationEndedByAgent, "" for not)
// and its GPU idle seconds (AnnotationGPUIdleSeconds).
func (k Marks) SignAgentReport(namespace, name, uid, ended, idle string, at time.Time) string {
	t := strconv.FormatInt(at.UnixNano(), 10)
	return t + "." + base64.RawURLEncoding.EncodeToString(k.n.agentSum(namespace, name, uid, ended, idle, t))
}

func (n nodeMarker) agentSum(namespace, name, uid, ended, idle, t string) []byte {
	return keyedSum(n.key, "runway agent report", n.node, namespace, name, uid, ended, idle, t)
}

// agentReport is the node agent's findings on p and when it made them,
// ok only when p is on n's node and the signature holds: a pod's
// annotations are also its project's users' to write, so nothing unsigned
// counts, and another node's agent cannot sign for it.
func (n nodeMarker) agentReport(p *corev1.Pod) (ended string, idle time.Duration, at int64, ok bool) {
	a := p.Annotations
	t, mac, found := strings.Cut(a[AnnotationAgentReportMAC], ".")
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if !found || err != nil || p.Spec.NodeName != n.node {
		return "", 0, 0, false
	}
	at, err = strconv.ParseInt(t, 10, 64)
	if err != nil || !hmac.Equal(got, n.agentSum(p.Namespace, p.Name, string(p.UID), a[AnnotationEndedByAgent], a[AnnotationGPUIdleSeconds], t)) {
		return "", 0, 0, false
	}
	if s, err := strconv.ParseInt(a[AnnotationGPUIdleSeconds], 10, 64); err == nil && s > 0 {
		idle = time.Duration(min(s, int64(math.MaxInt64/time.Second))) * time.Second
	}
	return a[AnnotationEndedByAgent], idle, at, true
}
