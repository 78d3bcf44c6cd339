package scheduler

import "github.com/prometheus/client_golang/prometheus"

// metrics are the replica's counters of what went wrong and was contained.
// They are registered on Config.Registerer when one is given.
type metrics struct {
	invariantFailures prometheus.Counter
	planDropped       prometheus.Counter
	modelBehind       prometheus.Counter
	undecodable       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		invariantFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runway_scheduler_invariant_failures_total",
			Help: "Cycles whose plan was dropped because an invariant of the scheduling core failed."}),
		planDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runway_scheduler_workload_plans_dropped_total",
			Help: "Workloads whose writes were left out of a plan because they exceed one transaction."}),
		modelBehind: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runway_scheduler_cycles_skipped_total",
			Help: "Cycles skipped because the model had not yet seen the last plan's writes."}),
		undecodable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runway_scheduler_undecodable_values_total",
			Help: "Stored values the scheduler's model skipped because they do not decode, by key prefix."}, []string{"prefix"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.invariantFailures, m.planDropped, m.modelBehind, m.undecodable} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
