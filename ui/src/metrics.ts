// The MetricsService's REST shapes and the pure arithmetic the charts need:
// aligning series on one time axis and printing values in their unit.
import { get } from './api'
import { bytes } from './format'

// A point's value is a JSON number, or "Infinity"/"NaN" (protobuf JSON of a
// double); an unlimited quota arrives as "Infinity".
export interface MetricPoint { time: string; value: number | string }
export interface MetricSeries { type: string; pod?: string; points?: MetricPoint[] }
export interface Metrics { name: string; series?: MetricSeries[]; startTime?: string; endTime?: string; stepSeconds?: string }
export interface NodePoolTelemetry { nodePool: string; allocatedGpus?: number; idleGpus?: number; readyNodes?: number; unreadyNodes?: number; runningWorkloads?: number }
export interface ProjectTelemetry { project: string; nodePool?: string; allocatedGpus?: number; gpuQuota?: number | string; runningWorkloads?: number; pendingWorkloads?: number }
export interface Telemetry { time?: string; nodePools?: NodePoolTelemetry[]; projects?: ProjectTelemetry[] }

export type Unit = 'gpus' | 'ratio' | 'bytes' | 'cores'

// Line is one drawn series: its legend label and its points.
export interface Line { label: string; points: MetricPoint[] }

// WINDOWS are the time ranges a chart offers, in seconds.
export const WINDOWS: [number, string][] = [
  [15 * 60, 'Last 15 minutes'],
  [60 * 60, 'Last hour'],
  [6 * 3600, 'Last 6 hours'],
  [24 * 3600, 'Last 24 hours'],
  [7 * 24 * 3600, 'Last 7 days'],
]

// queryMetrics reads one entity's series (`cluster`, `projects/team-a`,
// `projects/team-a/workloads/a1`, ...) over the last windowSeconds; the
// server picks the step (the window in 60).
export function queryMetrics(name: string, windowSeconds: number, signal?: AbortSignal, now = Date.now()): Promise<Metrics> {
  const start = new Date(now - windowSeconds * 1000).toISOString()
  const path = name.split('/').map(encodeURIComponent).join('/')
  return get<Metrics>(`/v1/${path}/metrics?startTime=${encodeURIComponent(start)}`, signal)
}

export const getTelemetry = (signal?: AbortSignal) => get<Telemetry>('/v1/telemetry', signal)

// num reads a point's value; Infinity and NaN are not drawn (null).
export function num(v: number | string | undefined): number | null {
  const n = typeof v === 'number' ? v : Number(v)
  return Number.isFinite(n) ? n : null
}

// linesOf picks the series of one type: one line, or one per pod for a
// workload's per-pod series ("GPU utilisation, pod 0").
export function linesOf(m: Metrics | undefined, type: string, label: string): Line[] {
  return (m?.series ?? [])
    .filter((s) => s.type === `METRIC_TYPE_${type}`)
    .map((s) => ({ label: s.pod ? `${label}, pod ${s.pod}` : label, points: s.points ?? [] }))
}

// align puts lines on one x axis (seconds since the epoch, ascending, each
// time once) with null where a line has no point: what uPlot draws and
// what the text alternative's table lists.
export function align(lines: Line[]): { xs: number[]; ys: (number | null)[][] } {
  const set = new Set<number>()
  const byLine = lines.map((l) => {
    const m = new Map<number, number | null>()
    for (const p of l.points) {
      const t = Math.round(Date.parse(p.time) / 1000)
      if (Number.isNaN(t)) continue
      set.add(t)
      m.set(t, num(p.value))
    }
    return m
  })
  const xs = [...set].sort((a, b) => a - b)
  return { xs, ys: byLine.map((m) => xs.map((x) => m.get(x) ?? null)) }
}

// fmt prints a value in its unit: GPUs with two decimals, a ratio as a
// percentage, bytes in binary units, cores with two decimals.
export function fmt(v: number | null | undefined, unit: Unit): string {
  if (v === null || v === undefined) return '-'
  switch (unit) {
    case 'ratio':
      return `${Math.round(v * 100)}%`
    case 'bytes':
      return bytes(Math.round(v))
    default:
      return v.toFixed(2)
  }
}

// summary is a chart's text alternative in one sentence: each line's latest
// value and its peak over the window.
export function summary(lines: Line[], unit: Unit): string {
  const { ys } = align(lines)
  if (!lines.length || ys.every((y) => y.every((v) => v === null))) return 'No data in this window.'
  return lines
    .map((l, i) => {
      const vals = ys[i].filter((v): v is number => v !== null)
      if (!vals.length) return `${l.label}: no data`
      return `${l.label}: now ${fmt(vals[vals.length - 1], unit)}, peak ${fmt(Math.max(...vals), unit)}`
    })
    .join('; ')
    .concat('.')
}
