import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import { launch, nav, rest, shot, signIn, startDev, stopDev, type Dev } from './harness'

// Day-to-day pages, driven in the browser and checked through the REST
// API: the account's general settings changed by the administrator (the
// sign-in banner they set shows before anyone signs in), a node's role, a
// workspace's tool opened with Connect on the proxy's own origin, and a
// researcher who reads the settings and is refused a change.
let dev: Dev
let browser: Browser
let page: Page
let admin: ReturnType<typeof rest>
const a11y: string[] = []
const ADMIN_PASSWORD = 'admin-password-e2e-settings'
const BANNER = 'Authorised use only: this cluster is monitored.'

async function fresh(): Promise<Page> {
  const p = await (await browser.newContext({ viewport: { width: 1366, height: 800 } })).newPage()
  await p.goto(dev.url + '/')
  return p
}

describe('settings, node roles and tools in the web UI', () => {
  beforeAll(async () => {
    ;[dev, browser] = await Promise.all([startDev(), launch()])
    page = await fresh()
    await signIn(page, 'admin', dev.adminPassword, ADMIN_PASSWORD)
    // The password changed, so runway dev's token went with it: sign in by REST.
    const login = await (await fetch(dev.url + '/v1/auth:login', { method: 'POST', body: JSON.stringify({ password: { user: 'admin', password: ADMIN_PASSWORD } }) })).json()
    admin = rest(dev.url, login.accessToken)
  })
  afterAll(async () => {
    await browser?.close()
    await stopDev(dev)
  })

  it('saves the settings an administrator sets, as the API reads them, and shows the banner at sign-in', async () => {
    await nav(page, 'Settings')
    await page.getByRole('heading', { name: 'General settings' }).waitFor()
    await page.getByLabel('Default node pool').selectOption('nodepools/default')
    await page.getByLabel('Workspace auto-suspend').fill('8h')
    await page.getByLabel('Sign-in banner').fill(BANNER)
    await page.getByLabel(/Allow workspaces to exceed/).check()
    await page.getByRole('button', { name: 'Save settings' }).click()
    await page.getByRole('status').filter({ hasText: 'Settings saved.' }).waitFor()
    a11y.push(...(await shot(page, '50-settings')))
    const got = await (await admin('GET', '/v1/settings')).json()
    expect(got).toMatchObject({ defaultNodePool: 'nodepools/default', workspaceAutoSuspend: '28800s', loginBanner: BANNER, allowOverQuotaByDefault: true })

    // A bad duration is refused in the form's words before anything is sent.
    await page.getByLabel('Workspace auto-suspend').fill('soon')
    await page.getByRole('button', { name: 'Save settings' }).click()
    await page.getByRole('alert').filter({ hasText: '“Workspace auto-suspend” is a duration' }).waitFor()

    const signInPage = await fresh()
    await signInPage.getByRole('note').filter({ hasText: BANNER }).waitFor()
    a11y.push(...(await shot(signInPage, '51-sign-in-banner')))
    await signInPage.context().close()
  })

  it('gives a node a role from the Nodes page, as the API reads it, and takes it away', async () => {
    await nav(page, 'Nodes')
    const roles = page.getByRole('group', { name: /^Roles of node-1/ })
    await roles.getByLabel('GPU worker').check()
    await page.getByRole('button', { name: 'Set roles of node-1' }).click()
    await page.getByRole('group', { name: 'Roles of node-1: GPU worker' }).waitFor()
    expect((await (await admin('GET', '/v1/nodes/node-1')).json()).roles).toEqual(['NODE_ROLE_GPU_WORKER'])
    a11y.push(...(await shot(page, '52-node-roles')))
    await page.getByRole('group', { name: /^Roles of node-1/ }).getByLabel('GPU worker').uncheck()
    await page.getByRole('button', { name: 'Set roles of node-1' }).click()
    await page.getByRole('group', { name: 'Roles of node-1: none' }).waitFor()
    expect((await (await admin('GET', '/v1/nodes/node-1')).json()).roles ?? []).toEqual([])
  })

  it("connects to a running workspace's tool from its page: a ticket opens it on the proxy's origin", async () => {
    await admin('POST', '/v1/projects?projectId=team-t', { nodePoolQuotas: [{ nodePool: 'nodepools/default', gpu: { deservedMilliGpus: '1000' } }] })
    const port = 20000 + Math.floor(Math.random() * 20000)
    const server = `require('http').createServer((q, s) => s.end('hello from the tool at ' + q.url)).listen(${port}, '127.0.0.1')`
    const r = await admin('POST', '/v1/projects/team-t/workloads?workloadId=ws1', {
      type: 'WORKLOAD_TYPE_WORKSPACE',
      spec: { image: 'node', command: [process.execPath, '-e', server], tools: [{ name: 'web', type: 'TOOL_TYPE_CUSTOM', port }] },
    })
    expect(r.ok, await r.text()).toBe(true)
    // Within the page: a reload would forget the in-memory sign-in.
    await nav(page, 'Workloads')
    await page.getByRole('link', { name: 'ws1', exact: true }).click()
    const connect = page.getByRole('button', { name: 'Connect to web' })
    await connect.waitFor({ timeout: 60_000 })
    a11y.push(...(await shot(page, '53-workload-tools')))
    const [popup] = await Promise.all([page.waitForEvent('popup'), connect.click()])
    await popup.getByText('hello from the tool at').waitFor({ timeout: 30_000 })
    // The tool is on the proxy's origin, not the UI's.
    expect(new URL(popup.url()).origin).not.toBe(new URL(dev.url).origin)
    await popup.close()
  })

  it("lets a researcher read the settings and refuses her change with the server's reason", async () => {
    await admin('POST', '/v1/projects?projectId=team-s', { nodePoolQuotas: [{ nodePool: 'nodepools/default', gpu: { deservedMilliGpus: '1000' } }] })
    const sara = await (await admin('POST', '/v1/users?userId=sara', { email: 'sara@example.com' })).json()
    await admin('POST', '/v1/accessRules', {
      subject: { kind: 'SUBJECT_KIND_USER', name: 'users/sara' }, role: 'roles/l1-researcher', scope: { kind: 'SCOPE_KIND_PROJECT', name: 'projects/team-s' },
    })
    const p = await fresh()
    await signIn(p, 'sara', sara.temporaryPassword, 'sara-password-e2e-settings')
    await nav(p, 'Settings')
    await expect(p.getByLabel('Sign-in banner').inputValue()).resolves.toBe(BANNER)
    await p.getByLabel('Sign-in banner').fill('mine now')
    await p.getByRole('button', { name: 'Save settings' }).click()
    await p.getByRole('alert').filter({ hasText: /settings/i }).waitFor()
    const got = await (await admin('GET', '/v1/settings')).json()
    expect(got.loginBanner).toBe(BANNER)
    await p.context().close()
    expect(a11y).toEqual([])
  })
})
