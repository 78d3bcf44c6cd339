import { useState } from 'react'
import { call, listAll } from '../api'
import { useAction, useLoad } from '../hooks'
import { DataTable, type Col } from '../table'
import { gpus, id, workloadType } from '../format'
import type { Department, GpuQuota, NodePool, NodePoolQuota, Project, Queue, SchedulingRules } from '../types'
import { MetricCharts, WindowPicker, type ChartSpec } from '../chart'
import { RulesForm, showDuration } from './Rules'
import { problemText } from '../problems'
import { linesOf, type Line, type Metrics } from '../metrics'

// queueLines are a project's or a department's GPUs over time: allocated,
// the scheduler's fair share, used, and deserved (the quota); an unlimited
// fair share or quota is not drawn.
export function queueLines(m: Metrics | undefined): Line[] {
  return [
    ...linesOf(m, 'ALLOCATED_GPUS', 'Allocated'),
    ...linesOf(m, 'FAIR_SHARE_GPUS', 'Fair share'),
    ...linesOf(m, 'USED_GPUS', 'Used'),
    ...linesOf(m, 'GPU_QUOTA', 'Quota'),
  ]
}

// OverTime charts every project's allocation, and one chosen project's or
// department's queueLines.
function OverTime({ projects, departments }: { projects: string[]; departments: string[] }) {
  const [window, setWindow] = useState(3600)
  const [chosen, setChosen] = useState('')
  const entity = chosen || projects[0] || departments[0] || ''
  const charts: ChartSpec[] = [
    { title: 'GPU allocation by project over time', unit: 'gpus', lines: (m) => projects.flatMap((p) => linesOf(m.get(p), 'ALLOCATED_GPUS', id(p))) },
  ]
  if (entity)
    charts.push({
      title: `${entity.startsWith('departments/') ? 'Department' : 'Project'} ${id(entity)}: GPUs over time`,
      unit: 'gpus',
      lines: (m) => queueLines(m.get(entity)),
    })
  const names = [...new Set([...projects, entity].filter(Boolean))]
  return (
    <section aria-labelledby="h-projects-time">
      <div className="heading">
        <h2 id="h-projects-time">Over time</h2>
        <span className="toolbar">
          <label className="window">
            Project or department
            <select value={entity} onChange={(e) => setChosen(e.target.value)}>
              {[...projects, ...departments].map((n) => <option key={n} value={n}>{n.startsWith('departments/') ? 'Department' : 'Project'} {id(n)}</option>)}
            </select>
          </label>
          <WindowPicker value={window} onChange={setWindow} />
        </span>
      </div>
      {names.length > 0 && <MetricCharts label="Projects over time" names={names} window={window} charts={charts} />}
    </section>
  )
}

// A row per project or department: its quotas per node pool as set, and
// the scheduler's numbers for each pool now (its queue).
interface Row {
  kind: 'Project' | 'Department'; name: string; department: string; pools: string[]; quotas: NodePoolQuota[]; queue?: Queue; etag?: string
  rules: string; schedulingRules: SchedulingRules[]
}

// rulesText is a scope's scheduling rules in one line, per workload type.
export function rulesText(rs: SchedulingRules[] = []): string {
  return rs
    .map((r) => {
      const parts = [
        r.timeLimit && `time limit ${showDuration(r.timeLimit)}`,
        r.idleGpuLimit && `idle GPU limit ${showDuration(r.idleGpuLimit)}${r.preemptWhenIdle ? ' (preempt)' : ''}`,
        r.nodeTypes?.length && `node types ${r.nodeTypes.join(', ')}`,
      ].filter(Boolean)
      return `${workloadType(r.workloadType)}: ${parts.join(', ')}`
    })
    .join('; ')
}

function rows(kind: Row['kind'], items: (Project | Department)[], queues: Map<string, Queue>): Row[] {
  return items.map((p) => {
    const queue = queues.get(`${p.name}/queue`)
    // The pools it has a quota in, and those it holds or asks for GPUs in.
    const busy = (queue?.nodePools ?? []).filter((n) => Number(n.allocated?.milliGpus ?? 0) > 0 || (n.runningWorkloads ?? 0) + (n.pendingWorkloads ?? 0) > 0)
    const pools = new Set<string>([...(p.nodePoolQuotas ?? []).map((q) => q.nodePool ?? ''), ...busy.map((n) => n.nodePool ?? '')])
    if (pools.size === 0) pools.add('nodepools/default')
    return {
      kind,
      name: id(p.name),
      department: 'department' in p ? id(p.department) : '',
      pools: [...pools].sort(),
      quotas: p.nodePoolQuotas ?? [],
      queue,
      etag: p.etag,
      rules: rulesText(p.schedulingRules),
      schedulingRules: p.schedulingRules ?? [],
    }
  })
}

