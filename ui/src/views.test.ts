import { describe, expect, it } from 'vitest'
import { auditFilter } from './views/Audit'
import { policyPath } from './views/Governance'
import { summarize } from './views/Overview'
import { checkRule, ruleText } from './policy'
import { milli, queueLines, rulesText } from './views/Projects'
import { WORKLOAD_CHARTS } from './views/WorkloadPage'
import { summary, type Metrics } from './metrics'
import { gpuState, holder, planShares } from './views/Nodes'
import { localInput, reportBody } from './views/Reports'
import { parseDuration, showDuration, withRule } from './views/Rules'
import { parseSelector, selectorText } from './views/NodePoolForm'
import { sourceKind, sourceText } from './views/DataSources'
import { mountSpec } from './views/MountFields'

describe('audit filter', () => {
  it('joins the chosen comparisons with AND and quotes values', () => {
    expect(auditFilter({ from: '', to: '', principal: '', resource: '', failedOnly: false })).toBe('')
    const f = auditFilter({ from: '2026-01-02T03:04', to: '', principal: 'alice', resource: 'projects/"x"/', failedOnly: true })
    expect(f).toBe(`create_time >= "${new Date('2026-01-02T03:04').toISOString()}" AND principal = "users/alice" AND resource:"projects/\\"x\\"/" AND status_code != 0`)
    expect(auditFilter({ from: '', to: '', principal: 'applications/ci', resource: '', failedOnly: false })).toBe('principal = "applications/ci"')
  })
})

describe('policies', () => {
  it('paths by scope', () => {
    expect(policyPath('account', 'training')).toBe('/v1/policies/training')
    expect(policyPath('department:research', 'workspace')).toBe('/v1/departments/research/policies/workspace')
    expect(policyPath('project:team-a', 'inference')).toBe('/v1/projects/team-a/policies/inference')
  })
  it('rules as text and the early check', () => {
    expect(ruleText({ required: true, min: 1, max: 4, options: ['a', 'b'], canEdit: false })).toBe('required; min 1; max 4; one of a, b; fixed by policy')
    expect(checkRule(2, { max: 1 })).toBe('at most 1')
    expect(checkRule(0, { min: 1 })).toBe('at least 1')
    expect(checkRule(1, { min: 1, max: 1 })).toBe('')
    expect(checkRule(undefined, { max: 1 })).toBe('')
  })
})

describe('overview', () => {
  it('sums pools, departments and pending reasons from what was read', () => {
    const s = summarize(
      [
        { name: 'nodes/n1', nodePool: 'nodepools/default', capacity: { milliGpus: '2000' }, allocated: { milliGpus: '1500' },
          devices: [{ index: 0, allocations: [{ fractionMilli: 1000 }] }, { index: 1, allocations: [{ fractionMilli: 500 }] }] },
        { name: 'nodes/n2', nodePool: 'nodepools/default', capacity: { milliGpus: '2000' }, allocated: { milliGpus: '0' },
          devices: [{ index: 0 }, { index: 1, healthy: false }] },
      ],
      [
        { name: 'departments/research/queue', kind: 'QUEUE_KIND_DEPARTMENT', nodePools: [{ allocated: { milliGpus: '1500' }, deserved: { milliGpus: '-1' } }] },
        { name: 'projects/team-a/queue', kind: 'QUEUE_KIND_PROJECT', nodePools: [{ allocated: { milliGpus: '1500' } }] },
      ],
      [
        { name: 'projects/team-a/workloads/a1', project: 'projects/team-a', status: { phase: 'WORKLOAD_PHASE_PENDING', pendingReasons: [{ check: 'PENDING_CHECK_RECLAIM' }] } },
        { name: 'projects/team-a/workloads/a3', project: 'projects/team-a', status: { phase: 'WORKLOAD_PHASE_PENDING', pendingReasons: [{ check: 'PENDING_CHECK_RECLAIM' }] } },
        { name: 'projects/team-a/workloads/a2', project: 'projects/team-a', status: { phase: 'WORKLOAD_PHASE_RUNNING' } },
        { name: 'projects/team-a/workloads/nb', project: 'projects/team-a', status: { phase: 'WORKLOAD_PHASE_RUNNING', nodePool: 'nodepools/default', allocatedMilliGpus: '500', gpuIdleTime: '90.5s' } },
      ],
    )
    expect(s.pools).toEqual([{ name: 'default', nodes: 2, capacity: 4000, allocated: 1500, unallocated: 2500, idle: 500, freeDevices: 1 }])
    expect(s.departments).toEqual([{ name: 'research', allocated: 1500, deserved: -1 }])
    expect(s.pending).toEqual([{ project: 'team-a', reason: 'Reclaim', count: 2 }])
    expect(s.idle).toEqual([{ name: 'nb', project: 'team-a', gpus: 500, idleSeconds: 90.5 }])
  })
})

describe('quota amounts', () => {
  it('reads what a person types', () => {
    expect(milli('2')).toBe('2000')
    expect(milli('0.5')).toBe('500')
    expect(milli('')).toBeUndefined()
    expect(milli('unlimited')).toBeUndefined()
    expect(milli('NaN')).toBeNull()
    expect(milli('-1')).toBeNull()
  })
})

