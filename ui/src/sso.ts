// Single sign-on: the OpenID Connect authorization code flow with PKCE
// (RFC 7636), as a public client. The provider's page opens in a window of
// its own, so this page keeps the verifier and state in memory (nothing is
// stored); the window comes back to CALLBACK_PATH on this origin, hands the
// redirect's query to this page by postMessage and closes. The server
// redeems the code with the verifier (Login with oidc_code): the page talks
// only to its own origin, as its CSP says.
import { call } from './api'

export interface SingleSignOn { issuer?: string; clientId?: string; authorizationEndpoint?: string }
export interface LoginResponse { accessToken: string; principal: string }

export const CALLBACK_PATH = '/sso/callback'
const MESSAGE = 'runway-sso-callback'

export function b64url(b: Uint8Array): string {
  let s = ''
  for (const c of b) s += String.fromCharCode(c)
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

// randomString is n random bytes, base64url: 32 give a 43-character verifier.
export function randomString(n = 32): string {
  return b64url(crypto.getRandomValues(new Uint8Array(n)))
}

// challengeOf is the S256 code challenge of a verifier.
export async function challengeOf(verifier: string): Promise<string> {
  return b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))))
}

// authorizeUrl is where the sign-in window goes.
export function authorizeUrl(sso: SingleSignOn, p: { redirectUri: string; state: string; challenge: string }): string {
  const u = new URL(sso.authorizationEndpoint!)
  u.searchParams.set('response_type', 'code')
  u.searchParams.set('client_id', sso.clientId ?? '')
  u.searchParams.set('redirect_uri', p.redirectUri)
  u.searchParams.set('scope', 'openid email profile')
  u.searchParams.set('state', p.state)
  u.searchParams.set('code_challenge', p.challenge)
  u.searchParams.set('code_challenge_method', 'S256')
  return u.toString()
}

// readCallback reads the redirect's query: the code, when its state is the
// one this page sent (another is a forged or stale redirect).
export function readCallback(search: string, state: string): { code: string } | { error: string } {
  const q = new URLSearchParams(search)
  if (q.get('error')) return { error: `The provider refused the sign-in: ${q.get('error_description') || q.get('error')}` }
  if (!state || q.get('state') !== state) return { error: 'The sign-in answer is not for this sign-in (its state differs); try again.' }
  const code = q.get('code')
  return code ? { code } : { error: 'The provider sent no authorization code.' }
}

// signInWithSSO runs the flow and signs in; it must be called from a click
// (the window is opened before anything is awaited, or it is blocked).
export async function signInWithSSO(sso: SingleSignOn): Promise<LoginResponse> {
  const popup = window.open('', 'runway-sso', 'popup,width=520,height=700')
  if (!popup) throw new Error('The browser blocked the sign-in window; allow pop-ups for this site and try again.')
  const verifier = randomString(32)
  const state = randomString(16)
  const redirectUri = window.location.origin + CALLBACK_PATH
  const code = await new Promise<string>((ok, fail) => {
    const done = () => {
      window.removeEventListener('message', onMessage)
      clearInterval(timer)
    }
    const onMessage = (e: MessageEvent) => {
      if (e.origin !== window.location.origin || e.source !== popup || e.data?.type !== MESSAGE) return
      done()
      popup.close()
      const r = readCallback(String(e.data.search ?? ''), state)
      if ('code' in r) ok(r.code)
      else fail(new Error(r.error))
    }
    const timer = setInterval(() => {
      if (popup.closed) {
        done()
        fail(new Error('The sign-in window was closed before signing in.'))
      }
    }, 500)
    window.addEventListener('message', onMessage)
    challengeOf(verifier).then(
      (challenge) => popup.location.assign(authorizeUrl(sso, { redirectUri, state, challenge })),
      (e) => {
        done()
        popup.close()
        fail(e)
      },
    )
  })
  return call<LoginResponse>('POST', '/v1/auth:login', { oidcCode: { code, codeVerifier: verifier, redirectUri } })
}

// handleCallback runs in the sign-in window once the provider sends it back:
// it gives the query to the page that opened it, on this origin only.
export function handleCallback(): boolean {
  if (window.location.pathname !== CALLBACK_PATH) return false
  if (window.opener) {
    ;(window.opener as Window).postMessage({ type: MESSAGE, search: window.location.search }, window.location.origin)
    window.close()
  }
  return true
}
