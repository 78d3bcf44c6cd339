import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createServer, type Server } from 'node:http'
import type { Browser, Page } from 'playwright-core'
import { launch, nav as navTo, rest, shot, signIn, startDev, stopDev, type Dev } from './harness'

// Data sources, what a workload mounts and notifications, done in the
// browser and checked through the REST API: an administrator's data
// sources of each kind the form asks for, a researcher who is told why
// a node directory is not hers to mount, a submit that mounts one, and a
// webhook subscription with its deliveries.
let dev: Dev
let browser: Browser
let page: Page
let admin: ReturnType<typeof rest>
let hook: Server
let hookUrl = ''
const received: string[] = []
const a11y: string[] = []
const ADMIN_PASSWORD = 'admin-password-e2e-3'
const RITA_PASSWORD = 'rita-password-e2e-3'
let ritaTemp = ''

const check = async (name: string) => a11y.push(...(await shot(page, name)))
const nav = (label: string) => navTo(page, label)
const tab = (label: string) => page.getByRole('navigation', { name: 'Policies and assets' }).getByRole('link', { name: label }).click()
async function json<T>(res: Promise<Response>): Promise<T> {
  const r = await res
  const body = await r.json()
  if (!r.ok) throw new Error(`${r.status}: ${JSON.stringify(body)}`)
  return body as T
}
async function signInFresh(user: string, password: string, newPassword?: string) {
  await page.context().close()
  page = await (await browser.newContext({ viewport: { width: 1366, height: 800 } })).newPage()
  await page.goto(dev.url + '/')
  await signIn(page, user, password, newPassword)
}
const wide = async () => page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth)