describe('rules and plans as text', () => {
  it('scheduling rules', () => {
    expect(rulesText([{ workloadType: 'WORKLOAD_TYPE_TRAINING', timeLimit: '28800s', nodeTypes: ['dgx'] }, { workloadType: 'WORKLOAD_TYPE_WORKSPACE', idleGpuLimit: '3600s', preemptWhenIdle: true }]))
      .toBe('Training: time limit 8h, node types dgx; Workspace: idle GPU limit 1h (preempt)')
    expect(rulesText(undefined)).toBe('')
  })
  it('a GPU is whole, shared, free or unhealthy', () => {
    expect(gpuState({ allocations: [{ fractionMilli: 1000 }] })).toBe('whole')
    expect(gpuState({ allocations: [{ fractionMilli: 500 }, { fractionMilli: 250 }] })).toBe('shared')
    expect(gpuState({ allocations: [] })).toBe('free')
    expect(gpuState({ healthy: false, allocations: [{ fractionMilli: 1000 }] })).toBe('unhealthy')
  })
  it('time-slice plan shares per pod', () => {
    expect(planShares([
      { workload: 'projects/team-a/workloads/nb', podIndex: 0, sharePercent: 25 },
      { sharePercent: 50 },
      { workload: 'projects/team-a/workloads/nb', podIndex: 0, sharePercent: 25 },
    ])).toEqual(['team-a/nb pod 0 50%', 'unowned 50%'])
  })
})

describe('watch events', () => {
  it('add, modify and delete by name; SYNCED carries no workload', async () => {
    const { applyWatch } = await import('./watch')
    let m = new Map()
    m = applyWatch(m, { type: 'WATCH_EVENT_TYPE_ADDED', workload: { name: 'projects/a/workloads/x', status: { phase: 'WORKLOAD_PHASE_PENDING' } } })
    m = applyWatch(m, { type: 'WATCH_EVENT_TYPE_MODIFIED', workload: { name: 'projects/a/workloads/x', status: { phase: 'WORKLOAD_PHASE_RUNNING' } } })
    m = applyWatch(m, { type: 'WATCH_EVENT_TYPE_ADDED', workload: { name: 'projects/a/workloads/y' } })
    m = applyWatch(m, { type: 'WATCH_EVENT_TYPE_SYNCED' })
    expect([...m.keys()]).toEqual(['projects/a/workloads/x', 'projects/a/workloads/y'])
    expect(m.get('projects/a/workloads/x').status.phase).toBe('WORKLOAD_PHASE_RUNNING')
    m = applyWatch(m, { type: 'WATCH_EVENT_TYPE_DELETED', workload: { name: 'projects/a/workloads/x' } })
    expect([...m.keys()]).toEqual(['projects/a/workloads/y'])
  })
})

describe('nodes', () => {
  it("names a holder, and none the caller may not view", () => {
    expect(holder('projects/team-a/workloads/a1')).toEqual({ project: 'team-a', name: 'a1' })
    expect(holder('projects/-/workloads/-')).toBeNull()
    expect(holder('')).toBeNull()
  })
})

describe('reports', () => {
  it('builds the create body from the form, with an end in this minute or later as now', () => {
    const now = new Date('2026-03-01T12:00:00Z')
    const f = { id: 'r1', displayName: ' March ', description: '', start: '2026-02-01T00:00:00Z', end: '2026-04-01T00:00:00Z', scope: 'departments/research', segment: 'REPORT_SEGMENT_PROJECT' }
    expect(reportBody(f, now)).toEqual({
      displayName: 'March', startTime: '2026-02-01T00:00:00.000Z', endTime: '2026-03-01T12:00:00.000Z', segmentBy: 'REPORT_SEGMENT_PROJECT', department: 'departments/research',
    })
    expect(reportBody({ ...f, scope: 'projects/team-a', description: 'x', end: '2026-02-02T00:00:00Z' }, now)).toMatchObject({ project: 'projects/team-a', description: 'x', endTime: '2026-02-02T00:00:00.000Z' })
    expect(reportBody({ ...f, scope: '' }, now)).not.toHaveProperty('project')
    expect(reportBody({ ...f, end: '2026-03-01T11:59:30Z' }, now).endTime).toBe('2026-03-01T12:00:00.000Z')
    expect(localInput(new Date(2026, 0, 2, 3, 4))).toBe('2026-01-02T03:04')
  })
})

describe('scheduling rules', () => {
  it('reads and shows durations as people type them', () => {
    expect(parseDuration('1h30m')).toBe('5400s')
    expect(parseDuration('2d')).toBe('172800s')
    expect(parseDuration(' 45s ')).toBe('45s')
    expect(parseDuration('')).toBeUndefined()
    expect(parseDuration('0m')).toBeNull()
    expect(parseDuration('90 minutes')).toBeNull()
    expect(showDuration('5400s')).toBe('1h30m')
    expect(showDuration('86461s')).toBe('1d1m1s')
    expect(showDuration(undefined)).toBe('')
  })
  it('keeps one rule per workload type, in type order', () => {
    const t = { workloadType: 'WORKLOAD_TYPE_TRAINING', timeLimit: '60s' }
    const w = { workloadType: 'WORKLOAD_TYPE_WORKSPACE', idleGpuLimit: '60s' }
    expect(withRule([w], t.workloadType, t)).toEqual([t, w])
    expect(withRule([t, w], t.workloadType, { ...t, timeLimit: '120s' })).toEqual([{ ...t, timeLimit: '120s' }, w])
    expect(withRule([t, w], w.workloadType, null)).toEqual([t])
  })
})

