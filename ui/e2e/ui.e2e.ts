import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { launch, nav as navTo, readText, rest, shot, signIn as signInAs, startDev, stopDev, type Dev } from './harness'
import { startProvider, type Provider } from './oidc'
import { parseCsv } from '../src/format'

// The quick start of the README, done in the browser by an administrator,
// then what a researcher of team-a sees. Each step leaves a screenshot in
// .cache/ui-shots/ and is checked with axe-core.
let dev: Dev
let provider: Provider
let browser: Browser
let ctx: BrowserContext
let page: Page
const a11y: string[] = []
const cspErrors: string[] = []
const NEW_ADMIN_PASSWORD = 'admin-password-e2e-1'
const NEW_ALICE_PASSWORD = 'alice-password-e2e-1'
let alicePassword = ''

async function check(name: string) {
  a11y.push(...(await shot(page, name)))
}

async function newPage() {
  ctx = await browser.newContext({ viewport: { width: 1366, height: 800 }, acceptDownloads: true })
  page = await ctx.newPage()
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) cspErrors.push(m.text())
  })
}

const signIn = (user: string, password: string, newPassword?: string) =>
  signInAs(page, user, password, newPassword, () => check(`02-change-password-${user}`))
const nav = (label: string) => navTo(page, label)

async function submitWorkload(name: string, project: string, gpu: string) {
  await nav('New workload')
  await page.getByLabel('Project').selectOption(project)
  await page.getByLabel('Name').fill(name)
  await page.getByLabel('By hand').check()
  await page.getByLabel('Image').fill('runai.jfrog.io/demo/quickstart')
  await page.getByLabel('Shell line').fill('sleep 600')
  if (gpu.includes('.')) await page.getByLabel('GPU as').selectOption({ label: 'A fraction of one GPU' })
  await page.getByLabel(gpu.includes('.') ? 'Fraction of one GPU per pod' : 'GPUs per pod').fill(gpu)
  await page.getByRole('button', { name: 'Submit' }).click()
}

// adminRest calls the REST API as the administrator, outside the browser.
async function adminRest() {
  const login = await fetch(dev.url + '/v1/auth:login', {
    method: 'POST',
    body: JSON.stringify({ password: { user: 'admin', password: NEW_ADMIN_PASSWORD } }),
  }).then((r) => r.json())
  return rest(dev.url, login.accessToken)
}

async function waitStatus(status: string) {
  await page.locator('dd.phase', { hasText: status }).waitFor({ timeout: 60_000 })
}

