package kube

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/netutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxAdmissionReview bounds the body of one AdmissionReview: a pod is at
// most etcd's 1.5 MiB, and its old object is absent on CREATE.
const maxAdmissionReview = 3 << 20

// AdmissionHandler is a mutating admission webhook (admission.k8s.io/v1,
// pods, CREATE) that gives a user's pod asking Runway for a GPU fraction
// the envFrom reference to its GPU ConfigMap (usergpu.go) in every
// container that lacks it. A pod whose name is generated (a Deployment's,
// a Job's) is not named yet at admission: the webhook picks its
// ConfigMap's name and writes it as AnnotationGPUConfigMap. It allows every
// pod; it only adds. Serve it over TLS, with failurePolicy Ignore: a pod
// admitted without it is refused at scheduling, never bound blind.
func AdmissionHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var review admissionv1.AdmissionReview
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxAdmissionReview))
		if err == nil {
			err = json.Unmarshal(body, &review)
		}
		if err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("want an AdmissionReview of at most %d bytes: %v", maxAdmissionReview, err), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		var pod corev1.Pod
		if err := json.Unmarshal(review.Request.Object.Raw, &pod); err != nil {
			resp.Allowed, resp.Result = false, &metav1.Status{Code: http.StatusBadRequest, Message: "not a pod: " + err.Error()}
		} else if pod.Namespace == "" {
			pod.Namespace = review.Request.Namespace
		}
		if resp.Allowed {
			if patch := gpuConfigMapPatch(&pod); len(patch) > 0 {
				b, _ := json.Marshal(patch)
				pt := admissionv1.PatchTypeJSONPatch
				resp.Patch, resp.PatchType = b, &pt
			}
		}
		review.Response, review.Request = resp, nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	})
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// gpuConfigMapPatch is the JSON patch that makes a user's fraction pod
// read its GPU ConfigMap; none for any other pod, or one that does.
func gpuConfigMapPatch(p *corev1.Pod) []patchOp {
	if foreignProject(p) == "" || p.Annotations[AnnotationGPUFraction] == "" {
		return nil
	}
	var ops []patchOp
	name := gpuConfigMap(p)
	if p.Annotations[AnnotationGPUConfigMap] == "" && p.Name == "" {
		name = UserGPUConfigMap(p.GenerateName[:min(len(p.GenerateName), 200)] + strings.ToLower(rand.Text()[:10]))
		if p.Annotations == nil {
			ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{}})
		}
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations/runway.io~1gpu-configmap", Value: name})
	}
	ref := corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
	for i, c := range p.Spec.Containers {
		switch {
		case readsConfigMap(c, name):
		case len(c.EnvFrom) == 0:
			ops = append(ops, patchOp{Op: "add", Path: fmt.Sprintf("/spec/containers/%d/envFrom", i), Value: []corev1.EnvFromSource{ref}})
		default:
			ops = append(ops, patchOp{Op: "add", Path: fmt.Sprintf("/spec/containers/%d/envFrom/-", i), Value: ref})
		}
	}
	return ops
}

// maxAdmissionConns bounds the webhook's open connections (each may hold
// a review of up to maxAdmissionReview bytes).
const maxAdmissionConns = 256

// ServeAdmission serves AdmissionHandler at /mutate-pods on l, over TLS
// with cfg, until ctx ends.
func ServeAdmission(ctx context.Context, l net.Listener, cfg *tls.Config, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("POST /mutate-pods", AdmissionHandler())
	// The apiserver gives a webhook 10 s at most; a slow client holds no
	// buffer past that, and no more than maxAdmissionConns are open at once.
	srv := &http.Server{Handler: mux, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 15 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(netutil.LimitListener(l, maxAdmissionConns), "", "") }()
	log.Info("kubernetes runtime: admission webhook serving", "addr", l.Addr().String())
	select {
	case err := <-done:
		return fmt.Errorf("admission webhook: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}
