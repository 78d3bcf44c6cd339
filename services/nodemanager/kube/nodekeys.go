package kube

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// DefaultNodeKeyAudience is the audience of the service account tokens
// node agents present to NodeKeys: a token the kubelet projects for Runway
// alone, which the apiserver itself does not take.
const DefaultNodeKeyAudience = "runway-nodemanager"

// The extra fields of a token bound to a pod, as TokenReview gives them.
const (
	extraPodName  = "authentication.kubernetes.io/pod-name"
	extraPodUID   = "authentication.kubernetes.io/pod-uid"
	extraNodeName = "authentication.kubernetes.io/node-name"
)

// PermissionNodeMarkKey is the permission a GetNodeMarkKey refusal names:
// being the node agent of that node.
const PermissionNodeMarkKey = "the node agent of this node"

// NodeKeys hands each node agent the key of its own node
// (NodeManagerService.GetNodeMarkKey), so that no agent holds the mark key
// itself, nor another node's key. The caller proves which node it is with a
// service account token of the agents' account bound to its pod: the
// apiserver's TokenReview says whose it is and which pod it is bound to,
// and that very pod (same UID, still there) must run on the node asked for.
// So root on one node, which can read its agent's token, gets that node's
// key and no other.
type NodeKeys struct {
	// Kube reviews the tokens and reads the agents' pods. Required.
	Kube kubernetes.Interface
	// Namespace is Runway's (DefaultNamespace when empty), where the mark
	// key's Secret is (MarkKeySecret), which NodeKeys reads (or makes)
	// once.
	Namespace string
	// Etcd is where an older Runway kept the mark key (loadMarker moves
	// it). Required.
	Etcd *clientv3.Client
	// AgentNamespace and AgentServiceAccount are the node agents' service
	// account: no other account's token gets a key. Required.
	AgentNamespace, AgentServiceAccount string
	// Audience the tokens must be for; DefaultNodeKeyAudience when empty.
	Audience string

	mu      sync.Mutex
	marker  *marker
	reviews chan struct{} // at most reviewsAtOnce TokenReviews in flight
	once    sync.Once
}

// reviewsAtOnce bounds the TokenReviews NodeKeys asks at once: the method
// takes any caller's token, and a flood of them must not become one of
// the apiserver's.
const reviewsAtOnce = 8

// NodeKey is node's key for the caller whose service account token is
// token: PERMISSION_DENIED unless the token is the agents' account's,
// bound to a pod that runs on node; UNAUTHENTICATED when the apiserver
// does not take the token.
func (k *NodeKeys) NodeKey(ctx context.Context, token, node string) ([]byte, error) {
	if err := k.review(ctx, token, node); err != nil {
		return nil, err
	}
	m, err := k.load(ctx)
	if err != nil {
		return nil, err
	}
	return m.forNode(node).key, nil
}

// Review checks that token is the node agents' service account token,
// bound to an agent pod that runs on the Kubernetes node node, and returns
// that node's Runway id: PERMISSION_DENIED when it is another's,
// UNAUTHENTICATED when the apiserver does not take it. It is how a node
// agent proves which node it is (for its Runway token).
func (k *NodeKeys) Review(ctx context.Context, token, node string) (string, error) {
	if err := k.review(ctx, token, node); err != nil {
		return "", err
	}
	if id := nodeID(node); id != "" {
		return id, nil
	}
	return "", apierr.InvalidField("kubernetes_node", "not a Kubernetes node name Runway can use")
}

func (k *NodeKeys) review(ctx context.Context, token, node string) error {
	if node == "" {
		return apierr.InvalidField("kubernetes_node", "the Kubernetes node's name is required")
	}
	if token == "" {
		return apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_MISSING)
	}
	if strings.Count(token, ".") != 2 || len(token) > 16<<10 {
		return apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID) // not a service account token (a JWT)
	}
	k.once.Do(func() { k.reviews = make(chan struct{}, reviewsAtOnce) })
	select {
	case k.reviews <- struct{}{}:
		defer func() { <-k.reviews }()
	case <-ctx.Done():
		return apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, time.Second).WithCause(ctx.Err())
	}
	audience := k.Audience
	if audience == "" {
		audience = DefaultNodeKeyAudience
	}
	review, err := k.Kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}, metav1.CreateOptions{})
	if err != nil {
		return apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, 0).WithCause(fmt.Errorf("kube: review a node agent's token: %w", err))
	}
	st := review.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, audience) {
		return apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID)
	}
	denied := func(why string) error {
		return apierr.PermissionDenied(PermissionNodeMarkKey, "kubernetes/nodes/"+node).With("why", why)
	}
	if st.User.Username != "system:serviceaccount:"+k.AgentNamespace+":"+k.AgentServiceAccount {
		return denied("the token is not the node agents' service account's")
	}
	one := func(key string) string {
		if v := st.User.Extra[key]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	podName, podUID := one(extraPodName), one(extraPodUID)
	if podName == "" || podUID == "" {
		return denied("the token is not bound to the agent's pod")
	}
	if n := one(extraNodeName); n != "" && n != node {
		return denied("the agent's pod runs on another node")
	}
	pod, err := k.Kube.CoreV1().Pods(k.AgentNamespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return denied("the agent's pod is not found")
	}
	if string(pod.UID) != podUID || pod.Spec.NodeName != node {
		return denied("the agent's pod runs on another node")
	}
	return nil
}

// load reads the mark key once (loadMarker).
func (k *NodeKeys) load(ctx context.Context) (marker, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.marker == nil {
		m, err := loadMarker(ctx, k.Kube, cmp.Or(k.Namespace, DefaultNamespace), k.Etcd)
		if err != nil {
			return marker{}, apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, 0).WithCause(err)
		}
		k.marker = &m
	}
	return *k.marker, nil
}
