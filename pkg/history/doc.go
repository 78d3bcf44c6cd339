// Package history is Runway's metrics history: Prometheus's TSDB embedded
// in a data directory, fed by gathering a registry at a fixed interval, and
// read through the Prometheus query engine (PromQL).
//
// A Store answers instant and range queries, series and label names; API
// serves them as Prometheus's HTTP query API (/api/v1/query, query_range,
// series, labels) so that Grafana or any Prometheus client can use
// `runway dev` as a data source. Source is what readers of history need;
// the embedded Store is one, Remote (an external Prometheus-compatible
// server, --prometheus-url) the other, answering the same queries.
//
// Families are written as a Prometheus scrape would: gauges, counters and
// untyped as their value, histograms as classic _bucket{le}, _sum and
// _count series, summaries as {quantile}, _sum and _count.
package history
