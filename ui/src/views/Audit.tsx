import { useState } from 'react'
import { listAll } from '../api'
import { useLoad } from '../hooks'
import { DataTable, type Col } from '../table'
import { download, id, time } from '../format'
import type { AuditEvent } from '../types'

export interface AuditQuery { from: string; to: string; principal: string; resource: string; failedOnly: boolean }

// auditFilter builds the AIP-160 filter ListAuditEvents takes. from/to are
// datetime-local values (the browser's local time) or empty.
export function auditFilter(q: AuditQuery): string {
  const quote = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`
  const parts: string[] = []
  if (q.from) parts.push(`create_time >= ${quote(new Date(q.from).toISOString())}`)
  if (q.to) parts.push(`create_time < ${quote(new Date(q.to).toISOString())}`)
  if (q.principal.trim()) {
    const p = q.principal.trim()
    parts.push(`principal = ${quote(p.includes('/') ? p : `users/${p}`)}`)
  }
  if (q.resource.trim()) parts.push(`resource:${quote(q.resource.trim())}`)
  if (q.failedOnly) parts.push('status_code != 0')
  return parts.join(' AND ')
}

const cols: Col<AuditEvent>[] = [
  { id: 'time', header: 'Time', text: (e) => time(e.createTime) },
  { id: 'principal', header: 'Who', text: (e) => e.principal ?? '', filter: true },
  { id: 'method', header: 'Action', text: (e) => (e.method ?? '').split('/').pop() ?? '', filter: true },
  { id: 'resource', header: 'Resource', text: (e) => e.resource ?? '' },
  { id: 'status', header: 'Result', text: (e) => (e.statusCode ? `failed (${e.errorReason || e.statusCode})` : 'ok'), filter: true },
  { id: 'peer', header: 'From', text: (e) => e.peerAddress ?? '', hidden: true },
  { id: 'request', header: 'Request id', text: (e) => e.requestId ?? '', hidden: true },
]

export function Audit() {
  const [q, setQ] = useState<AuditQuery>({ from: '', to: '', principal: '', resource: '', failedOnly: false })
  const [applied, setApplied] = useState(q)
  const filter = auditFilter(applied)
  const { data, error } = useLoad(
    (s) => listAll<AuditEvent>(`/v1/auditEvents${filter ? `?filter=${encodeURIComponent(filter)}` : ''}`, 'auditEvents', s, 10),
    [filter],
  )
  const set = (k: keyof AuditQuery) => (e: React.ChangeEvent<HTMLInputElement>) =>
    setQ({ ...q, [k]: e.target.type === 'checkbox' ? e.target.checked : e.target.value })
  return (
    <section aria-labelledby="h-audit">
      <h1 id="h-audit">Event history</h1>
      <form className="form inline" aria-label="Audit filter" onSubmit={(e) => { e.preventDefault(); setApplied(q) }}>
        <label>From<input type="datetime-local" value={q.from} onChange={set('from')} /></label>
        <label>To<input type="datetime-local" value={q.to} onChange={set('to')} /></label>
        <label>Who<input value={q.principal} onChange={set('principal')} placeholder="alice or applications/ci" /></label>
        <label>Resource starts with<input value={q.resource} onChange={set('resource')} placeholder="projects/team-a/" /></label>
        <label className="check"><input type="checkbox" checked={q.failedOnly} onChange={set('failedOnly')} /> Failed only</label>
        <button type="submit">Apply</button>
        <button type="button" className="secondary" onClick={() => setQ(applied)}>Cancel</button>
        <button type="button" onClick={() => download('audit-events.json', 'application/json', JSON.stringify(data ?? [], null, 2))}>
          Download JSON
        </button>
      </form>
      {error && <p role="alert" className="error">{error}</p>}
      {data && <DataTable label="Audit events" rows={data} cols={cols} rowKey={(e) => e.name || id(e.requestId)} />}
    </section>
  )
}
