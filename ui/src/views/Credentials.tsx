import { useState } from 'react'
import { call, listAll } from '../api'
import { useAction, useLoad } from '../hooks'
import { DataTable, type Col } from '../table'
import { enumLabel, id, time } from '../format'
import { problemsOf, type Problems } from '../problems'
import type { Department, Project } from '../types'
import { Field } from './Field'
import { AssetTabs } from './AssetTabs'

// Credential is the API's resource as it answers: keys, never values.
export interface Credential { name: string; type?: string; description?: string; server?: string; keys?: string[]; creator?: string; createTime?: string }

// TYPES are the credential types and the values each holds, by key, as the
// form asks for them (the workload service checks them).
const TYPES: { type: string; label: string; fields: { key: string; label: string; secret: boolean; multiline?: boolean; optional?: boolean }[] }[] = [
  { type: 'CREDENTIAL_TYPE_GENERIC', label: 'Generic (keys and values)', fields: [] },
  { type: 'CREDENTIAL_TYPE_REGISTRY', label: 'Container registry', fields: [{ key: 'username', label: 'User name', secret: false }, { key: 'password', label: 'Password', secret: true }] },
  { type: 'CREDENTIAL_TYPE_S3_KEYS', label: 'S3 access keys', fields: [{ key: 'access_key_id', label: 'Access key id', secret: false }, { key: 'secret_access_key', label: 'Secret access key', secret: true }] },
  {
    type: 'CREDENTIAL_TYPE_GIT', label: 'Git', fields: [
      { key: 'username', label: 'User name', secret: false, optional: true }, { key: 'token', label: 'Token', secret: true, optional: true },
      { key: 'ssh_private_key', label: 'SSH private key', secret: true, multiline: true, optional: true },
    ],
  },
]

// scopePath is a scope picker's value ("project:team-r") as an API
// parent ("projects/team-r"; '' for the account); scopeOf reads it back
// from a resource name.
export const scopePath = (scope: string) => (scope === 'account' ? '' : scope.replace(':', 's/'))
export const scopeOf = (name: string) => name.split('/').slice(0, -2).join('/') || 'account'

// ScopeField picks where an asset is created: the account, a department
// or a project.
export function ScopeField({ scopes, value, onChange, problem }: { scopes: [string, string][]; value: string; onChange: (v: string) => void; problem: string }) {
  return (
    <Field label="Scope" problem={problem}>
      <select value={value} onChange={(e) => onChange(e.target.value)}>
        {scopes.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
      </select>
    </Field>
  )
}

// CredentialForm creates one credential. Its values are write-only: sent
// once, cleared from the form when the server has them, never shown again.
function CredentialForm({ scopes, onDone }: { scopes: [string, string][]; onDone: () => void }) {
  const [scope, setScope] = useState('account')
  const [cid, setCid] = useState('')
  const [type, setType] = useState(TYPES[0].type)
  const [description, setDescription] = useState('')
  const [server, setServer] = useState('')
  const [values, setValues] = useState<Record<string, string>>({})
  const [pairs, setPairs] = useState<{ key: string; value: string }[]>([{ key: '', value: '' }])
  const [problems, setProblems] = useState<Problems>({ fields: {}, rest: '' })
  const [done, setDone] = useState('')
  const t = TYPES.find((x) => x.type === type)!
  const labels: Record<string, string> = {
    credential_id: 'Credential id', parent: 'Scope', 'credential.server': 'Registry server', 'credential.description': 'Description',
    'credential.values': t.fields.length ? t.fields[0].label : 'Keys and values',
    ...Object.fromEntries(t.fields.map((f) => [`credential.values[${f.key}]`, f.label])),
  }
  const clear = () => {
    setValues({})
    setPairs([{ key: '', value: '' }])
  }
  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    setDone('')
    const vals = t.fields.length
      ? Object.fromEntries(Object.entries(values).filter(([k, v]) => v !== '' && t.fields.some((f) => f.key === k)))
      : Object.fromEntries(pairs.filter((p) => p.key.trim()).map((p) => [p.key.trim(), p.value]))
    try {
      await call('POST', `/v1/${scopePath(scope) ? scopePath(scope) + '/' : ''}credentials?credentialId=${encodeURIComponent(cid)}`, {
        type, values: vals, ...(description ? { description } : {}), ...(type === 'CREDENTIAL_TYPE_REGISTRY' ? { server } : {}),
      })
      setProblems({ fields: {}, rest: '' })
      clear()
      setDone(`Credential ${cid} created. Its values are stored sealed and are not shown again.`)
      setCid('')
      onDone()
    } catch (err) {
      setProblems(problemsOf(err, labels))
    }
  }
  const p = (l: string) => problems.fields[l] ?? ''
  return (
    <form className="form" aria-label="Create a credential" onSubmit={submit} autoComplete="off">
      <div className="inline">
        <ScopeField scopes={scopes} value={scope} onChange={setScope} problem={p('Scope')} />
        <Field label="Credential id" problem={p('Credential id')}><input value={cid} onChange={(e) => setCid(e.target.value)} required /></Field>
        <Field label="Credential type">
          <select value={type} onChange={(e) => { setType(e.target.value); clear() }}>
            {TYPES.map((x) => <option key={x.type} value={x.type}>{x.label}</option>)}
          </select>
        </Field>
        <Field label="Description" problem={p('Description')}><input value={description} onChange={(e) => setDescription(e.target.value)} /></Field>
        {type === 'CREDENTIAL_TYPE_REGISTRY' && (
          <Field label="Registry server" problem={p('Registry server')} hint="Such as registry.example.com:5000">
            <input value={server} onChange={(e) => setServer(e.target.value)} />
          </Field>
        )}
      </div>
      <fieldset>
        <legend>Values (write-only: never shown again)</legend>
        {t.fields.map((f) => (
          <Field key={f.key} label={f.label} problem={p(f.label)} hint={f.optional ? 'Optional' : undefined}>
            {f.multiline ? (
              <textarea rows={3} value={values[f.key] ?? ''} onChange={(e) => setValues({ ...values, [f.key]: e.target.value })} spellCheck={false} />
            ) : (
              <input type={f.secret ? 'password' : 'text'} value={values[f.key] ?? ''} onChange={(e) => setValues({ ...values, [f.key]: e.target.value })} autoComplete={f.secret ? 'new-password' : 'off'} />
            )}
          </Field>
        ))}
        {!t.fields.length && (
          <>
            {pairs.map((pair, i) => (
              <div className="inline" key={i}>
                <label>Key {i + 1}<input value={pair.key} onChange={(e) => setPairs(pairs.map((x, j) => (j === i ? { ...x, key: e.target.value } : x)))} placeholder="HF_TOKEN" /></label>
                <label>Value {i + 1}<input type="password" value={pair.value} autoComplete="new-password" onChange={(e) => setPairs(pairs.map((x, j) => (j === i ? { ...x, value: e.target.value } : x)))} /></label>
              </div>
            ))}
            <button type="button" className="secondary" onClick={() => setPairs([...pairs, { key: '', value: '' }])}>Add a key</button>
            {p('Keys and values') && <p className="problem">{p('Keys and values')}</p>}
          </>
        )}
      </fieldset>
      {problems.rest && <p role="alert" className="error">{problems.rest}</p>}
      {done && <p role="status">{done}</p>}
      <div className="actions">
        <button type="submit">Create credential</button>
        <button type="button" className="secondary" onClick={() => { clear(); setCid(''); setDescription(''); setServer(''); setProblems({ fields: {}, rest: '' }) }}>Cancel</button>
      </div>
    </form>
  )
}

