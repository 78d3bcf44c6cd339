// Package chaos is Runway's chaos run (`make chaos`, and a short form in
// `make test`): every service as its own `runway serve` process, a
// 3-member etcd cluster (bin/etcd), two scheduler replicas and three
// `runway agent` nodes, under a steady load of submits, deletes and
// completions from many callers, while a driver SIGKILLs a random service,
// agent (alone: its pods must be adopted by the next one; or with its
// pods and their shims, as when its node dies: they are run again), scheduler
// leader or one etcd member every few seconds and starts it again. An
// independent checker reads etcd directly throughout and at the end, and
// the run prints one line:
//
//	chaos: N acked, 0 lost, 0 doubled, R re-runs after agent death, failover p50 X ms p99 Y ms
//
// failover is from a leader's kill until another replica holds the
// election (polled from the kill on). Beside it a line gives its parts
// (failover_test.go): the kill until the old leader's key was deleted, and
// from the new leader's runway_scheduler_failover_phase_seconds its lease,
// elect, ready and first_cycle phases, each p50 and p99, and the kill until
// the new leader's first plan.
//
// lost counts acknowledged creates missing (or with another uid) and
// acknowledged deletes present at the end; doubled counts pods bound twice
// or GPU devices over capacity at a sampled moment, and runs beyond the
// bindings a workload had (from the pods' own ledger) that no event of the
// workload explains: only a STARTED event "Pod N restarted after its node
// agent failed." allows one more run (R counts them; for a workload
// deleted by the end, the most such events it ever had, or where it was
// deleted before they were folded, the agent_restarts its pods' run
// reports said: both watched throughout). A workload neither
// final nor running after the drain fails the run. Everything listens
// on 127.0.0.1; the run is bounded by CHAOS_DURATION (default 40s) and
// stops by itself.
package chaos
