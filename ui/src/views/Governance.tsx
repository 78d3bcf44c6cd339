import { useEffect, useState } from 'react'
import { ApiError, call, get, listAll } from '../api'
import { errorText, useAction, useLoad } from '../hooks'
import { DataTable, type Col } from '../table'
import { bytes, gpuRequest, id, parseGpu } from '../format'
import type { ComputeResource, Environment, Policy, Template } from '../types'
import { ruleText } from '../policy'
import { parseBytes, parseCpu, runsText } from '../spec'
import { problemsOf, type Problems } from '../problems'
import { CommandFields, useCommand } from './CommandFields'
import { Field } from './Field'
import { AssetTabs } from './AssetTabs'
import { listScoped, type Credential } from './Credentials'
import { PULL_POLICIES, PullFields } from './MountFields'

// policyPath is a policy's REST path: the account's, a department's or a
// project's, for one workload type.
export function policyPath(scope: string, type: string): string {
  if (scope === 'account' || scope === '') return `/v1/policies/${type}`
  const [kind, name] = scope.split(':')
  return `/v1/${kind === 'department' ? 'departments' : 'projects'}/${encodeURIComponent(name ?? '')}/policies/${type}`
}

function PolicyEditor() {
  const [scope, setScope] = useState('account')
  const [type, setType] = useState('training')
  const [text, setText] = useState('')
  const [policy, setPolicy] = useState<Policy | null>(null)
  const [msg, setMsg] = useState('')
  const [error, setError] = useState('')
  const [loaded, setLoaded] = useState(false)
  const path = policyPath(scope, type)
  // The editor is read-only until the stored policy is in, so a late answer
  // never overwrites what was typed.
  useEffect(() => {
    const ctl = new AbortController()
    setError('')
    setMsg('')
    setLoaded(false)
    get<Policy>(path, ctl.signal)
      .then((p) => {
        setPolicy(p)
        setText(JSON.stringify({ defaults: p.defaults ?? {}, rules: p.rules ?? {} }, null, 2))
      })
      .catch((e) => {
        if (ctl.signal.aborted) return
        setPolicy(null)
        if (e instanceof ApiError && e.status === 404) setText(JSON.stringify({ defaults: {}, rules: {} }, null, 2))
        else setError(errorText(e))
      })
      .finally(() => {
        if (!ctl.signal.aborted) setLoaded(true)
      })
    return () => ctl.abort()
  }, [path])
  const save = async (e: React.FormEvent) => {
    e.preventDefault()
    setError('')
    setMsg('')
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch (err) {
      setError(`Not JSON: ${errorText(err)}`)
      return
    }
    try {
      const p = await call<Policy>('PATCH', `${path}?allowMissing=true`, body)
      setPolicy(p)
      setMsg('Policy saved.')
    } catch (err) {
      setError(errorText(err))
    }
  }
  return (
    <form className="form" onSubmit={save} aria-label="Policy">
      <div className="inline">
        <label>
          Scope
          <input value={scope} onChange={(e) => setScope(e.target.value)} placeholder="account, department:NAME or project:NAME" />
        </label>
        <label>
          Workload type
          <select value={type} onChange={(e) => setType(e.target.value)}>
            <option>training</option>
            <option>workspace</option>
            <option>inference</option>
          </select>
        </label>
      </div>
      <p className="hint">{policy ? `Set ${policy.updateTime ?? ''}` : 'No policy set at this scope for this type.'}</p>
      {policy?.rules && (
        <ul>
          {Object.entries(policy.rules).map(([f, r]) => (
            <li key={f}><code>{f}</code>: {ruleText(r)}</li>
          ))}
        </ul>
      )}
      <label>
        Defaults and rules (JSON, the REST form)
        <textarea rows={10} value={text} onChange={(e) => setText(e.target.value)} spellCheck={false} readOnly={!loaded} />
      </label>
      {error && <p role="alert" className="error">{error}</p>}
      {msg && <p role="status">{msg}</p>}
      <button type="submit" disabled={!loaded}>Save policy</button>
      <button type="button" className="secondary" onClick={() => { setError(''); setMsg(''); setText(JSON.stringify({ defaults: policy?.defaults ?? {}, rules: policy?.rules ?? {} }, null, 2)) }}>Cancel</button>
    </form>
  )
}

