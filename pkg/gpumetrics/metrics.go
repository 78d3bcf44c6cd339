package gpumetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the GPU series of every agent in a process, labelled by
// node, device (index), project, workload (id) and pod (index). A device's
// own series have empty project, workload and pod; a pod's series hold its
// share of the device.
type Metrics struct {
	util, mem, idle *prometheus.GaugeVec
}

var labels = []string{"node", "device", "project", "workload", "pod"}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		util: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "runway_gpu_utilization",
			Help: "GPU utilisation, 0 to 1: of the device, or of one pod on it (simulated devices: the pod's CPU time)."}, labels),
		mem: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "runway_gpu_memory_used_bytes",
			Help: "GPU memory used: on the device, or by one pod on it."}, labels),
		idle: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "runway_gpu_idle_seconds_per_workload",
			Help: "How long the pod's GPUs have been idle: whole 30-second windows of zero utilisation in a row."}, labels),
	}
	for _, c := range []prometheus.Collector{m.util, m.mem, m.idle} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Series names one device or one pod on a device.
type Series struct {
	Node              string
	Device            int
	Project, Workload string
	// Pod is the pod's index; ignored for a device's series (Workload "").
	Pod int
}

func (s Series) values() []string {
	pod := ""
	if s.Workload != "" {
		pod = strconv.Itoa(s.Pod)
	}
	return []string{s.Node, strconv.Itoa(s.Device), s.Project, s.Workload, pod}
}

// Set records a device's or a pod's utilisation and memory; a pod's idle
// time too (ignored for a device).
func (m *Metrics) Set(s Series, util float64, memBytes int64, idleSeconds float64) {
	v := s.values()
	m.util.WithLabelValues(v...).Set(util)
	m.mem.WithLabelValues(v...).Set(float64(memBytes))
	if s.Workload != "" {
		m.idle.WithLabelValues(v...).Set(idleSeconds)
	}
}

// Delete drops the series of a pod that left the device, or of a device.
func (m *Metrics) Delete(s Series) {
	v := s.values()
	m.util.DeleteLabelValues(v...)
	m.mem.DeleteLabelValues(v...)
	m.idle.DeleteLabelValues(v...)
}
