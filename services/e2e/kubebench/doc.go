// Package kubebench measures Runway's Kubernetes runtime beside
// kube-scheduler (`make bench-k8s`): a real kube-apiserver, KWOK playing
// the kubelets of NODES fake nodes of 8 GPUs, and the same PODS one-GPU pods
// scheduled twice through that apiserver, once by Runway (trainings
// submitted through its API) and once by kube-scheduler (pods created
// directly). It prints pods bound per second of each, from the first create
// to the last pod Running:
//
//	k8s-bench: nodes=N pods=P runway=X/s kube-scheduler=Y/s ratio=R
//
// KWOK plays the pods of up to 64 at a time (its default is 4, which made
// the fake kubelets set the pace of both rounds). RUNWAY_BENCH_CPUPROFILE
// and RUNWAY_BENCH_MEMPROFILE write the CPU profile and the allocations of
// Runway's round (make: BENCH_K8S_PROFILE, BENCH_K8S_MEMPROFILE).
//
// The benchmark is behind the k8sbench build tag, so that `make test` and
// `make bench` do not start a cluster of a thousand nodes.
package kubebench
