import { useState } from 'react'
import { call, get, listAll } from '../api'
import { useAction, useLoad } from '../hooks'
import { DataTable, type Col } from '../table'
import { bytes, id, time } from '../format'
import { parseBytes } from '../spec'
import { problemsOf, type Problems } from '../problems'
import type { Caller, Role } from '../types'
import { Field } from './Field'
import { AssetTabs } from './AssetTabs'
import { listScoped, ScopeField, scopeOf, scopePath, type Credential } from './Credentials'

// DataSource is the API's resource: a mount path and exactly one source.
export interface DataSource {
  name: string; description?: string; mountPath?: string; readOnly?: boolean; creator?: string; createTime?: string
  hostPath?: { path?: string }; nfs?: { server?: string; path?: string }
  pvc?: { claimName?: string; storageClass?: string; sizeBytes?: string; lifetime?: string }
  git?: { repository?: string; revision?: string; credential?: string }
  s3?: { endpoint?: string; bucket?: string; prefix?: string; credential?: string }
  configMap?: { name?: string }; secret?: { name?: string }
}

type Kind = 'hostPath' | 'nfs' | 'pvc' | 'git' | 's3' | 'configMap' | 'secret'

// KINDS are the source types, the fields each asks for (by their JSON
// names) and, for git and s3, the credential type its picker offers.
const KINDS: { kind: Kind; label: string; fields: { key: string; label: string; hint?: string; optional?: boolean }[]; credType?: string }[] = [
  { kind: 'nfs', label: 'NFS export', fields: [{ key: 'server', label: 'NFS server', hint: 'A host name or an IP address' }, { key: 'path', label: 'Export path', hint: 'Absolute, such as /exports/data' }] },
  { kind: 'git', label: 'Git repository', credType: 'CREDENTIAL_TYPE_GIT', fields: [{ key: 'repository', label: 'Repository URL', hint: 'https://… without a password' }, { key: 'revision', label: 'Revision', hint: 'A branch, tag or commit; empty: the default branch', optional: true }] },
  { kind: 's3', label: 'S3 bucket', credType: 'CREDENTIAL_TYPE_S3_KEYS', fields: [{ key: 'endpoint', label: 'S3 endpoint', hint: 'Such as https://s3.example.com' }, { key: 'bucket', label: 'Bucket' }, { key: 'prefix', label: 'Key prefix', optional: true }] },
  { kind: 'pvc', label: 'PersistentVolumeClaim (Kubernetes)', fields: [{ key: 'claimName', label: 'Claim name', hint: 'An existing claim; or leave empty and give a storage class and size', optional: true }, { key: 'storageClass', label: 'Storage class', optional: true }, { key: 'sizeBytes', label: 'Size', hint: 'Such as 100Gi', optional: true }] },
  { kind: 'configMap', label: 'ConfigMap (Kubernetes)', fields: [{ key: 'name', label: 'ConfigMap name' }] },
  { kind: 'secret', label: 'Secret (Kubernetes)', fields: [{ key: 'name', label: 'Secret name' }] },
  { kind: 'hostPath', label: 'Node directory (host path)', fields: [{ key: 'path', label: 'Node directory', hint: 'Absolute path on the node' }] },
]

const snake = (k: string) => k.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase())
const SNAKE_KIND: Record<Kind, string> = { hostPath: 'host_path', nfs: 'nfs', pvc: 'pvc', git: 'git', s3: 's3', configMap: 'config_map', secret: 'secret' }

// sourceKind is which source a data source has; sourceText says it in one line.
export function sourceKind(d: Omit<DataSource, 'name'>): Kind | undefined {
  return KINDS.map((k) => k.kind).find((k) => d[k])
}
export function sourceText(d: Omit<DataSource, 'name'>): string {
  if (d.hostPath) return `node directory ${d.hostPath.path}`
  if (d.nfs) return `nfs ${d.nfs.server}:${d.nfs.path}`
  if (d.pvc) return d.pvc.claimName ? `claim ${d.pvc.claimName}` : `new claim ${d.pvc.storageClass ?? ''} ${bytes(d.pvc.sizeBytes)}`.trim()
  if (d.git) return `git ${d.git.repository}${d.git.revision ? `@${d.git.revision}` : ''}${d.git.credential ? ` (with ${id(d.git.credential)})` : ''}`
  if (d.s3) return `s3 ${d.s3.endpoint}/${d.s3.bucket}${d.s3.prefix ? `/${d.s3.prefix}` : ''}${d.s3.credential ? ` (with ${id(d.s3.credential)})` : ''}`
  if (d.configMap) return `config map ${d.configMap.name}`
  if (d.secret) return `secret ${d.secret.name}`
  return ''
}

