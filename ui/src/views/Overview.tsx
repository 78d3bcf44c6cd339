import { useState } from 'react'
import { listAll } from '../api'
import { useLoad } from '../hooks'
import { Link } from '../router'
import { deviceUse, enumLabel, gpus, id } from '../format'
import { MetricCharts, WindowPicker, type ChartSpec } from '../chart'
import { getTelemetry, linesOf, type Metrics, type Telemetry } from '../metrics'
import type { Department, NodePool, NodeT, Queue, Workload } from '../types'

// summarize is the overview's arithmetic, from what the caller may read now
// (the nodes, the queues and the workloads).
export function summarize(nodes: NodeT[], queues: Queue[], workloads: Workload[], telemetry?: Telemetry) {
  const pools = new Map<string, { capacity: number; allocated: number; unallocated: number; idle: number; freeDevices: number; nodes: number }>()
  for (const n of nodes) {
    const p = pools.get(n.nodePool ?? '') ?? { capacity: 0, allocated: 0, unallocated: 0, idle: 0, freeDevices: 0, nodes: 0 }
    p.nodes++
    p.capacity += Number(n.capacity?.milliGpus ?? 0)
    p.allocated += Number(n.allocated?.milliGpus ?? 0)
    p.unallocated = p.capacity - p.allocated
    p.freeDevices += (n.devices ?? []).filter((d) => d.healthy !== false && deviceUse(d) === 0).length
    pools.set(n.nodePool ?? '', p)
  }
  // Idle GPUs are allocated and unused: those of running workloads whose
  // GPUs the agents measure as idle now (gpu_idle_time resets on any use).
  for (const w of workloads) {
    const p = pools.get(w.status?.nodePool ?? '')
    if (p && w.status?.phase === 'WORKLOAD_PHASE_RUNNING' && parseFloat(w.status.gpuIdleTime ?? '0') > 0) p.idle += Number(w.status.allocatedMilliGpus ?? 0)
  }
  const departments = queues
    .filter((q) => q.kind === 'QUEUE_KIND_DEPARTMENT')
    .map((q) => ({
      name: id(q.name.replace(/\/queue$/, '')),
      allocated: (q.nodePools ?? []).reduce((s, n) => s + Number(n.allocated?.milliGpus ?? 0), 0),
      // -1 (unlimited) in any pool makes the whole unlimited.
      deserved: (q.nodePools ?? []).reduce((s, n) => (s < 0 || Number(n.deserved?.milliGpus ?? 0) < 0 ? -1 : s + Number(n.deserved?.milliGpus ?? 0)), 0),
    }))
  const pending = new Map<string, number>()
  for (const w of workloads) {
    if (w.status?.phase !== 'WORKLOAD_PHASE_PENDING') continue
    const reason = enumLabel(w.status.pendingReasons?.[0]?.check, 'PENDING_CHECK_') || 'Not yet considered'
    const key = `${id(w.project)}\u0000${reason}`
    pending.set(key, (pending.get(key) ?? 0) + 1)
  }
  // Durations arrive as "12.5s" (protobuf JSON).
  const idle = workloads
    .filter((w) => w.status?.phase === 'WORKLOAD_PHASE_RUNNING' && parseFloat(w.status.gpuIdleTime ?? '0') > 0 && Number(w.status.allocatedMilliGpus ?? 0) > 0)
    .map((w) => ({ name: id(w.name), project: id(w.project), gpus: Number(w.status!.allocatedMilliGpus), idleSeconds: parseFloat(w.status!.gpuIdleTime!) }))
    .sort((a, b) => b.idleSeconds - a.idleSeconds)
  return {
    idle,
    // The telemetry's numbers of now where the caller may read them
    // (its idle_gpus are devices nothing holds: free devices), the nodes'
    // otherwise.
    pools: [...pools.entries()]
      .map(([name, p]) => {
        const t = telemetry?.nodePools?.find((n) => n.nodePool === name)
        return { name: id(name), ...p, freeDevices: t ? (t.idleGpus ?? 0) : p.freeDevices, running: t?.runningWorkloads, unready: t?.unreadyNodes }
      })
      .sort((a, b) => a.name.localeCompare(b.name)),
    departments,
    pending: [...pending.entries()].map(([k, n]) => ({ project: k.split('\u0000')[0], reason: k.split('\u0000')[1], count: n })).sort((a, b) => a.project.localeCompare(b.project) || a.reason.localeCompare(b.reason)),
  }
}

