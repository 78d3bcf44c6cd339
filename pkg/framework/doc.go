// Package framework computes the launch variables of a distributed
// training's pods: what torchrun, mpirun, TensorFlow, JAX and XGBoost read to
// find each other. It is pure: the node agent gives it the gang (framework,
// pods, each pod's address and GPUs, as its runtime names them) and one pod's
// index, and gets that pod's variables and, for MPI, its hostfile.
//
// Pod 0 is the master (PyTorch, TensorFlow's chief, JAX's coordinator,
// XGBoost's tracker) or the launcher (MPI); pods 1..N are the workers.
//
// Addresses come from the runtime: on the container runtime each pod has a
// network namespace of its own and a DNS alias ({workload}-master-0,
// {workload}-worker-K) on its workload's network, so every pod listens on the
// framework's usual port; on Kubernetes the names are the pods' hostnames
// under the workload's headless Service; on the process runtime (one
// machine, one network) every address is 127.0.0.1 and each pod gets a port
// of its own (Ports).
package framework