// isAccountAdmin says whether the caller holds nodes.edit on the account:
// a host-path data source needs it (it reaches the node).
async function isAccountAdmin(signal: AbortSignal): Promise<boolean> {
  const [caller, roles] = await Promise.all([get<Caller>('/v1/caller', signal), listAll<Role>('/v1/roles', 'roles', signal).catch(() => [] as Role[])])
  const perms = new Map(roles.map((r) => [r.name, r.permissions ?? []]))
  return (caller.accessRules ?? []).some((r) => r.scope?.kind === 'SCOPE_KIND_ACCOUNT' && (perms.get(r.role ?? '') ?? []).includes('nodes.edit'))
}

async function load(signal: AbortSignal) {
  const [{ items, scopes }, creds, admin] = await Promise.all([
    listScoped<DataSource>('dataSources', signal), listScoped<Credential>('credentials', signal), isAccountAdmin(signal).catch(() => false),
  ])
  return { sources: items, scopes, creds: creds.items, admin }
}

const HOST_PATH_REASON = 'Only an account administrator may mount a node directory: it reaches the node itself.'

function DataSourceForm({ scopes, creds, admin, onDone }: { scopes: [string, string][]; creds: Credential[]; admin: boolean; onDone: () => void }) {
  const [scope, setScope] = useState('account')
  const [did, setDid] = useState('')
  const [kind, setKind] = useState<Kind>('nfs')
  const [values, setValues] = useState<Record<string, string>>({})
  const [credential, setCredential] = useState('')
  const [mountPath, setMountPath] = useState('')
  const [readOnly, setReadOnly] = useState(false)
  const [description, setDescription] = useState('')
  const [problems, setProblems] = useState<Problems>({ fields: {}, rest: '' })
  const [done, setDone] = useState('')
  const k = KINDS.find((x) => x.kind === kind)!
  const labels: Record<string, string> = {
    data_source_id: 'Data source id', parent: 'Scope', 'data_source.mount_path': 'Mount path', 'data_source.description': 'Description',
    [`data_source.${SNAKE_KIND[kind]}`]: k.fields[0].label, [`data_source.${SNAKE_KIND[kind]}.credential`]: 'Credential',
    ...Object.fromEntries(k.fields.map((f) => [`data_source.${SNAKE_KIND[kind]}.${snake(f.key)}`, f.label])),
  }
  const reset = () => {
    setDid(''); setValues({}); setCredential(''); setMountPath(''); setReadOnly(false); setDescription(''); setProblems({ fields: {}, rest: '' })
  }
  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    setDone('')
    const src: Record<string, string> = Object.fromEntries(Object.entries(values).filter(([key, v]) => v.trim() !== '' && k.fields.some((f) => f.key === key)))
    if (kind === 'pvc' && src.sizeBytes !== undefined) {
      const b = parseBytes(src.sizeBytes)
      if (!b) return setProblems({ fields: { Size: 'a size such as 100Gi' }, rest: 'Check “Size”: each says what to fix.' })
      src.sizeBytes = String(b)
    }
    if (k.credType && credential) src.credential = credential
    try {
      await call('POST', `/v1/${scopePath(scope) ? scopePath(scope) + '/' : ''}dataSources?dataSourceId=${encodeURIComponent(did)}`, {
        mountPath, readOnly, [kind]: src, ...(description ? { description } : {}),
      })
      setDone(`Data source ${did} created.`)
      reset()
      onDone()
    } catch (err) {
      setProblems(problemsOf(err, labels))
    }
  }
  const p = (l: string) => problems.fields[l] ?? ''
  const usable = creds.filter((c) => c.type === k.credType)
  return (
    <form className="form" aria-label="Create a data source" onSubmit={submit} autoComplete="off">
      <div className="inline">
        <ScopeField scopes={scopes} value={scope} onChange={setScope} problem={p('Scope')} />
        <Field label="Data source id" problem={p('Data source id')}><input value={did} onChange={(e) => setDid(e.target.value)} required /></Field>
        <Field label="Source type" hint={admin ? undefined : HOST_PATH_REASON}>
          <select value={kind} onChange={(e) => { setKind(e.target.value as Kind); setValues({}); setCredential('') }}>
            {KINDS.map((x) => <option key={x.kind} value={x.kind} disabled={x.kind === 'hostPath' && !admin}>{x.label}{x.kind === 'hostPath' && !admin ? ' (administrators only)' : ''}</option>)}
          </select>
        </Field>
      </div>
      <fieldset>
        <legend>{k.label}</legend>
        <div className="inline">
          {k.fields.map((f) => (
            <Field key={f.key} label={f.label} problem={p(f.label)} hint={[f.hint, f.optional && 'Optional'].filter(Boolean).join('. ') || undefined}>
              <input value={values[f.key] ?? ''} onChange={(e) => setValues({ ...values, [f.key]: e.target.value })} required={!f.optional} spellCheck={false} />
            </Field>
          ))}
          {kind === 'pvc' && (
            <Field label="Claim lifetime">
              <select value={values.lifetime ?? ''} onChange={(e) => setValues({ ...values, lifetime: e.target.value })}>
                <option value="">Kept after the workload</option>
                <option value="PVC_LIFETIME_DELETED_WITH_WORKLOAD">Deleted with the workload</option>
              </select>
            </Field>
          )}
          {k.credType && (
            <Field label="Credential" problem={p('Credential')} hint={usable.length ? 'Optional' : `Optional; none of type ${k.credType === 'CREDENTIAL_TYPE_GIT' ? 'git' : 's3 keys'} yet (create one under Credentials)`}>
              <select value={credential} onChange={(e) => setCredential(e.target.value)}>
                <option value="">(none)</option>
                {usable.map((c) => <option key={c.name} value={c.name}>{id(c.name)} ({scopeOf(c.name)})</option>)}
              </select>
            </Field>
          )}
        </div>
      </fieldset>
      <div className="inline">
        <Field label="Mount path" problem={p('Mount path')} hint="Absolute path in the pods, such as /data">
          <input value={mountPath} onChange={(e) => setMountPath(e.target.value)} required spellCheck={false} />
        </Field>
        <Field label="Description" problem={p('Description')}><input value={description} onChange={(e) => setDescription(e.target.value)} /></Field>
        <label className="check"><input type="checkbox" checked={readOnly} onChange={(e) => setReadOnly(e.target.checked)} /> Read-only</label>
      </div>
      {problems.rest && <p role="alert" className="error">{problems.rest}</p>}
      {done && <p role="status">{done}</p>}
      <div className="actions">
        <button type="submit">Create data source</button>
        <button type="button" className="secondary" onClick={reset}>Cancel</button>
      </div>
    </form>
  )
}

