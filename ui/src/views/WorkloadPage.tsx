import { useEffect, useRef, useState } from 'react'
import { ApiError, call, get, streamNDJSON } from '../api'
import { useRouter } from '../router'
import { errorText, useAction, useLoad } from '../hooks'
import { bytes, enumLabel, gpuRequest, gpus, id, labelText, phase, time, workloadType } from '../format'
import type { Explain, PendingReason, Quantity, Workload } from '../types'
import { MetricCharts, WindowPicker, type ChartSpec } from '../chart'
import { linesOf } from '../metrics'
import { runsText } from '../spec'
import { PULL_POLICIES } from './MountFields'
import { sourceText } from './DataSources'

// A workload's metrics, one line per pod; CPU and memory as measured by the
// agents per pod, with the workload's allocation as a line to compare with.
export const WORKLOAD_CHARTS = (name: string): ChartSpec[] => [
  { title: 'GPU utilisation', unit: 'ratio', lines: (m) => linesOf(m.get(name), 'GPU_UTILIZATION', 'Utilisation') },
  { title: 'GPUs allocated', unit: 'gpus', lines: (m) => linesOf(m.get(name), 'ALLOCATED_GPUS', 'GPUs allocated') },
  { title: 'GPU memory used', unit: 'bytes', lines: (m) => linesOf(m.get(name), 'GPU_MEMORY_USED_BYTES', 'GPU memory') },
  {
    title: 'CPU cores used',
    unit: 'cores',
    lines: (m) => [...linesOf(m.get(name), 'CPU_USAGE_CORES', 'CPU used'), ...linesOf(m.get(name), 'ALLOCATED_CPU_CORES', 'CPU allocated')],
  },
  {
    title: 'Memory used',
    unit: 'bytes',
    lines: (m) => [...linesOf(m.get(name), 'MEMORY_USAGE_BYTES', 'Memory used'), ...linesOf(m.get(name), 'ALLOCATED_MEMORY_BYTES', 'Memory allocated')],
  },
]

function WorkloadMetrics({ project, name }: { project: string; name: string }) {
  const [window, setWindow] = useState(3600)
  const entity = `projects/${project}/workloads/${name}`
  return (
    <section aria-labelledby="h-metrics">
      <div className="heading">
        <h2 id="h-metrics">Metrics over time</h2>
        <WindowPicker value={window} onChange={setWindow} />
      </div>
      <MetricCharts label="Workload metrics" names={[entity]} window={window} charts={WORKLOAD_CHARTS(entity)} />
    </section>
  )
}

function qty(q?: Quantity) {
  if (!q) return ''
  const parts = [`${gpus(q.milliGpus)} GPU`]
  if (q.milliCpu && q.milliCpu !== '0') parts.push(`${Number(q.milliCpu) / 1000} CPU`)
  if (q.memoryBytes && q.memoryBytes !== '0') parts.push(bytes(q.memoryBytes))
  return parts.join(', ')
}

// never is the scheduler's word that no node is big enough for one pod,
// said first: no wait will make it run.
function never(reasons?: PendingReason[]): string {
  const m = (reasons ?? []).map((r) => r.message ?? '').find((t) => t.includes('it can never fit'))
  if (!m) return ''
  const s = m.slice(m.indexOf('it can never fit'))
  return s[0].toUpperCase() + s.slice(1) + '.'
}