// listAssets reads the account's environments, compute resources and
// templates.
export async function listAssets(signal: AbortSignal) {
  const [envs, crs, templates] = await Promise.all([
    listAll<Environment>('/v1/environments', 'environments', signal),
    listAll<ComputeResource>('/v1/computeResources', 'computeResources', signal),
    listAll<Template>('/v1/templates', 'templates', signal),
  ])
  return { envs, crs, templates }
}

// templateType is a template's workload type as people say it, or "any".
export function templateType(t: Template): string {
  return t.type && t.type !== 'WORKLOAD_TYPE_UNSPECIFIED' ? t.type.replace('WORKLOAD_TYPE_', '').toLowerCase() : 'any'
}

// TemplateForm creates an account template from the assets that exist and
// a few spec fields; what it leaves empty a submission gives.
function TemplateForm({ envs, crs, onDone }: { envs: Environment[]; crs: ComputeResource[]; onDone: () => void }) {
  const [tid, setTid] = useState('')
  const [type, setType] = useState('')
  const [environment, setEnvironment] = useState('')
  const [compute, setCompute] = useState('')
  const [image, setImage] = useState('')
  const [pods, setPods] = useState('')
  const { run, error } = useAction(onDone)
  return (
    <form className="form inline" aria-label="Create a template"
      onSubmit={(e) => {
        e.preventDefault()
        const spec: Record<string, unknown> = {}
        if (image) spec.image = image
        if (pods) spec.pods = Number(pods)
        run(() => call('POST', `/v1/templates?templateId=${encodeURIComponent(tid)}`, {
          ...(type ? { type: `WORKLOAD_TYPE_${type.toUpperCase()}` } : {}),
          ...(environment ? { environment } : {}), ...(compute ? { computeResource: compute } : {}), spec,
        }))
      }}>
      <label>Template id<input value={tid} onChange={(e) => setTid(e.target.value)} required /></label>
      <label>
        Template type
        <select value={type} onChange={(e) => setType(e.target.value)}>
          <option value="">any</option>
          <option>training</option>
          <option>workspace</option>
          <option>inference</option>
        </select>
      </label>
      <label>
        Template environment
        <select value={environment} onChange={(e) => setEnvironment(e.target.value)}>
          <option value="">(none)</option>
          {envs.map((e) => <option key={e.name} value={id(e.name)}>{id(e.name)}</option>)}
        </select>
      </label>
      <label>
        Template compute resource
        <select value={compute} onChange={(e) => setCompute(e.target.value)}>
          <option value="">(none)</option>
          {crs.map((c) => <option key={c.name} value={id(c.name)}>{id(c.name)}</option>)}
        </select>
      </label>
      <label>Template image<input value={image} onChange={(e) => setImage(e.target.value)} /></label>
      <label>Template pods<input type="number" min={1} value={pods} onChange={(e) => setPods(e.target.value)} /></label>
      <button type="submit">Create template</button>
      <button type="button" className="secondary" onClick={() => { setTid(''); setType(''); setEnvironment(''); setCompute(''); setImage(''); setPods('') }}>Cancel</button>
      {error && <p role="alert" className="error">{error}</p>}
    </form>
  )
}

