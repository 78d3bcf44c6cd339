import { useEffect, useState } from 'react'
import { ApiError, streamNDJSON } from './api'
import type { Workload } from './types'

interface WatchEvent { type?: string; workload?: Workload; resumeToken?: string }

// applyWatch folds one watch event into the map of workloads by name.
export function applyWatch(m: Map<string, Workload>, e: WatchEvent): Map<string, Workload> {
  const name = e.workload?.name
  if (!name) return m
  const next = new Map(m)
  if (e.type === 'WATCH_EVENT_TYPE_DELETED') next.delete(name)
  else if (e.type === 'WATCH_EVENT_TYPE_ADDED' || e.type === 'WATCH_EVENT_TYPE_MODIFIED') next.set(name, e.workload!)
  return next
}

// useWorkloadWatch keeps the caller's workloads live from the :watch
// stream: the initial listing, then each change. When the stream breaks it
// resumes after the last event seen; when the token has expired it starts
// over with a fresh listing.
export function useWorkloadWatch(parent = 'projects/-') {
  const [workloads, setWorkloads] = useState<Map<string, Workload>>(new Map())
  const [synced, setSynced] = useState(false)
  const [error, setError] = useState('')
  useEffect(() => {
    const ctl = new AbortController()
    let token = ''
    let timer: ReturnType<typeof setTimeout> | undefined
    const run = () => {
      let pending = new Map<string, Workload>()
      let listing = token === ''
      const q = token ? `?resumeToken=${encodeURIComponent(token)}` : ''
      streamNDJSON(
        `/v1/${parent}/workloads:watch${q}`,
        (v) => {
          const e = v as WatchEvent
          if (e.resumeToken) token = e.resumeToken
          if (e.type === 'WATCH_EVENT_TYPE_SYNCED') {
            if (listing) setWorkloads(pending)
            listing = false
            setSynced(true)
            setError('')
            return
          }
          if (listing) pending = applyWatch(pending, e)
          else setWorkloads((m) => applyWatch(m, e))
        },
        ctl.signal,
      )
        .catch((e) => {
          if (ctl.signal.aborted) return
          if (e instanceof ApiError && e.reason === 'RESUME_TOKEN_EXPIRED') token = ''
          else setError(e instanceof Error ? e.message : String(e))
        })
        .finally(() => {
          if (!ctl.signal.aborted) timer = setTimeout(run, 1000)
        })
    }
    run()
    return () => {
      ctl.abort()
      clearTimeout(timer)
    }
  }, [parent])
  return { workloads: [...workloads.values()], synced, error }
}