function Reasons({ reasons }: { reasons: PendingReason[] }) {
  return (
    <table>
      <caption>Why it waits</caption>
      <thead>
        <tr>
          <th scope="col">Check</th><th scope="col">Reason</th><th scope="col">Node pool</th>
          <th scope="col">Requested</th><th scope="col">Available</th><th scope="col">Nodes failed</th>
        </tr>
      </thead>
      <tbody>
        {reasons.map((r, i) => (
          <tr key={i}>
            <td>{enumLabel(r.check, 'PENDING_CHECK_')}</td><td>{r.message}</td><td>{id(r.nodePool)}</td>
            <td>{qty(r.requested)}</td><td>{qty(r.available)}</td><td>{r.nodeCount ?? ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

// Attempts is the scheduler's last look at a pending workload (:explain):
// per node pool, how many nodes each check removed and the largest free
// block on the rest.
function Attempts({ path, phase }: { path: string; phase: string }) {
  const { data } = useLoad((s) => get<Explain>(`${path}:explain`, s), [path, phase], 5000)
  const attempts = data?.nodePoolAttempts ?? []
  if (!attempts.length && !data?.lastDecision) return null
  return (
    <>
      {data?.lastDecision?.message && (
        <p className="hint">
          Last decision ({time(data.lastDecision.time)}, {enumLabel(data.lastDecision.outcome, 'DECISION_OUTCOME_').toLowerCase()}): {data.lastDecision.message}
        </p>
      )}
      {attempts.length > 0 && (
        <table>
          <caption>Node pools tried</caption>
          <thead>
            <tr><th scope="col">Node pool</th><th scope="col">Nodes</th><th scope="col">Feasible</th><th scope="col">Removed by</th><th scope="col">Largest free block</th></tr>
          </thead>
          <tbody>
            {attempts.map((a, i) => (
              <tr key={i}>
                <td>{id(a.nodePool)}</td><td>{a.nodesTotal ?? 0}</td><td>{a.nodesFeasible ?? 0}</td>
                <td>{(a.filtered ?? []).map((f) => `${enumLabel(f.check, 'PENDING_CHECK_')}: ${f.nodes ?? 0}${f.message ? ` (${f.message})` : ''}`).join('; ')}</td>
                <td>{qty(a.largestFreeBlock)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  )
}

// Logs reads the :logs NDJSON stream: the last lines, then (when following)
// what the pod writes next, until the page is left or follow is switched off.
function Logs({ path, phase }: { path: string; phase: string }) {
  const [pod, setPod] = useState(0)
  const [retry, setRetry] = useState(0)
  const [follow, setFollow] = useState(false)
  const [text, setText] = useState('')
  const [error, setError] = useState('')
  const pre = useRef<HTMLPreElement>(null)
  useEffect(() => {
    const ctl = new AbortController()
    let timer: ReturnType<typeof setTimeout> | undefined
    setText('')
    setError('')
    const dec = new TextDecoder()
    streamNDJSON(
      `${path}:logs?podIndex=${pod}&tailLines=200&follow=${follow}`,
      (v) => {
        const data = (v as { data?: string }).data ?? ''
        const bin = atob(data)
        const u8 = Uint8Array.from(bin, (c) => c.charCodeAt(0))
        setText((t) => (t + dec.decode(u8, { stream: true })).slice(-200_000))
      },
      ctl.signal,
    ).catch((e) => {
      if (ctl.signal.aborted) return
      // No output yet (not started, or no pod at that index): ask again soon.
      if (e instanceof ApiError && e.reason === 'WORKLOAD_NO_LOGS') timer = setTimeout(() => setRetry((r) => r + 1), 2000)
      else setError(e instanceof Error ? e.message : String(e))
    })
    return () => {
      ctl.abort()
      clearTimeout(timer)
    }
  }, [path, pod, follow, phase, retry])
  useEffect(() => {
    if (pre.current) pre.current.scrollTop = pre.current.scrollHeight
  }, [text])
  return (
    <section aria-labelledby="h-logs">
      <h2 id="h-logs">Logs</h2>
      <div className="toolbar">
        <label>
          Pod
          <input type="number" min={0} value={pod} onChange={(e) => setPod(Math.max(0, Number(e.target.value)))} />
        </label>
        <label className="check">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} /> Follow
        </label>
      </div>
      {error && <p role="alert" className="error">{error}</p>}
      <pre ref={pre} className="logs" tabIndex={0} aria-label="Log output">{text || noLogs(phase)}</pre>
    </section>
  )
}

// noLogs says why there is no output to show, in the workload's terms.
function noLogs(phase: string): string {
  if (phase === 'WORKLOAD_PHASE_PENDING') return 'No pod is running yet: the workload is pending.'
  if (phase === 'WORKLOAD_PHASE_STOPPED') return 'No pod is running: the workload is stopped.'
  return '(no output yet)'
}

function Actions({ path, w, reload }: { path: string; w: Workload; reload: () => void }) {
  const { go } = useRouter()
  const { run, error } = useAction(reload)
  const act = (method: string, url: string, body?: unknown, after?: () => void) => run(() => call(method, url, body), after)
  const stopped = w.status?.phase === 'WORKLOAD_PHASE_STOPPED'
  const final = w.status?.phase === 'WORKLOAD_PHASE_COMPLETED' || w.status?.phase === 'WORKLOAD_PHASE_FAILED'
  return (
    <div className="actions" role="group" aria-label="Workload actions">
      {!final && (stopped ? (
        <button type="button" onClick={() => act('POST', `${path}:resume`, {})}>Resume</button>
      ) : (
        <button type="button" onClick={() => act('POST', `${path}:suspend`, {})}>Suspend</button>
      ))}
      <button type="button" className="danger" onClick={() => window.confirm(`Delete workload ${id(w.name)}?`) && act('DELETE', path, undefined, () => go('/workloads'))}>
        Delete
      </button>
      {error && <p role="alert" className="error">{error}</p>}
    </div>
  )
}

export function WorkloadPage({ project, name }: { project: string; name: string }) {
  const path = `/v1/projects/${encodeURIComponent(project)}/workloads/${encodeURIComponent(name)}`
  const { data: w, error, reload } = useLoad((s) => get<Workload>(path, s), [path], 2000)
  const st = w?.status
  return (
    <section aria-labelledby="h-workload">
      <h1 id="h-workload">
        Workload {name} <small>in project {project}</small>
      </h1>
      {error && <p role="alert" className="error">{error}</p>}
      {w && (
        <>
          <Actions path={path} w={w} reload={reload} />
          <dl className="facts">
            <dt>Status</dt>
            <dd className={`phase phase-${phase(st?.phase).toLowerCase()}`}>
              {phase(st?.phase)}
              {st?.preemptionCount ? ` (sent back to pending ${st.preemptionCount} time${st.preemptionCount > 1 ? 's' : ''})` : ''}
            </dd>
            <dt>Type</dt><dd>{workloadType(w.type)}</dd>
            {w.labels && Object.keys(w.labels).length > 0 && <><dt>Labels</dt><dd>{labelText(w.labels)}</dd></>}
            {Number(w.spec?.ttlAfterFinishedSeconds) > 0 && <><dt>Deleted</dt><dd>{Number(w.spec?.ttlAfterFinishedSeconds) / 3600} h after it finishes</dd></>}
            <dt>Submitted</dt><dd>{time(w.createTime)} by {id(w.creator)}</dd>
            <dt>Image</dt><dd>{w.spec?.image}</dd>
            <dt>Command</dt><dd><code>{runsText([...(w.spec?.command ?? []), ...(w.spec?.args ?? [])]) || "the image's own"}</code></dd>
            <dt>GPU per pod</dt><dd>{gpuRequest(w.spec?.gpu)}</dd>
            <dt>CPU per pod</dt><dd>{Number(w.spec?.milliCpu) > 0 ? `${Number(w.spec?.milliCpu) / 1000} cores` : 'none reserved'}</dd>
            <dt>Memory per pod</dt><dd>{Number(w.spec?.memoryBytes) > 0 ? bytes(w.spec?.memoryBytes) : 'none reserved'}</dd>
            <dt>Pods</dt><dd>{st?.runningPods ?? 0} running of {st?.requestedPods ?? w.spec?.pods ?? 1}</dd>
            <dt>Priority</dt><dd>{w.spec?.priority}</dd>
            <dt>Node pool</dt><dd>{id(st?.nodePool) || (w.spec?.nodePools?.length ? `one of ${w.spec.nodePools.map(id).join(', ')}, in this order` : '')}</dd>
            {w.spec?.nodeType && <><dt>Node type</dt><dd>{w.spec.nodeType}</dd></>}
            {w.spec?.imagePullPolicy && <><dt>Pull policy</dt><dd>{PULL_POLICIES.find(([v]) => v === w.spec?.imagePullPolicy)?.[1] ?? w.spec.imagePullPolicy}</dd></>}
            {w.spec?.registryCredential && <><dt>Registry credential</dt><dd>{w.spec.registryCredential}</dd></>}
            {w.spec?.dataSources?.length ? (
              <><dt>Data sources</dt><dd><ul aria-label="Data sources it mounts">{w.spec.dataSources.map((d, i) => (
                <li key={i}>{d.dataSource ? id(d.dataSource) : 'one-off'} at <code>{d.source?.mountPath}</code>{d.source?.readOnly ? ' (read-only)' : ''}{d.source ? `: ${sourceText(d.source)}` : ''}</li>
              ))}</ul></dd></>
            ) : null}
            {w.spec?.credentials?.length ? (
              <><dt>Credentials</dt><dd><ul aria-label="Credentials it mounts">{w.spec.credentials.map((c, i) => (
                <li key={i}>{c.credential} {c.path ? <>as files under <code>{c.path}</code></> : 'as environment variables'}</li>
              ))}</ul></dd></>
            ) : null}
            <dt>GPU allocation</dt><dd>{gpus(st?.allocatedMilliGpus)}</dd>
            {st?.gpuIdleTime && <><dt>GPUs idle for</dt><dd>{st.gpuIdleTime}</dd></>}
            {st?.stopReason && <><dt>Stopped because</dt><dd>{st.stopReason}</dd></>}
          </dl>
          <Tools path={path} w={w} />
          {never(st?.pendingReasons) && <p className="never" role="note">{never(st?.pendingReasons)}</p>}
          {st?.pendingReasons?.length ? <Reasons reasons={st.pendingReasons} /> : null}
          {st?.phase === 'WORKLOAD_PHASE_PENDING' && <Attempts path={path} phase={st.phase} />}
          <table>
            <caption>Pods</caption>
            <thead><tr><th scope="col">Pod</th><th scope="col">State</th><th scope="col">Node</th><th scope="col">Devices</th><th scope="col">Message</th></tr></thead>
            <tbody>
              {(st?.pods ?? []).map((p) => (
                <tr key={p.index ?? 0}>
                  <td>{p.index ?? 0}</td><td>{enumLabel(p.state, 'POD_STATE_')}</td><td>{p.node}</td>
                  <td>{(p.deviceIndexes ?? []).map((d) => `GPU ${d}`).join(', ')}{p.fractionMilli ? ` (${p.fractionMilli / 10}%)` : ''}</td>
                  <td>{p.message}</td>
                </tr>
              ))}
              {!st?.pods?.length && <tr><td colSpan={5} className="empty">No pod is bound.</td></tr>}
            </tbody>
          </table>
          <table>
            <caption>Events</caption>
            <thead><tr><th scope="col">Time</th><th scope="col">Event</th><th scope="col">By</th><th scope="col">Message</th></tr></thead>
            <tbody>
              {(st?.events ?? []).map((e, i) => (
                <tr key={i}>
                  <td>{time(e.time)}</td><td>{enumLabel(e.type, 'WORKLOAD_EVENT_TYPE_')}</td>
                  <td>{[e.by, enumLabel(e.rule, 'SCHEDULING_RULE_')].filter(Boolean).join(', ')}</td><td>{e.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <WorkloadMetrics project={project} name={name} />
          <Logs path={path} phase={st?.phase ?? ''} />
        </>
      )}
    </section>
  )
}

// Tools lists a workload's tools with a Connect button each: a one-time
// ticket (CreateToolTicket) opens the tool on the proxy's origin, which
// trades it for a cookie of that workload's path alone; the UI's own token
// never leaves this page. An inference endpoint's URL is shown to copy.
function Tools({ path, w }: { path: string; w: Workload }) {
  const [error, setError] = useState('')
  const tools = w.status?.tools ?? []
  const endpoint = w.status?.endpointUrl
  if (tools.length === 0 && !endpoint) return null
  const connect = async (tool: string) => {
    setError('')
    // Opened before the call, so that the browser counts it as the click's.
    const win = window.open('', '_blank')
    try {
      const t = await call<{ url?: string }>('POST', `${path}:createToolTicket`, { tool })
      if (!t.url) throw new Error('This deployment serves no tool proxy.')
      if (win) {
        win.opener = null
        win.location.href = t.url
      }
    } catch (err) {
      win?.close()
      setError(errorText(err))
    }
  }
  return (
    <section aria-labelledby="h-tools">
      <h2 id="h-tools">Tools</h2>
      <ul>
        {tools.map((t) => (
          <li key={t.name}>
            {t.name} <small>{enumLabel(t.type, 'TOOL_TYPE_')}</small>{' '}
            {t.url ? <button type="button" onClick={() => connect(t.name ?? '')}>Connect to {t.name}</button> : <small>reachable once the workload runs</small>}
          </li>
        ))}
      </ul>
      {endpoint && (
        <p>
          Endpoint: <code>{endpoint}</code>{' '}
          <button type="button" className="secondary" onClick={() => navigator.clipboard?.writeText(endpoint)}>Copy endpoint</button>
        </p>
      )}
      {error && <p role="alert" className="error">{error}</p>}
    </section>
  )
}