describe('node pools', () => {
  it('reads a node selector as key=value pairs', () => {
    expect(parseSelector('gpu=a100, zone = eu')).toEqual({ gpu: 'a100', zone: 'eu' })
    expect(parseSelector('')).toEqual({})
    expect(parseSelector('gpu')).toBeNull()
    expect(parseSelector('=a100')).toBeNull()
    expect(selectorText({ gpu: 'a100', zone: 'eu' })).toBe('gpu=a100, zone=eu')
  })
})

describe('charts over time', () => {
  const pt = (value: number | string) => [{ time: '2026-01-01T00:00:00Z', value }]
  it("draw a project's allocation next to its fair share, and no unlimited quota", () => {
    const m: Metrics = {
      name: 'projects/team-a',
      series: [
        { type: 'METRIC_TYPE_GPU_QUOTA', points: pt('Infinity') },
        { type: 'METRIC_TYPE_FAIR_SHARE_GPUS', points: pt(3) },
        { type: 'METRIC_TYPE_ALLOCATED_GPUS', points: pt(2) },
        { type: 'METRIC_TYPE_USED_GPUS', points: pt(1.5) },
      ],
    }
    const lines = queueLines(m)
    expect(lines.map((l) => l.label)).toEqual(['Allocated', 'Fair share', 'Used', 'Quota'])
    expect(summary(lines, 'gpus')).toBe('Allocated: now 2.00, peak 2.00; Fair share: now 3.00, peak 3.00; Used: now 1.50, peak 1.50; Quota: no data.')
    expect(queueLines(undefined)).toEqual([])
  })
  it("draw a workload's measured CPU and memory per pod, with its allocation", () => {
    const name = 'projects/team-a/workloads/a2'
    const m = new Map<string, Metrics>([[name, {
      name,
      series: [
        { type: 'METRIC_TYPE_CPU_USAGE_CORES', pod: '0', points: pt(0.25) },
        { type: 'METRIC_TYPE_CPU_USAGE_CORES', pod: '1', points: pt(0.5) },
        { type: 'METRIC_TYPE_ALLOCATED_CPU_CORES', points: pt(2) },
        { type: 'METRIC_TYPE_MEMORY_USAGE_BYTES', pod: '0', points: pt(64 * 1024 ** 2) },
        { type: 'METRIC_TYPE_ALLOCATED_MEMORY_BYTES', points: pt(1024 ** 3) },
      ],
    }]])
    const chart = (title: string) => WORKLOAD_CHARTS(name).find((c) => c.title === title)!
    expect(summary(chart('CPU cores used').lines(m), 'cores')).toBe(
      'CPU used, pod 0: now 0.25, peak 0.25; CPU used, pod 1: now 0.50, peak 0.50; CPU allocated: now 2.00, peak 2.00.')
    expect(summary(chart('Memory used').lines(m), 'bytes')).toBe('Memory used, pod 0: now 64 MiB, peak 64 MiB; Memory allocated: now 1 GiB, peak 1 GiB.')
  })
})

describe('data sources', () => {
  it('say their source in one line and which kind it is', () => {
    expect(sourceText({ nfs: { server: 'nfs.example.com', path: '/exports/a' } })).toBe('nfs nfs.example.com:/exports/a')
    expect(sourceText({ git: { repository: 'https://g.example.com/r.git', revision: 'v1', credential: 'projects/p/credentials/bot' } })).toBe('git https://g.example.com/r.git@v1 (with bot)')
    expect(sourceText({ s3: { endpoint: 'https://s3.example.com', bucket: 'b' } })).toBe('s3 https://s3.example.com/b')
    expect(sourceText({ pvc: { storageClass: 'fast', sizeBytes: String(2 ** 30) } })).toBe('new claim fast 1 GiB')
    expect(sourceText({ hostPath: { path: '/mnt' } })).toBe('node directory /mnt')
    expect(sourceKind({ configMap: { name: 'c' } })).toBe('configMap')
    expect(sourceKind({})).toBeUndefined()
  })
})

describe('mounts', () => {
  it('are the spec fields of what was chosen', () => {
    expect(mountSpec([], [{ credential: '', path: '/x' }])).toEqual({})
    expect(mountSpec(['dataSources/a'], [{ credential: 'credentials/hf', path: ' ' }, { credential: 'credentials/k', path: '/etc/k ' }])).toEqual({
      dataSources: [{ dataSource: 'dataSources/a' }],
      credentials: [{ credential: 'credentials/hf' }, { credential: 'credentials/k', path: '/etc/k' }],
    })
  })
})
