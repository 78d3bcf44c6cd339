import { useState } from 'react'
import { call, get, listAll } from '../api'
import { errorText, useAction, useLoad } from '../hooks'
import { DataTable, type Col } from '../table'
import { download, enumLabel, id, time } from '../format'
import type { Department, Project } from '../types'

// The ReportService's Report, the fields the view reads.
export interface Report {
  name: string; displayName?: string; description?: string; startTime?: string; endTime?: string
  project?: string; department?: string; segmentBy?: string; state?: string; errorMessage?: string
  creator?: string; createTime?: string; completeTime?: string; rowCount?: number; etag?: string
}

export interface ReportForm { id: string; displayName: string; description: string; start: string; end: string; scope: string; segment: string }

// localInput is a time as a datetime-local input shows it (local time, to
// the minute).
export function localInput(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`
}

// reportBody is CreateReport's REST body from the form. scope is "" (every
// project), "projects/x" or "departments/x". The input has minutes only:
// an end within the last minute, or later, means now (the server refuses an
// end in the future, and the form's default is this minute).
export function reportBody(f: ReportForm, now = new Date()): Record<string, unknown> {
  const end = new Date(f.end)
  const body: Record<string, unknown> = {
    displayName: f.displayName.trim(),
    startTime: new Date(f.start).toISOString(),
    endTime: (end.getTime() > now.getTime() - 60_000 ? now : end).toISOString(),
    segmentBy: f.segment,
  }
  if (f.description.trim()) body.description = f.description.trim()
  if (f.scope.startsWith('projects/')) body.project = f.scope
  if (f.scope.startsWith('departments/')) body.department = f.scope
  return body
}

const SEGMENTS: [string, string][] = [
  ['REPORT_SEGMENT_PROJECT', 'Project'],
  ['REPORT_SEGMENT_DEPARTMENT', 'Department'],
  ['REPORT_SEGMENT_NODE_POOL', 'Node pool'],
]

function CreateReport({ scopes, onDone, onCancel }: { scopes: string[]; onDone: () => void; onCancel: () => void }) {
  const now = new Date()
  const [f, setF] = useState<ReportForm>({
    id: '', displayName: '', description: '', start: localInput(new Date(now.getTime() - 24 * 3600 * 1000)), end: localInput(now), scope: '', segment: SEGMENTS[0][0],
  })
  const [error, setError] = useState('')
  const set = (k: keyof ReportForm) => (e: React.ChangeEvent<HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>) => setF({ ...f, [k]: e.target.value })
  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    setError('')
    try {
      await call('POST', `/v1/reports${f.id.trim() ? `?reportId=${encodeURIComponent(f.id.trim())}` : ''}`, reportBody(f))
      onDone()
    } catch (err) {
      setError(errorText(err))
    }
  }
  return (
    <form className="form inline" aria-label="Create a report" onSubmit={submit}>
      <label>Report name<input value={f.displayName} onChange={set('displayName')} required maxLength={100} /></label>
      <label>Report id<input value={f.id} onChange={set('id')} placeholder="generated" pattern="[a-z0-9-]{1,63}" /></label>
      <label>Description<input value={f.description} onChange={set('description')} maxLength={1000} /></label>
      <label>Start<input type="datetime-local" value={f.start} onChange={set('start')} required /></label>
      <label>End<input type="datetime-local" value={f.end} onChange={set('end')} required /></label>
      <label>
        Only
        <select value={f.scope} onChange={set('scope')}>
          <option value="">Every project</option>
          {scopes.map((s) => <option key={s} value={s}>{s.startsWith('projects/') ? 'Project' : 'Department'} {id(s)}</option>)}
        </select>
      </label>
      <label>
        One row per
        <select value={f.segment} onChange={set('segment')}>
          {SEGMENTS.map(([v, l]) => <option key={v} value={v}>{l} and node pool</option>)}
        </select>
      </label>
      <button type="submit">Create report</button>
      <button type="button" className="secondary" onClick={onCancel}>Cancel</button>
      {error && <p role="alert" className="error">{error}</p>}
    </form>
  )
}

export function Reports() {
  // Cancel empties the create form: a new one in its place.
  const [form, setForm] = useState(0)
  const { data, error, reload } = useLoad(
    async (s) => {
      const [reports, ps, ds] = await Promise.all([
        listAll<Report>('/v1/reports', 'reports', s, 4),
        listAll<Project>('/v1/projects', 'projects', s).catch(() => [] as Project[]),
        listAll<Department>('/v1/departments', 'departments', s).catch(() => [] as Department[]),
      ])
      return { reports, scopes: [...ds.map((d) => d.name), ...ps.map((p) => p.name)] }
    },
    [],
    2000,
  )
  const { run, error: actionError } = useAction(reload)
  const fetchCsv = (r: Report) =>
    run(async () => {
      const res = await get<{ csv?: string }>(`/v1/${r.name}:download`)
      download(`${id(r.name)}.csv`, 'text/csv', res.csv ?? '')
    })
  const del = (r: Report) =>
    window.confirm(`Delete report ${r.displayName || id(r.name)}?`) &&
    run(() => call('DELETE', `/v1/${r.name}${r.etag ? `?etag=${encodeURIComponent(r.etag)}` : ''}`))
  const cols: Col<Report>[] = [
    { id: 'name', header: 'Name', text: (r) => r.displayName || id(r.name) },
    { id: 'status', header: 'Status', text: (r) => enumLabel(r.state, 'REPORT_STATE_') + (r.errorMessage ? `: ${r.errorMessage}` : ''), filter: true },
    { id: 'window', header: 'Window', text: (r) => `${time(r.startTime)} to ${time(r.endTime)}` },
    { id: 'scope', header: 'Only', text: (r) => r.project || r.department || 'every project' },
    { id: 'segment', header: 'Rows per', text: (r) => enumLabel(r.segmentBy, 'REPORT_SEGMENT_') },
    { id: 'rows', header: 'Rows', text: (r) => String(r.rowCount ?? 0) },
    { id: 'creator', header: 'Created by', text: (r) => id(r.creator), filter: true },
    { id: 'created', header: 'Created', text: (r) => time(r.createTime) },
    { id: 'description', header: 'Description', text: (r) => r.description ?? '', hidden: true },
    {
      id: 'actions',
      header: 'Actions',
      text: () => '',
      cell: (r) => (
        <span className="actions">
          {r.state === 'REPORT_STATE_READY' && (
            <button type="button" onClick={() => fetchCsv(r)} aria-label={`Download report ${id(r.name)}`}>Download</button>
          )}
          <button type="button" className="danger" onClick={() => del(r)} aria-label={`Delete report ${id(r.name)}`}>Delete</button>
        </span>
      ),
    },
  ]
  return (
    <section aria-labelledby="h-reports">
      <h1 id="h-reports">Reports</h1>
      <p className="hint">Consumption over a window: GPU-hours allocated and used, CPU core-hours and memory GiB-hours, per segment and node pool.</p>
      <CreateReport key={form} scopes={data?.scopes ?? []} onDone={reload} onCancel={() => setForm(form + 1)} />
      {(error || actionError) && <p role="alert" className="error">{error || actionError}</p>}
      {data && <DataTable label="Reports" rows={data.reports} cols={cols} rowKey={(r) => r.name} empty="No report yet." />}
    </section>
  )
}
