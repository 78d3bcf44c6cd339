// A small OpenID Connect provider on 127.0.0.1 for the end-to-end run:
// discovery, a JWKS with one RSA key, a sign-in page, and the authorization
// code grant with PKCE (S256 only), each code redeemed once. runway dev
// trusts it (--oidc-issuer); the browser signs in at its page.
import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Provider { url: string; clientId: string; redeemed: () => number; close: () => Promise<void> }

const b64url = (b: Buffer) => b.toString('base64url')
const html = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

export async function startProvider(clientId: string): Promise<Provider> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const jwk = publicKey.export({ format: 'jwk' })
  const pending = new Map<string, { redirectUri: string; state: string; challenge: string }>()
  const codes = new Map<string, { redirectUri: string; challenge: string; email: string }>()
  let redeemed = 0
  let url = ''
  const idToken = (email: string) => {
    const now = Math.floor(Date.now() / 1000)
    const head = b64url(Buffer.from(JSON.stringify({ alg: 'RS256', kid: 'k1', typ: 'JWT' })))
    const body = b64url(Buffer.from(JSON.stringify({ iss: url, aud: clientId, sub: `sub-${email}`, email, email_verified: true, iat: now, exp: now + 300 })))
    return `${head}.${body}.${b64url(sign('sha256', Buffer.from(`${head}.${body}`), privateKey))}`
  }
  const srv: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', url)
    const json = (status: number, v: unknown) => {
      res.writeHead(status, { 'Content-Type': 'application/json' })
      res.end(JSON.stringify(v))
    }
    if (req.method === 'GET' && u.pathname === '/.well-known/openid-configuration') {
      return json(200, {
        issuer: url, authorization_endpoint: `${url}/auth`, token_endpoint: `${url}/token`, jwks_uri: `${url}/jwks`,
        response_types_supported: ['code'], code_challenge_methods_supported: ['S256'], id_token_signing_alg_values_supported: ['RS256'],
      })
    }
    if (req.method === 'GET' && u.pathname === '/jwks') return json(200, { keys: [{ ...jwk, kid: 'k1', alg: 'RS256', use: 'sig' }] })
    if (req.method === 'GET' && u.pathname === '/auth') {
      const q = u.searchParams
      if (q.get('client_id') !== clientId || q.get('response_type') !== 'code' || q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge') || !q.get('redirect_uri')) {
        res.writeHead(400).end('invalid_request')
        return
      }
      const id = b64url(randomBytes(12))
      pending.set(id, { redirectUri: q.get('redirect_uri')!, state: q.get('state') ?? '', challenge: q.get('code_challenge')! })
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' })
      res.end(`<!doctype html><html lang="en"><title>Test provider</title><h1>Test provider</h1>
<form method="post" action="/approve"><input type="hidden" name="id" value="${html(id)}">
<label>Email <input name="email" type="email" required></label> <button type="submit">Continue</button></form>`)
      return
    }
    if (req.method === 'POST' && (u.pathname === '/approve' || u.pathname === '/token')) {
      let body = ''
      req.on('data', (c) => (body = (body + c).slice(0, 65536)))
      req.on('end', () => {
        const f = new URLSearchParams(body)
        if (u.pathname === '/approve') {
          const p = pending.get(f.get('id') ?? '')
          pending.delete(f.get('id') ?? '')
          if (!p) return void res.writeHead(400).end('unknown sign-in')
          const code = b64url(randomBytes(16))
          codes.set(code, { redirectUri: p.redirectUri, challenge: p.challenge, email: f.get('email') ?? '' })
          const back = new URL(p.redirectUri)
          back.searchParams.set('code', code)
          back.searchParams.set('state', p.state)
          res.writeHead(302, { Location: back.toString() }).end()
          return
        }
        const c = codes.get(f.get('code') ?? '')
        codes.delete(f.get('code') ?? '')
        const verifier = f.get('code_verifier') ?? ''
        if (f.get('grant_type') !== 'authorization_code' || !c || f.get('client_id') !== clientId || f.get('redirect_uri') !== c.redirectUri ||
          b64url(createHash('sha256').update(verifier).digest()) !== c.challenge) {
          return json(400, { error: 'invalid_grant' })
        }
        redeemed++
        json(200, { access_token: b64url(randomBytes(16)), token_type: 'Bearer', expires_in: 300, id_token: idToken(c.email) })
      })
      return
    }
    res.writeHead(404).end()
  })
  await new Promise<void>((ok) => srv.listen(0, '127.0.0.1', ok))
  url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`
  return { url, clientId, redeemed: () => redeemed, close: () => new Promise((ok) => srv.close(() => ok())) }
}