// listScoped reads one kind of asset (credentials, dataSources) of the
// account and of every department and project the caller may list, and
// the scopes a form may create one at.
export async function listScoped<T>(kind: string, signal: AbortSignal) {
  const opt = <U,>(p: Promise<U[]>) => p.catch(() => [] as U[])
  const [ds, ps] = await Promise.all([opt(listAll<Department>('/v1/departments', 'departments', signal)), opt(listAll<Project>('/v1/projects', 'projects', signal))])
  const parents = ['', ...ds.map((d) => d.name), ...ps.map((p) => p.name)]
  const lists = await Promise.all(parents.map((p) => opt(listAll<T>(`/v1/${p ? p + '/' : ''}${kind}`, kind, signal))))
  const scopes: [string, string][] = [
    ['account', 'Account'],
    ...ds.map((d): [string, string] => [`department:${id(d.name)}`, `Department ${id(d.name)}`]),
    ...ps.map((p): [string, string] => [`project:${id(p.name)}`, `Project ${id(p.name)}`]),
  ]
  return { items: lists.flat(), scopes, projects: ps }
}

const listCredentials = async (signal: AbortSignal) => {
  const { items, scopes } = await listScoped<Credential>('credentials', signal)
  return { creds: items, scopes }
}

export function Credentials() {
  const { data, error, reload } = useLoad(listCredentials, [])
  const { run, error: actionError } = useAction(reload)
  const cols: Col<Credential>[] = [
    { id: 'name', header: 'Credential', text: (c) => id(c.name) },
    { id: 'scope', header: 'Scope', text: (c) => scopeOf(c.name), filter: true },
    { id: 'type', header: 'Type', text: (c) => enumLabel(c.type, 'CREDENTIAL_TYPE_'), filter: true },
    { id: 'keys', header: 'Keys', text: (c) => (c.keys ?? []).join(', ') },
    { id: 'server', header: 'Server', text: (c) => c.server ?? '' },
    { id: 'description', header: 'Description', text: (c) => c.description ?? '' },
    { id: 'creator', header: 'Created by', text: (c) => id(c.creator) },
    { id: 'created', header: 'Created', text: (c) => time(c.createTime) },
    {
      id: 'actions', header: 'Actions', text: () => '',
      cell: (c) => (
        <button type="button" className="danger" aria-label={`Delete credential ${id(c.name)} of ${scopeOf(c.name)}`}
          onClick={() => window.confirm(`Delete credential ${c.name}? Workloads that use it cannot start pods.`) && run(() => call('DELETE', `/v1/${c.name}`))}>Delete</button>
      ),
    },
  ]
  return (
    <section aria-labelledby="h-creds">
      <AssetTabs />
      <h1 id="h-creds">Credentials</h1>
      <p className="hint">Secrets that workloads use without anyone reading them back: the values are sealed on the server and go only to the node a pod that uses them runs on.</p>
      {(error || actionError) && <p role="alert" className="error">{error || actionError}</p>}
      {data && <CredentialForm scopes={data.scopes} onDone={reload} />}
      {data && <DataTable label="Credentials" rows={data.creds} cols={cols} rowKey={(c) => c.name} />}
    </section>
  )
}
