// The e2e harness: a real `runway dev` from bin/runway on a free port of
// 127.0.0.1 with its own data directory, and Chromium through playwright-core.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { createRequire } from 'node:module'
import { chromium, type Browser, type Page } from 'playwright-core'

export const ROOT = resolve(__dirname, '../..')
export const SHOTS = join(ROOT, '.cache/ui-shots')
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer()
    s.once('error', fail)
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => ok(port))
    })
  })
}

export interface Dev { url: string; adminPassword: string; adminToken: string; proc: ChildProcess; dir: string; log: () => string }

export async function startDev(extra: string[] = []): Promise<Dev> {
  const dir = mkdtempSync(join(tmpdir(), 'runway-ui-e2e-'))
  const port = await freePort()
  // The operations listener's own free port (by default it is the next one,
  // which another listener on this machine may hold).
  const opsPort = await freePort()
  const proc = spawn(join(ROOT, 'bin/runway'), ['dev', '--runtime', 'process', '--data-dir', dir, '--listen', `127.0.0.1:${port}`, '--nodes', '2', '--gpus-per-node', '2',
    // Often enough for the charts to have points within the run.
    '--history-interval', '2s', '--metrics-listen', `127.0.0.1:${opsPort}`, ...extra], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  proc.stdout!.on('data', (b) => (out += b))
  proc.stderr!.on('data', (b) => (err += b.toString().slice(-20000)))
  const deadline = Date.now() + 90_000
  for (;;) {
    const pw = out.match(/one-time password: (\S+)/)
    const tok = out.match(/export RUNWAY_TOKEN=(\S+)/)
    if (pw && tok) return { url: `http://127.0.0.1:${port}`, adminPassword: pw[1], adminToken: tok[1].replace(/^'|'$/g, ''), proc, dir, log: () => err }
    if (proc.exitCode !== null) throw new Error(`runway dev exited ${proc.exitCode}:\n${err}`)
    if (Date.now() > deadline) throw new Error(`runway dev did not start in 90 s:\n${out}\n${err}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

export async function stopDev(d?: Dev) {
  if (!d) return
  d.proc.kill('SIGTERM')
  await new Promise((r) => (d.proc.exitCode !== null ? r(null) : d.proc.once('exit', r)))
  rmSync(d.dir, { recursive: true, force: true })
}

// setup empties the screenshots' folder once per run (vitest's
// globalSetup), so every file in it is from this run, of every e2e file.
export function setup() {
  rmSync(SHOTS, { recursive: true, force: true })
  mkdirSync(SHOTS, { recursive: true })
}

export async function launch(): Promise<Browser> {
  mkdirSync(SHOTS, { recursive: true })
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
}

// signIn signs in through the sign-in page; with newPassword, it changes
// the temporary password first (beforeChange runs on that page).
export async function signIn(page: Page, user: string, password: string, newPassword?: string, beforeChange?: () => Promise<void>) {
  await page.getByLabel('User or email').fill(user)
  await page.getByLabel('Password', { exact: true }).fill(password)
  await page.getByRole('button', { name: 'Sign in', exact: true }).click()
  if (newPassword) {
    await page.getByLabel('New password', { exact: true }).waitFor()
    await beforeChange?.()
    await page.getByLabel('New password', { exact: true }).fill(newPassword)
    await page.getByLabel('Confirm new password').fill(newPassword)
    await page.getByRole('button', { name: 'Change password and sign in' }).click()
  }
  await page.getByText('Signed in as').waitFor()
}

export async function nav(page: Page, label: string) {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: label, exact: true }).click()
}

// rest calls the REST API with a bearer token, outside the browser.
export function rest(url: string, token: string) {
  return (method: string, path: string, body?: unknown) =>
    fetch(url + path, { method, headers: { Authorization: `Bearer ${token}` }, body: body && JSON.stringify(body) })
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

// shot writes a screenshot of the view and runs axe-core on it; it returns
// the serious and critical violations (the test fails on any).
export async function shot(page: Page, name: string): Promise<string[]> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true })
  // Evaluated through the DevTools protocol, which the page's CSP does not
  // govern (an injected <script> would rightly be refused).
  await page.evaluate(axeSource)
  const violations = await page.evaluate(async () => {
    // @ts-expect-error axe is the global the script above defines
    const r = await window.axe.run(document, { resultTypes: ['violations'] })
    return r.violations.map((v: { id: string; impact: string; help: string; nodes: { target: string[] }[] }) => ({
      id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(' ')).slice(0, 3),
    }))
  })
  return violations
    .filter((v: { impact: string }) => v.impact === 'serious' || v.impact === 'critical')
    .map((v: { id: string; help: string; targets: string[] }) => `${name}: ${v.id} (${v.help}) at ${v.targets.join(', ')}`)
}

export function readText(path: string) {
  return readFileSync(path, 'utf8')
}
