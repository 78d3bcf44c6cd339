import { useEffect, useState } from 'react'
import { call, get, listAll } from '../api'
import { errorText, useLoad } from '../hooks'
import { useRouter } from '../router'
import { gpuRequest, id, parseGpu } from '../format'
import type { EffectivePolicy, Project } from '../types'
import { listAssets, templateType } from './Governance'
import { checkRule, ruleText } from '../policy'

const TYPES = ['training', 'workspace', 'inference'] as const

// parseLabels reads "team=vision, stage=test" (null when a pair has no
// key or no =); the server checks the keys and values.
export function parseLabels(text: string): Record<string, string> | null {
  const out: Record<string, string> = {}
  for (const pair of text.split(',').map((p) => p.trim()).filter(Boolean)) {
    const i = pair.indexOf('=')
    if (i <= 0) return null
    out[pair.slice(0, i).trim()] = pair.slice(i + 1).trim()
  }
  return out
}

export function NewWorkload() {
  const { go } = useRouter()
  const { data: projects } = useLoad((s) => listAll<Project>('/v1/projects', 'projects', s), [])
  const [project, setProject] = useState('')
  const [type, setType] = useState<(typeof TYPES)[number]>('training')
  const [name, setName] = useState('')
  const [mode, setMode] = useState<'asset' | 'hand' | 'template'>('hand')
  const [template, setTemplate] = useState('')
  const [environment, setEnvironment] = useState('')
  const [compute, setCompute] = useState('')
  const [image, setImage] = useState('')
  const [command, setCommand] = useState('')
  const [gpu, setGpu] = useState('')
  const [pods, setPods] = useState('1')
  const [labels, setLabels] = useState('')
  const [ttlHours, setTtlHours] = useState('')
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)

  useEffect(() => {
    if (!project && projects?.length) setProject(id(projects[0].name))
  }, [projects, project])

  const { data: assets } = useLoad(listAssets, [])
  const { data: policy } = useLoad(
    (s) => (project ? get<EffectivePolicy>(`/v1/projects/${project}/policies/${type}:effective`, s) : Promise.resolve(undefined)),
    [project, type],
  )
  const fields = new Map((policy?.fields ?? []).map((f) => [f.field, f]))

  // The effective policy's defaults fill the fields the user has not typed
  // in yet, each time the policy (project or type) changes.
  const [touched, setTouched] = useState<Set<string>>(new Set())
  const touch = (f: string, set: (v: string) => void) => (e: React.ChangeEvent<HTMLInputElement>) => {
    setTouched((t) => new Set(t).add(f))
    set(e.target.value)
  }
  useEffect(() => {
    const d = (f: string) => fields.get(f)?.defaultValue ?? ''
    if (!touched.has('image')) setImage(d('image'))
    if (!touched.has('gpu')) setGpu(d('gpu.devices') || (d('gpu.fractionMilli') ? String(Number(d('gpu.fractionMilli')) / 1000) : ''))
    if (!touched.has('pods')) setPods(d('pods') || '1')
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [policy])

  const gpuParsed = parseGpu(gpu)
  const gpuProblem = gpuParsed === null ? 'a whole number of GPUs, or a fraction below 1 such as 0.5' : checkRule(gpuParsed.devices, fields.get('gpu.devices')?.rule)
  const podsProblem = checkRule(Number(pods), fields.get('pods')?.rule)

  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    setError('')
    if (gpuParsed === null) {
      setError(`GPU: ${gpuProblem}`)
      return
    }
    const labelMap = parseLabels(labels)
    if (labelMap === null) {
      setError('Labels: KEY=VALUE pairs, comma-separated, such as team=vision,stage=test')
      return
    }
    setBusy(true)
    // From a template, only what was typed in overrides it.
    const spec: Record<string, unknown> = mode === 'template' && !touched.has('pods') ? {} : { pods: Number(pods) || 1 }
    const q = new URLSearchParams({ workloadId: name })
    const words = command.trim().split(/\s+/).filter(Boolean)
    if (mode === 'template') {
      if (template) q.set('template', template)
      if (image && touched.has('image')) spec.image = image
      if (words.length) spec.command = words
      if (touched.has('gpu') && (gpuParsed.devices || gpuParsed.fractionMilli)) spec.gpu = gpuParsed
    } else {
      if (mode === 'asset') {
        if (environment) q.set('environment', environment)
        if (compute) q.set('computeResource', compute)
      }
      if (mode === 'hand' || !environment) {
        if (image) spec.image = image
        if (words.length) spec.command = words
      }
      if ((mode === 'hand' || !compute) && (gpuParsed.devices || gpuParsed.fractionMilli)) spec.gpu = gpuParsed
    }
    if (Number(ttlHours) > 0) spec.ttlAfterFinishedSeconds = String(Math.round(Number(ttlHours) * 3600))
    try {
      await call('POST', `/v1/projects/${project}/workloads?${q}`, {
        type: `WORKLOAD_TYPE_${type.toUpperCase()}`, spec, ...(Object.keys(labelMap).length ? { labels: labelMap } : {}),
      })
      go(`/workloads/${project}/${name}`)
    } catch (err) {
      setError(errorText(err))
    } finally {
      setBusy(false)
    }
  }

  return (
    <section aria-labelledby="h-new">
      <h1 id="h-new">New workload</h1>
      <form onSubmit={submit} className="form">
        <label>
          Project
          <select value={project} onChange={(e) => setProject(e.target.value)} required>
            {(projects ?? []).map((p) => (
              <option key={p.name} value={id(p.name)}>{id(p.name)}</option>
            ))}
          </select>
        </label>
        <fieldset>
          <legend>Type</legend>
          {TYPES.map((t) => (
            <label key={t} className="check">
              <input type="radio" name="type" value={t} checked={type === t} onChange={() => setType(t)} /> {t[0].toUpperCase() + t.slice(1)}
            </label>
          ))}
        </fieldset>
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required pattern="[a-z][a-z0-9\-]{0,62}" title="1-63 characters of a-z, 0-9 and -, starting with a letter" />
        </label>
        <fieldset>
          <legend>Set up</legend>
          <label className="check">
            <input type="radio" name="mode" checked={mode === 'asset'} onChange={() => setMode('asset')} /> From an environment and a compute resource
          </label>
          <label className="check">
            <input type="radio" name="mode" checked={mode === 'template'} onChange={() => setMode('template')} /> From a template
          </label>
          <label className="check">
            <input type="radio" name="mode" checked={mode === 'hand'} onChange={() => setMode('hand')} /> By hand
          </label>
        </fieldset>
        {mode === 'template' && (
          <label>
            Template
            <select value={template} onChange={(e) => setTemplate(e.target.value)} required>
              <option value="">(choose one)</option>
              {(assets?.templates ?? []).filter((t) => templateType(t) === 'any' || templateType(t) === type).map((t) => (
                <option key={t.name} value={id(t.name)}>{id(t.name)} ({[templateType(t), t.environment, t.computeResource, t.spec?.image].filter(Boolean).join(', ')})</option>
              ))}
            </select>
          </label>
        )}
        {mode === 'template' && <p className="hint">Fields typed in below override the template's.</p>}
        {mode === 'asset' && (
          <>
            <label>
              Environment
              <select value={environment} onChange={(e) => setEnvironment(e.target.value)}>
                <option value="">(none: set the image below)</option>
                {(assets?.envs ?? []).map((e) => (
                  <option key={e.name} value={id(e.name)}>{id(e.name)} ({e.image})</option>
                ))}
              </select>
            </label>
            <label>
              Compute resource
              <select value={compute} onChange={(e) => setCompute(e.target.value)}>
                <option value="">(none: set the GPUs below)</option>
                {(assets?.crs ?? []).map((c) => (
                  <option key={c.name} value={id(c.name)}>{id(c.name)} ({gpuRequest(c.gpu)} GPU)</option>
                ))}
              </select>
            </label>
          </>
        )}
        {(mode !== 'asset' || !environment) && (
          <>
            <label>
              Image <span className="rule">{ruleText(fields.get('image')?.rule)}</span>
              <input value={image} onChange={touch('image', setImage)} />
            </label>
            <label>
              Command
              <input value={command} onChange={(e) => setCommand(e.target.value)} placeholder="sleep 600" />
            </label>
          </>
        )}
        {(mode !== 'asset' || !compute) && (
          <label>
            GPUs per pod <span className="rule">{ruleText(fields.get('gpu.devices')?.rule)}</span>
            <input value={gpu} onChange={touch('gpu', setGpu)} inputMode="decimal" aria-invalid={gpuProblem ? true : undefined} aria-describedby="gpu-problem" />
            <span id="gpu-problem" className="problem">{gpuProblem}</span>
          </label>
        )}
        <label>
          Pods <span className="rule">{ruleText(fields.get('pods')?.rule)}</span>
          <input type="number" min={1} value={pods} onChange={touch('pods', setPods)} aria-describedby="pods-problem" />
          <span id="pods-problem" className="problem">{podsProblem}</span>
        </label>
        <label>
          Labels
          <input value={labels} onChange={(e) => setLabels(e.target.value)} placeholder="team=vision, stage=test" />
        </label>
        <label>
          Delete after it finishes (hours)
          <input type="number" min={0} step="any" value={ttlHours} onChange={(e) => setTtlHours(e.target.value)} placeholder="keep it" />
        </label>
        {policy?.fields?.length ? (
          <details>
            <summary>Effective policy for {type} in {project}</summary>
            <table>
              <caption>Policy fields</caption>
              <thead><tr><th scope="col">Field</th><th scope="col">Default</th><th scope="col">Rule</th><th scope="col">From</th></tr></thead>
              <tbody>
                {policy.fields.map((f) => (
                  <tr key={f.field}><td>{f.field}</td><td>{f.defaultValue}</td><td>{ruleText(f.rule)}</td><td>{f.ruleSource || f.defaultSource}</td></tr>
                ))}
              </tbody>
            </table>
          </details>
        ) : null}
        {error && <p role="alert" className="error">{error}</p>}
        <button type="submit" disabled={busy || !project}>Submit</button>
      </form>
    </section>
  )
}
