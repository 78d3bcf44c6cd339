import { describe, expect, it } from 'vitest'
import { align, fmt, linesOf, num, summary, type Metrics } from './metrics'

const m: Metrics = {
  name: 'projects/team-a/workloads/a1',
  series: [
    { type: 'METRIC_TYPE_GPU_UTILIZATION', pod: '0', points: [{ time: '2026-01-01T00:00:00Z', value: 0.5 }, { time: '2026-01-01T00:01:00Z', value: 0.75 }] },
    { type: 'METRIC_TYPE_GPU_UTILIZATION', pod: '1', points: [{ time: '2026-01-01T00:01:00Z', value: 1 }] },
    { type: 'METRIC_TYPE_GPU_QUOTA', points: [{ time: '2026-01-01T00:00:00Z', value: 'Infinity' }] },
  ],
}

describe('metrics', () => {
  it('picks one line per pod of a type', () => {
    expect(linesOf(m, 'GPU_UTILIZATION', 'Utilisation').map((l) => l.label)).toEqual(['Utilisation, pod 0', 'Utilisation, pod 1'])
    expect(linesOf(m, 'USED_GPUS', 'Used')).toEqual([])
    expect(linesOf(undefined, 'USED_GPUS', 'Used')).toEqual([])
  })

  it('aligns lines on one time axis with gaps as null', () => {
    const { xs, ys } = align(linesOf(m, 'GPU_UTILIZATION', 'U'))
    expect(xs).toEqual([Date.parse('2026-01-01T00:00:00Z') / 1000, Date.parse('2026-01-01T00:01:00Z') / 1000])
    expect(ys).toEqual([[0.5, 0.75], [null, 1]])
  })

  it('does not draw Infinity or NaN', () => {
    expect(num('Infinity')).toBeNull()
    expect(num('NaN')).toBeNull()
    expect(num(2)).toBe(2)
    expect(align(linesOf(m, 'GPU_QUOTA', 'Quota')).ys).toEqual([[null]])
  })

  it('prints values in their unit', () => {
    expect(fmt(0.756, 'ratio')).toBe('76%')
    expect(fmt(1.5, 'gpus')).toBe('1.50')
    expect(fmt(2 * 1024 ** 3, 'bytes')).toBe('2 GiB')
    expect(fmt(null, 'gpus')).toBe('-')
  })

  it('says each line now and at its peak, as the text alternative', () => {
    expect(summary(linesOf(m, 'GPU_UTILIZATION', 'U'), 'ratio')).toBe('U, pod 0: now 75%, peak 75%; U, pod 1: now 100%, peak 100%.')
    expect(summary([], 'gpus')).toBe('No data in this window.')
    expect(summary(linesOf(m, 'GPU_QUOTA', 'Quota'), 'gpus')).toBe('No data in this window.')
  })
})
