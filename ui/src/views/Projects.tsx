import { useState } from 'react'
import { call, listAll } from '../api'
import { errorText, useAction, useLoad } from '../hooks'
import { DataTable, type Col } from '../table'
import { gpus, id, workloadType } from '../format'
import type { Department, NodePoolQuota, Project, Queue, SchedulingRules } from '../types'
import { MetricCharts, WindowPicker, type ChartSpec } from '../chart'
import { RulesForm, showDuration } from './Rules'
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

// A row per (project or department, node pool): the quota as set and the
// scheduler's numbers for it now (its queue).
interface Row {
  kind: 'Project' | 'Department'; name: string; department: string; pool: string; q?: NodePoolQuota; queue?: Queue; etag?: string
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

const num = (q?: string) => (q === undefined ? '' : q)

function rows(kind: Row['kind'], items: (Project | Department)[], queues: Map<string, Queue>): Row[] {
  return items.flatMap((p) => {
    const queue = queues.get(`${p.name}/queue`)
    const pools = new Set<string>([...(p.nodePoolQuotas ?? []).map((q) => q.nodePool ?? ''), ...(queue?.nodePools ?? []).map((n) => n.nodePool ?? '')])
    if (pools.size === 0) pools.add('nodepools/default')
    return [...pools].map((pool) => ({
      kind,
      name: id(p.name),
      department: 'department' in p ? id(p.department) : '',
      pool,
      q: p.nodePoolQuotas?.find((q) => q.nodePool === pool),
      queue,
      etag: p.etag,
      rules: rulesText(p.schedulingRules),
      schedulingRules: p.schedulingRules ?? [],
    }))
  })
}

function cols(onDelete: (r: Row) => void, onEdit: (r: Row) => void, onRules: (r: Row) => void): Col<Row>[] {
  const np = (r: Row) => r.queue?.nodePools?.find((n) => n.nodePool === r.pool)
  return [
    { id: 'name', header: 'Name', text: (r) => r.name },
    { id: 'kind', header: 'Kind', text: (r) => r.kind, filter: true },
    { id: 'department', header: 'Department', text: (r) => r.department, filter: true },
    { id: 'pool', header: 'Node pool', text: (r) => id(r.pool), filter: true },
    { id: 'quota', header: 'GPU quota', text: (r) => gpus(num(r.q?.gpu?.deservedMilliGpus) || np(r)?.deserved?.milliGpus) },
    { id: 'limit', header: 'Limit', text: (r) => gpus(r.q?.gpu?.limitMilliGpus ?? np(r)?.limit?.milliGpus ?? '-1') },
    { id: 'weight', header: 'Over-quota weight', text: (r) => String(r.q?.gpu?.overQuotaWeight ?? np(r)?.overQuotaWeights?.gpu ?? 1) },
    { id: 'allocated', header: 'Allocated', text: (r) => gpus(np(r)?.allocated?.milliGpus) },
    { id: 'fairShare', header: 'Fair share', text: (r) => gpus(np(r)?.fairShare?.milliGpus) },
    { id: 'rules', header: 'Scheduling rules', text: (r) => r.rules },
    { id: 'running', header: 'Running', text: (r) => String(np(r)?.runningWorkloads ?? 0), hidden: true },
    { id: 'pending', header: 'Pending', text: (r) => String(np(r)?.pendingWorkloads ?? 0), hidden: true },
    {
      id: 'actions',
      header: 'Actions',
      text: () => '',
      cell: (r) => (
        <span className="actions">
          <button type="button" onClick={() => onEdit(r)} aria-label={`Edit ${r.kind.toLowerCase()} ${r.name}`}>Edit</button>
          <button type="button" onClick={() => onRules(r)} aria-label={`Scheduling rules of ${r.kind.toLowerCase()} ${r.name}`}>Rules</button>
          <button type="button" className="danger" onClick={() => onDelete(r)} aria-label={`Delete ${r.kind.toLowerCase()} ${r.name}`}>Delete</button>
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

function QuotaForm({ editing, departments, onDone }: { editing?: Row; departments: Department[]; onDone: () => void }) {
  const [kind, setKind] = useState<Row['kind']>(editing?.kind ?? 'Project')
  const [name, setName] = useState(editing?.name ?? '')
  const [department, setDepartment] = useState(editing?.department || 'default')
  const [pool, setPool] = useState(id(editing?.pool) || 'default')
  const [quota, setQuota] = useState(shown(editing?.q?.gpu?.deservedMilliGpus))
  const [limit, setLimit] = useState(shown(editing?.q?.gpu?.limitMilliGpus))
  const [weight, setWeight] = useState(String(editing?.q?.gpu?.overQuotaWeight ?? ''))
  const [error, setError] = useState('')
  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    setError('')
    const gpu: Record<string, unknown> = {}
    const [q, l] = [milli(quota), milli(limit)]
    if (q === null || l === null || (weight.trim() && !/^\d+$/.test(weight.trim()))) {
      setError('GPU quota and limit are amounts of GPUs such as 2 or 0.5 (limit empty: unlimited); the weight is a whole number.')
      return
    }
    if (q !== undefined) gpu.deservedMilliGpus = q
    if (l !== undefined) gpu.limitMilliGpus = l
    if (weight.trim()) gpu.overQuotaWeight = Number(weight)
    const body: Record<string, unknown> = { nodePoolQuotas: [{ nodePool: `nodepools/${pool}`, gpu }] }
    const coll = kind === 'Project' ? 'projects' : 'departments'
    try {
      if (editing) {
        await call('PATCH', `/v1/${coll}/${name}`, body)
      } else {
        if (kind === 'Project' && department) body.department = `departments/${department}`
        await call('POST', `/v1/${coll}?${kind === 'Project' ? 'projectId' : 'departmentId'}=${encodeURIComponent(name)}`, body)
      }
      onDone()
    } catch (err) {
      setError(errorText(err))
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
        <input value={pool} onChange={(e) => setPool(e.target.value)} required />
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
      {error && <p role="alert" className="error">{error}</p>}
    </form>
  )
}

export function Projects() {
  const { data, error, reload } = useLoad(
    async (s) => {
      const [ps, ds, qs] = await Promise.all([
        listAll<Project>('/v1/projects', 'projects', s),
        listAll<Department>('/v1/departments', 'departments', s).catch(() => [] as Department[]),
        listAll<Queue>('/v1/queues', 'queues', s).catch(() => [] as Queue[]),
      ])
      const queues = new Map(qs.map((q) => [q.name, q]))
      return { ds, projectNames: ps.map((p) => p.name), all: [...rows('Department', ds, queues), ...rows('Project', ps, queues)] }
    },
    [],
    3000,
  )
  const [editing, setEditing] = useState<Row | undefined>()
  const [rulesOf, setRulesOf] = useState<Row | undefined>()
  const [form, setForm] = useState(false)
  const { run, error: actionError } = useAction(reload)
  const del = (r: Row) =>
    window.confirm(`Delete ${r.kind.toLowerCase()} ${r.name}?`) && run(() => call('DELETE', `/v1/${r.kind === 'Project' ? 'projects' : 'departments'}/${r.name}`))
  return (
    <section aria-labelledby="h-projects">
      <div className="heading">
        <h1 id="h-projects">Projects and departments</h1>
        <button type="button" onClick={() => { setEditing(undefined); setRulesOf(undefined); setForm(!form) }} aria-expanded={form}>
          New project or department
        </button>
      </div>
      {(form || editing) && (
        <QuotaForm key={editing ? editing.kind + editing.name + editing.pool : 'new'} editing={editing} departments={data?.ds ?? []} onDone={() => { setForm(false); setEditing(undefined); reload() }} />
      )}
      {rulesOf && (
        <RulesForm
          key={rulesOf.kind + rulesOf.name}
          scope={`${rulesOf.kind === 'Project' ? 'projects' : 'departments'}/${rulesOf.name}`}
          rules={rulesOf.schedulingRules}
          onDone={() => { setRulesOf(undefined); reload() }}
        />
      )}
      {(error || actionError) && <p role="alert" className="error">{error || actionError}</p>}
      {data && (
        <DataTable
          label="Projects and departments"
          rows={data.all}
          cols={cols(del, (r) => { setForm(false); setRulesOf(undefined); setEditing(r) }, (r) => { setForm(false); setEditing(undefined); setRulesOf(r) })}
          rowKey={(r) => `${r.kind}/${r.name}/${r.pool}`}
        />
      )}
      {data && <OverTime projects={data.projectNames} departments={data.ds.map((d) => d.name)} />}
    </section>
  )
}
