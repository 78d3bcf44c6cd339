import { useEffect, useState } from 'react'
import { call, onSignedOut, setToken } from './api'
import { Login } from './Login'
import { Link, RouterProvider, useRouter } from './router'
import { id } from './format'
import type { Caller } from './types'
import { Workloads } from './views/Workloads'
import { WorkloadPage } from './views/WorkloadPage'
import { NewWorkload } from './views/NewWorkload'
import { Projects } from './views/Projects'
import { Nodes } from './views/Nodes'
import { Access } from './views/Access'
import { Governance } from './views/Governance'
import { Audit } from './views/Audit'
import { Overview } from './views/Overview'
import { Reports } from './views/Reports'
import { Credentials } from './views/Credentials'
import { DataSources } from './views/DataSources'
import { Notifications } from './views/Notifications'
import { Settings } from './views/Settings'

const NAV: [string, string][] = [
  ['/', 'Overview'],
  ['/workloads', 'Workloads'],
  ['/new', 'New workload'],
  ['/projects', 'Projects'],
  ['/nodes', 'Nodes'],
  ['/access', 'Access'],
  ['/policies', 'Policies and assets'],
  ['/audit', 'Event history'],
  ['/reports', 'Reports'],
  ['/notifications', 'Notifications'],
  ['/settings', 'Settings'],
]

function View() {
  const { path } = useRouter()
  const p = path.split('?')[0]
  const m = p.match(/^\/workloads\/([^/]+)\/([^/]+)$/)
  if (m) return <WorkloadPage key={p} project={decodeURIComponent(m[1])} name={decodeURIComponent(m[2])} />
  switch (p) {
    case '/':
      return <Overview />
    case '/workloads':
      return <Workloads />
    case '/new':
      return <NewWorkload />
    case '/projects':
      return <Projects />
    case '/nodes':
      return <Nodes />
    case '/access':
      return <Access />
    case '/policies':
      return <Governance />
    case '/policies/credentials':
      return <Credentials />
    case '/policies/data-sources':
      return <DataSources />
    case '/notifications':
      return <Notifications />
    case '/settings':
      return <Settings />
    case '/audit':
      return <Audit />
    case '/reports':
      return <Reports />
  }
  return (
    <section>
      <h1>Not found</h1>
      <p>
        There is no page at {p}. <Link to="/">Overview</Link>
      </p>
    </section>
  )
}

function Shell({ caller, signOut }: { caller: Caller; signOut: () => void }) {
  const { path } = useRouter()
  useEffect(() => {
    document.getElementById('main')?.focus()
  }, [path])
  return (
    <>
      <a href="#main" className="skip">Skip to content</a>
      <header className="top">
        <span className="brand">Runway</span>
        <nav aria-label="Main">
          <ul>
            {NAV.map(([to, label]) => (
              <li key={to}>
                <Link to={to}>{label}</Link>
              </li>
            ))}
          </ul>
        </nav>
        <span className="who">
          Signed in as <strong>{id(caller.principal)}</strong>{' '}
          <button type="button" onClick={signOut}>Sign out</button>
        </span>
      </header>
      <main id="main" tabIndex={-1}>
        <View />
      </main>
    </>
  )
}

export function App() {
  const [caller, setCaller] = useState<Caller | null>(null)
  useEffect(() => onSignedOut(() => setCaller(null)), [])
  // Signing out ends the sign-in on the server too (its tokens stop working
  // everywhere); the page forgets the token whatever the answer.
  const signOut = () => {
    call('POST', '/v1/auth:logout', {})
      .catch(() => {})
      .finally(() => {
        setToken('')
        setCaller(null)
      })
  }
  return <RouterProvider>{caller ? <Shell caller={caller} signOut={signOut} /> : <Login onSignedIn={setCaller} />}</RouterProvider>
}
