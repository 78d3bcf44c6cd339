// Package kwoktest is a Kubernetes cluster for tests: the real
// kube-apiserver (bin/kube-apiserver, on its own embedded etcd) and KWOK
// (bin/kwok, v0.8.0 from testbin/kwok) playing the kubelet of fake GPU
// nodes, with the stages in stages/.
//
//	c, err := kwoktest.Start(dir)          // apiserver + KWOK; c.Stop()
//	c.Config, c.Kubeconfig, c.Kube         // rest config, kubeconfig file, client
//	c.CreateNodes(ctx, kwoktest.GPUNodes("n", 100, 8)...) // nvidia.com/gpu nodes, 16 at a time
//	c.WaitReady(ctx, names...)             // KWOK made them Ready
//	c.NotReady / c.BackReady               // a node that blinks
//	c.Cordon / c.Taint / c.Untaint         // drains
//	d, err := c.StartDevicePlugin(ctx)     // the device plugin's stand-in: devices per pod, UUIDs
//	kwoktest.Bin("kwok")                   // where a binary is, or how to build it
//
// Managed nodes (the default) turn Ready, their bound pods go Running,
// deleted pods without finalizers go 200 ms after their deletion (a
// finalizer holds one in its grace period), and LabelNotReady turns one
// NotReady. Node.Unmanaged nodes are Ready and run nothing: their pods stay
// Pending. No controller-manager runs: no service accounts are made, no
// taints by condition are put on nodes, and a deleted namespace stays
// Terminating.
package kwoktest
