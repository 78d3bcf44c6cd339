import { useState } from 'react'
import { call, listAll } from '../api'
import { useAction, useLoad } from '../hooks'
import { DataTable, type Col } from '../table'
import { enumLabel, id, time } from '../format'
import type { AccessRule, Application, Department, Project, Role, User } from '../types'

// Secret shows a value the server returns once (a temporary password, a
// client secret); it is gone when dismissed.
function Secret({ label, value, onDismiss }: { label: string; value: string; onDismiss: () => void }) {
  return (
    <div className="secret" role="status">
      <p>
        {label} (shown once, copy it now): <code data-testid="secret">{value}</code>
      </p>
      <button type="button" onClick={onDismiss}>I have copied it</button>
    </div>
  )
}

const subjectText = (r: AccessRule) => `${enumLabel(r.subject?.kind, 'SUBJECT_KIND_').toLowerCase()}:${id(r.subject?.name)}`
const scopeText = (r: AccessRule) => {
  const k = enumLabel(r.scope?.kind, 'SCOPE_KIND_').toLowerCase()
  return k === 'account' ? 'account' : `${k}:${id(r.scope?.name)}`
}

export function Access() {
  const { data, error, reload } = useLoad(
    async (s) => {
      const opt = <T,>(p: Promise<T[]>) => p.catch(() => [] as T[])
      const [users, apps, rules, roles, ds, ps] = await Promise.all([
        opt(listAll<User>('/v1/users', 'users', s)),
        opt(listAll<Application>('/v1/applications', 'applications', s)),
        opt(listAll<AccessRule>('/v1/accessRules', 'accessRules', s)),
        opt(listAll<Role>('/v1/roles', 'roles', s)),
        opt(listAll<Department>('/v1/departments', 'departments', s)),
        opt(listAll<Project>('/v1/projects', 'projects', s)),
      ])
      // The scopes a rule may name: the account, each department, each project.
      const scopes: [string, string][] = [
        ['account', 'Account'],
        ...ds.map((d): [string, string] => [`department:${id(d.name)}`, `Department ${id(d.name)}`]),
        ...ps.map((p): [string, string] => [`project:${id(p.name)}`, `Project ${id(p.name)}`]),
      ]
      return { users, apps, rules, roles, scopes }
    },
    [],
  )
  const [secret, setSecret] = useState<{ label: string; value: string } | undefined>()
  const [userId, setUserId] = useState('')
  const [email, setEmail] = useState('')
  const [appId, setAppId] = useState('')
  const [subject, setSubject] = useState('')
  const [subjectKind, setSubjectKind] = useState('SUBJECT_KIND_USER')
  const [role, setRole] = useState('')
  const [scope, setScope] = useState('')

  const { run, error: actionError } = useAction(reload)
  const createUser = (e: React.FormEvent) => {
    e.preventDefault()
    run(async () => {
      const u = await call<User>('POST', `/v1/users?userId=${encodeURIComponent(userId)}`, { email })
      setSecret({ label: `Temporary password of ${userId}`, value: u.temporaryPassword ?? '' })
      setUserId('')
      setEmail('')
    })
  }
  const createApp = (e: React.FormEvent) => {
    e.preventDefault()
    run(async () => {
      const a = await call<Application>('POST', `/v1/applications?applicationId=${encodeURIComponent(appId)}`, {})
      setSecret({ label: `Client id ${a.clientId}, client secret`, value: a.clientSecret ?? '' })
      setAppId('')
    })
  }
  const createRule = (e: React.FormEvent) => {
    e.preventDefault()
    run(async () => {
      const prefix = subjectKind === 'SUBJECT_KIND_USER' ? 'users/' : subjectKind === 'SUBJECT_KIND_APPLICATION' ? 'applications/' : ''
      const [kind, name] = scope === 'account' ? ['SCOPE_KIND_ACCOUNT', ''] : scope.split(':')
      const sc =
        kind === 'SCOPE_KIND_ACCOUNT'
          ? { kind }
          : { kind: kind === 'department' ? 'SCOPE_KIND_DEPARTMENT' : 'SCOPE_KIND_PROJECT', name: `${kind === 'department' ? 'departments' : 'projects'}/${name}` }
      await call('POST', '/v1/accessRules', { subject: { kind: subjectKind, name: prefix + subject }, role: `roles/${role}`, scope: sc })
      setSubject('')
      setScope('')
    })
  }
  const userCols: Col<User>[] = [
    { id: 'id', header: 'User', text: (u) => id(u.name) },
    { id: 'email', header: 'Email', text: (u) => u.email ?? '' },
    { id: 'groups', header: 'Groups', text: (u) => (u.groups ?? []).join(', ') },
    { id: 'temp', header: 'Must change password', text: (u) => (u.passwordChangeRequired ? 'yes' : 'no'), filter: true },
    { id: 'last', header: 'Last sign-in', text: (u) => time(u.lastLoginTime) },
    {
      id: 'actions', header: 'Actions', text: () => '',
      cell: (u) => (
        <span className="actions">
          <button type="button" aria-label={`Reset password of ${id(u.name)}`}
            onClick={() => run(async () => {
              const r = await call<User>('POST', `/v1/${u.name}:resetPassword`, {})
              setSecret({ label: `Temporary password of ${id(u.name)}`, value: r.temporaryPassword ?? '' })
            })}>Reset password</button>
          <button type="button" className="danger" aria-label={`Delete user ${id(u.name)}`}
            onClick={() => window.confirm(`Delete user ${id(u.name)}?`) && run(() => call('DELETE', `/v1/${u.name}`))}>Delete</button>
        </span>
      ),
    },
  ]
  const appCols: Col<Application>[] = [
    { id: 'id', header: 'Application', text: (a) => id(a.name) },
    { id: 'client', header: 'Client id', text: (a) => a.clientId ?? '' },
    { id: 'created', header: 'Created', text: (a) => time(a.createTime) },
    { id: 'last', header: 'Last sign-in', text: (a) => time(a.lastLoginTime) },
    {
      id: 'actions', header: 'Actions', text: () => '',
      cell: (a) => (
        <span className="actions">
          <button type="button" aria-label={`Regenerate secret of ${id(a.name)}`}
            onClick={() => run(async () => {
              const r = await call<Application>('POST', `/v1/${a.name}:regenerateSecret`, {})
              setSecret({ label: `Client id ${r.clientId}, new client secret`, value: r.clientSecret ?? '' })
            })}>Regenerate secret</button>
          <button type="button" className="danger" aria-label={`Delete application ${id(a.name)}`}
            onClick={() => window.confirm(`Delete application ${id(a.name)}?`) && run(() => call('DELETE', `/v1/${a.name}`))}>Delete</button>
        </span>
      ),
    },
  ]
  const ruleCols: Col<AccessRule>[] = [
    { id: 'subject', header: 'Subject', text: subjectText },
    { id: 'role', header: 'Role', text: (r) => id(r.role), filter: true },
    { id: 'scope', header: 'Scope', text: scopeText, filter: true },
    { id: 'creator', header: 'Created by', text: (r) => id(r.creator) },
    {
      id: 'actions', header: 'Actions', text: () => '',
      cell: (r) => (
        <button type="button" className="danger" aria-label={`Delete rule ${subjectText(r)} ${id(r.role)} ${scopeText(r)}`}
          onClick={() => run(async () => { await call('DELETE', `/v1/${r.name}`) })}>Delete</button>
      ),
    },
  ]
  const roleCols: Col<Role>[] = [
    { id: 'id', header: 'Role', text: (r) => id(r.name) },
    { id: 'display', header: 'Name', text: (r) => r.displayName ?? '' },
    { id: 'description', header: 'Description', text: (r) => r.description ?? '' },
    { id: 'permissions', header: 'Permissions', text: (r) => (r.permissions ?? []).join(', ') },
  ]
  return (
    <section aria-labelledby="h-access">
      <h1 id="h-access">Access</h1>
      {(error || actionError) && <p role="alert" className="error">{error || actionError}</p>}
      {secret && <Secret label={secret.label} value={secret.value} onDismiss={() => setSecret(undefined)} />}
      <h2>Users</h2>
      <form className="form inline" onSubmit={createUser} aria-label="Create a user">
        <label>User id<input value={userId} onChange={(e) => setUserId(e.target.value)} required /></label>
        <label>Email<input type="email" value={email} onChange={(e) => setEmail(e.target.value)} required /></label>
        <button type="submit">Create user</button>
        <button type="button" className="secondary" onClick={() => { setUserId(''); setEmail('') }}>Cancel</button>
      </form>
      {data && <DataTable label="Users" rows={data.users} cols={userCols} rowKey={(u) => u.name} />}
      <h2>Applications</h2>
      <form className="form inline" onSubmit={createApp} aria-label="Create an application">
        <label>Application id<input value={appId} onChange={(e) => setAppId(e.target.value)} required /></label>
        <button type="submit">Create application</button>
        <button type="button" className="secondary" onClick={() => setAppId('')}>Cancel</button>
      </form>
      {data && <DataTable label="Applications" rows={data.apps} cols={appCols} rowKey={(a) => a.name} />}
      <h2>Access rules</h2>
      <form className="form inline" onSubmit={createRule} aria-label="Create an access rule">
        <label>
          Subject kind
          <select value={subjectKind} onChange={(e) => setSubjectKind(e.target.value)}>
            <option value="SUBJECT_KIND_USER">User</option>
            <option value="SUBJECT_KIND_GROUP">Group</option>
            <option value="SUBJECT_KIND_APPLICATION">Application</option>
          </select>
        </label>
        <label>Subject<input value={subject} onChange={(e) => setSubject(e.target.value)} required placeholder="alice" /></label>
        <label>
          Role
          <select value={role} onChange={(e) => setRole(e.target.value)} required>
            <option value="">Choose a role</option>
            {(data?.roles ?? []).map((r) => <option key={r.name} value={id(r.name)}>{id(r.name)}</option>)}
          </select>
        </label>
        <label>
          Scope
          <select value={scope} onChange={(e) => setScope(e.target.value)} required>
            <option value="">Choose a scope</option>
            {(data?.scopes ?? []).map(([v, l]) => <option key={v} value={v}>{l}</option>)}
          </select>
        </label>
        <button type="submit">Create access rule</button>
        <button type="button" className="secondary" onClick={() => { setSubject(''); setRole(''); setScope('') }}>Cancel</button>
      </form>
      {data && <DataTable label="Access rules" rows={data.rules} cols={ruleCols} rowKey={(r) => r.name} />}
      <h2>Roles</h2>
      {data && <DataTable label="Roles" rows={data.roles} cols={roleCols} rowKey={(r) => r.name} />}
    </section>
  )
}