export function Overview() {
  const { data, error } = useLoad(
    async (s) => {
      const opt = <T,>(p: Promise<T[]>) => p.catch(() => [] as T[])
      const [nodes, queues, ws, pools, ds, tel] = await Promise.all([
        opt(listAll<NodeT>('/v1/nodes', 'nodes', s)),
        opt(listAll<Queue>('/v1/queues', 'queues', s)),
        listAll<Workload>('/v1/projects/-/workloads', 'workloads', s),
        opt(listAll<NodePool>('/v1/nodepools', 'nodePools', s)),
        opt(listAll<Department>('/v1/departments', 'departments', s)),
        getTelemetry(s).catch(() => undefined),
      ])
      return { ...summarize(nodes, queues, ws, tel), poolNames: pools.map((p) => p.name), departmentNames: ds.map((d) => d.name) }
    },
    [],
    3000,
  )
  const [window, setWindow] = useState(3600)
  return (
    <section aria-labelledby="h-overview">
      <div className="heading">
        <h1 id="h-overview">Overview</h1>
        <WindowPicker value={window} onChange={setWindow} />
      </div>
      {error && <p role="alert" className="error">{error}</p>}
      {data && (
        <div className="cards">
          <div className="scroll" tabIndex={0}><table>
            <caption>GPU allocation by node pool, now</caption>
            <thead>
              <tr>
                <th scope="col">Node pool</th><th scope="col">Nodes</th><th scope="col">GPUs</th><th scope="col">Allocated</th>
                <th scope="col">Idle (allocated, unused)</th><th scope="col">Unallocated</th><th scope="col">Free devices</th><th scope="col">Running workloads</th>
              </tr>
            </thead>
            <tbody>
              {data.pools.map((p) => (
                <tr key={p.name}>
                  <td>{p.name}</td><td>{p.nodes}</td><td>{gpus(p.capacity)}</td><td>{gpus(p.allocated)}</td>
                  <td>{gpus(p.idle)}</td><td>{gpus(p.unallocated)}</td><td>{p.freeDevices}</td><td>{p.running ?? ''}</td>
                </tr>
              ))}
            </tbody>
          </table></div>
          <div className="scroll" tabIndex={0}><table>
            <caption>GPU allocation by department, now</caption>
            <thead><tr><th scope="col">Department</th><th scope="col">Quota</th><th scope="col">Allocated</th></tr></thead>
            <tbody>
              {data.departments.map((d) => (
                <tr key={d.name}><td>{d.name}</td><td>{gpus(d.deserved)}</td><td>{gpus(d.allocated)}</td></tr>
              ))}
            </tbody>
          </table></div>
          <div className="scroll" tabIndex={0}><table>
            <caption>Pending workloads by project and reason</caption>
            <thead><tr><th scope="col">Project</th><th scope="col">Reason</th><th scope="col">Workloads</th></tr></thead>
            <tbody>
              {data.pending.map((p) => (
                <tr key={p.project + p.reason}><td>{p.project}</td><td>{p.reason}</td><td><Link to="/workloads">{p.count}</Link></td></tr>
              ))}
              {data.pending.length === 0 && <tr><td colSpan={3} className="empty">Nothing is pending.</td></tr>}
            </tbody>
          </table></div>
          <div className="scroll" tabIndex={0}><table>
            <caption>Running workloads whose GPUs are idle</caption>
            <thead><tr><th scope="col">Workload</th><th scope="col">Project</th><th scope="col">GPUs held</th><th scope="col">Idle for</th></tr></thead>
            <tbody>
              {data.idle.map((w) => (
                <tr key={w.project + w.name}><td><Link to={`/workloads/${w.project}/${w.name}`}>{w.name}</Link></td><td>{w.project}</td><td>{gpus(w.gpus)}</td><td>{Math.round(w.idleSeconds)} s</td></tr>
              ))}
              {data.idle.length === 0 && <tr><td colSpan={4} className="empty">No running workload has idle GPUs.</td></tr>}
            </tbody>
          </table></div>
        </div>
      )}
      {data && <OverTime window={window} pools={data.poolNames} departments={data.departmentNames} />}
    </section>
  )
}

const CLUSTER: ChartSpec[] = [
  {
    title: 'Cluster GPUs over time',
    unit: 'gpus',
    lines: (m) => [...linesOf(m.get('cluster'), 'ALLOCATED_GPUS', 'Allocated'), ...linesOf(m.get('cluster'), 'USED_GPUS', 'Used'), ...linesOf(m.get('cluster'), 'TOTAL_GPUS', 'Total')],
  },
  { title: 'Cluster GPU utilisation over time', unit: 'ratio', lines: (m) => linesOf(m.get('cluster'), 'GPU_UTILIZATION', 'Utilisation') },
]

// each draws one line per entity of a kind (its id as the label).
const each = (names: string[], type: string) => (m: Map<string, Metrics>) => names.flatMap((n) => linesOf(m.get(n), type, id(n)))

// OverTime is the overview's charts: the cluster, each node pool and each
// department the caller may read, over the chosen window.
function OverTime({ window, pools, departments }: { window: number; pools: string[]; departments: string[] }) {
  const charts: ChartSpec[] = [
    ...CLUSTER,
    { title: 'GPU allocation by node pool over time', unit: 'gpus', lines: each(pools, 'ALLOCATED_GPUS') },
    { title: 'GPU utilisation by node pool over time', unit: 'ratio', lines: each(pools, 'GPU_UTILIZATION') },
    { title: 'GPU allocation by department over time', unit: 'gpus', lines: each(departments, 'ALLOCATED_GPUS') },
    { title: 'GPUs used by department over time', unit: 'gpus', lines: each(departments, 'USED_GPUS') },
  ]
  return <MetricCharts label="Over time" names={['cluster', ...pools, ...departments]} window={window} charts={charts} />
}
