import { useState } from 'react'
import { call, get, listAll } from '../api'
import { useAction, useLoad } from '../hooks'
import { DataTable, type Col } from '../table'
import { enumLabel, id, time } from '../format'
import { problemsOf, type Problems } from '../problems'
import type { Project } from '../types'
import { Field } from './Field'

interface Subscription {
  name: string; events?: string[]; project?: string; pendingThreshold?: string; idleThreshold?: string; overQuotaThresholdPercent?: number
  webhook?: { url?: string; slack?: boolean }; email?: { to?: string; smtpServer?: string; from?: string; tls?: string; credential?: string }
  createTime?: string
}
interface Delivery {
  name: string; notification?: { event?: string; resource?: string; message?: string; eventTime?: string }
  state?: string; attempts?: number; lastError?: string; nextAttemptTime?: string; sentTime?: string; createTime?: string
}

// EVENTS are what a subscription may name, and who may get each.
const EVENTS: [string, string][] = [
  ['WORKLOAD_FAILED', 'A workload failed'],
  ['WORKLOAD_PREEMPTED', 'A workload was preempted'],
  ['WORKLOAD_COMPLETED', 'A workload completed'],
  ['WORKLOAD_PENDING_TOO_LONG', 'A workload is pending too long'],
  ['WORKLOAD_IDLE_GPUS', "A workload's GPUs are idle too long"],
  ['NODE_LOST', 'A node is lost (administrators)'],
  ['GPU_UNHEALTHY', 'A GPU is unhealthy (administrators)'],
  ['PROJECT_OVER_QUOTA', 'A project is over its GPU quota'],
  ['DEPARTMENT_OVER_QUOTA', 'A department is over its GPU quota'],
]
const EVENT = 'NOTIFICATION_EVENT_'
const eventText = (e: string) => EVENTS.find(([k]) => EVENT + k === e)?.[1] ?? enumLabel(e, EVENT)
const minutes = (d?: string) => (d ? `${Math.round(parseFloat(d) / 60)} min` : '')

function channelText(s: Subscription): string {
  if (s.webhook) return `${s.webhook.slack ? 'Slack webhook' : 'Webhook'} ${s.webhook.url}`
  if (s.email) return `Email to ${s.email.to} via ${s.email.smtpServer}`
  return ''
}

const LABELS = {
  subscription_id: 'Subscription id', 'subscription.events': 'Events', 'subscription.project': 'Project',
  'subscription.pending_threshold': 'Pending longer than (minutes)', 'subscription.idle_threshold': 'GPUs idle longer than (minutes)',
  'subscription.over_quota_threshold_percent': 'Over quota by more than (%)', 'subscription.webhook.url': 'Webhook URL', 'subscription.webhook': 'Webhook URL',
  'subscription.email.to': 'Recipient', 'subscription.email.smtp_server': 'SMTP server', 'subscription.email.from': 'Sender',
  'subscription.email.credential': 'SMTP credential', 'subscription.email': 'Recipient',
}

