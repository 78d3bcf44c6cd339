package kwoktest

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// AgentPod is a node agent's pod on node, of the service account
// namespace/account (made when missing), as the chart's DaemonSet makes
// one, and the token the kubelet would project into it for the
// NodeManagerService: audience kube.DefaultNodeKeyAudience, bound to the
// pod. The pod is named account-node; on a managed node KWOK runs it.
func (c *Cluster) AgentPod(ctx context.Context, namespace, account, node string) (*corev1.Pod, string, error) {
	_, err := c.Kube.CoreV1().ServiceAccounts(namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", fmt.Errorf("service account %s/%s: %w", namespace, account, err)
	}
	p, err := c.Kube.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: account + "-" + node},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: account,
			Containers: []corev1.Container{{Name: "agent", Image: "runway"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("agent pod on %s: %w", node, err)
	}
	tok, err := c.Token(ctx, p, kube.DefaultNodeKeyAudience)
	return p, tok, err
}

// Token is a token of p's service account bound to p, for audience.
func (c *Cluster) Token(ctx context.Context, p *corev1.Pod, audience string) (string, error) {
	tr, err := c.Kube.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, p.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s for %s: %w", p.Namespace, p.Name, audience, err)
	}
	return tr.Status.Token, nil
}
