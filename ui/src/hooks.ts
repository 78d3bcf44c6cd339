import { useCallback, useEffect, useRef, useState } from 'react'
import { ApiError } from './api'

// useLoad runs load now and every intervalMs (0: once), keeping the last
// good data on screen while a re-read is in flight. Each run gets its own
// AbortSignal, aborted when the view goes away.
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[], intervalMs = 0) {
  const [data, setData] = useState<T | undefined>()
  const [error, setError] = useState('')
  const ref = useRef(load)
  ref.current = load
  const [tick, setTick] = useState(0)
  const reload = useCallback(() => setTick((t) => t + 1), [])
  useEffect(() => {
    const ctl = new AbortController()
    let timer: ReturnType<typeof setTimeout> | undefined
    const run = () => {
      ref
        .current(ctl.signal)
        .then((d) => {
          setData(d)
          setError('')
        })
        .catch((e) => {
          if (!ctl.signal.aborted) setError(e instanceof ApiError || e instanceof Error ? e.message : String(e))
        })
        .finally(() => {
          if (intervalMs > 0 && !ctl.signal.aborted) timer = setTimeout(run, intervalMs)
        })
    }
    run()
    return () => {
      ctl.abort()
      clearTimeout(timer)
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick, intervalMs])
  return { data, error, reload }
}

export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e)
}

// useAction runs a change (a create, a delete, a drain) and keeps the
// server's message when it fails; after runs once it succeeds.
export function useAction(after: () => void) {
  const [error, setError] = useState('')
  const run = async (f: () => Promise<unknown>, then: () => void = after) => {
    setError('')
    try {
      await f()
      then()
    } catch (err) {
      setError(errorText(err))
    }
  }
  return { run, error, setError }
}