function SubscribeForm({ projects, onDone }: { projects: string[]; onDone: () => void }) {
  const [sid, setSid] = useState('')
  const [events, setEvents] = useState<string[]>([])
  const [project, setProject] = useState('')
  const [pending, setPending] = useState('')
  const [idle, setIdle] = useState('')
  const [overPct, setOverPct] = useState('')
  const [channel, setChannel] = useState<'webhook' | 'email'>('webhook')
  const [url, setUrl] = useState('')
  const [slack, setSlack] = useState(false)
  const [email, setEmail] = useState({ to: '', smtpServer: '', from: '', tls: '', credential: '' })
  const [problems, setProblems] = useState<Problems>({ fields: {}, rest: '' })
  const reset = () => {
    setSid(''); setEvents([]); setProject(''); setPending(''); setIdle(''); setOverPct(''); setUrl(''); setSlack(false)
    setEmail({ to: '', smtpServer: '', from: '', tls: '', credential: '' }); setProblems({ fields: {}, rest: '' })
  }
  const has = (e: string) => events.includes(EVENT + e)
  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    if (!events.length) return setProblems({ fields: { Events: 'choose at least one' }, rest: 'Check “Events”: each says what to fix.' })
    const sub: Record<string, unknown> = { events }
    if (project) sub.project = project
    if (has('WORKLOAD_PENDING_TOO_LONG') && pending) sub.pendingThreshold = `${Math.round(Number(pending) * 60)}s`
    if (has('WORKLOAD_IDLE_GPUS') && idle) sub.idleThreshold = `${Math.round(Number(idle) * 60)}s`
    if (has('DEPARTMENT_OVER_QUOTA') && overPct) sub.overQuotaThresholdPercent = Number(overPct)
    if (channel === 'webhook') sub.webhook = { url, slack }
    else sub.email = Object.fromEntries(Object.entries(email).filter(([, v]) => v))
    try {
      await call('POST', `/v1/users/-/subscriptions${sid ? `?subscriptionId=${encodeURIComponent(sid)}` : ''}`, sub)
      reset()
      onDone()
    } catch (err) {
      setProblems(problemsOf(err, LABELS))
    }
  }
  const p = (l: string) => problems.fields[l] ?? ''
  const setE = (k: keyof typeof email) => (e: React.ChangeEvent<HTMLInputElement | HTMLSelectElement>) => setEmail({ ...email, [k]: e.target.value })
  return (
    <form className="form" aria-label="Subscribe to notifications" onSubmit={submit} autoComplete="off">
      <Field label="Subscription id" problem={p('Subscription id')} hint="Optional: one is made up when empty"><input value={sid} onChange={(e) => setSid(e.target.value)} /></Field>
      <fieldset aria-describedby={p('Events') ? 'events-problem' : undefined}>
        <legend>Events</legend>
        {EVENTS.map(([k, label]) => (
          <label key={k} className="check">
            <input type="checkbox" checked={has(k)} onChange={(e) => setEvents(e.target.checked ? [...events, EVENT + k] : events.filter((x) => x !== EVENT + k))} /> {label}
          </label>
        ))}
        {p('Events') && <span id="events-problem" className="problem">{p('Events')}</span>}
      </fieldset>
      <div className="inline">
        {has('WORKLOAD_PENDING_TOO_LONG') && (
          <Field label={LABELS['subscription.pending_threshold']} problem={p(LABELS['subscription.pending_threshold'])}>
            <input type="number" min={1} value={pending} onChange={(e) => setPending(e.target.value)} required />
          </Field>
        )}
        {has('WORKLOAD_IDLE_GPUS') && (
          <Field label={LABELS['subscription.idle_threshold']} problem={p(LABELS['subscription.idle_threshold'])}>
            <input type="number" min={1} value={idle} onChange={(e) => setIdle(e.target.value)} required />
          </Field>
        )}
        {has('DEPARTMENT_OVER_QUOTA') && (
          <Field label={LABELS['subscription.over_quota_threshold_percent']} problem={p(LABELS['subscription.over_quota_threshold_percent'])} hint="Empty or 0: any use over quota">
            <input type="number" min={0} max={1000} value={overPct} onChange={(e) => setOverPct(e.target.value)} />
          </Field>
        )}
        <Field label="Project" problem={p('Project')} hint="Empty: every project you may view">
          <select value={project} onChange={(e) => setProject(e.target.value)}>
            <option value="">(every project)</option>
            {projects.map((n) => <option key={n} value={n}>{id(n)}</option>)}
          </select>
        </Field>
      </div>
      <fieldset>
        <legend>Send to</legend>
        <label className="check"><input type="radio" name="channel" checked={channel === 'webhook'} onChange={() => setChannel('webhook')} /> A webhook</label>
        <label className="check"><input type="radio" name="channel" checked={channel === 'email'} onChange={() => setChannel('email')} /> Email</label>
        {channel === 'webhook' ? (
          <div className="inline">
            <Field label="Webhook URL" problem={p('Webhook URL')} hint="An http or https URL; it gets a JSON POST">
              <input type="url" value={url} onChange={(e) => setUrl(e.target.value)} required spellCheck={false} />
            </Field>
            <label className="check"><input type="checkbox" checked={slack} onChange={(e) => setSlack(e.target.checked)} /> Slack incoming webhook (sends {'{"text": …}'})</label>
          </div>
        ) : (
          <div className="inline">
            <Field label="Recipient" problem={p('Recipient')}><input type="email" value={email.to} onChange={setE('to')} required /></Field>
            <Field label="Sender" problem={p('Sender')}><input type="email" value={email.from} onChange={setE('from')} required /></Field>
            <Field label="SMTP server" problem={p('SMTP server')} hint="host:port"><input value={email.smtpServer} onChange={setE('smtpServer')} required /></Field>
            <Field label="Connection security">
              <select value={email.tls} onChange={setE('tls')}>
                <option value="">STARTTLS</option>
                <option value="SMTP_TLS_IMPLICIT">TLS from the start (SMTPS)</option>
                <option value="SMTP_TLS_NONE">None (test servers; no credential)</option>
              </select>
            </Field>
            <Field label="SMTP credential" problem={p('SMTP credential')} hint="Optional: a generic credential's full name holding username and password">
              <input value={email.credential} onChange={setE('credential')} placeholder="credentials/smtp" spellCheck={false} />
            </Field>
          </div>
        )}
      </fieldset>
      {problems.rest && <p role="alert" className="error">{problems.rest}</p>}
      <div className="actions">
        <button type="submit">Subscribe</button>
        <button type="button" className="secondary" onClick={reset}>Cancel</button>
      </div>
    </form>
  )
}