const queuePool = (r: Row, pool: string) => r.queue?.nodePools?.find((n) => n.nodePool === pool)
const quotaOf = (r: Row, pool: string) => r.quotas.find((q) => q.nodePool === pool)

// sum adds thousandths over a row's pools; any unlimited (-1) is unlimited.
export function sum(values: (string | undefined)[]): string {
  const ns = values.map((v) => Number(v ?? 0))
  return ns.some((n) => n < 0) ? '-1' : String(ns.reduce((a, b) => a + b, 0))
}

// poolText is one pool's quota and what the scheduler holds in it now.
export function poolText(r: Row, pool: string): string {
  const q = quotaOf(r, pool)?.gpu
  const np = queuePool(r, pool)
  const now = `allocated ${gpus(np?.allocated?.milliGpus)}, fair share ${gpus(np?.fairShare?.milliGpus)}`
  if (!q) return `${id(pool)}: no quota set; ${now}`
  return `${id(pool)}: quota ${gpus(q.deservedMilliGpus)}, limit ${gpus(q.limitMilliGpus ?? '-1')}, weight ${q.overQuotaWeight ?? 1}; ${now}`
}

function cols(onDelete: (r: Row) => void, onEdit: (r: Row) => void, onRules: (r: Row) => void, onDeleteQuota: (r: Row, pool: string) => void): Col<Row>[] {
  const label = (r: Row) => `${r.kind.toLowerCase()} ${r.name}`
  return [
    { id: 'name', header: 'Name', text: (r) => r.name },
    { id: 'kind', header: 'Kind', text: (r) => r.kind, filter: true },
    { id: 'department', header: 'Department', text: (r) => r.department, filter: true },
    { id: 'quota', header: 'GPU quota', text: (r) => gpus(sum(r.pools.map((p) => quotaOf(r, p)?.gpu?.deservedMilliGpus ?? queuePool(r, p)?.deserved?.milliGpus))) },
    { id: 'allocated', header: 'Allocated', text: (r) => gpus(sum(r.pools.map((p) => queuePool(r, p)?.allocated?.milliGpus))) },
    { id: 'fairShare', header: 'Fair share', text: (r) => gpus(sum(r.pools.map((p) => queuePool(r, p)?.fairShare?.milliGpus))) },
    {
      id: 'pools', header: 'Quotas per node pool', text: (r) => r.pools.map((p) => poolText(r, p)).join('; '), filter: false,
      cell: (r) => (
        <ul className="pool-quotas" aria-label={`Quotas of ${label(r)} per node pool`}>
          {r.pools.map((p) => (
            <li key={p}>
              <span>{poolText(r, p)}</span>
              {quotaOf(r, p) && (
                <button type="button" className="secondary" onClick={() => onDeleteQuota(r, p)} aria-label={`Delete quota of ${label(r)} in node pool ${id(p)}`}>Delete quota</button>
              )}
            </li>
          ))}
        </ul>
      ),
    },
    { id: 'rules', header: 'Scheduling rules', text: (r) => r.rules },
    { id: 'running', header: 'Running', text: (r) => String(r.pools.reduce((n, p) => n + (queuePool(r, p)?.runningWorkloads ?? 0), 0)), hidden: true },
    { id: 'pending', header: 'Pending', text: (r) => String(r.pools.reduce((n, p) => n + (queuePool(r, p)?.pendingWorkloads ?? 0), 0)), hidden: true },
    {
      id: 'actions',
      header: 'Actions',
      text: () => '',
      cell: (r) => (
        <span className="actions">
          <button type="button" onClick={() => onEdit(r)} aria-label={`Edit ${label(r)}`}>Edit</button>
          <button type="button" onClick={() => onRules(r)} aria-label={`Scheduling rules of ${label(r)}`}>Rules</button>
          <button type="button" className="danger" onClick={() => onDelete(r)} aria-label={`Delete ${label(r)}`}>Delete</button>
        </span>
      ),
    },
  ]
}

// milli reads a GPU amount typed by a person: "2", "1.5"; empty or
// "unlimited" is unset. null: not a number.
export function milli(s: string): string | undefined | null {
  const t = s.trim()
  if (t === '' || t === 'unlimited') return undefined
  if (!/^\d+(\.\d{1,3})?$/.test(t)) return null
  return String(Math.round(Number(t) * 1000))
}