export function DataSources() {
  const { data, error, reload } = useLoad(load, [])
  const { run, error: actionError } = useAction(reload)
  const cols: Col<DataSource>[] = [
    { id: 'name', header: 'Data source', text: (d) => id(d.name) },
    { id: 'scope', header: 'Scope', text: (d) => scopeOf(d.name), filter: true },
    { id: 'type', header: 'Type', text: (d) => KINDS.find((k) => k.kind === sourceKind(d))?.label ?? '', filter: true },
    { id: 'source', header: 'Source', text: sourceText },
    { id: 'mount', header: 'Mount path', text: (d) => d.mountPath ?? '' },
    { id: 'ro', header: 'Read-only', text: (d) => (d.readOnly ? 'yes' : 'no'), filter: true },
    { id: 'description', header: 'Description', text: (d) => d.description ?? '', hidden: true },
    { id: 'creator', header: 'Created by', text: (d) => id(d.creator) },
    { id: 'created', header: 'Created', text: (d) => time(d.createTime), hidden: true },
    {
      id: 'actions', header: 'Actions', text: () => '',
      cell: (d) => (
        <button type="button" className="danger" aria-label={`Delete data source ${id(d.name)} of ${scopeOf(d.name)}`}
          onClick={() => window.confirm(`Delete data source ${d.name}? Workloads submitted with it keep what they mount.`) && run(() => call('DELETE', `/v1/${d.name}`))}>Delete</button>
      ),
    },
  ]
  return (
    <section aria-labelledby="h-ds">
      <AssetTabs />
      <h1 id="h-ds">Data sources</h1>
      <p className="hint">Data that workloads mount at a path: an NFS export, a git repository cloned before the command starts, an S3 prefix, a claim, a config map or secret, or (administrators) a node directory.</p>
      {(error || actionError) && <p role="alert" className="error">{error || actionError}</p>}
      {data && <DataSourceForm scopes={data.scopes} creds={data.creds} admin={data.admin} onDone={reload} />}
      {data && <DataTable label="Data sources" rows={data.sources} cols={cols} rowKey={(d) => d.name} />}
    </section>
  )
}
