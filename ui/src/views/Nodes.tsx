import { useState } from 'react'
import { call, listAll } from '../api'
import { useAction, useLoad } from '../hooks'
import { Link } from '../router'
import { bytes, deviceUse, enumLabel, gpus, id } from '../format'
import type { GpuDevice, NodePool, NodeT, TimeSlot } from '../types'
import { NodePoolForm, selectorText } from './NodePoolForm'

// planShares sums a time-slice plan's slots per pod: "team-a/nb pod 0 50%".
export function planShares(slots: TimeSlot[]): string[] {
  const by = new Map<string, number>()
  for (const s of slots) {
    const parts = (s.workload ?? '').split('/')
    const key = s.workload ? `${parts[1]}/${parts[3]} pod ${s.podIndex ?? 0}` : 'unowned'
    by.set(key, (by.get(key) ?? 0) + (s.sharePercent ?? 0))
  }
  return [...by.entries()].map(([k, v]) => `${k} ${v}%`)
}

// holder names a device's holder: its project and workload, or null for
// one the caller may not view (the server sends projects/-/workloads/-).
export function holder(workload?: string): { project: string; name: string } | null {
  const parts = (workload ?? '').split('/')
  if (parts.length !== 4 || parts[0] !== 'projects' || parts[1] === '-' || parts[3] === '-') return null
  return { project: parts[1], name: parts[3] }
}

// GpuMap draws one node's devices: whole (one holder), shared (fractions,
// each holder's share), free, unhealthy.
export function gpuState(d: GpuDevice): 'unhealthy' | 'free' | 'whole' | 'shared' {
  if (d.healthy === false) return 'unhealthy'
  if (deviceUse(d) === 0) return 'free'
  return (d.allocations ?? []).some((a) => (a.fractionMilli ?? 1000) >= 1000) ? 'whole' : 'shared'
}

function GpuMap({ node }: { node: NodeT }) {
  return (
    <ul className="gpu-map" aria-label={`GPUs of ${id(node.name)}`}>
      {(node.devices ?? []).map((d) => {
        const s = gpuState(d)
        return (
          <li key={d.index ?? 0} className={`gpu gpu-${s}`}>
            <strong>GPU {d.index ?? 0}</strong> <span className="gpu-state">{s}</span>
            <span className="gpu-model">{d.model} {d.memoryBytes ? bytes(d.memoryBytes) : ''}</span>
            <span className="bar" role="img" aria-label={`${deviceUse(d) / 10}% held`}>
              {(d.allocations ?? []).map((a, i) => (
                <span key={i} className="seg" style={{ width: `${(a.fractionMilli ?? 1000) / 10}%` }} />
              ))}
            </span>
            {d.timeSlicePlan && (
              <p className="plan">
                Time slicing {enumLabel(d.timeSlicePlan.mode, 'TIME_SLICING_MODE_').toLowerCase()}, leases of {d.timeSlicePlan.leaseDuration}:{' '}
                {planShares(d.timeSlicePlan.slots ?? []).join(', ')}
              </p>
            )}
            <ul className="holders">
              {(d.allocations ?? []).map((a, i) => {
                const h = holder(a.workload)
                return (
                  <li key={i}>
                    {h ? <Link to={`/workloads/${h.project}/${h.name}`}>{h.project}/{h.name}</Link> : <span className="hidden-holder">a workload you may not view</span>}
                    {h ? ` pod ${a.podIndex ?? 0}` : ''}
                    {(a.fractionMilli ?? 1000) < 1000 ? ` (${(a.fractionMilli ?? 0) / 10}%)` : ''}
                  </li>
                )
              })}
            </ul>
          </li>
        )
      })}
    </ul>
  )
}

// cores prints thousandths of a core as cores: "0.5", "2".
const cores = (milli?: string) => String(Number(milli ?? 0) / 1000)

