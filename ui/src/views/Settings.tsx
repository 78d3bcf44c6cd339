import { useEffect, useState } from 'react'
import { call, get, listAll } from '../api'
import { errorText, useLoad } from '../hooks'
import { id } from '../format'
import { parseDuration, showDuration } from './Rules'
import type { NodePool } from '../types'

// AccountSettings is QuotaService's Settings resource as REST returns it.
export type AccountSettings = {
  name?: string
  rejectOverSubscription?: boolean
  defaultNodePool?: string
  allowOverQuotaByDefault?: boolean
  workspaceAutoSuspend?: string
  gpuResourceOptimization?: boolean
  loginBanner?: string
  etag?: string
}

// The fields the form edits, in the update mask's names.
const FIELDS = ['reject_over_subscription', 'default_node_pool', 'allow_over_quota_by_default',
  'workspace_auto_suspend', 'gpu_resource_optimization', 'login_banner']

// Settings shows the account's general settings to everyone and lets a
// system administrator change them (UpdateSettings with an update mask;
// the server refuses anyone else, and says so here).
export function Settings() {
  const { data, error, reload } = useLoad(async (s) => {
    const [settings, pools] = await Promise.all([
      get<AccountSettings>('/v1/settings', s),
      listAll<NodePool>('/v1/nodepools', 'nodePools', s).catch(() => [] as NodePool[]),
    ])
    return { settings, pools }
  }, [])
  const [f, setF] = useState<AccountSettings>({})
  const [suspend, setSuspend] = useState('')
  const [saved, setSaved] = useState('')
  const [problem, setProblem] = useState('')
  useEffect(() => {
    if (data) {
      setF(data.settings)
      setSuspend(showDuration(data.settings.workspaceAutoSuspend))
    }
  }, [data])
  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    setSaved('')
    setProblem('')
    const d = parseDuration(suspend)
    if (d === null) {
      setProblem('“Workspace auto-suspend” is a duration such as 8h or 2d; empty means none.')
      return
    }
    const body: AccountSettings = { ...f, workspaceAutoSuspend: d, etag: data?.settings.etag }
    try {
      await call('PATCH', `/v1/settings?updateMask=${FIELDS.join(',')}`, body)
      setSaved('Settings saved.')
      reload()
    } catch (err) {
      setProblem(errorText(err))
    }
  }
  return (
    <section>
      <h1>General settings</h1>
      <p className="hint">The account's settings. Everyone may read them; only a system administrator changes them, and every change is in the event history.</p>
      {error && <p role="alert" className="error">{error}</p>}
      {data && (
        <form className="form" aria-label="General settings" onSubmit={submit}>
          <label className="check">
            <input type="checkbox" checked={!!f.rejectOverSubscription} onChange={(e) => setF({ ...f, rejectOverSubscription: e.target.checked })} />
            Reject quotas above what a department or node pool can give
          </label>
          <label>
            Default node pool
            <select value={f.defaultNodePool ?? ''} onChange={(e) => setF({ ...f, defaultNodePool: e.target.value })}>
              <option value="">none</option>
              {data.pools.map((p) => <option key={p.name} value={p.name}>{id(p.name)}</option>)}
            </select>
          </label>
          <label className="check">
            <input type="checkbox" checked={!!f.allowOverQuotaByDefault} onChange={(e) => setF({ ...f, allowOverQuotaByDefault: e.target.checked })} />
            Allow workspaces to exceed their project's quota by default (they may then be preempted)
          </label>
          <label>
            Workspace auto-suspend
            <input value={suspend} onChange={(e) => setSuspend(e.target.value)} placeholder="none" />
          </label>
          <label className="check">
            <input type="checkbox" checked={f.gpuResourceOptimization !== false} onChange={(e) => setF({ ...f, gpuResourceOptimization: e.target.checked })} />
            GPU resource optimisation (workloads may ask for part of a GPU)
          </label>
          <label>
            Sign-in banner
            <textarea value={f.loginBanner ?? ''} maxLength={1000} onChange={(e) => setF({ ...f, loginBanner: e.target.value })} />
          </label>
          <button type="submit">Save settings</button>
          <button type="button" className="secondary" onClick={() => { setSaved(''); setProblem(''); reload() }}>Cancel</button>
          {saved && <p role="status">{saved}</p>}
          {problem && <p role="alert" className="error">{problem}</p>}
        </form>
      )}
    </section>
  )
}
