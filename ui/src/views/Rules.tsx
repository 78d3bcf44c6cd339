import { useState } from 'react'
import { call } from '../api'
import { errorText } from '../hooks'
import { id, workloadType } from '../format'
import type { SchedulingRules } from '../types'

const TYPES = ['WORKLOAD_TYPE_TRAINING', 'WORKLOAD_TYPE_WORKSPACE', 'WORKLOAD_TYPE_INFERENCE']

// parseDuration reads "90m", "1h30m", "2d", "45s" as protobuf JSON ("5400s");
// empty is unset (undefined), anything else null.
export function parseDuration(s: string): string | undefined | null {
  const t = s.trim()
  if (t === '') return undefined
  const m = t.match(/^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/)
  if (!m) return null
  const secs = Number(m[1] ?? 0) * 86400 + Number(m[2] ?? 0) * 3600 + Number(m[3] ?? 0) * 60 + Number(m[4] ?? 0)
  return secs > 0 ? `${secs}s` : null
}

// showDuration is the inverse for the form: "5400s" -> "1h30m".
export function showDuration(d?: string): string {
  if (!d) return ''
  let s = Math.round(parseFloat(d))
  if (!Number.isFinite(s) || s <= 0) return ''
  const parts: string[] = []
  for (const [unit, n] of [['d', 86400], ['h', 3600], ['m', 60], ['s', 1]] as [string, number][]) {
    if (s >= n) {
      parts.push(`${Math.floor(s / n)}${unit}`)
      s %= n
    }
  }
  return parts.join('')
}

// withRule is the scope's rules with the one for r's type replaced by r, or
// removed when r is null; one entry per type, in type order.
export function withRule(rules: SchedulingRules[], type: string, r: SchedulingRules | null): SchedulingRules[] {
  const rest = rules.filter((x) => x.workloadType !== type)
  return (r ? [...rest, r] : rest).sort((a, b) => TYPES.indexOf(a.workloadType ?? '') - TYPES.indexOf(b.workloadType ?? ''))
}

// RulesForm edits a project's or department's scheduling rules, one
// workload type at a time; the server checks them (UpdateProject,
// UpdateDepartment) and its message is shown.
export function RulesForm({ scope, rules, onDone, onCancel }: { scope: string; rules: SchedulingRules[]; onDone: () => void; onCancel: () => void }) {
  const [type, setType] = useState(TYPES[0])
  const current = rules.find((r) => r.workloadType === type)
  const [f, setF] = useState(() => fields(current))
  const [error, setError] = useState('')
  const pick = (t: string) => {
    setType(t)
    setF(fields(rules.find((r) => r.workloadType === t)))
  }
  const save = async (next: SchedulingRules[]) => {
    setError('')
    try {
      await call('PATCH', `/v1/${scope}`, { schedulingRules: next })
      onDone()
    } catch (err) {
      setError(errorText(err))
    }
  }
  const submit = (e: React.FormEvent) => {
    e.preventDefault()
    const [tl, il] = [parseDuration(f.timeLimit), parseDuration(f.idleGpuLimit)]
    if (tl === null || il === null) {
      setError('Limits are durations such as 90m, 8h or 2d; empty means no limit.')
      return
    }
    const r: SchedulingRules = { workloadType: type }
    if (tl) r.timeLimit = tl
    if (il) r.idleGpuLimit = il
    if (f.preemptWhenIdle) r.preemptWhenIdle = true
    const nodeTypes = f.nodeTypes.split(',').map((s) => s.trim()).filter(Boolean)
    if (nodeTypes.length) r.nodeTypes = nodeTypes
    save(withRule(rules, type, r))
  }
  return (
    <form className="form inline" aria-label={`Scheduling rules of ${id(scope)}`} onSubmit={submit}>
      <label>
        Workload type
        <select value={type} onChange={(e) => pick(e.target.value)}>
          {TYPES.map((t) => <option key={t} value={t}>{workloadType(t)}</option>)}
        </select>
      </label>
      <label>Time limit<input value={f.timeLimit} onChange={(e) => setF({ ...f, timeLimit: e.target.value })} placeholder="none" /></label>
      <label>Idle GPU limit<input value={f.idleGpuLimit} onChange={(e) => setF({ ...f, idleGpuLimit: e.target.value })} placeholder="none" /></label>
      <label className="check">
        <input type="checkbox" checked={f.preemptWhenIdle} onChange={(e) => setF({ ...f, preemptWhenIdle: e.target.checked })} /> Preempt when idle
      </label>
      <label>Node types<input value={f.nodeTypes} onChange={(e) => setF({ ...f, nodeTypes: e.target.value })} placeholder="any" /></label>
      <button type="submit">Save rules</button>
      <button type="button" className="secondary" onClick={onCancel}>Cancel</button>
      {current && <button type="button" className="danger" onClick={() => save(withRule(rules, type, null))}>Remove {workloadType(type).toLowerCase()} rules</button>}
      {error && <p role="alert" className="error">{error}</p>}
    </form>
  )
}

function fields(r?: SchedulingRules) {
  return { timeLimit: showDuration(r?.timeLimit), idleGpuLimit: showDuration(r?.idleGpuLimit), preemptWhenIdle: !!r?.preemptWhenIdle, nodeTypes: (r?.nodeTypes ?? []).join(', ') }
}