describe('web UI against runway dev', () => {
  beforeAll(async () => {
    provider = await startProvider('runway-ui')
    ;[dev, browser] = await Promise.all([startDev(['--oidc-issuer', provider.url, '--oidc-client-id', provider.clientId]), launch()])
    await newPage()
  })
  afterAll(async () => {
    await browser?.close()
    await stopDev(dev)
    await provider?.close()
  })

  it('serves the UI with its CSP beside the REST API', async () => {
    const res = await fetch(dev.url + '/workloads')
    expect(res.status).toBe(200)
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'")
    expect(await res.text()).toContain('<div id="root">')
    const api = await fetch(dev.url + '/v1/projects')
    expect(api.status).toBe(401) // the gateway's, not index.html
    expect((await fetch(dev.url + '/openapi.json')).headers.get('content-type')).toBe('application/json')
  })

  it('signs the administrator in and changes the first password', async () => {
    await page.goto(dev.url + '/')
    await page.getByLabel('User or email').waitFor()
    await check('01-sign-in')
    await signIn('admin', dev.adminPassword, NEW_ADMIN_PASSWORD)
    await expect(page.locator('.who strong').textContent()).resolves.toBe('admin')
    // The token is held in memory only.
    const stored = await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie])
    expect(stored).toEqual([0, 0, ''])
    await check('03-overview-empty')
  })

  it('creates team-a and team-b with two GPUs of quota each', async () => {
    await nav('Projects')
    for (const team of ['team-a', 'team-b']) {
      await page.getByRole('button', { name: 'New project or department' }).click()
      const form = page.getByRole('form', { name: 'Create a project or department' })
      await form.getByLabel('Name').fill(team)
      await form.getByLabel('GPU quota').fill('2')
      await form.getByRole('button', { name: 'Create' }).click()
      await page.getByRole('cell', { name: team, exact: true }).waitFor()
    }
    await check('04-projects')
  })

  it('submits a1, a2, b1 and b2 through the form; a1 goes back to Pending, reclaimed by team-b', async () => {
    for (const [name, project, gpu] of [
      ['a1', 'team-a', '1'],
      ['a2', 'team-a', '2'],
      ['b1', 'team-b', '1'],
      ['b2', 'team-b', '1'],
    ]) {
      await submitWorkload(name, project, gpu)
      await page.getByRole('heading', { name: new RegExp(`Workload ${name}`) }).waitFor()
      await waitStatus('Running')
      if (name === 'a1') await check('05-new-workload-done')
    }
    // A deep link loads index.html for the client route; the full load
    // signs out (the token was in memory) and signing in lands on the page.
    await page.goto(dev.url + '/workloads/team-a/a1')
    await signIn('admin', NEW_ADMIN_PASSWORD)
    await waitStatus('Pending')
    const reasons = page.getByRole('table', { name: 'Why it waits' })
    await expect(reasons.textContent()).resolves.toMatch(/fair share/)
    const events = page.getByRole('table', { name: 'Events' })
    await events.getByRole('cell', { name: 'Preempted', exact: true }).waitFor()
    await expect(events.textContent()).resolves.toMatch(/project team-b reclaimed 1 GPU: project team-a held/)
    await page.getByText(/^Last decision \(.*not placed\): needs 1 GPU on one node/).waitFor()
    await check('06-workload-a1-pending')
    await page.getByRole('region', { name: 'Logs' }).waitFor()
  })

  it('lists the workloads and downloads a CSV that parses', async () => {
    await nav('Workloads')
    await page.getByRole('cell', { name: 'b2', exact: true }).waitFor()
    await check('07-workloads')
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()])
    const rows = parseCsv(readText((await download.path())!))
    expect(rows[0]).toEqual(['Name', 'Type', 'Status', 'Project', 'Department', 'Node pool', 'GPU allocation', 'Running/requested pods', 'Submitted', 'Submitted by', 'Labels'])
    const byName = new Map(rows.slice(1).map((r) => [r[0], r]))
    expect([...byName.keys()].sort()).toEqual(['a1', 'a2', 'b1', 'b2'])
    expect(byName.get('a1')!.slice(1, 5)).toEqual(['Training', 'Pending', 'team-a', 'default'])
    expect(byName.get('a2')![2]).toBe('Running')
    expect(byName.get('a2')![6]).toBe('2.00')
    expect(byName.get('b2')![9]).toBe('admin')
    // Search, filter and column choice narrow the table.
    await page.getByLabel('Search').fill('team-b')
    await expect(page.locator('tbody tr').count()).resolves.toBe(2)
    await page.getByLabel('Search').fill('')
    await page.getByRole('group', { name: 'Workloads controls' }).getByRole('combobox', { name: 'Status' }).selectOption('Pending')
    await expect(page.locator('tbody tr').count()).resolves.toBe(1)
  })

  it("charts a workload's, the projects' and the cluster's metrics over time", async () => {
    await nav('Overview')
    await nav('Workloads')
    await page.getByRole('link', { name: 'a2', exact: true }).click()
    await waitStatus('Running')
    const metrics = page.getByRole('region', { name: 'Metrics over time' })
    await metrics.getByLabel('Time range').selectOption({ label: 'Last 15 minutes' })
    // Each chart is a figure named by its caption, its canvas an image whose
    // label says the numbers, and a table of them.
    const allocated = metrics.getByRole('figure', { name: 'GPUs allocated', exact: true })
    await allocated.getByRole('img', { name: /GPUs allocated: now 2\.00/ }).waitFor({ timeout: 60_000 })
    for (const name of ['GPU utilisation', 'GPU memory used'])
      await metrics.getByRole('figure', { name, exact: true }).getByRole('img', { name: new RegExp(`^${name}\\. .*: now `) }).waitFor()
    // CPU and memory as the agent measures a2's pod (sleep: near nothing),
    // next to what a2 is allocated.
    await metrics.getByRole('figure', { name: 'CPU cores used', exact: true })
      .getByRole('img', { name: /CPU used, pod 0: now \d+\.\d\d.*; CPU allocated: now \d+\.\d\d/ }).waitFor({ timeout: 60_000 })
    await metrics.getByRole('figure', { name: 'Memory used', exact: true })
      .getByRole('img', { name: /Memory used, pod 0: now \d.*; Memory allocated: now \d/ }).waitFor({ timeout: 60_000 })
    await allocated.locator('canvas').first().waitFor()
    await allocated.getByText(/^Data table/).click()
    const rows = await allocated.getByRole('table').locator('tbody tr').allTextContents()
    expect(rows.length).toBeGreaterThan(0)
    expect(rows[rows.length - 1]).toMatch(/2\.00$/)
    await check('06c-workload-metrics')
    await nav('Projects')
    const byProject = page.getByRole('figure', { name: 'GPU allocation by project over time' })
    await byProject.getByRole('img', { name: /team-a: now 2\.00/ }).waitFor({ timeout: 60_000 })
    await byProject.getByRole('img', { name: /team-b: now 2\.00/ }).waitFor({ timeout: 60_000 })
    await page.getByRole('combobox', { name: /^Project or department/ }).selectOption({ label: 'Project team-b' })
    await page.getByRole('figure', { name: 'Project team-b: GPUs over time' }).getByRole('img', { name: /Allocated: now 2\.00.*Fair share: now 2\.00.*Quota: now 2\.00/ }).waitFor({ timeout: 60_000 })
    await check('04b-projects-over-time')
  })

  it('shows the overview, nodes with their GPU maps, policies and assets and the event history', async () => {
    await nav('Overview')
    await page.getByRole('table', { name: 'Pending workloads by project and reason' }).getByRole('cell', { name: 'team-a' }).waitFor()
    const cluster = page.getByRole('figure', { name: 'Cluster GPUs over time' })
    await cluster.getByRole('img', { name: /Allocated: now 4\.00.*Total: now 4\.00/ }).waitFor({ timeout: 60_000 })
    await page.getByRole('figure', { name: 'GPU allocation by node pool over time' }).getByRole('img', { name: /default: now 4\.00/ }).waitFor({ timeout: 60_000 })
    await page.getByRole('figure', { name: 'GPU allocation by department over time' }).getByRole('img', { name: /default: now 4\.00/ }).waitFor({ timeout: 60_000 })
    await page.getByRole('figure', { name: 'Cluster GPU utilisation over time' }).getByRole('img', { name: /Utilisation: now \d+%/ }).waitFor()
    // All four GPUs are held: none unallocated, no free device.
    const pools = page.getByRole('table', { name: 'GPU allocation by node pool, now' })
    await expect(pools.locator('tbody tr').first().locator('td').nth(5).textContent()).resolves.toBe('0.00')
    await expect(pools.locator('tbody tr').first().locator('td').nth(6).textContent()).resolves.toBe('0')
    await check('08-overview')
    await nav('Nodes')
    await page.getByRole('list', { name: 'GPUs of node-1' }).waitFor()
    await expect(page.locator('.gpu-free').count()).resolves.toBe(0) // 4 GPUs, all held
    await check('09-nodes')
    await nav('Policies and assets')
    await page.getByRole('cell', { name: 'quick-start', exact: true }).waitFor()
    await check('10-policies-assets')
    await nav('Event history')
    await page.getByRole('cell', { name: 'CreateWorkload' }).first().waitFor()
    await check('11-audit')
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download JSON' }).click()])
    const events = JSON.parse(readText((await download.path())!))
    expect(events.some((e: { method: string; resource: string }) => e.method.endsWith('/CreateWorkload') && e.resource === 'projects/team-b/workloads/b2')).toBe(true)
  })

  it('creates and deletes assets', async () => {
    await nav('Policies and assets')
    const env = page.getByRole('form', { name: 'Create an environment' })
    await env.getByLabel('Environment id').fill('pytorch')
    await env.getByLabel('Image').fill('pytorch:25')
    await env.getByLabel('Shell line').fill('python train.py')
    await env.getByRole('button', { name: 'Create environment' }).click()
    await page.getByRole('cell', { name: 'pytorch:25', exact: true }).waitFor()
    const cr = page.getByRole('form', { name: 'Create a compute resource' })
    await cr.getByLabel('Compute resource id').fill('half-gpu')
    await cr.getByLabel('GPU per pod').fill('0.5')
    await cr.getByRole('button', { name: 'Create compute resource' }).click()
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'half-gpu', exact: true }) })
    await row.getByRole('cell', { name: '0.5', exact: true }).waitFor()
    page.once('dialog', (d) => d.accept())
    await page.getByRole('button', { name: 'Delete half-gpu' }).click()
    await row.waitFor({ state: 'detached' })
    await page.getByRole('cell', { name: 'pytorch', exact: true }).waitFor()
  })

  it('creates a department with a project, edits its quota and deletes it', async () => {
    await nav('Projects')
    await page.getByRole('button', { name: 'New project or department' }).click()
    let form = page.getByRole('form', { name: 'Create a project or department' })
    await form.getByLabel('Kind').selectOption('Department')
    await form.getByLabel('Name').fill('research')
    await form.getByLabel('GPU quota').fill('1')
    await form.getByRole('button', { name: 'Create' }).click()
    await page.getByRole('cell', { name: 'research', exact: true }).first().waitFor()
    await page.getByRole('button', { name: 'New project or department' }).click()
    form = page.getByRole('form', { name: 'Create a project or department' })
    await form.getByLabel('Name').fill('team-c')
    await form.getByRole('combobox', { name: /^Department/ }).selectOption('research')
    await form.getByLabel('GPU quota').fill('0.5')
    await form.getByRole('button', { name: 'Create' }).click()
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'team-c', exact: true }) })
    await row.getByRole('cell', { name: '0.50', exact: true }).first().waitFor()
    await expect(row.getByRole('cell').nth(2).textContent()).resolves.toBe('research')
    await page.getByRole('button', { name: 'Edit project team-c' }).click()
    const edit = page.getByRole('form', { name: 'Edit team-c' })
    await edit.getByLabel('GPU quota').fill('1')
    await edit.getByLabel('Over-quota weight').fill('3')
    await edit.getByRole('button', { name: 'Save' }).click()
    const quotas = row.getByRole('list', { name: 'Quotas of project team-c per node pool' })
    await quotas.getByText(/^default: quota 1\.00, limit unlimited, weight 3;/).waitFor()
    await expect(row.getByRole('cell').nth(3).textContent()).resolves.toBe('1.00')
    // Scheduling rules: the training rules of team-c, set, shown, removed.
    await page.getByRole('button', { name: 'Scheduling rules of project team-c' }).click()
    const rules = page.getByRole('form', { name: 'Scheduling rules of team-c' })
    await rules.getByRole('combobox', { name: /^Workload type/ }).selectOption({ label: 'Training' })
    await rules.getByLabel('Time limit').fill('1h30m')
    await rules.getByLabel('Idle GPU limit').fill('20m')
    await rules.getByLabel('Preempt when idle').check()
    await rules.getByRole('button', { name: 'Save rules' }).click()
    await row.getByRole('cell', { name: 'Training: time limit 1h30m, idle GPU limit 20m (preempt)', exact: true }).waitFor()
    await page.getByRole('button', { name: 'Scheduling rules of project team-c' }).click()
    await expect(rules.getByLabel('Time limit').inputValue()).resolves.toBe('1h30m')
    await check('04c-projects-scheduling-rules')
    await rules.getByRole('button', { name: 'Remove training rules' }).click()
    await expect.poll(() => row.getByRole('cell').nth(7).textContent(), { timeout: 10_000 }).toBe('')
    // A limit the form cannot read is refused before it is sent.
    await page.getByRole('button', { name: 'Scheduling rules of project team-c' }).click()
    await rules.getByLabel('Time limit').fill('soon')
    await rules.getByRole('button', { name: 'Save rules' }).click()
    await rules.getByRole('alert').getByText(/durations such as 90m/).waitFor()
    page.once('dialog', (d) => d.accept())
    await page.getByRole('button', { name: 'Delete project team-c' }).click()
    await row.waitFor({ state: 'detached' })
  })

  it('creates, edits and deletes a node pool', async () => {
    await nav('Nodes')
    await page.getByRole('button', { name: 'New node pool' }).click()
    const form = page.getByRole('form', { name: 'Create a node pool' })
    await form.getByLabel('Node pool id').fill('a100')
    await form.getByLabel('Node selector').fill('gpu=a100')
    await form.getByRole('combobox', { name: /^Placement/ }).selectOption({ label: 'Spread' })
    await form.getByRole('button', { name: 'Create node pool' }).click()
    const heading = page.getByRole('heading', { name: /^Node pool a100/ })
    await heading.getByText('Spread placement, time slicing off, 0 nodes, nodes labelled gpu=a100').waitFor()
    await page.getByRole('button', { name: 'Edit node pool a100' }).click()
    const edit = page.getByRole('form', { name: 'Edit node pool a100' })
    await edit.getByRole('combobox', { name: /^Time slicing/ }).selectOption({ label: 'Fair' })
    await edit.getByRole('button', { name: 'Save node pool' }).click()
    await heading.getByText(/time slicing fair/).waitFor()
    await check('09b-node-pools')
    // The server's rules stand: the default pool selects every other node.
    await page.getByRole('button', { name: 'Edit node pool default' }).click()
    const def = page.getByRole('form', { name: 'Edit node pool default' })
    await def.getByLabel('Node selector').fill('gpu=h100')
    await def.getByRole('button', { name: 'Save node pool' }).click()
    await def.getByRole('alert').waitFor()
    page.once('dialog', (d) => d.accept())
    await page.getByRole('button', { name: 'Delete node pool a100' }).click()
    await heading.waitFor({ state: 'detached' })
  })

  it('drains and undrains a node', async () => {
    await nav('Nodes')
    await page.getByRole('button', { name: 'Drain node-2' }).click()
    await page.getByText('drained: drained from the web UI').waitFor()
    await page.getByRole('button', { name: 'Undrain node-2' }).click()
    await page.getByRole('button', { name: 'Drain node-2' }).waitFor()
  })

  it("shows a finished workload's logs", async () => {
    await nav('New workload')
    await page.getByLabel('Project').selectOption('team-a')
    await page.getByLabel('Name').fill('hello')
    await page.getByLabel('Image').fill('runai.jfrog.io/demo/quickstart')
    await page.getByLabel('Shell line').fill('echo hello-from-the-pod')
    await page.getByLabel('GPUs per pod').fill('0')
    await page.getByRole('button', { name: 'Submit' }).click()
    await waitStatus('Completed')
    await page.getByRole('region', { name: 'Logs' }).getByText('hello-from-the-pod').waitFor()
    await check('07b-workload-logs')
  })

  it('suspends, resumes and deletes a workload from its page', async () => {
    await submitWorkload('pause', 'team-a', '0')
    await waitStatus('Running')
    const actions = page.getByRole('group', { name: 'Workload actions' })
    await actions.getByRole('button', { name: 'Suspend' }).click()
    await waitStatus('Stopped')
    await actions.getByRole('button', { name: 'Resume' }).click()
    await waitStatus('Running')
    page.once('dialog', (d) => d.accept())
    await actions.getByRole('button', { name: 'Delete' }).click()
    await page.getByRole('heading', { name: 'Workloads' }).waitFor()
    await page.getByRole('cell', { name: 'a1', exact: true }).waitFor()
    await expect.poll(async () => page.locator('tbody tr td:first-child').allTextContents(), { timeout: 30_000 }).not.toContain('pause')
  })

  it('updates the workloads table live from the watch stream', async () => {
    const rest = await adminRest()
    await nav('Workloads')
    await page.getByRole('cell', { name: 'a1', exact: true }).waitFor()
    const created = await rest('POST', '/v1/projects/team-a/workloads?workloadId=live', {
      type: 'WORKLOAD_TYPE_TRAINING', spec: { image: 'x', command: ['sleep', '600'] },
    })
    expect(created.status).toBe(200)
    await page.getByRole('cell', { name: 'live', exact: true }).waitFor()
    expect((await rest('DELETE', '/v1/projects/team-a/workloads/live')).status).toBe(200)
    await page.getByRole('cell', { name: 'live', exact: true }).waitFor({ state: 'detached' })
  })

  it('creates an application and shows its secret once', async () => {
    await nav('Access')
    const form = page.getByRole('form', { name: 'Create an application' })
    await form.getByLabel('Application id').fill('ci')
    await form.getByRole('button', { name: 'Create application' }).click()
    const secret = (await page.getByTestId('secret').textContent()) ?? ''
    expect(secret.length).toBeGreaterThan(16)
    await page.getByRole('button', { name: 'I have copied it' }).click()
    await page.getByRole('cell', { name: 'ci', exact: true }).waitFor()
    expect(await page.locator('main').textContent()).not.toContain(secret)
    await page.getByRole('button', { name: 'Regenerate secret of ci' }).click()
    const next = (await page.getByTestId('secret').textContent()) ?? ''
    expect(next.length).toBeGreaterThan(16)
    expect(next).not.toBe(secret)
    await page.getByRole('button', { name: 'I have copied it' }).click()
    page.once('dialog', (d) => d.accept())
    await page.getByRole('button', { name: 'Delete application ci' }).click()
    await page.getByRole('cell', { name: 'ci', exact: true }).waitFor({ state: 'detached' })
  })

  it('creates a researcher of team-a in Access', async () => {
    await nav('Access')
    const form = page.getByRole('form', { name: 'Create a user' })
    await form.getByLabel('User id').fill('alice')
    await form.getByLabel('Email').fill('alice@example.com')
    await form.getByRole('button', { name: 'Create user' }).click()
    alicePassword = (await page.getByTestId('secret').textContent()) ?? ''
    expect(alicePassword.length).toBeGreaterThan(8)
    await check('12-access-user-created')
    await page.getByRole('button', { name: 'I have copied it' }).click()
    const rule = page.getByRole('form', { name: 'Create an access rule' })
    await rule.getByLabel('Subject', { exact: true }).fill('alice')
    await rule.getByLabel('Role').selectOption('l1-researcher')
    await rule.getByRole('combobox', { name: /^Scope/ }).selectOption({ label: 'Project team-a' })
    await rule.getByRole('button', { name: 'Create access rule' }).click()
    await page.getByRole('cell', { name: 'user:alice', exact: true }).waitFor()
    await check('13-access')
  })

  it("blocks a submit over a policy's max rule with the server's message", async () => {
    await nav('Policies and assets')
    await page.getByText('No policy set at this scope for this type.').waitFor()
    await page.getByLabel('Defaults and rules (JSON, the REST form)').fill(
      JSON.stringify({ defaults: { image: 'runai.jfrog.io/demo/defaulted' }, rules: { 'gpu.devices': { max: 1 } } }),
    )
    await page.getByRole('button', { name: 'Save policy' }).click()
    await page.getByText('Policy saved.').waitFor()
    await page.getByText('gpu.devices: max 1').waitFor()
    // The form fills the effective policy's default and shows its rule.
    await nav('New workload')
    await page.getByLabel('Project').selectOption('team-a')
    await expect.poll(() => page.getByLabel('Image').inputValue(), { timeout: 10_000 }).toBe('runai.jfrog.io/demo/defaulted')
    await page.locator('.rule', { hasText: 'max 1' }).waitFor()
    await page.getByLabel('GPUs per pod').fill('2')
    await page.getByText('at most 1', { exact: true }).waitFor() // the early answer, while typing
    await submitWorkload('a3', 'team-a', '2')
    // The server's answer, next to the field and in its words.
    const alert = page.getByRole('alert')
    await alert.waitFor()
    await expect(alert.textContent()).resolves.toMatch(/Check “GPUs per pod”/)
    await page.locator('.problem', { hasText: /must be at most 1/ }).waitFor()
    await check('14-new-workload-policy-blocked')
    await nav('Workloads')
    await page.getByRole('cell', { name: 'a1', exact: true }).waitFor()
    expect(await page.locator('tbody tr td:first-child').allTextContents()).not.toContain('a3')
  })

  it('submits a workspace from an environment and a compute resource', async () => {
    await nav('New workload')
    await page.getByLabel('Project').selectOption('team-b')
    await page.getByLabel('Workspace').check()
    await page.getByLabel('Name').fill('ws1')
    await page.getByLabel('From an environment and a compute resource').check()
    await page.getByRole('combobox', { name: 'Environment' }).selectOption('quick-start')
    await page.getByRole('combobox', { name: 'Compute resource' }).selectOption('one-gpu')
    await check('14b-new-workload-from-assets')
    await page.getByRole('button', { name: 'Submit' }).click()
    await page.getByRole('heading', { name: /Workload ws1/ }).waitFor()
    const facts = page.locator('dl.facts')
    await facts.getByText('Workspace', { exact: true }).waitFor()
    await facts.getByText('runai.jfrog.io/demo/quickstart', { exact: true }).waitFor()
    await expect(facts.locator('dt:has-text("GPU per pod") + dd').textContent()).resolves.toBe('1')
    page.once('dialog', (d) => d.accept())
    await page.getByRole('group', { name: 'Workload actions' }).getByRole('button', { name: 'Delete' }).click()
    await page.getByRole('heading', { name: 'Workloads' }).waitFor()
  })

  it('creates a template and submits a training from it, with labels and a time to live', async () => {
    await nav('Policies and assets')
    const form = page.getByRole('form', { name: 'Create a template' })
    await form.getByLabel('Template id').fill('qs-train')
    await form.getByLabel('Template type').selectOption('training')
    await form.getByLabel('Template environment').selectOption('quick-start')
    await form.getByLabel('Template compute resource').selectOption('one-gpu')
    await form.getByRole('button', { name: 'Create template' }).click()
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'qs-train', exact: true }) })
    await row.getByRole('cell', { name: 'quick-start', exact: true }).waitFor()
    await check('10b-templates')
    await nav('New workload')
    await page.getByLabel('Project').selectOption('team-b')
    await page.getByLabel('Training').check()
    await page.getByLabel('Name').fill('from-tmpl')
    await page.getByLabel('From a template').check()
    await page.getByRole('combobox', { name: 'Template' }).selectOption('qs-train')
    await page.getByLabel('Labels').fill('team=vision, stage=test')
    await page.getByLabel('Delete after it finishes (hours)').fill('24')
    await page.getByRole('button', { name: 'Submit' }).click()
    await page.getByRole('heading', { name: /Workload from-tmpl/ }).waitFor()
    const facts = page.locator('dl.facts')
    await facts.getByText('runai.jfrog.io/demo/quickstart', { exact: true }).waitFor()
    await facts.getByText('stage=test, team=vision', { exact: true }).waitFor()
    await facts.getByText('24 h after it finishes', { exact: true }).waitFor()
    await expect(facts.locator('dt:has-text("GPU per pod") + dd').textContent()).resolves.toBe('1')
    page.once('dialog', (d) => d.accept())
    await page.getByRole('group', { name: 'Workload actions' }).getByRole('button', { name: 'Delete' }).click()
    await page.getByRole('heading', { name: 'Workloads' }).waitFor()
  })

  it('creates a report, downloads its CSV and deletes it', async () => {
    await nav('Reports')
    const form = page.getByRole('form', { name: 'Create a report' })
    await form.getByLabel('Report name').fill('GPU hours')
    await form.getByLabel('Report id').fill('gpu-hours')
    await form.getByLabel('Description').fill('The quick start, per project')
    await form.getByLabel('Only').selectOption({ label: 'Department default' })
    await form.getByLabel('One row per').selectOption({ label: 'Project and node pool' })
    await form.getByRole('button', { name: 'Create report' }).click()
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'GPU hours', exact: true }) })
    await row.getByRole('cell', { name: 'Ready', exact: true }).waitFor({ timeout: 60_000 })
    await expect(row.getByRole('cell').nth(3).textContent()).resolves.toBe('departments/default')
    await check('18-reports')
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download report gpu-hours' }).click()])
    expect(download.suggestedFilename()).toBe('gpu-hours.csv')
    const rows = parseCsv(readText((await download.path())!))
    expect(rows[0]).toEqual(['segment', 'node_pool', 'gpu_hours_allocated', 'gpu_hours_used', 'cpu_core_hours', 'memory_gib_hours', 'workloads'])
    const teams = rows.slice(1).map((r) => r[0]).sort()
    expect(teams).toEqual(['team-a', 'team-b'])
    for (const r of rows.slice(1)) expect(Number(r[2])).toBeGreaterThan(0)
    // A window that ends before it starts is the server's to refuse.
    await form.getByLabel('Report name').fill('backwards')
    await form.getByLabel('Start').fill('2026-01-02T00:00')
    await form.getByLabel('End').fill('2026-01-01T00:00')
    await form.getByRole('button', { name: 'Create report' }).click()
    await form.getByRole('alert').waitFor()
    await expect(form.getByRole('alert').textContent()).resolves.toMatch(/end_time|after/i)
    page.once('dialog', (d) => d.accept())
    await page.getByRole('button', { name: 'Delete report gpu-hours' }).click()
    await row.waitFor({ state: 'detached' })
  })

  it('shows a researcher of team-a nothing of team-b', async () => {
    await ctx.close()
    await newPage()
    await page.goto(dev.url + '/')
    await page.getByLabel('User or email').waitFor()
    // By keyboard only: Tab to each field, Enter to send.
    await page.keyboard.press('Tab')
    await page.keyboard.type('alice@example.com')
    await page.keyboard.press('Tab')
    await page.keyboard.type(alicePassword)
    await page.keyboard.press('Enter')
    await page.getByLabel('New password', { exact: true }).waitFor()
    await check('02-change-password-alice')
    await page.getByLabel('New password', { exact: true }).fill(NEW_ALICE_PASSWORD)
    await page.getByLabel('Confirm new password').fill(NEW_ALICE_PASSWORD)
    await page.keyboard.press('Enter')
    await page.getByText('Signed in as').waitFor()
    await nav('Workloads')
    await page.getByRole('cell', { name: 'a1', exact: true }).waitFor()
    const names = await page.locator('tbody tr td:first-child').allTextContents()
    expect(names.sort()).toEqual(['a1', 'a2', 'hello'])
    expect(await page.locator('main').textContent()).not.toContain('team-b')
    await check('15-workloads-researcher')
    await nav('Projects')
    await page.getByRole('cell', { name: 'team-a', exact: true }).first().waitFor()
    expect(await page.locator('main').textContent()).not.toContain('team-b')
    await check('16-projects-researcher')
    await nav('Overview')
    await page.getByRole('heading', { name: 'Overview' }).waitFor()
    expect(await page.locator('main').textContent()).not.toContain('team-b')
    await nav('Nodes')
    await page.getByRole('list', { name: 'GPUs of node-1' }).waitFor()
    // The server hides the workloads of projects she may not view.
    expect(await page.locator('main').textContent()).not.toContain('team-b')
    await check('17-nodes-researcher')
  })

  it('shows a GPU shared by two half-GPU workloads, and a holder she may not view as plain text', async () => {
    // a2 goes (by the REST API, as the administrator): a1 runs again on one
    // of its GPUs and one GPU is left for the halves to share.
    const del = await (await adminRest())('DELETE', '/v1/projects/team-a/workloads/a2')
    expect(del.status).toBe(200)
    await nav('Workloads')
    const a1 = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'a1', exact: true }) })
    await a1.getByRole('cell', { name: 'Running', exact: true }).waitFor({ timeout: 60_000 })
    for (const name of ['half-1', 'half-2']) {
      await submitWorkload(name, 'team-a', '0.5')
      await page.getByRole('heading', { name: new RegExp(`Workload ${name}`) }).waitFor()
      await waitStatus('Running')
    }
    await nav('Nodes')
    const shared = page.locator('li.gpu-shared')
    await shared.getByRole('link', { name: 'team-a/half-2' }).waitFor()
    await expect(shared.count()).resolves.toBe(1)
    await expect(shared.textContent()).resolves.toMatch(/team-a\/half-1 pod 0 \(50%\).*team-a\/half-2 pod 0 \(50%\)/)
    await expect(shared.getByRole('img').getAttribute('aria-label')).resolves.toBe('100% held')
    // team-b's two GPUs: their holders are hidden from her, and not links.
    // The map fills in as the nodes' holders arrive: wait for both.
    await expect.poll(() => page.locator('.hidden-holder').count(), { timeout: 15_000 }).toBe(2)
    await expect(page.getByRole('link', { name: /^-\/-$|a workload you may not view/ }).count()).resolves.toBe(0)
    await check('19-nodes-shared-gpu')
  })

  it('signs in with single sign-on: the code flow with PKCE at the provider, the token in memory only', async () => {
    await ctx.close()
    await newPage()
    await page.goto(dev.url + '/')
    const [popup] = await Promise.all([page.waitForEvent('popup'), page.getByRole('button', { name: 'Sign in with single sign-on' }).click()])
    await popup.getByLabel('Email').fill('sam@example.com')
    const auth = new URL(popup.url())
    expect(auth.origin).toBe(provider.url)
    expect(auth.searchParams.get('code_challenge_method')).toBe('S256')
    expect(auth.searchParams.get('redirect_uri')).toBe(dev.url + '/sso/callback')
    await popup.getByRole('button', { name: 'Continue' }).click()
    // Signed in, or the sign-in page says why not.
    await page.getByText('Signed in as').or(page.locator('.login [role=alert]')).first().waitFor()
    expect(await page.locator('.login [role=alert]').allTextContents()).toEqual([])
    await expect(page.locator('.who strong').textContent()).resolves.toMatch(/^sam-example-com-[0-9a-f]+$/)
    expect(provider.redeemed()).toBe(1)
    const stored = await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie])
    expect(stored).toEqual([0, 0, ''])
    // The new SSO user holds no access rule yet: signed in, seeing nothing.
    await nav('Workloads')
    await page.getByText('Nothing to show.').or(page.getByRole('alert')).first().waitFor()
    await check('20-signed-in-sso')
    // Signed out (the sign-in ended on the server too), the sign-in page
    // offers both ways again.
    const logout = page.waitForResponse((r) => r.url().endsWith('/v1/auth:logout'))
    await page.getByRole('button', { name: 'Sign out' }).click()
    expect((await logout).status()).toBe(200)
    await page.getByRole('button', { name: 'Sign in with single sign-on' }).waitFor()
    await check('01b-sign-in-sso')
    // Back in, to look at every view as this user.
    const [again] = await Promise.all([page.waitForEvent('popup'), page.getByRole('button', { name: 'Sign in with single sign-on' }).click()])
    await again.getByLabel('Email').fill('sam@example.com')
    await again.getByRole('button', { name: 'Continue' }).click()
    await page.getByText('Signed in as').waitFor()
    expect(provider.redeemed()).toBe(2)
  })

  it("fits a laptop's width: no view scrolls sideways at 1280 px", async () => {
    await page.setViewportSize({ width: 1280, height: 720 })
    const wide: string[] = []
    for (const label of ['Overview', 'Workloads', 'New workload', 'Projects', 'Nodes', 'Access', 'Policies and assets', 'Event history', 'Reports']) {
      await nav(label)
      await page.locator('main h1').first().waitFor()
      await page.waitForTimeout(300)
      const [scroll, inner] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth])
      if (scroll > inner) wide.push(`${label}: ${scroll}px wide`)
    }
    expect(wide).toEqual([])
  })

  it('has no serious accessibility violations and no CSP refusals in any view', () => {
    expect(a11y).toEqual([])
    expect(cspErrors).toEqual([])
  })
})
