import { createContext, useContext, useEffect, useState } from 'react'

// A small history-API router: the server answers every client route with
// index.html, so deep links and reloads work.
const Ctx = createContext<{ path: string; go: (p: string) => void }>({ path: '/', go: () => {} })

export function RouterProvider({ children }: { children: React.ReactNode }) {
  const [path, setPath] = useState(window.location.pathname + window.location.search)
  useEffect(() => {
    const f = () => setPath(window.location.pathname + window.location.search)
    window.addEventListener('popstate', f)
    return () => window.removeEventListener('popstate', f)
  }, [])
  const go = (p: string) => {
    window.history.pushState(null, '', p)
    setPath(p)
    window.scrollTo(0, 0)
  }
  return <Ctx.Provider value={{ path, go }}>{children}</Ctx.Provider>
}

export const useRouter = () => useContext(Ctx)

export function Link({ to, children, className, exact }: { to: string; children: React.ReactNode; className?: string; exact?: boolean }) {
  const { go, path } = useRouter()
  const current = path === to || (!exact && to !== '/' && path.startsWith(to + '/'))
  return (
    <a
      href={to}
      className={className}
      aria-current={current ? 'page' : undefined}
      onClick={(e) => {
        if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return
        e.preventDefault()
        go(to)
      }}
    >
      {children}
    </a>
  )
}
