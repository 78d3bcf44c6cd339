import { describe, expect, it } from 'vitest'
import { authorizeUrl, b64url, challengeOf, randomString, readCallback } from './sso'

describe('single sign-on (PKCE)', () => {
  it('derives the S256 challenge of RFC 7636 appendix B', async () => {
    expect(await challengeOf('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')).toBe('E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM')
  })

  it('makes verifiers the server accepts: 43 characters of the unreserved set, each new', () => {
    const a = randomString(32)
    expect(a).toMatch(/^[A-Za-z0-9._~-]{43}$/)
    expect(randomString(32)).not.toBe(a)
    expect(b64url(new Uint8Array([251, 255]))).toBe('-_8')
  })

  it('sends the code flow with the challenge, keeping the endpoint’s own query', () => {
    const u = new URL(authorizeUrl({ clientId: 'runway-ui', authorizationEndpoint: 'https://login.example.com/auth?tenant=x' }, { redirectUri: 'http://127.0.0.1:7070/sso/callback', state: 's1', challenge: 'c1' }))
    expect(u.origin + u.pathname).toBe('https://login.example.com/auth')
    expect(Object.fromEntries(u.searchParams)).toEqual({
      tenant: 'x', response_type: 'code', client_id: 'runway-ui', redirect_uri: 'http://127.0.0.1:7070/sso/callback',
      scope: 'openid email profile', state: 's1', code_challenge: 'c1', code_challenge_method: 'S256',
    })
  })

  it('takes the code only with the state it sent', () => {
    expect(readCallback('?code=abc&state=s1', 's1')).toEqual({ code: 'abc' })
    expect(readCallback('?code=abc&state=s2', 's1')).toHaveProperty('error')
    expect(readCallback('?code=abc', '')).toHaveProperty('error')
    expect(readCallback('?state=s1', 's1')).toEqual({ error: 'The provider sent no authorization code.' })
    expect(readCallback('?error=access_denied&error_description=No+thanks&state=s1', 's1')).toEqual({ error: 'The provider refused the sign-in: No thanks' })
  })
})