// shown is a stored amount as the form shows it: unset and -1 are empty.
const shown = (m?: string) => (m === undefined || Number(m) < 0 ? '' : gpus(m))

// withQuota is a scope's quotas with the one of pool replaced by q (its
// CPU and memory kept), or removed when q is null: an update sends the
// whole list, so the other pools' quotas stay as they are.
export function withQuota(quotas: NodePoolQuota[], pool: string, gpu: GpuQuota | null): NodePoolQuota[] {
  const old = quotas.find((q) => q.nodePool === pool)
  const rest = quotas.filter((q) => q.nodePool !== pool)
  return gpu ? [...rest, { ...old, nodePool: pool, gpu }] : rest
}

// quotaLabels are the form's labels of a project's or department's fields.
export function quotaLabels(kind: 'project' | 'department') {
  const q = `${kind}.node_pool_quotas`
  return {
    [`${kind}_id`]: 'Name', [`${kind}.name`]: 'Name', [`${kind}.department`]: 'Department', [q]: 'Node pool', [`${q}.node_pool`]: 'Node pool',
    [`${q}.gpu.deserved_milli_gpus`]: 'GPU quota', [`${q}.gpu.limit_milli_gpus`]: 'GPU limit', [`${q}.gpu.over_quota_weight`]: 'Over-quota weight',
  }
}

function QuotaForm({ editing, departments, pools, onDone, onCancel }: {
  editing?: Row; departments: Department[]; pools: string[]; onDone: () => void; onCancel: () => void
}) {
  const [kind, setKind] = useState<Row['kind']>(editing?.kind ?? 'Project')
  const [name, setName] = useState(editing?.name ?? '')
  const [department, setDepartment] = useState(editing?.department || 'default')
  const [pool, setPool] = useState(id(editing?.pools[0]) || 'default')
  const stored = (p: string) => editing && quotaOf(editing, `nodepools/${p}`)?.gpu
  const [quota, setQuota] = useState(shown(stored(pool)?.deservedMilliGpus))
  const [limit, setLimit] = useState(shown(stored(pool)?.limitMilliGpus))
  const [weight, setWeight] = useState(String(stored(pool)?.overQuotaWeight ?? ''))
  const [error, setError] = useState('')
  // Choosing another pool shows its quota as set (empty: none yet).
  const pick = (p: string) => {
    setPool(p)
    setQuota(shown(stored(p)?.deservedMilliGpus))
    setLimit(shown(stored(p)?.limitMilliGpus))
    setWeight(String(stored(p)?.overQuotaWeight ?? ''))
  }
  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    setError('')
    const gpu: GpuQuota = {}
    const [q, l] = [milli(quota), milli(limit)]
    if (q === null || l === null || (weight.trim() && !/^\d+$/.test(weight.trim()))) {
      setError('GPU quota and limit are amounts of GPUs such as 2 or 0.5 (limit empty: unlimited); the weight is a whole number.')
      return
    }
    if (q !== undefined) gpu.deservedMilliGpus = q
    if (l !== undefined) gpu.limitMilliGpus = l
    if (weight.trim()) gpu.overQuotaWeight = Number(weight)
    const nodePoolQuotas = withQuota(editing?.quotas ?? [], `nodepools/${pool}`, gpu)
    const coll = kind === 'Project' ? 'projects' : 'departments'
    try {
      if (editing) {
        await call('PATCH', `/v1/${coll}/${name}`, { nodePoolQuotas, etag: editing.etag })
      } else {
        const body: Record<string, unknown> = { nodePoolQuotas }
        if (kind === 'Project' && department) body.department = `departments/${department}`
        await call('POST', `/v1/${coll}?${kind === 'Project' ? 'projectId' : 'departmentId'}=${encodeURIComponent(name)}`, body)
      }
      onDone()
    } catch (err) {
      setError(problemText(err, quotaLabels(kind === 'Project' ? 'project' : 'department')))
    }
  }
  return (
    <form onSubmit={submit} className="form inline" aria-label={editing ? `Edit ${editing.name}` : 'Create a project or department'}>
      {!editing && (
        <label>
          Kind
          <select value={kind} onChange={(e) => setKind(e.target.value as Row['kind'])}>
            <option>Project</option>
            <option>Department</option>
          </select>
        </label>
      )}
      <label>
        Name
        <input value={name} onChange={(e) => setName(e.target.value)} required disabled={!!editing} />
      </label>
      {kind === 'Project' && !editing && (
        <label>
          Department
          <select value={department} onChange={(e) => setDepartment(e.target.value)}>
            {(departments.length ? departments.map((d) => id(d.name)) : ['default']).map((d) => (
              <option key={d} value={d}>{d}</option>
            ))}
          </select>
        </label>
      )}
      <label>
        Node pool
        <select value={pool} onChange={(e) => pick(e.target.value)}>
          {[...new Set([...pools.map(id), pool])].map((p) => <option key={p} value={p}>{p}{editing && !stored(p) ? ' (no quota yet)' : ''}</option>)}
        </select>
      </label>
      <label>
        GPU quota
        <input value={quota} onChange={(e) => setQuota(e.target.value)} inputMode="decimal" />
      </label>
      <label>
        GPU limit
        <input value={limit} onChange={(e) => setLimit(e.target.value)} inputMode="decimal" placeholder="unlimited" />
      </label>
      <label>
        Over-quota weight
        <input value={weight} onChange={(e) => setWeight(e.target.value)} inputMode="numeric" placeholder="1" />
      </label>
      <button type="submit">{editing ? 'Save' : 'Create'}</button>
      <button type="button" className="secondary" onClick={onCancel}>Cancel</button>
      {error && <p role="alert" className="error">{error}</p>}
    </form>
  )
}

