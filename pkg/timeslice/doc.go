// Package timeslice is the arithmetic of GPU time-slicing plans, pure and
// free of processes and clocks.
//
// A plan lasts Lease × Leases, where Leases = 100 / precision (defaults:
// 250 ms leases, 5% precision → 20 leases, a 5 s plan). In each lease one
// sharer has the device alone. Every sharer owns a run of consecutive leases,
// its fraction of the plan rounded to the precision (New); leases nobody owns
// stay idle.
//
// Schedule says who runs in each lease given which sharers are busy:
//   - Strict: every sharer gets exactly its own leases, busy or not.
//   - Fair: a busy sharer gets at least its own leases; the leases of idle
//     sharers and the unowned ones are divided equally, round robin, among
//     the busy sharers.
package timeslice
