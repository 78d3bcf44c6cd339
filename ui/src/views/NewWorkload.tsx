import { useEffect, useState } from 'react'
import { call, get, listAll } from '../api'
import { useLoad } from '../hooks'
import { useRouter } from '../router'
import { bytes, gpuRequest, id, parseGpu } from '../format'
import type { EffectivePolicy, NodePool, NodeT, Project } from '../types'
import { listAssets, templateType } from './Governance'
import { checkRule, ruleText } from '../policy'
import { problemsOf, type Problems } from '../problems'
import { DEFAULT_PRIORITY, parseBytes, parseCpu, parseEnv, PRIORITIES, priorityText, type CommandMode } from '../spec'
import { COMMAND_LABELS, CommandFields, useCommand } from './CommandFields'
import { Field } from './Field'
import { PoolOrder } from './PoolOrder'
import { MOUNT_LABELS, MountFields, PullFields, useMounts, useUsable } from './MountFields'

const TYPES = ['training', 'workspace', 'inference'] as const
type GpuKind = 'devices' | 'fraction' | 'memory'

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

// The form's labels, which its problems are keyed by.
const L = {
  name: 'Name', image: 'Image', ...COMMAND_LABELS,
  cpu: 'CPU per pod (cores)', memory: 'Memory per pod', priority: 'Priority', pools: 'Node pools, in order of preference',
  nodeType: 'Node type', minPods: 'Minimum pods started together', env: 'Environment variables', labels: 'Labels',
  ttl: 'Delete after it finishes (hours)', template: 'Template', environment: 'Environment', compute: 'Compute resource',
}
const GPU_LABEL: Record<GpuKind, string> = { devices: 'GPUs per pod', fraction: 'Fraction of one GPU per pod', memory: 'GPU memory per pod' }
const PODS_LABEL: Record<string, string> = { training: 'Workers (pods)', workspace: 'Pods', inference: 'Replicas' }

// apiLabels maps the API's field paths (as its errors name them) to the
// form's labels.
function apiLabels(gpuLabel: string, podsLabel: string, mode: CommandMode) {
  const s = 'workload.spec.'
  return {
    workload_id: L.name, template: L.template, environment: L.environment, compute_resource: L.compute, 'workload.labels': L.labels,
    [s + 'image']: L.image, [s + 'command']: mode === 'shell' ? L.shell : L.command, [s + 'args']: mode === 'shell' ? L.shell : L.args,
    [s + 'env']: L.env, [s + 'gpu']: gpuLabel, [s + 'gpu.devices']: gpuLabel, [s + 'gpu.fraction_milli']: gpuLabel,
    [s + 'gpu.gpu_memory_bytes']: gpuLabel, [s + 'milli_cpu']: L.cpu, [s + 'memory_bytes']: L.memory, [s + 'pods']: podsLabel,
    [s + 'min_pods']: L.minPods, [s + 'priority']: L.priority, [s + 'node_pools']: L.pools, [s + 'node_type']: L.nodeType,
    [s + 'ttl_after_finished_seconds']: L.ttl, [s + 'image_pull_policy']: MOUNT_LABELS.pullPolicy,
    [s + 'registry_credential']: MOUNT_LABELS.registry, [s + 'data_sources']: MOUNT_LABELS.dataSources, [s + 'credentials']: MOUNT_LABELS.credentials,
  }
}

