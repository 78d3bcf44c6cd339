// The REST client. The access token lives in this module only: never in
// localStorage, sessionStorage or a cookie, so a reload signs out.

export interface FieldViolation { field: string; description: string }
export interface ApiErrorBody {
  code: number
  message: string
  details?: { '@type'?: string; reason?: string; metadata?: Record<string, string>; fieldViolations?: FieldViolation[] }[]
}

// statusWords says what an HTTP status means when the answer carries no
// message of its own (a proxy's page, a dropped connection), never a bare
// "HTTP 400".
export function statusWords(status: number): string {
  if (status === 400) return 'The server refused the request as invalid.'
  if (status === 401) return 'You are signed out; sign in again.'
  if (status === 403) return 'You are not allowed to do this.'
  if (status === 404) return 'Not found: it may have been deleted.'
  if (status === 409) return 'It changed or exists already; reload and try again.'
  if (status === 429) return 'Too many requests; wait a moment and try again.'
  if (status >= 500) return 'The server could not answer; try again in a moment.'
  return `The server refused the request (status ${status}).`
}

export class ApiError extends Error {
  status: number
  reason: string
  violations: FieldViolation[]
  constructor(status: number, body: ApiErrorBody) {
    super(body.message || statusWords(status))
    this.status = status
    this.reason = body.details?.find((d) => d.reason)?.reason ?? ''
    this.violations = body.details?.flatMap((d) => d.fieldViolations ?? []) ?? []
  }
}

let token = ''
let onUnauthenticated: () => void = () => {}

export function setToken(t: string) {
  token = t
}
export function hasToken() {
  return token !== ''
}
export function onSignedOut(f: () => void) {
  onUnauthenticated = f
}

function headers(extra?: HeadersInit): Headers {
  const h = new Headers(extra)
  if (token) h.set('Authorization', `Bearer ${token}`)
  return h
}

async function fail(res: Response): Promise<never> {
  let body: ApiErrorBody = { code: 0, message: '' }
  try {
    body = await res.json()
  } catch {
    /* not the gateway's JSON */
  }
  if (res.status === 401 && token) {
    token = ''
    onUnauthenticated()
  }
  throw new ApiError(res.status, body)
}

export async function call<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const res = await fetch(path, {
    method,
    headers: headers(body === undefined ? undefined : { 'Content-Type': 'application/json' }),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  })
  if (!res.ok) return fail(res)
  const text = await res.text()
  return (text ? JSON.parse(text) : {}) as T
}

export const get = <T>(path: string, signal?: AbortSignal) => call<T>('GET', path, undefined, signal)

// listAll follows next_page_token; maxPages bounds what one view loads.
export async function listAll<T>(path: string, key: string, signal?: AbortSignal, maxPages = 50): Promise<T[]> {
  const out: T[] = []
  let pageToken = ''
  for (let i = 0; i < maxPages; i++) {
    const sep = path.includes('?') ? '&' : '?'
    const url = `${path}${sep}pageSize=500${pageToken ? `&pageToken=${encodeURIComponent(pageToken)}` : ''}`
    const page = await get<Record<string, unknown>>(url, signal)
    out.push(...((page[key] as T[]) ?? []))
    pageToken = (page.nextPageToken as string) ?? ''
    if (!pageToken) break
  }
  return out
}

// streamNDJSON reads a server-streaming REST endpoint: one JSON object a
// line, each {"result": ...} or {"error": ...}.
export async function streamNDJSON(path: string, onItem: (v: unknown) => void, signal: AbortSignal): Promise<void> {
  const res = await fetch(path, { headers: headers(), signal })
  if (!res.ok) return fail(res)
  const reader = res.body!.getReader()
  const dec = new TextDecoder()
  let buf = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    buf += dec.decode(value, { stream: true })
    let nl: number
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim()
      buf = buf.slice(nl + 1)
      if (!line) continue
      const msg = JSON.parse(line)
      if (msg.error) throw new ApiError(500, msg.error)
      onItem(msg.result)
    }
  }
}