describe('data sources, mounts and notifications in the web UI', () => {
  beforeAll(async () => {
    ;[dev, browser] = await Promise.all([startDev(), launch()])
    hook = createServer((req, res) => {
      let body = ''
      req.on('data', (b) => (body += b))
      req.on('end', () => {
        received.push(body)
        res.writeHead(204).end()
      })
    })
    await new Promise<void>((ok) => hook.listen(0, '127.0.0.1', ok))
    hookUrl = `http://127.0.0.1:${(hook.address() as { port: number }).port}/hook`
    admin = rest(dev.url, dev.adminToken)
    await json(admin('POST', '/v1/projects?projectId=team-m', { nodePoolQuotas: [{ nodePool: 'nodepools/default', gpu: { deservedMilliGpus: '1000' } }] }))
    // A git credential for the git data source's picker.
    await json(admin('POST', '/v1/credentials?credentialId=git-bot', { type: 'CREDENTIAL_TYPE_GIT', values: { username: 'bot', token: 'tok-never-shown-1' } }))
    // A generic one to mount and a registry one to pull with.
    await json(admin('POST', '/v1/projects/team-m/credentials?credentialId=hf', { type: 'CREDENTIAL_TYPE_GENERIC', values: { HF_TOKEN: 'hf-never-shown-2' } }))
    await json(admin('POST', '/v1/credentials?credentialId=reg', { type: 'CREDENTIAL_TYPE_REGISTRY', server: 'registry.example.com', values: { username: 'u', password: 'pw-never-shown-3' } }))
    ritaTemp = (await json<{ temporaryPassword: string }>(admin('POST', '/v1/users?userId=rita', { email: 'rita@example.com' }))).temporaryPassword
    await json(admin('POST', '/v1/accessRules', {
      subject: { kind: 'SUBJECT_KIND_USER', name: 'users/rita' }, role: 'roles/l1-researcher', scope: { kind: 'SCOPE_KIND_PROJECT', name: 'projects/team-m' },
    }))
    page = await (await browser.newContext({ viewport: { width: 1366, height: 800 } })).newPage()
    await page.goto(dev.url + '/')
    await signIn(page, 'admin', dev.adminPassword, ADMIN_PASSWORD)
    const login = await json<{ accessToken: string }>(fetch(dev.url + '/v1/auth:login', { method: 'POST', body: JSON.stringify({ password: { user: 'admin', password: ADMIN_PASSWORD } }) }))
    admin = rest(dev.url, login.accessToken)
  })
  afterAll(async () => {
    hook?.close()
    await browser?.close()
    await stopDev(dev)
  })

  it('creates a git data source with its credential and an nfs one, read-only, as an administrator', async () => {
    await nav('Policies and assets')
    await tab('Data sources')
    const form = page.getByRole('form', { name: 'Create a data source' })
    // An administrator may mount a node directory.
    await expect(form.getByLabel('Source type').locator('option', { hasText: 'Node directory' }).evaluate((o) => (o as HTMLOptionElement).disabled)).resolves.toBe(false)
    await form.getByLabel('Data source id').fill('repo')
    await form.getByLabel('Source type').selectOption('git')
    await form.getByLabel('Repository URL').fill('https://git.example.com/team/models.git')
    await form.getByLabel('Revision').fill('v1.2')
    await form.getByLabel(/^Credential/).selectOption('credentials/git-bot')
    await form.getByLabel('Mount path').fill('/src')
    await form.getByRole('button', { name: 'Create data source' }).click()
    await page.getByRole('status').getByText('Data source repo created.').waitFor()
    const repo = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'repo', exact: true }) })
    await repo.getByRole('cell', { name: 'git https://git.example.com/team/models.git@v1.2 (with git-bot)' }).waitFor()
    const git = await json<Record<string, unknown>>(admin('GET', '/v1/dataSources/repo'))
    expect([git.mountPath, git.readOnly, git.git]).toEqual(['/src', false, { repository: 'https://git.example.com/team/models.git', revision: 'v1.2', credential: 'credentials/git-bot' }])

    // The server's refusal next to the field it names.
    await form.getByLabel('Scope').selectOption({ label: 'Project team-m' })
    await form.getByLabel('Data source id').fill('datasets')
    await form.getByLabel('Source type').selectOption('nfs')
    await form.getByLabel('NFS server').fill('nfs.example.com')
    await form.getByLabel('Export path').fill('/exports/datasets')
    await form.getByLabel('Mount path').fill('relative/path')
    await form.getByRole('button', { name: 'Create data source' }).click()
    await expect(form.getByRole('alert').textContent()).resolves.toMatch(/Check “Mount path”/)
    await expect(form.getByLabel('Mount path').getAttribute('aria-invalid')).resolves.toBe('true')
    await form.getByLabel('Mount path').fill('/data')
    await form.getByLabel('Read-only').check()
    await form.getByRole('button', { name: 'Create data source' }).click()
    const ds = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'datasets', exact: true }) })
    await ds.getByRole('cell', { name: 'nfs nfs.example.com:/exports/datasets' }).waitFor()
    await expect(ds.getByRole('cell').nth(1).textContent()).resolves.toBe('projects/team-m')
    const nfs = await json<Record<string, unknown>>(admin('GET', '/v1/projects/team-m/dataSources/datasets'))
    expect([nfs.mountPath, nfs.readOnly, nfs.nfs]).toEqual(['/data', true, { server: 'nfs.example.com', path: '/exports/datasets' }])
    await check('40-data-sources')
    // Search and a filter as every table; a third one, deleted.
    await page.getByRole('group', { name: 'Data sources controls' }).getByLabel('Search').fill('nfs.example')
    await expect(page.getByRole('table', { name: /^Data sources/ }).locator('tbody tr').count()).resolves.toBe(1)
    await page.getByRole('group', { name: 'Data sources controls' }).getByLabel('Search').fill('')
    await json(admin('POST', '/v1/dataSources?dataSourceId=scratch', { mountPath: '/scratch', hostPath: { path: '/tmp' } }))
    await nav('Overview')
    await nav('Policies and assets')
    await tab('Data sources')
    page.once('dialog', (d) => d.accept())
    await page.getByRole('button', { name: 'Delete data source scratch of account' }).click()
    await page.getByRole('cell', { name: 'scratch', exact: true }).waitFor({ state: 'detached' })
    expect((await admin('GET', '/v1/dataSources/scratch')).status).toBe(404)
  })

  it('submits from the New workload form a data source and a credential to mount, a pull policy and a registry credential (refused next to its picker first); its page lists the mounts', async () => {
    await nav('New workload')
    await page.getByLabel('Project').selectOption('team-m')
    await page.getByLabel('Name', { exact: true }).fill('m1')
    await page.getByLabel('Image', { exact: true }).fill('runai.jfrog.io/demo/quickstart')
    await page.getByLabel('Shell line').fill('ls /data')
    await page.getByLabel('Pull policy').selectOption('IMAGE_PULL_POLICY_NEVER')
    await page.getByLabel(/^Registry credential/).selectOption('credentials/reg')
    await page.getByRole('button', { name: 'Add a credential' }).click()
    await page.getByLabel(/^Credential 1/).selectOption('projects/team-m/credentials/hf')
    await page.getByLabel('Path 1').fill('/etc/hf')
    const sources = page.getByRole('group', { name: 'Data sources' })
    // Usable in team-m: the account's and the project's own.
    await sources.getByRole('checkbox').nth(1).waitFor()
    await expect(sources.getByRole('checkbox').count()).resolves.toBe(2)
    await sources.getByRole('checkbox', { name: /^datasets at \/data \(read-only\)/ }).check()
    await page.getByLabel('Submit it stopped (resume it later)').check()
    await check('41-new-workload-mounts')
    // The registry credential is for another registry than the image's:
    // the server's refusal goes next to its picker.
    await page.getByRole('button', { name: 'Submit' }).click()
    await expect(page.getByRole('alert').textContent()).resolves.toBe('Check “Registry credential”: each says what to fix.')
    const reg = page.getByLabel(/^Registry credential/)
    await expect(reg.getAttribute('aria-invalid')).resolves.toBe('true')
    await expect(reg.evaluate((el) => (el.getAttribute('aria-describedby') ?? '').split(' ').map((i) => document.getElementById(i)?.textContent).join(' ')))
      .resolves.toMatch(/must be a credential of the image's registry runai\.jfrog\.io/)
    await page.getByLabel('Image', { exact: true }).fill('registry.example.com/demo/quickstart')
    await page.getByRole('button', { name: 'Submit' }).click()
    await page.getByRole('heading', { name: /Workload m1/ }).waitFor()
    const w = await json<{ spec: { dataSources: { dataSource: string; source: Record<string, unknown> }[]; imagePullPolicy: string; registryCredential: string; credentials: unknown[] } }>(
      admin('GET', '/v1/projects/team-m/workloads/m1'))
    expect([w.spec.imagePullPolicy, w.spec.registryCredential]).toEqual(['IMAGE_PULL_POLICY_NEVER', 'credentials/reg'])
    expect(w.spec.credentials).toEqual([{ credential: 'projects/team-m/credentials/hf', path: '/etc/hf' }])
    expect(w.spec.dataSources.map((d) => [d.dataSource, d.source.mountPath, d.source.readOnly, d.source.nfs])).toEqual(
      [['projects/team-m/dataSources/datasets', '/data', true, { server: 'nfs.example.com', path: '/exports/datasets' }]])
    await page.getByRole('list', { name: 'Data sources it mounts' }).getByText('datasets at /data (read-only): nfs nfs.example.com:/exports/datasets').waitFor()
    await page.getByRole('list', { name: 'Credentials it mounts' }).getByText('projects/team-m/credentials/hf as files under /etc/hf').waitFor()
    await check('42-workload-mounts')
  })

  it('creates an environment with a pull policy and a registry credential', async () => {
    await nav('Policies and assets')
    const env = page.getByRole('form', { name: 'Create an environment' })
    await env.getByLabel('Environment id').fill('pinned')
    await env.getByLabel('Image', { exact: true }).fill('registry.example.com/team/train:1')
    await env.getByLabel('Pull policy').selectOption('IMAGE_PULL_POLICY_ALWAYS')
    await env.getByLabel(/^Registry credential/).selectOption('credentials/reg')
    await env.getByRole('button', { name: 'Create environment' }).click()
    await page.getByRole('cell', { name: 'pinned', exact: true }).waitFor()
    const got = await json<{ imagePullPolicy: string; registryCredential: string }>(admin('GET', '/v1/environments/pinned'))
    expect([got.imagePullPolicy, got.registryCredential]).toEqual(['IMAGE_PULL_POLICY_ALWAYS', 'credentials/reg'])
  })

  it("tells a researcher why a node directory is not hers to mount", async () => {
    await signInFresh('rita', ritaTemp, RITA_PASSWORD)
    await nav('Policies and assets')
    await tab('Data sources')
    const form = page.getByRole('form', { name: 'Create a data source' })
    await expect(form.getByLabel('Source type').locator('option', { hasText: 'Node directory' }).evaluate((o) => (o as HTMLOptionElement).disabled)).resolves.toBe(true)
    await form.getByText(/Only an account administrator may mount a node directory/).waitFor()
    await page.getByRole('cell', { name: 'datasets', exact: true }).waitFor()
    await check('43-data-sources-researcher')
  })

  it('subscribes a webhook to failed workloads, lists it, shows its deliveries and deletes it', async () => {
    await nav('Notifications')
    const form = page.getByRole('form', { name: 'Subscribe to notifications' })
    await form.getByLabel('Subscription id').fill('fails')
    await form.getByLabel('A workload failed').check()
    await form.getByLabel(/^Project/).selectOption('projects/team-m')
    await form.getByLabel('Webhook URL').fill(hookUrl)
    await form.getByRole('button', { name: 'Subscribe' }).click()
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'fails', exact: true }) })
    await row.getByRole('cell', { name: `Webhook ${hookUrl}` }).waitFor()
    await row.getByRole('cell', { name: 'A workload failed', exact: true }).waitFor()
    const subs = await json<{ subscriptions: { name: string; events: string[]; project: string; webhook: { url: string } }[] }>(
      rest(dev.url, await ritaToken())('GET', '/v1/users/-/subscriptions'))
    expect(subs.subscriptions.map((s) => [s.name, s.events, s.project, s.webhook.url])).toEqual(
      [['users/rita/subscriptions/fails', ['NOTIFICATION_EVENT_WORKLOAD_FAILED'], 'projects/team-m', hookUrl]])
    // A workload of team-m fails: the webhook gets it and the deliveries say so.
    await json(admin('POST', '/v1/projects/team-m/workloads?workloadId=boom', { type: 'WORKLOAD_TYPE_TRAINING', spec: { image: 'x', command: ['sh', '-c', 'exit 3'] } }))
    await page.getByRole('button', { name: 'Deliveries of subscription fails' }).click()
    const deliveries = page.getByRole('table', { name: /^Deliveries of fails/ })
    await deliveries.locator('tbody tr', { hasText: 'projects/team-m/workloads/boom' }).getByRole('cell', { name: 'Sent', exact: true }).waitFor({ timeout: 60_000 })
    expect(received.some((b) => b.includes('projects/team-m/workloads/boom'))).toBe(true)
    await check('44-notifications')
    page.once('dialog', (d) => d.accept())
    await page.getByRole('button', { name: 'Delete subscription fails' }).click()
    await row.waitFor({ state: 'detached' })
    expect((await rest(dev.url, await ritaToken())('GET', '/v1/users/-/subscriptions/fails')).status).toBe(404)
  })

  it('fits a phone and a laptop: the new views do not scroll sideways at 420 or 1280 px', async () => {
    const sideways: string[] = []
    for (const width of [420, 1280]) {
      await page.setViewportSize({ width, height: 800 })
      await nav('Notifications')
      await page.getByRole('heading', { name: 'Notifications', exact: true }).waitFor()
      if (await wide()) sideways.push(`Notifications at ${width}px`)
      await nav('Policies and assets')
      await tab('Data sources')
      await page.getByRole('cell', { name: 'datasets', exact: true }).waitFor()
      if (await wide()) sideways.push(`Data sources at ${width}px`)
      if (width === 420) await check('45-narrow-data-sources')
      await nav('New workload')
      await page.getByRole('group', { name: 'Data sources' }).getByRole('checkbox').first().waitFor()
      if (await wide()) sideways.push(`New workload with data sources at ${width}px`)
      await page.goto(dev.url + '/workloads/team-m/m1')
      await signIn(page, 'rita', RITA_PASSWORD)
      await page.getByRole('list', { name: 'Data sources it mounts' }).waitFor()
      if (await wide()) sideways.push(`workload page with mounts at ${width}px`)
    }
    expect(sideways).toEqual([])
  })

  it('has no serious accessibility violations', () => {
    expect(a11y).toEqual([])
  })
})

async function ritaToken(): Promise<string> {
  const login = await json<{ accessToken: string }>(fetch(dev.url + '/v1/auth:login', { method: 'POST', body: JSON.stringify({ password: { user: 'rita', password: RITA_PASSWORD } }) }))
  return login.accessToken
}