// Deliveries is one subscription's record of what was sent, newest first.
function Deliveries({ sub }: { sub: string }) {
  const { data, error } = useLoad((s) => get<{ deliveries?: Delivery[] }>(`/v1/${sub}/deliveries`, s).then((r) => r.deliveries ?? []), [sub], 5000)
  const cols: Col<Delivery>[] = [
    { id: 'time', header: 'Recorded', text: (d) => time(d.createTime) },
    { id: 'event', header: 'Event', text: (d) => eventText(d.notification?.event ?? ''), filter: true },
    { id: 'resource', header: 'About', text: (d) => d.notification?.resource ?? '' },
    { id: 'state', header: 'State', text: (d) => enumLabel(d.state, 'DELIVERY_STATE_'), filter: true },
    { id: 'attempts', header: 'Attempts', text: (d) => String(d.attempts ?? 0) },
    { id: 'error', header: 'Last error', text: (d) => d.lastError ?? '' },
    { id: 'next', header: 'Next attempt', text: (d) => time(d.nextAttemptTime), hidden: true },
    { id: 'message', header: 'Message', text: (d) => d.notification?.message ?? '', hidden: true },
  ]
  return (
    <>
      {error && <p role="alert" className="error">{error}</p>}
      {data && <DataTable label={`Deliveries of ${id(sub)}`} rows={data} cols={cols} rowKey={(d) => d.name} empty="Nothing sent yet." />}
    </>
  )
}

export function Notifications() {
  const { data, error, reload } = useLoad(async (s) => {
    const [subs, projects] = await Promise.all([
      get<{ subscriptions?: Subscription[] }>('/v1/users/-/subscriptions', s).then((r) => r.subscriptions ?? []),
      listAll<Project>('/v1/projects', 'projects', s).catch(() => [] as Project[]),
    ])
    return { subs, projects: projects.map((p) => p.name) }
  }, [])
  const { run, error: actionError } = useAction(reload)
  const [open, setOpen] = useState('')
  const cols: Col<Subscription>[] = [
    { id: 'name', header: 'Subscription', text: (s) => id(s.name) },
    { id: 'events', header: 'Events', text: (s) => (s.events ?? []).map(eventText).join(', ') },
    { id: 'project', header: 'Project', text: (s) => (s.project ? id(s.project) : 'every project'), filter: true },
    { id: 'channel', header: 'Sent to', text: channelText },
    { id: 'thresholds', header: 'Thresholds', text: (s) => [s.pendingThreshold && `pending ${minutes(s.pendingThreshold)}`, s.idleThreshold && `idle ${minutes(s.idleThreshold)}`, s.overQuotaThresholdPercent && `over quota ${s.overQuotaThresholdPercent}%`].filter(Boolean).join(', ') },
    { id: 'created', header: 'Created', text: (s) => time(s.createTime) },
    {
      id: 'actions', header: 'Actions', text: () => '',
      cell: (s) => (
        <span className="actions">
          <button type="button" className="secondary" aria-expanded={open === s.name} aria-label={`Deliveries of subscription ${id(s.name)}`} onClick={() => setOpen(open === s.name ? '' : s.name)}>Deliveries</button>
          <button type="button" className="danger" aria-label={`Delete subscription ${id(s.name)}`}
            onClick={() => window.confirm(`Delete subscription ${id(s.name)}? Nothing more is sent to it.`) && run(() => call('DELETE', `/v1/${s.name}`), () => { if (open === s.name) setOpen(''); reload() })}>Delete</button>
        </span>
      ),
    },
  ]
  return (
    <section aria-labelledby="h-notify">
      <h1 id="h-notify">Notifications</h1>
      <p className="hint">Your own subscriptions: events of what you may view, sent to a webhook, Slack or email. Each is sent only while you may still view what it is about.</p>
      {(error || actionError) && <p role="alert" className="error">{error || actionError}</p>}
      {data && <SubscribeForm projects={data.projects} onDone={reload} />}
      {data && <DataTable label="Subscriptions" rows={data.subs} cols={cols} rowKey={(s) => s.name} empty="No subscriptions yet." />}
      {open && (
        <section aria-labelledby="h-deliveries">
          <h2 id="h-deliveries">Deliveries of {id(open)}</h2>
          <Deliveries sub={open} />
        </section>
      )}
    </section>
  )
}
