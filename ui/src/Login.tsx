import { useEffect, useState } from 'react'
import { ApiError, call, get, setToken } from './api'
import { signInWithSSO, type LoginResponse, type SingleSignOn } from './sso'
import type { Caller } from './types'

// SingleSignOnButton offers the configured provider (GetSignInOptions, which
// needs no token), or says it cannot be reached now.
function SingleSignOnButton({ onToken, onError }: { onToken: (t: string) => Promise<void>; onError: (m: string) => void }) {
  const [sso, setSso] = useState<SingleSignOn | undefined>()
  const [busy, setBusy] = useState(false)
  useEffect(() => {
    get<{ singleSignOn?: SingleSignOn }>('/v1/signInOptions').then((o) => setSso(o.singleSignOn), () => setSso(undefined))
  }, [])
  if (!sso) return null
  if (!sso.authorizationEndpoint) return <p className="hint">Single sign-on is configured but its provider cannot be reached now.</p>
  const start = () => {
    onError('')
    setBusy(true)
    signInWithSSO(sso)
      .then((r) => onToken(r.accessToken))
      .catch((e) => onError(e instanceof Error ? e.message : String(e)))
      .finally(() => setBusy(false))
  }
  return (
    <>
      <p className="or">or</p>
      <button type="button" className="secondary" onClick={start} disabled={busy}>
        Sign in with single sign-on
      </button>
    </>
  )
}

// LoginBanner is the account's sign-in banner (GetLoginBanner, which needs
// no token); nothing when there is none or it cannot be read.
function LoginBanner() {
  const [text, setText] = useState('')
  useEffect(() => {
    get<{ text?: string }>('/v1/settings/loginBanner').then((b) => setText(b.text ?? ''), () => setText(''))
  }, [])
  return text ? <p className="banner" role="note">{text}</p> : null
}

// Login signs in with a user's password. A temporary password (the first
// sign-in, or after a reset) must be replaced in the same call: the server
// answers PASSWORD_CHANGE_REQUIRED and the form asks for a new one.
export function Login({ onSignedIn }: { onSignedIn: (c: Caller) => void }) {
  const [user, setUser] = useState('')
  const [password, setPassword] = useState('')
  const [change, setChange] = useState(false)
  const [next, setNext] = useState('')
  const [confirm, setConfirm] = useState('')
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)

  const signedIn = async (token: string) => {
    setToken(token)
    onSignedIn(await call<Caller>('GET', '/v1/caller'))
  }

  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    setError('')
    if (change && next !== confirm) {
      setError('The new passwords differ.')
      return
    }
    setBusy(true)
    try {
      const creds: Record<string, string> = { user, password }
      if (change) creds.newPassword = next
      const res = await call<LoginResponse>('POST', '/v1/auth:login', { password: creds })
      await signedIn(res.accessToken)
    } catch (err) {
      if (err instanceof ApiError && err.reason === 'PASSWORD_CHANGE_REQUIRED') {
        setChange(true)
        setError('')
      } else setError(err instanceof Error ? err.message : String(err))
    } finally {
      setBusy(false)
    }
  }

  return (
    <main className="login">
      <h1>Runway</h1>
      <LoginBanner />
      <form onSubmit={submit} aria-labelledby="signin-title">
        <h2 id="signin-title">{change ? 'Choose a new password' : 'Sign in'}</h2>
        <label>
          User or email
          <input name="user" autoComplete="username" value={user} onChange={(e) => setUser(e.target.value)} required />
        </label>
        <label>
          Password
          <input name="password" type="password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.target.value)} required />
        </label>
        {change && (
          <>
            <p className="hint">This password is temporary. Choose a new one of at least 12 characters.</p>
            <label>
              New password
              <input name="new-password" type="password" autoComplete="new-password" minLength={12} value={next} onChange={(e) => setNext(e.target.value)} required />
            </label>
            <label>
              Confirm new password
              <input name="confirm-password" type="password" autoComplete="new-password" minLength={12} value={confirm} onChange={(e) => setConfirm(e.target.value)} required />
            </label>
          </>
        )}
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          {change ? 'Change password and sign in' : 'Sign in'}
        </button>
        {!change && <SingleSignOnButton onToken={signedIn} onError={setError} />}
      </form>
    </main>
  )
}