function AssetForms({ onDone }: { onDone: () => void }) {
  const [envId, setEnvId] = useState('')
  const [image, setImage] = useState('')
  const cmd = useCommand()
  const [pullPolicy, setPullPolicy] = useState('')
  const [registry, setRegistry] = useState('')
  const { data: creds } = useLoad((sig) => listScoped<Credential>('credentials', sig).then((r) => r.items), [])
  const [crId, setCrId] = useState('')
  const [gpu, setGpu] = useState('')
  const [cpu, setCpu] = useState('')
  const [memory, setMemory] = useState('')
  const [crProblems, setCrProblems] = useState<Problems>({ fields: {}, rest: '' })
  const { run, error } = useAction(onDone)
  const crLabels = { gpu: 'GPU per pod', cpu: 'CPU per pod (cores)', memory: 'Memory per pod' }
  const createCr = async (e: React.FormEvent) => {
    e.preventDefault()
    const g = parseGpu(gpu)
    const [c, m] = [parseCpu(cpu), parseBytes(memory)]
    const local: Record<string, string> = {}
    if (g === null) local[crLabels.gpu] = 'a whole number of GPUs, or a fraction below 1 such as 0.5'
    if (c === null) local[crLabels.cpu] = 'cores, such as 0.5 or 4'
    if (m === null) local[crLabels.memory] = 'a size such as 512Mi or 16Gi'
    if (g !== null && c === undefined && m === undefined && !g.devices && !g.fractionMilli) local[crLabels.gpu] = 'set GPU, CPU or memory'
    setCrProblems({ fields: local, rest: '' })
    if (Object.keys(local).length) return
    try {
      await call('POST', `/v1/computeResources?computeResourceId=${encodeURIComponent(crId)}`, {
        ...(g && (g.devices || g.fractionMilli) ? { gpu: g } : {}), ...(c ? { milliCpu: String(c) } : {}), ...(m ? { memoryBytes: String(m) } : {}),
      })
      onDone()
    } catch (err) {
      setCrProblems(problemsOf(err, {
        compute_resource_id: 'Compute resource id', 'compute_resource.gpu': crLabels.gpu, 'compute_resource.milli_cpu': crLabels.cpu,
        'compute_resource.memory_bytes': crLabels.memory,
      }))
    }
  }
  const p = (l: string) => crProblems.fields[l] ?? ''
  return (
    <>
      <form className="form inline" aria-label="Create an environment"
        onSubmit={(e) => {
          e.preventDefault()
          run(() => call('POST', `/v1/environments?environmentId=${encodeURIComponent(envId)}`, {
            image, ...(cmd.run.command.length ? { command: cmd.run.command } : {}), ...(cmd.run.args.length ? { args: cmd.run.args } : {}),
            ...(pullPolicy ? { imagePullPolicy: pullPolicy } : {}), ...(registry ? { registryCredential: registry } : {}),
          }))
        }}>
        <label>Environment id<input value={envId} onChange={(e) => setEnvId(e.target.value)} required /></label>
        <label>Image<input value={image} onChange={(e) => setImage(e.target.value)} required /></label>
        <CommandFields c={cmd} problem={() => ''} name="env-cmd" />
        <PullFields policy={pullPolicy} setPolicy={setPullPolicy} registry={registry} setRegistry={setRegistry} creds={creds ?? []} problem={() => ''} />
        <button type="submit">Create environment</button>
        <button type="button" className="secondary" onClick={() => { setEnvId(''); setImage(''); cmd.reset(); setPullPolicy(''); setRegistry('') }}>Cancel</button>
        {error && <p role="alert" className="error">{error}</p>}
      </form>
      <form className="form inline" aria-label="Create a compute resource" onSubmit={createCr}>
        <Field label="Compute resource id" problem={p('Compute resource id')}><input value={crId} onChange={(e) => setCrId(e.target.value)} required /></Field>
        <Field label={crLabels.gpu} problem={p(crLabels.gpu)}><input value={gpu} onChange={(e) => setGpu(e.target.value)} inputMode="decimal" /></Field>
        <Field label={crLabels.cpu} problem={p(crLabels.cpu)}><input value={cpu} onChange={(e) => setCpu(e.target.value)} inputMode="decimal" placeholder="none" /></Field>
        <Field label={crLabels.memory} problem={p(crLabels.memory)}><input value={memory} onChange={(e) => setMemory(e.target.value)} placeholder="such as 16Gi" /></Field>
        <button type="submit">Create compute resource</button>
        <button type="button" className="secondary" onClick={() => { setCrId(''); setGpu(''); setCpu(''); setMemory(''); setCrProblems({ fields: {}, rest: '' }) }}>Cancel</button>
        {crProblems.rest && <p role="alert" className="error">{crProblems.rest}</p>}
      </form>
    </>
  )
}