export function Projects() {
  const { data, error, reload } = useLoad(
    async (s) => {
      const [ps, ds, qs, pools] = await Promise.all([
        listAll<Project>('/v1/projects', 'projects', s),
        listAll<Department>('/v1/departments', 'departments', s).catch(() => [] as Department[]),
        listAll<Queue>('/v1/queues', 'queues', s).catch(() => [] as Queue[]),
        listAll<NodePool>('/v1/nodepools', 'nodePools', s).catch(() => [] as NodePool[]),
      ])
      const queues = new Map(qs.map((q) => [q.name, q]))
      return { ds, pools: pools.map((p) => p.name), projectNames: ps.map((p) => p.name), all: [...rows('Department', ds, queues), ...rows('Project', ps, queues)] }
    },
    [],
    3000,
  )
  const [editing, setEditing] = useState<Row | undefined>()
  const [rulesOf, setRulesOf] = useState<Row | undefined>()
  const [form, setForm] = useState(false)
  const { run, error: actionError } = useAction(reload)
  const path = (r: Row) => `/v1/${r.kind === 'Project' ? 'projects' : 'departments'}/${r.name}`
  const del = (r: Row) => window.confirm(`Delete ${r.kind.toLowerCase()} ${r.name}?`) && run(() => call('DELETE', path(r)))
  // Deleting a pool's quota updates the project; the project stays.
  const delQuota = (r: Row, pool: string) =>
    window.confirm(`Delete the quota of ${r.kind.toLowerCase()} ${r.name} in node pool ${id(pool)}? The ${r.kind.toLowerCase()} stays.`) &&
    run(() => call('PATCH', path(r), { nodePoolQuotas: withQuota(r.quotas, pool, null), etag: r.etag }))
  return (
    <section aria-labelledby="h-projects">
      <div className="heading">
        <h1 id="h-projects">Projects and departments</h1>
        <button type="button" onClick={() => { setEditing(undefined); setRulesOf(undefined); setForm(!form) }} aria-expanded={form}>
          New project or department
        </button>
      </div>
      {(form || editing) && (
        <QuotaForm key={editing ? editing.kind + editing.name : 'new'} editing={editing} departments={data?.ds ?? []} pools={data?.pools ?? []}
          onDone={() => { setForm(false); setEditing(undefined); reload() }} onCancel={() => { setForm(false); setEditing(undefined) }} />
      )}
      {rulesOf && (
        <RulesForm
          key={rulesOf.kind + rulesOf.name}
          scope={`${rulesOf.kind === 'Project' ? 'projects' : 'departments'}/${rulesOf.name}`}
          rules={rulesOf.schedulingRules}
          onDone={() => { setRulesOf(undefined); reload() }}
          onCancel={() => setRulesOf(undefined)}
        />
      )}
      {(error || actionError) && <p role="alert" className="error">{error || actionError}</p>}
      {data && (
        <DataTable
          label="Projects and departments"
          rows={data.all}
          cols={cols(del, (r) => { setForm(false); setRulesOf(undefined); setEditing(r) }, (r) => { setForm(false); setEditing(undefined); setRulesOf(r) }, delQuota)}
          rowKey={(r) => `${r.kind}/${r.name}`}
        />
      )}
      {data && <OverTime projects={data.projectNames} departments={data.ds.map((d) => d.name)} />}
    </section>
  )
}