export function Nodes() {
  const { data, error, reload } = useLoad(
    async (s) => {
      const [pools, nodes] = await Promise.all([
        listAll<NodePool>('/v1/nodepools', 'nodePools', s),
        listAll<NodeT>('/v1/nodes', 'nodes', s),
      ])
      return { pools, nodes }
    },
    [],
    3000,
  )
  const { run, error: actionError } = useAction(reload)
  // The pool being edited, or 'new' while one is being created.
  const [form, setForm] = useState<NodePool | 'new' | undefined>()
  const deletePool = (p: NodePool) => window.confirm(`Delete node pool ${id(p.name)}?`) && run(() => call('DELETE', `/v1/${p.name}`))
  const act = (n: NodeT, verb: 'drain' | 'undrain') =>
    run(() => call('POST', `/v1/${n.name}:${verb}`, verb === 'drain' ? { reason: 'drained from the web UI' } : {}))
  return (
    <section aria-labelledby="h-nodes">
      <div className="heading">
        <h1 id="h-nodes">Node pools and nodes</h1>
        <button type="button" onClick={() => setForm(form === 'new' ? undefined : 'new')} aria-expanded={form === 'new'}>New node pool</button>
      </div>
      {form && (
        <NodePoolForm key={form === 'new' ? 'new' : form.name} editing={form === 'new' ? undefined : form} onDone={() => { setForm(undefined); reload() }} onCancel={() => setForm(undefined)} />
      )}
      {(error || actionError) && <p role="alert" className="error">{error || actionError}</p>}
      {data?.pools.map((p) => {
        const nodes = data.nodes.filter((n) => n.nodePool === p.name)
        return (
          <section key={p.name} aria-labelledby={`pool-${id(p.name)}`} className="pool">
            <h2 id={`pool-${id(p.name)}`}>
              Node pool {id(p.name)}{' '}
              <small>
                {enumLabel(p.placementStrategy, 'PLACEMENT_STRATEGY_') || 'Binpack'} placement, time slicing {enumLabel(p.timeSlicing?.mode, 'TIME_SLICING_MODE_').toLowerCase() || 'off'}, {nodes.length} nodes
                {p.nodeSelector && Object.keys(p.nodeSelector).length > 0 ? `, nodes labelled ${selectorText(p.nodeSelector)}` : ''}
              </small>
            </h2>
            <span className="actions">
              <button type="button" onClick={() => setForm(p)} aria-label={`Edit node pool ${id(p.name)}`}>Edit</button>
              {p.name !== 'nodepools/default' && (
                <button type="button" className="danger" onClick={() => deletePool(p)} aria-label={`Delete node pool ${id(p.name)}`}>Delete</button>
              )}
            </span>
            {nodes.map((n) => (
              <article key={n.name} className="node" aria-labelledby={`node-${id(n.name)}`}>
                <h3 id={`node-${id(n.name)}`}>
                  {id(n.name)} <small>{enumLabel(n.readiness, 'READINESS_')}{n.drained ? `, drained${n.drainReason ? `: ${n.drainReason}` : ''}` : ''} · {gpus(n.allocated?.milliGpus)} of {gpus(n.capacity?.milliGpus)} GPUs, {cores(n.allocated?.milliCpu)} of {cores(n.capacity?.milliCpu)} cores, {bytes(n.allocated?.memoryBytes)} of {bytes(n.capacity?.memoryBytes)} memory allocated</small>
                </h3>
                {n.drained ? (
                  <button type="button" onClick={() => act(n, 'undrain')}>Undrain {id(n.name)}</button>
                ) : (
                  <button type="button" onClick={() => act(n, 'drain')}>Drain {id(n.name)}</button>
                )}
                <NodeRoles node={n} run={run} />
                <GpuMap node={n} />
              </article>
            ))}
          </section>
        )
      })}
    </section>
  )
}

// The node roles a placement honours (pkg/placement's Eligible): GPU
// workloads only on gpu-workers once any node is one, CPU-only workloads
// only on cpu-workers once any is, system nodes take neither.
const ROLES: [string, string][] = [['NODE_ROLE_GPU_WORKER', 'GPU worker'], ['NODE_ROLE_CPU_WORKER', 'CPU worker'], ['NODE_ROLE_SYSTEM', 'System']]

// NodeRoles shows a node's roles and sets them (SetNodeRoles; the server
// admits administrators of nodes only, and its refusal is shown above).
function NodeRoles({ node, run }: { node: NodeT; run: (f: () => Promise<unknown>) => Promise<void> }) {
  const [roles, setRoles] = useState<string[]>(node.roles ?? [])
  const toggle = (r: string, on: boolean) => setRoles(on ? [...roles.filter((x) => x !== r), r] : roles.filter((x) => x !== r))
  return (
    <fieldset className="roles">
      <legend>Roles of {id(node.name)}: {(node.roles ?? []).map((r) => ROLES.find(([k]) => k === r)?.[1] ?? r).join(', ') || 'none'}</legend>
      {ROLES.map(([r, label]) => (
        <label key={r} className="check">
          <input type="checkbox" checked={roles.includes(r)} onChange={(e) => toggle(r, e.target.checked)} /> {label}
        </label>
      ))}
      <button type="button" onClick={() => run(() => call('POST', `/v1/${node.name}:setRoles`, { roles }))}>Set roles of {id(node.name)}</button>
    </fieldset>
  )
}
