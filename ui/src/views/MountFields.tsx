import { useState } from 'react'
import { listAll } from '../api'
import { useLoad } from '../hooks'
import { id } from '../format'
import type { Project } from '../types'
import { Field } from './Field'
import type { Credential } from './Credentials'
import { sourceText, type DataSource } from './DataSources'

export const MOUNT_LABELS = {
  pullPolicy: 'Pull policy', registry: 'Registry credential', dataSources: 'Data sources', credentials: 'Credentials to mount',
}

export const PULL_POLICIES: [string, string][] = [
  ['', 'Default'],
  ['IMAGE_PULL_POLICY_ALWAYS', 'Always pull'],
  ['IMAGE_PULL_POLICY_IF_NOT_PRESENT', 'If not on the node'],
  ['IMAGE_PULL_POLICY_NEVER', 'Never pull'],
]

// useUsable reads the data sources and credentials a project's workloads
// may name: the project's own, its department's and the account's (what
// the caller may list of them).
export function useUsable(project: Project | undefined) {
  const { data } = useLoad(async (s) => {
    if (!project) return { sources: [] as DataSource[], creds: [] as Credential[] }
    const parents = ['', ...(project.department ? [project.department] : []), project.name]
    const each = <T,>(kind: string) => Promise.all(parents.map((p) => listAll<T>(`/v1/${p ? p + '/' : ''}${kind}`, kind, s).catch(() => [] as T[]))).then((l) => l.flat())
    const [sources, creds] = await Promise.all([each<DataSource>('dataSources'), each<Credential>('credentials')])
    return { sources, creds }
  }, [project?.name])
  return data ?? { sources: [], creds: [] }
}

// PullFields are the image pull policy and the registry credential, for
// the New workload form and the environment form.
export function PullFields({ policy, setPolicy, registry, setRegistry, creds, problem }: {
  policy: string; setPolicy: (v: string) => void; registry: string; setRegistry: (v: string) => void; creds: Credential[]; problem: (l: string) => string
}) {
  const regs = creds.filter((c) => c.type === 'CREDENTIAL_TYPE_REGISTRY')
  return (
    <div className="inline">
      <Field label={MOUNT_LABELS.pullPolicy} problem={problem(MOUNT_LABELS.pullPolicy)} hint="Default: if not on the node (Kubernetes: always for :latest)">
        <select value={policy} onChange={(e) => setPolicy(e.target.value)}>
          {PULL_POLICIES.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
        </select>
      </Field>
      <Field label={MOUNT_LABELS.registry} problem={problem(MOUNT_LABELS.registry)} hint={regs.length ? 'Optional: pulls the image with it' : 'Optional; there is no registry credential to choose (create one under Credentials)'}>
        <select value={registry} onChange={(e) => setRegistry(e.target.value)}>
          <option value="">(none)</option>
          {regs.map((c) => <option key={c.name} value={c.name}>{id(c.name)}{c.server ? ` (${c.server})` : ''}</option>)}
        </select>
      </Field>
    </div>
  )
}

// mountSpec is the WorkloadSpec's data_sources and credentials of what was
// chosen; a credential row left unchosen is dropped, an empty path unset.
export function mountSpec(sources: string[], creds: { credential: string; path: string }[]) {
  const chosen = creds.filter((c) => c.credential)
  return {
    ...(sources.length ? { dataSources: sources.map((dataSource) => ({ dataSource })) } : {}),
    ...(chosen.length ? { credentials: chosen.map((c) => ({ credential: c.credential, ...(c.path.trim() ? { path: c.path.trim() } : {}) })) } : {}),
  }
}

// useMounts holds what the pods mount as chosen: data sources by name and
// generic credentials with an optional path.
export function useMounts() {
  const [sources, setSources] = useState<string[]>([])
  const [creds, setCreds] = useState<{ credential: string; path: string }[]>([])
  return { sources, setSources, creds, setCreds, spec: () => mountSpec(sources, creds) }
}

export function MountFields({ m, usable, problem }: { m: ReturnType<typeof useMounts>; usable: ReturnType<typeof useUsable>; problem: (l: string) => string }) {
  const generic = usable.creds.filter((c) => c.type === 'CREDENTIAL_TYPE_GENERIC')
  return (
    <>
      <fieldset>
        <legend>{MOUNT_LABELS.dataSources}</legend>
        {!usable.sources.length && <p className="hint">None usable in this project (create them under Policies and assets, Data sources).</p>}
        {usable.sources.map((d) => (
          <label key={d.name} className="check">
            <input type="checkbox" checked={m.sources.includes(d.name)}
              onChange={(e) => m.setSources(e.target.checked ? [...m.sources, d.name] : m.sources.filter((x) => x !== d.name))} />
            {' '}{id(d.name)} at {d.mountPath}{d.readOnly ? ' (read-only)' : ''}: {sourceText(d)}
          </label>
        ))}
        {problem(MOUNT_LABELS.dataSources) && <p className="problem">{problem(MOUNT_LABELS.dataSources)}</p>}
      </fieldset>
      <fieldset>
        <legend>{MOUNT_LABELS.credentials}</legend>
        <p className="hint">Each key of a generic credential becomes an environment variable of that name, or a file under the path if one is given.</p>
        {m.creds.map((c, i) => (
          <div className="inline" key={i}>
            <label>Credential {i + 1}
              <select value={c.credential} onChange={(e) => m.setCreds(m.creds.map((x, j) => (j === i ? { ...x, credential: e.target.value } : x)))}>
                <option value="">(choose one)</option>
                {generic.map((g) => <option key={g.name} value={g.name}>{id(g.name)} ({(g.keys ?? []).join(', ')})</option>)}
              </select>
            </label>
            <label>Path {i + 1} (optional)<input value={c.path} onChange={(e) => m.setCreds(m.creds.map((x, j) => (j === i ? { ...x, path: e.target.value } : x)))} placeholder="empty: environment variables" spellCheck={false} /></label>
            <button type="button" className="secondary" aria-label={`Remove credential ${i + 1}`} onClick={() => m.setCreds(m.creds.filter((_, j) => j !== i))}>Remove</button>
          </div>
        ))}
        <button type="button" className="secondary" onClick={() => m.setCreds([...m.creds, { credential: '', path: '' }])} disabled={!generic.length}>Add a credential</button>
        {!generic.length && <p className="hint">No generic credential is usable in this project.</p>}
        {problem(MOUNT_LABELS.credentials) && <p className="problem">{problem(MOUNT_LABELS.credentials)}</p>}
      </fieldset>
    </>
  )
}
