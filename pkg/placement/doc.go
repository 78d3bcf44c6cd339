// Package placement chooses nodes and devices for the pods of a workload
// (SCHEDULING.md §5): feasibility (Ready, pool, Eligible: node type and
// node role, every resource fits), ranking (binpack: least free GPU first; spread: most free first;
// ties by node name) and device choice (whole GPUs take idle devices; a
// fraction goes to the fullest shared device it fits on under binpack, the
// emptiest under spread).
//
// Pods of one gang are placed one after another on the state, each seeing the
// ones before it, so binpack fills a node before opening the next. A gang is
// all or nothing: on failure every pod placed for it is rolled back.
//
// A miss says what did not fit with numbers: the largest free GPU block, the
// most free CPU and memory on one node for a pod that asks for them, and,
// when no node of the pool is big enough for one pod even empty, which
// resource falls short and the largest node's total and free resources. The
// words never change where a pod goes.
package placement