export function NewWorkload() {
  const { go } = useRouter()
  const { data: projects } = useLoad((s) => listAll<Project>('/v1/projects', 'projects', s), [])
  // Pools and nodes feed the pickers; a caller who may not list them types.
  const { data: pools } = useLoad((s) => listAll<NodePool>('/v1/nodepools', 'nodePools', s).catch(() => [] as NodePool[]), [])
  const { data: nodes } = useLoad((s) => listAll<NodeT & { labels?: Record<string, string> }>('/v1/nodes', 'nodes', s).catch(() => []), [])
  const [project, setProject] = useState('')
  const [type, setType] = useState<(typeof TYPES)[number]>('training')
  const [name, setName] = useState('')
  const [mode, setMode] = useState<'asset' | 'hand' | 'template'>('hand')
  const [template, setTemplate] = useState('')
  const [environment, setEnvironment] = useState('')
  const [compute, setCompute] = useState('')
  const [image, setImage] = useState('')
  const cmd = useCommand()
  const [gpuKind, setGpuKind] = useState<GpuKind>('devices')
  const [gpu, setGpu] = useState('')
  const [cpu, setCpu] = useState('')
  const [memory, setMemory] = useState('')
  const [priority, setPriority] = useState('')
  const [nodePools, setNodePools] = useState<string[]>([])
  const [nodeType, setNodeType] = useState('')
  const [pods, setPods] = useState('1')
  const [minPods, setMinPods] = useState('')
  const [envText, setEnvText] = useState('')
  const [labels, setLabels] = useState('')
  const [ttlHours, setTtlHours] = useState('')
  const [suspended, setSuspended] = useState(false)
  const [pullPolicy, setPullPolicy] = useState('')
  const [registry, setRegistry] = useState('')
  const mounts = useMounts()
  const usable = useUsable(projects?.find((p) => id(p.name) === project))
  const [problems, setProblems] = useState<Problems>({ fields: {}, rest: '' })
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
  const rule = (f: string) => ruleText(f === 'milliCpu' ? cpuRule : fields.get(f)?.rule)
  // A CPU rule is in thousandths of a core; the form speaks of cores.
  const mc = fields.get('milliCpu')?.rule
  const cpuRule = mc && { ...mc, min: mc.min === undefined ? undefined : mc.min / 1000, max: mc.max === undefined ? undefined : mc.max / 1000 }
  // A default the form does not fill in is the server's to apply: shown
  // as the placeholder.
  const dflt = (f: string, otherwise: string) => (fields.get(f)?.defaultValue ? `policy default: ${fields.get(f)!.defaultValue}` : otherwise)

  // The effective policy's defaults fill the fields the user has not typed
  // in yet, each time the policy (project or type) changes.
  const [touched, setTouched] = useState<Set<string>>(new Set())
  const touch = (f: string, set: (v: string) => void) => (e: React.ChangeEvent<HTMLInputElement | HTMLSelectElement>) => {
    setTouched((t) => new Set(t).add(f))
    set(e.target.value)
  }
  useEffect(() => {
    const d = (f: string) => fields.get(f)?.defaultValue ?? ''
    if (!touched.has('image')) setImage(d('image'))
    if (!touched.has('gpu')) {
      const kind: GpuKind = d('gpu.fractionMilli') ? 'fraction' : d('gpu.gpuMemoryBytes') ? 'memory' : 'devices'
      setGpuKind(kind)
      setGpu(kind === 'fraction' ? String(Number(d('gpu.fractionMilli')) / 1000) : kind === 'memory' ? bytes(d('gpu.gpuMemoryBytes')).replace(' ', '') : d('gpu.devices'))
    }
    if (!touched.has('pods')) setPods(d('pods') || '1')
    if (!touched.has('priority')) setPriority('')
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [policy])

  const gpuLabel = GPU_LABEL[gpuKind]
  const podsLabel = PODS_LABEL[type]
  const gpuParsed = gpuKind === 'memory' ? gpuMemory(gpu) : gpuKind === 'fraction' ? fraction(gpu) : devices(gpu)
  // What cannot be read stops the submit; a policy rule's early answer only
  // shows (the server's answer on submit is the truth).
  const unreadable: Record<string, string> = {
    [gpuLabel]: typeof gpuParsed === 'string' ? gpuParsed : '',
    [L.cpu]: parseCpu(cpu) === null ? 'cores, such as 0.5 or 4' : '',
    [L.memory]: parseBytes(memory) === null ? 'a size such as 512Mi, 16Gi or 20G' : '',
  }
  const early: Record<string, string> = {
    [gpuLabel]: unreadable[gpuLabel] || (typeof gpuParsed === 'string' ? '' : checkRule(gpuParsed.devices, fields.get('gpu.devices')?.rule)),
    [podsLabel]: checkRule(Number(pods), fields.get('pods')?.rule),
    [L.cpu]: unreadable[L.cpu] || checkRule((parseCpu(cpu) ?? 0) / 1000 || undefined, cpuRule),
    [L.memory]: unreadable[L.memory],
  }
  const problem = (label: string) => problems.fields[label] || early[label] || ''
  const run = cmd.run
  const typePriorities = PRIORITIES.filter((p) => p.types.includes(type))
  const nodeTypes = [...new Set((nodes ?? []).map((n) => n.labels?.['run.ai/type']).filter((t): t is string => !!t))].sort()
  const setsCommand = mode !== 'asset' || !environment
  const setsCompute = mode !== 'asset' || !compute

  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    const labelMap = parseLabels(labels)
    const env = parseEnv(envText)
    const local: Record<string, string> = Object.fromEntries(Object.entries(unreadable).filter(([, v]) => v))
    if (labelMap === null) local[L.labels] = 'KEY=VALUE pairs, comma-separated, such as team=vision, stage=test'
    if ('bad' in env) local[L.env] = `one NAME=VALUE a line; “${env.bad}” is not`
    if (Object.keys(local).length || typeof gpuParsed === 'string') {
      setProblems({ fields: local, rest: `Check ${Object.keys(local).map((l) => `“${l}”`).join(', ')}: each says what to fix.` })
      return
    }
    setProblems({ fields: {}, rest: '' })
    setBusy(true)
    // From a template, only what was typed in overrides it.
    const spec: Record<string, unknown> = mode === 'template' && !touched.has('pods') ? {} : { pods: Number(pods) || 1 }
    const q = new URLSearchParams({ workloadId: name })
    if (mode === 'template' && template) q.set('template', template)
    if (mode === 'asset' && environment) q.set('environment', environment)
    if (mode === 'asset' && compute) q.set('computeResource', compute)
    if (setsCommand) {
      if (image && (mode !== 'template' || touched.has('image'))) spec.image = image
      if (run.command.length) spec.command = run.command
      if (run.args.length) spec.args = run.args
    }
    const hasGpu = gpuParsed.devices || gpuParsed.fractionMilli || gpuParsed.gpuMemoryBytes
    if (setsCompute && hasGpu && (mode !== 'template' || touched.has('gpu'))) spec.gpu = gpuParsed
    if (setsCompute && parseCpu(cpu)) spec.milliCpu = String(parseCpu(cpu))
    if (setsCompute && parseBytes(memory)) spec.memoryBytes = String(parseBytes(memory))
    if (priority) spec.priority = priority
    if (nodePools.length) spec.nodePools = nodePools
    if (nodeType.trim()) spec.nodeType = nodeType.trim()
    if (Number(minPods) > 0) spec.minPods = Number(minPods)
    if ('env' in env && env.env.length) spec.env = env.env
    if (suspended) spec.suspended = true
    if (pullPolicy) spec.imagePullPolicy = pullPolicy
    if (registry) spec.registryCredential = registry
    Object.assign(spec, mounts.spec())
    if (Number(ttlHours) > 0) spec.ttlAfterFinishedSeconds = String(Math.round(Number(ttlHours) * 3600))
    try {
      await call('POST', `/v1/projects/${project}/workloads?${q}`, {
        type: `WORKLOAD_TYPE_${type.toUpperCase()}`, spec, ...(labelMap && Object.keys(labelMap).length ? { labels: labelMap } : {}),
      })
      go(`/workloads/${project}/${name}`)
    } catch (err) {
      setProblems(problemsOf(err, apiLabels(gpuLabel, podsLabel, cmd.mode)))
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
          <select value={project} onChange={(e) => { setProject(e.target.value); mounts.setSources([]); mounts.setCreds([]); setRegistry('') }} required>
            {(projects ?? []).map((p) => (
              <option key={p.name} value={id(p.name)}>{id(p.name)}</option>
            ))}
          </select>
        </label>
        <fieldset>
          <legend>Type</legend>
          {TYPES.map((t) => (
            <label key={t} className="check">
              <input type="radio" name="type" value={t} checked={type === t} onChange={() => { setType(t); setPriority('') }} /> {t[0].toUpperCase() + t.slice(1)}
            </label>
          ))}
        </fieldset>
        <Field label={L.name} problem={problem(L.name)} hint="1-63 characters of a-z, 0-9 and -, starting with a letter">
          <input value={name} onChange={(e) => setName(e.target.value)} required pattern="[a-z][a-z0-9\-]{0,62}" />
        </Field>
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
          <Field label={L.template} problem={problem(L.template)} hint="Fields typed in below override the template's.">
            <select value={template} onChange={(e) => setTemplate(e.target.value)} required>
              <option value="">(choose one)</option>
              {(assets?.templates ?? []).filter((t) => templateType(t) === 'any' || templateType(t) === type).map((t) => (
                <option key={t.name} value={id(t.name)}>{id(t.name)} ({[templateType(t), t.environment, t.computeResource, t.spec?.image].filter(Boolean).join(', ')})</option>
              ))}
            </select>
          </Field>
        )}
        {mode === 'asset' && (
          <>
            <Field label={L.environment} problem={problem(L.environment)}>
              <select value={environment} onChange={(e) => setEnvironment(e.target.value)}>
                <option value="">(none: set the image below)</option>
                {(assets?.envs ?? []).map((e) => (
                  <option key={e.name} value={id(e.name)}>{id(e.name)} ({e.image})</option>
                ))}
              </select>
            </Field>
            <Field label={L.compute} problem={problem(L.compute)}>
              <select value={compute} onChange={(e) => setCompute(e.target.value)}>
                <option value="">(none: set GPU, CPU and memory below)</option>
                {(assets?.crs ?? []).map((c) => (
                  <option key={c.name} value={id(c.name)}>{id(c.name)} ({computeText(c)})</option>
                ))}
              </select>
            </Field>
          </>
        )}
        {setsCommand && (
          <>
            <Field label={L.image} rule={rule('image')} problem={problem(L.image)}>
              <input value={image} onChange={touch('image', setImage)} />
            </Field>
            <CommandFields c={cmd} problem={problem} />
          </>
        )}
        <PullFields policy={pullPolicy} setPolicy={setPullPolicy} registry={registry} setRegistry={setRegistry} creds={usable.creds} problem={problem} />
        {setsCompute && (
          <fieldset>
            <legend>Compute per pod</legend>
            <div className="inline">
              <label>
                GPU as
                <select value={gpuKind} onChange={touch('gpu', (v) => setGpuKind(v as GpuKind))}>
                  <option value="devices">Whole GPUs</option>
                  <option value="fraction">A fraction of one GPU</option>
                  <option value="memory">GPU memory on one GPU</option>
                </select>
              </label>
              <Field label={gpuLabel} rule={rule(gpuKind === 'devices' ? 'gpu.devices' : gpuKind === 'fraction' ? 'gpu.fractionMilli' : 'gpu.gpuMemoryBytes')} problem={problem(gpuLabel)}
                hint={gpuKind === 'devices' ? 'Empty or 0: a CPU-only pod.' : gpuKind === 'fraction' ? 'Such as 0.5: the pod shares a GPU.' : 'Such as 20Gi, on one GPU.'}>
                <input value={gpu} onChange={touch('gpu', setGpu)} inputMode={gpuKind === 'memory' ? 'text' : 'decimal'} />
              </Field>
              <Field label={L.cpu} rule={rule('milliCpu')} problem={problem(L.cpu)} hint="Empty: no CPU reserved.">
                <input value={cpu} onChange={(e) => setCpu(e.target.value)} inputMode="decimal" placeholder={dflt('milliCpu', 'none')} />
              </Field>
              <Field label={L.memory} rule={rule('memoryBytes')} problem={problem(L.memory)} hint="Such as 16Gi; empty: none reserved.">
                <input value={memory} onChange={(e) => setMemory(e.target.value)} placeholder={dflt('memoryBytes', 'none')} />
              </Field>
            </div>
          </fieldset>
        )}
        <Field label={podsLabel} rule={rule('pods')} problem={problem(podsLabel)}
          hint={type === 'training' ? 'More than 1: distributed training, all workers placed together.' : undefined}>
          <input type="number" min={1} value={pods} onChange={touch('pods', setPods)} />
        </Field>
        {Number(pods) > 1 && (
          <Field label={L.minPods} rule={rule('minPods')} problem={problem(L.minPods)} hint="Empty: all of them; fewer lets the rest join when there is room (elastic).">
            <input type="number" min={1} max={Number(pods)} value={minPods} onChange={(e) => setMinPods(e.target.value)} />
          </Field>
        )}
        <Field label={L.priority} rule={rule('priority')} problem={problem(L.priority)}
          hint={priorityText(PRIORITIES.find((p) => p.name === (priority || fields.get('priority')?.defaultValue || DEFAULT_PRIORITY[type]))!)}>
          <select value={priority} onChange={touch('priority', setPriority)}>
            <option value="">{fields.get('priority')?.defaultValue ? `the policy's default (${fields.get('priority')!.defaultValue})` : `default: ${DEFAULT_PRIORITY[type]}`}</option>
            {typePriorities.map((p) => <option key={p.name} value={p.name}>{p.name} ({p.value}{p.preemptible ? ', may exceed the quota' : ''})</option>)}
          </select>
        </Field>
        <PoolOrder label={L.pools} pools={(pools ?? []).map((p) => id(p.name))} value={nodePools} onChange={setNodePools} problem={problem(L.pools)}
          hint={dflt('nodePools', "None chosen: the project's default node pools.")} />
        <Field label={L.nodeType} rule={rule('nodeType')} problem={problem(L.nodeType)} hint="Only nodes whose run.ai/type label has this value; empty: any node.">
          <input value={nodeType} onChange={(e) => setNodeType(e.target.value)} list="node-types" placeholder={dflt('nodeType', 'any')} />
        </Field>
        <datalist id="node-types">{nodeTypes.map((t) => <option key={t} value={t} />)}</datalist>
        <MountFields m={mounts} usable={usable} problem={problem} />
        <Field label={L.env} problem={problem(L.env)} hint="One NAME=VALUE a line.">
          <textarea rows={2} value={envText} onChange={(e) => setEnvText(e.target.value)} spellCheck={false} />
        </Field>
        <Field label={L.labels} problem={problem(L.labels)}>
          <input value={labels} onChange={(e) => setLabels(e.target.value)} placeholder="team=vision, stage=test" />
        </Field>
        <Field label={L.ttl} rule={rule('ttlAfterFinishedSeconds')} problem={problem(L.ttl)}>
          <input type="number" min={0} step="any" value={ttlHours} onChange={(e) => setTtlHours(e.target.value)} placeholder="keep it" />
        </Field>
        <label className="check">
          <input type="checkbox" checked={suspended} onChange={(e) => setSuspended(e.target.checked)} /> Submit it stopped (resume it later)
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
        {problems.rest && <p role="alert" className="error">{problems.rest}</p>}
        <div className="actions">
          <button type="submit" disabled={busy || !project}>Submit</button>
          <button type="button" className="secondary" onClick={() => go('/workloads')}>Cancel</button>
        </div>
      </form>
    </section>
  )
}

// The GPU field as typed, per kind: the request, or what is wrong with it.
type Gpu = { devices?: number; fractionMilli?: number; gpuMemoryBytes?: string }
function devices(s: string): Gpu | string {
  const g = parseGpu(s)
  if (g === null || g.fractionMilli) return 'a whole number of GPUs; choose “A fraction of one GPU” for part of one'
  return g
}
function fraction(s: string): Gpu | string {
  const g = parseGpu(s)
  if (s.trim() === '') return {}
  if (g === null || !g.fractionMilli) return 'a fraction between 0 and 1, such as 0.5'
  return g
}
function gpuMemory(s: string): Gpu | string {
  const b = parseBytes(s)
  if (b === null) return 'a size such as 20Gi'
  return b === undefined ? {} : { gpuMemoryBytes: String(b) }
}

export function computeText(c: { gpu?: Gpu; milliCpu?: string; memoryBytes?: string }): string {
  return [`${gpuRequest(c.gpu)} GPU`, Number(c.milliCpu) > 0 && `${Number(c.milliCpu) / 1000} CPU`, Number(c.memoryBytes) > 0 && bytes(c.memoryBytes)]
    .filter(Boolean).join(', ')
}
