import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import { launch, nav as navTo, rest, shot, signIn, startDev, stopDev, type Dev } from './harness'

// A researcher's and an administrator's work done in the browser alone,
// each checked through the REST API: every field of a submit, errors next
// to the field, one row per project, the credentials, and every view at a
// laptop's and a phone's width.
let dev: Dev
let browser: Browser
let page: Page
let admin: ReturnType<typeof rest>
const a11y: string[] = []
const RITA_PASSWORD = 'rita-password-e2e-1'
const ADMIN_PASSWORD = 'admin-password-e2e-2'
const VIEWS = ['Overview', 'Workloads', 'New workload', 'Projects', 'Nodes', 'Access', 'Policies and assets', 'Event history', 'Reports', 'Notifications', 'Settings']

const check = async (name: string) => a11y.push(...(await shot(page, name)))
const nav = (label: string) => navTo(page, label)
const waitStatus = (status: string) => page.locator('dd.phase', { hasText: status }).waitFor({ timeout: 60_000 })
async function json<T>(res: Promise<Response>): Promise<T> {
  const r = await res
  const body = await r.json()
  if (!r.ok) throw new Error(`${r.status}: ${JSON.stringify(body)}`)
  return body as T
}

describe('workflows in the web UI', () => {
  beforeAll(async () => {
    ;[dev, browser] = await Promise.all([startDev(), launch()])
    admin = rest(dev.url, dev.adminToken)
    // team-r and rita, its researcher, by the REST API.
    await json(admin('POST', '/v1/projects?projectId=team-r', { nodePoolQuotas: [{ nodePool: 'nodepools/default', gpu: { deservedMilliGpus: '2000' } }] }))
    const rita = await json<{ temporaryPassword: string }>(admin('POST', '/v1/users?userId=rita', { email: 'rita@example.com' }))
    await json(admin('POST', '/v1/accessRules', {
      subject: { kind: 'SUBJECT_KIND_USER', name: 'users/rita' }, role: 'roles/l1-researcher', scope: { kind: 'SCOPE_KIND_PROJECT', name: 'projects/team-r' },
    }))
    page = await (await browser.newContext({ viewport: { width: 1366, height: 800 } })).newPage()
    await page.goto(dev.url + '/')
    await signIn(page, 'rita', rita.temporaryPassword, RITA_PASSWORD)
  })
  afterAll(async () => {
    await browser?.close()
    await stopDev(dev)
  })

  it("starts quietly: runway dev prints its own lines, none of the embedded TSDB's INFO lines", () => {
    expect(dev.log()).toMatch(/runway dev: ready/)
    expect(dev.log()).not.toMatch(/component=(tsdb|promql)/)
  })

  it('submits a training with CPU, memory, a priority and a quoted shell line; the API has each as typed', async () => {
    await nav('New workload')
    await page.getByLabel('Project').selectOption('team-r')
    await page.getByLabel('Name', { exact: true }).fill('r1')
    await page.getByLabel('Image').fill('runai.jfrog.io/demo/quickstart')
    const line = `echo "two   spaces" 'it'"'"'s' | tr a-z A-Z`
    await page.getByLabel('Shell line').fill(line)
    // What will run, exactly: the line whole, after sh -c.
    await expect(page.getByTestId('runs').textContent()).resolves.toBe(`sh -c '${line.replace(/'/g, `'\\''`)}'`)
    await page.getByLabel('CPU per pod (cores)').fill('0.5')
    await page.getByLabel('Memory per pod').fill('256Mi')
    await page.getByLabel(/^Priority/).selectOption('interactive-preemptible')
    await page.getByText("interactive-preemptible (75): allow the workload to exceed the project's quota; it may be preempted").waitFor()
    const pools = page.getByRole('group', { name: 'Node pools, in order of preference' })
    await pools.getByLabel('Add a node pool').selectOption('default')
    await pools.getByRole('button', { name: 'Add' }).click()
    await pools.getByRole('list').getByText('default').waitFor()
    await check('21-new-workload-full')
    await page.getByRole('button', { name: 'Submit' }).click()
    await page.getByRole('heading', { name: /Workload r1/ }).waitFor()
    const w = await json<{ spec: Record<string, unknown> }>(admin('GET', '/v1/projects/team-r/workloads/r1'))
    expect(w.spec.command).toEqual(['sh', '-c', line])
    expect(w.spec.args).toEqual([])
    expect(w.spec.milliCpu).toBe('500')
    expect(w.spec.memoryBytes).toBe(String(256 * 2 ** 20))
    expect(w.spec.priority).toBe('interactive-preemptible')
    expect(w.spec.nodePools).toEqual(['nodepools/default'])
    expect(w.spec.gpu).toBeNull()
    // The shell read the quotes: its output keeps the spaces.
    await waitStatus('Completed').catch(async (e) => {
      throw new Error(`${e}: ${JSON.stringify((await json<{ status: unknown }>(admin('GET', '/v1/projects/team-r/workloads/r1'))).status)}`)
    })
    const logs = page.getByRole('region', { name: 'Logs' })
    await logs.getByText("TWO   SPACES IT'S").waitFor()
    await expect(logs.locator('pre').textContent()).resolves.toBe("TWO   SPACES IT'S\n")
    const facts = page.locator('dl.facts')
    await expect(facts.locator('dt:has-text("CPU per pod") + dd').textContent()).resolves.toBe('0.5 cores')
    await expect(facts.locator('dt:has-text("Memory per pod") + dd').textContent()).resolves.toBe('256 MiB')
  })

  it('submits a command with its arguments as typed, never split on spaces, and workers with a GPU fraction', async () => {
    await nav('New workload')
    await page.getByLabel('Name', { exact: true }).fill('r2')
    await page.getByLabel('Image').fill('runai.jfrog.io/demo/quickstart')
    await page.getByLabel('As typed: a program and its arguments').check()
    await page.getByLabel('Command', { exact: true }).fill('printf')
    await page.getByLabel('Arguments, one per line').fill('%s|\na b  c\n"quoted"')
    await page.getByTestId('runs').getByText(`printf '%s|' 'a b  c' '"quoted"'`).waitFor()
    await page.getByLabel('GPU as').selectOption({ label: 'A fraction of one GPU' })
    await page.getByLabel('Fraction of one GPU per pod').fill('0.25')
    await page.getByLabel('Workers (pods)').fill('2')
    await page.getByLabel('Minimum pods started together').fill('1')
    await page.getByLabel('Environment variables').fill('GREETING=hello world\nEMPTY=')
    await page.getByRole('button', { name: 'Submit' }).click()
    await page.getByRole('heading', { name: /Workload r2/ }).waitFor()
    const w = await json<{ spec: Record<string, unknown> }>(admin('GET', '/v1/projects/team-r/workloads/r2'))
    expect(w.spec.command).toEqual(['printf'])
    expect(w.spec.args).toEqual(['%s|', 'a b  c', '"quoted"'])
    expect(w.spec.gpu).toEqual({ fractionMilli: 250 })
    expect([w.spec.pods, w.spec.minPods]).toEqual([2, 1])
    expect(w.spec.env).toEqual([{ name: 'GREETING', value: 'hello world', credential: null }, { name: 'EMPTY', value: '', credential: null }])
    expect(w.spec.priority).toBe('train')
  })

  it("puts the server's refusal next to the field, in the form's words", async () => {
    await nav('New workload')
    await page.getByLabel('Name', { exact: true }).fill('r3')
    await page.getByLabel('Image').fill('x')
    await page.getByLabel('Node type').fill('not a label!')
    // Unreadable input is caught before it is sent.
    await page.getByLabel('Memory per pod').fill('lots')
    await page.getByRole('button', { name: 'Submit' }).click()
    await expect(page.getByRole('alert').textContent()).resolves.toBe('Check “Memory per pod”: each says what to fix.')
    await expect(page.getByLabel('Memory per pod').getAttribute('aria-invalid')).resolves.toBe('true')
    await page.getByLabel('Memory per pod').fill('1Gi')
    await page.getByRole('button', { name: 'Submit' }).click()
    await expect(page.getByRole('alert').textContent()).resolves.toBe('Check “Node type”: each says what to fix.')
    const nodeType = page.getByLabel('Node type')
    await expect(nodeType.getAttribute('aria-invalid')).resolves.toBe('true')
    const described = await nodeType.evaluate((el) => (el.getAttribute('aria-describedby') ?? '').split(' ').map((i) => document.getElementById(i)?.textContent).join(' '))
    expect(described).toMatch(/must be a label value/)
    expect(await page.locator('main').textContent()).not.toMatch(/workload\.spec|node_type|HTTP \d/)
    await check('22-new-workload-field-error')
  })

  it('says a pending workload has no pod running yet in its logs', async () => {
    // 8 cores fit on no node (2 cores each): it waits.
    await json(admin('POST', '/v1/projects/team-r/workloads?workloadId=big', { type: 'WORKLOAD_TYPE_TRAINING', spec: { image: 'x', milliCpu: '8000', command: ['sleep', '60'] } }))
    await page.goto(dev.url + '/workloads/team-r/big')
    await signIn(page, 'rita', RITA_PASSWORD)
    await waitStatus('Pending')
    await page.getByRole('region', { name: 'Logs' }).getByText('No pod is running yet: the workload is pending.').waitFor()
    // It can never fit, said first and in plain words: the CPU it lacks and
    // the largest node's total and free CPU, memory and GPUs.
    const nodes = (await json<{ nodes: { name: string; capacity: { milliCpu: string } }[] }>(admin('GET', '/v1/nodes'))).nodes
    const note = page.getByRole('note')
    await note.getByText(/^It can never fit in node pool default: a pod needs 8 cores of CPU, more than any node has; the largest node, node-\d, has .* cores, .* GiB of memory and 2 GPUs in all \(.* free\)\.$/).waitFor({ timeout: 30_000 })
    expect(await note.textContent()).toContain(`has ${Number(nodes[0].capacity.milliCpu) / 1000} cores`)
    const reasons = page.getByRole('table', { name: 'Why it waits' })
    await expect(reasons.textContent()).resolves.toMatch(/needs 8 cores on one node; the most free on one node is/)
    // The Nodes page shows each node's CPU and memory, allocated and total.
    await nav('Nodes')
    await page.getByRole('heading', { name: new RegExp(`^node-1 .* GPUs, [\\d.]+ of ${Number(nodes.find((n) => n.name === 'nodes/node-1')!.capacity.milliCpu) / 1000} cores, .* of .* memory allocated$`) }).waitFor()
    await page.goBack()
    await waitStatus('Pending')
    expect(await page.locator('main').textContent()).not.toMatch(/HTTP \d|WORKLOAD_NO_LOGS/)
    await check('23-workload-pending-logs')
  })

  it('shows each project in one row with its quotas per pool; Delete on a pool quota keeps the project; forms cancel', async () => {
    await json(admin('POST', '/v1/nodepools?nodePoolId=a100', { nodeSelector: { gpu: 'a100' } }))
    await page.context().close()
    page = await (await browser.newContext({ viewport: { width: 1366, height: 800 } })).newPage()
    await page.goto(dev.url + '/projects')
    await signIn(page, 'admin', dev.adminPassword, ADMIN_PASSWORD)
    // The new password ends the sign-ins before it, the dev token's too.
    const login = await json<{ accessToken: string }>(fetch(dev.url + '/v1/auth:login', { method: 'POST', body: JSON.stringify({ password: { user: 'admin', password: ADMIN_PASSWORD } }) }))
    admin = rest(dev.url, login.accessToken)
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'team-r', exact: true }) })
    await row.waitFor()
    // A second pool's quota, from the pool picker.
    await page.getByRole('button', { name: 'Edit project team-r' }).click()
    const edit = page.getByRole('form', { name: 'Edit team-r' })
    await expect(edit.getByLabel('Node pool').locator('option').allTextContents()).resolves.toEqual(['a100 (no quota yet)', 'default'])
    await edit.getByLabel('Node pool').selectOption('a100')
    await edit.getByLabel('GPU quota').fill('1')
    await edit.getByRole('button', { name: 'Save' }).click()
    const quotas = row.getByRole('list', { name: 'Quotas of project team-r per node pool' })
    await quotas.getByText(/^a100: quota 1\.00/).waitFor()
    await quotas.getByText(/^default: quota 2\.00/).waitFor()
    await expect(page.getByRole('row').filter({ hasText: 'team-r' }).count()).resolves.toBe(1)
    await expect(row.getByRole('cell').nth(3).textContent()).resolves.toBe('3.00')
    await check('24-projects-pool-quotas')
    // The server's refusal in the form's words: a limit below the quota.
    await page.getByRole('button', { name: 'Edit project team-r' }).click()
    const bad = page.getByRole('form', { name: 'Edit team-r' })
    await bad.getByLabel('Node pool').selectOption('default')
    await bad.getByLabel('GPU limit').fill('0.5')
    await bad.getByRole('button', { name: 'Save' }).click()
    await expect(bad.getByRole('alert').textContent()).resolves.toMatch(/^“GPU limit”: must be .*at least “GPU quota”/)
    await bad.getByRole('button', { name: 'Cancel' }).click()
    await bad.waitFor({ state: 'detached' })
    page.once('dialog', (d) => d.accept())
    await quotas.getByRole('button', { name: 'Delete quota of project team-r in node pool a100' }).click()
    await quotas.getByText(/^a100:/).waitFor({ state: 'detached' })
    const p = await json<{ nodePoolQuotas: { nodePool: string; gpu: { deservedMilliGpus: string } }[] }>(admin('GET', '/v1/projects/team-r'))
    expect(p.nodePoolQuotas.map((q) => [q.nodePool, q.gpu.deservedMilliGpus])).toEqual([['nodepools/default', '2000']])
    // Each form that opens closes with Cancel, nothing sent.
    await page.getByRole('button', { name: 'New project or department' }).click()
    const create = page.getByRole('form', { name: 'Create a project or department' })
    await create.getByRole('button', { name: 'Cancel' }).click()
    await create.waitFor({ state: 'detached' })
    await page.getByRole('button', { name: 'Scheduling rules of project team-r' }).click()
    await page.getByRole('form', { name: 'Scheduling rules of team-r' }).getByRole('button', { name: 'Cancel' }).click()
    await page.getByRole('form', { name: 'Scheduling rules of team-r' }).waitFor({ state: 'detached' })
    await nav('Nodes')
    await page.getByRole('button', { name: 'New node pool' }).click()
    await page.getByRole('form', { name: 'Create a node pool' }).getByRole('button', { name: 'Cancel' }).click()
    await page.getByRole('form', { name: 'Create a node pool' }).waitFor({ state: 'detached' })
  })

  it("tells idle (allocated, unused) from unallocated on the overview, as the API's numbers say", async () => {
    // One GPU held by a sleeping pod: allocated; idle once the agents have
    // seen a window of zero use.
    await json(admin('POST', '/v1/projects/team-r/workloads?workloadId=g1', { type: 'WORKLOAD_TYPE_TRAINING', spec: { image: 'x', gpu: { devices: 1 }, command: ['sleep', '600'] } }))
    await nav('Overview')
    const pools = page.getByRole('table', { name: 'GPU allocation by node pool, now' })
    await pools.locator('tbody tr').first().waitFor()
    await expect(pools.locator('thead th').allTextContents()).resolves.toEqual(
      ['Node pool', 'Nodes', 'GPUs', 'Allocated', 'Idle (allocated, unused)', 'Unallocated', 'Free devices', 'Running workloads'])
    const fromApi = async () => {
      const nodes = (await json<{ nodes: { nodePool: string; capacity: { milliGpus: string }; allocated: { milliGpus: string } }[] }>(admin('GET', '/v1/nodes'))).nodes
        .filter((n) => n.nodePool === 'nodepools/default')
      const ws = (await json<{ workloads: { status: { phase: string; nodePool: string; gpuIdleTime: string | null; allocatedMilliGpus: string } }[] }>(admin('GET', '/v1/projects/-/workloads'))).workloads
      const cap = nodes.reduce((a, n) => a + Number(n.capacity.milliGpus), 0)
      const alloc = nodes.reduce((a, n) => a + Number(n.allocated.milliGpus), 0)
      const idle = ws.filter((w) => w.status.phase === 'WORKLOAD_PHASE_RUNNING' && w.status.nodePool === 'nodepools/default' && parseFloat(w.status.gpuIdleTime ?? '0') > 0)
        .reduce((a, w) => a + Number(w.status.allocatedMilliGpus), 0)
      return [(alloc / 1000).toFixed(2), (idle / 1000).toFixed(2), ((cap - alloc) / 1000).toFixed(2)]
    }
    const shown = async () => {
      const cells = await pools.locator('tbody tr').filter({ hasText: 'default' }).first().locator('td').allTextContents()
      return [cells[3], cells[4], cells[5]]
    }
    await expect.poll(async () => (await shown())[0], { timeout: 30_000 }).toBe('1.00')
    // The page re-reads every 3 s: the same numbers as the API's, read
    // between two of its reads.
    await expect.poll(async () => JSON.stringify(await shown()) === JSON.stringify(await fromApi()), { timeout: 15_000 }).toBe(true)
    expect((await shown())[2]).toBe('3.00')
    await check('25-overview-idle-unallocated')
  })

  it('creates credentials whose values are never shown again, lists them in a table and deletes them', async () => {
    await nav('Policies and assets')
    await page.getByRole('navigation', { name: 'Policies and assets' }).getByRole('link', { name: 'Credentials' }).click()
    const form = page.getByRole('form', { name: 'Create a credential' })
    await form.getByLabel('Scope').selectOption({ label: 'Project team-r' })
    await form.getByLabel('Credential id').fill('hf')
    await form.getByLabel('Key 1').fill('HF_TOKEN')
    const SECRET = 'hf_very-secret-value-4711'
    await form.getByLabel('Value 1').fill(SECRET)
    await expect(form.getByLabel('Value 1').getAttribute('type')).resolves.toBe('password')
    await form.getByRole('button', { name: 'Create credential' }).click()
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'hf', exact: true }) })
    await row.getByRole('cell', { name: 'HF_TOKEN', exact: true }).waitFor()
    await expect(row.getByRole('cell').nth(1).textContent()).resolves.toBe('projects/team-r')
    await page.getByRole('status').getByText(/not shown again/).waitFor()
    // Nowhere in the page: not its text, not a field's value, not its HTML.
    const inPage = await page.evaluate((s) => [document.body.innerText.includes(s), document.documentElement.outerHTML.includes(s),
      [...document.querySelectorAll('input, textarea')].some((e) => (e as HTMLInputElement).value.includes(s))], SECRET)
    expect(inPage).toEqual([false, false, false])
    const got = await json<{ values: Record<string, string>; keys: string[] }>(admin('GET', '/v1/projects/team-r/credentials/hf'))
    expect([got.values, got.keys]).toEqual([{}, ['HF_TOKEN']])
    // A registry credential: its server and user name by label, the
    // server's refusal next to the field it names.
    await form.getByLabel('Credential id').fill('reg')
    await form.getByLabel('Credential type').selectOption({ label: 'Container registry' })
    await form.getByLabel('User name').fill('robot')
    await form.getByRole('button', { name: 'Create credential' }).click()
    await expect(form.getByRole('alert').textContent()).resolves.toMatch(/Check “Password”, “Registry server”/)
    await form.getByLabel('Registry server').fill('registry.example.com:5000')
    await form.getByLabel('Password', { exact: true }).fill('pw-never-shown-8812')
    await form.getByRole('button', { name: 'Create credential' }).click()
    const reg = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'reg', exact: true }) })
    await reg.getByRole('cell', { name: 'registry.example.com:5000', exact: true }).waitFor()
    expect(await page.evaluate(() => document.documentElement.outerHTML.includes('pw-never-shown-8812'))).toBe(false)
    await check('27-credentials')
    // Search and CSV as every table.
    await page.getByRole('group', { name: 'Credentials controls' }).getByLabel('Search').fill('registry')
    await expect(page.getByRole('table', { name: /^Credentials/ }).locator('tbody tr').count()).resolves.toBe(1)
    await page.getByRole('group', { name: 'Credentials controls' }).getByLabel('Search').fill('')
    page.once('dialog', (d) => d.accept())
    await page.getByRole('button', { name: 'Delete credential reg of projects/team-r' }).click()
    await reg.waitFor({ state: 'detached' })
    expect((await admin('GET', '/v1/projects/team-r/credentials/reg')).status).toBe(404)
  })

  it('creates a compute resource with CPU and memory', async () => {
    await nav('Policies and assets')
    const cr = page.getByRole('form', { name: 'Create a compute resource' })
    await cr.getByLabel('Compute resource id').fill('cpu-box')
    await cr.getByLabel('CPU per pod (cores)').fill('4')
    await cr.getByLabel('Memory per pod').fill('16Gi')
    await cr.getByRole('button', { name: 'Create compute resource' }).click()
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'cpu-box', exact: true }) })
    await row.getByRole('cell', { name: '16 GiB', exact: true }).waitFor()
    const got = await json<{ milliCpu: string; memoryBytes: string }>(admin('GET', '/v1/computeResources/cpu-box'))
    expect([got.milliCpu, got.memoryBytes]).toEqual(['4000', String(16 * 2 ** 30)])
  })

  it('gives every form a Cancel', async () => {
    const missing: string[] = []
    for (const label of [...VIEWS, 'Credentials']) {
      await nav(label === 'Credentials' ? 'Policies and assets' : label)
      if (label === 'Credentials') await page.getByRole('navigation', { name: 'Policies and assets' }).getByRole('link', { name: 'Credentials' }).click()
      await page.locator('main h1').first().waitFor()
      await page.waitForTimeout(300)
      for (const f of await page.locator('main form').all()) {
        if ((await f.getByRole('button', { name: 'Cancel', exact: true }).count()) !== 1) missing.push(`${label}: ${await f.getAttribute('aria-label')}`)
      }
    }
    expect(missing).toEqual([])
  })

  it('fits a phone and a laptop: no view scrolls sideways at 420 or 1280 px, and the header does not overlap', async () => {
    const wide: string[] = []
    for (const width of [420, 1280]) {
      await page.setViewportSize({ width, height: 800 })
      for (const label of VIEWS) {
        await nav(label)
        await page.locator('main h1').first().waitFor()
        await page.waitForTimeout(400)
        const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth])
        if (scroll > client) wide.push(`${label} at ${width}px: ${scroll}px wide`)
        const overlaps = await page.evaluate(() => {
          const parts = [...document.querySelectorAll('header.top .brand, header.top nav li, header.top .who')].map((e) => e.getBoundingClientRect())
          let n = 0
          for (let i = 0; i < parts.length; i++)
            for (let j = i + 1; j < parts.length; j++) {
              const [a, b] = [parts[i], parts[j]]
              if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) n++
            }
          return n
        })
        if (overlaps) wide.push(`${label} at ${width}px: ${overlaps} header parts overlap`)
        if (width === 420) await check(`26-narrow-${label.toLowerCase().replace(/\W+/g, '-')}`)
      }
    }
    // The credentials page and a workload's page too.
    for (const width of [420, 1280]) {
      await page.setViewportSize({ width, height: 800 })
      await nav('Policies and assets')
      await page.getByRole('navigation', { name: 'Policies and assets' }).getByRole('link', { name: 'Credentials' }).click()
      await page.getByRole('heading', { name: 'Credentials', exact: true }).waitFor()
      const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth])
      if (scroll > client) wide.push(`Credentials at ${width}px: ${scroll}px wide`)
    }
    for (const width of [420, 1280]) {
      await page.setViewportSize({ width, height: 800 })
      await page.goto(dev.url + '/workloads/team-r/r1')
      await signIn(page, 'admin', ADMIN_PASSWORD)
      await waitStatus('Completed')
      const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth])
      if (scroll > client) wide.push(`workload page at ${width}px: ${scroll}px wide`)
    }
    expect(wide).toEqual([])
  })

  it('has no serious accessibility violations', () => {
    expect(a11y).toEqual([])
  })
})