export function Governance() {
  const { data, error, reload } = useLoad(listAssets, [])
  const { run, error: actionError } = useAction(reload)
  const del = (name: string) => window.confirm(`Delete ${name}?`) && run(() => call('DELETE', `/v1/${name}`))
  const delCol = <T extends { name: string }>(): Col<T> => ({
    id: 'actions', header: 'Actions', text: () => '',
    cell: (r) => <button type="button" className="danger" aria-label={`Delete ${id(r.name)}`} onClick={() => del(r.name)}>Delete</button>,
  })
  const envCols: Col<Environment>[] = [
    { id: 'name', header: 'Environment', text: (e) => id(e.name) },
    { id: 'scope', header: 'Scope', text: (e) => e.name.split('/').slice(0, -2).join('/') || 'account' },
    { id: 'image', header: 'Image', text: (e) => e.image ?? '' },
    { id: 'command', header: 'Command', text: (e) => runsText([...(e.command ?? []), ...(e.args ?? [])]) },
    { id: 'pull', header: 'Pull policy', text: (e) => PULL_POLICIES.find(([v]) => v === (e.imagePullPolicy ?? ''))?.[1] ?? '', hidden: true },
    { id: 'registry', header: 'Registry credential', text: (e) => e.registryCredential ?? '', hidden: true },
    { id: 'description', header: 'Description', text: (e) => e.description ?? '' },
    delCol<Environment>(),
  ]
  const crCols: Col<ComputeResource>[] = [
    { id: 'name', header: 'Compute resource', text: (c) => id(c.name) },
    { id: 'gpu', header: 'GPU per pod', text: (c) => gpuRequest(c.gpu) },
    { id: 'cpu', header: 'CPU', text: (c) => (c.milliCpu ? String(Number(c.milliCpu) / 1000) : '') },
    { id: 'memory', header: 'Memory', text: (c) => (c.memoryBytes ? bytes(c.memoryBytes) : '') },
    { id: 'description', header: 'Description', text: (c) => c.description ?? '' },
    delCol<ComputeResource>(),
  ]
  const templateCols: Col<Template>[] = [
    { id: 'name', header: 'Template', text: (t) => id(t.name) },
    { id: 'type', header: 'Type', text: templateType },
    { id: 'environment', header: 'Environment', text: (t) => t.environment ?? '' },
    { id: 'compute', header: 'Compute resource', text: (t) => t.computeResource ?? '' },
    { id: 'image', header: 'Image', text: (t) => t.spec?.image ?? '' },
    { id: 'pods', header: 'Pods', text: (t) => (t.spec?.pods ? String(t.spec.pods) : '') },
    delCol<Template>(),
  ]
  return (
    <section aria-labelledby="h-gov">
      <AssetTabs />
      <h1 id="h-gov">Policies and assets</h1>
      {(error || actionError) && <p role="alert" className="error">{error || actionError}</p>}
      <h2>Policies</h2>
      <PolicyEditor />
      <h2>Assets</h2>
      <AssetForms onDone={reload} />
      {data && <DataTable label="Environments" rows={data.envs} cols={envCols} rowKey={(e) => e.name} />}
      {data && <DataTable label="Compute resources" rows={data.crs} cols={crCols} rowKey={(c) => c.name} />}
      <h2>Templates</h2>
      {data && <TemplateForm envs={data.envs} crs={data.crs} onDone={reload} />}
      {data && <DataTable label="Templates" rows={data.templates} cols={templateCols} rowKey={(t) => t.name} />}
    </section>
  )
}
