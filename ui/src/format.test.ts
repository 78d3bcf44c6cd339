import { describe, expect, it } from 'vitest'
import { csv, deviceUse, enumLabel, gpuRequest, gpus, id, parseCsv, parseGpu, phase } from './format'

describe('format', () => {
  it('names', () => {
    expect(id('projects/team-a/workloads/a1')).toBe('a1')
    expect(id('a1')).toBe('a1')
    expect(phase('WORKLOAD_PHASE_PENDING')).toBe('Pending')
    expect(enumLabel('PENDING_CHECK_NODE_POOL', 'PENDING_CHECK_')).toBe('Node pool')
    expect(phase('WORKLOAD_PHASE_UNSPECIFIED')).toBe('')
  })
  it('gpu amounts', () => {
    expect(gpus('1500')).toBe('1.50')
    expect(gpus('-1')).toBe('unlimited')
    expect(gpus(undefined)).toBe('0.00')
    expect(parseGpu('2')).toEqual({ devices: 2 })
    expect(parseGpu('0.5')).toEqual({ fractionMilli: 500 })
    expect(parseGpu('1.5')).toBeNull()
    expect(parseGpu('abc')).toBeNull()
    expect(parseGpu('')).toEqual({})
    expect(gpuRequest({ fractionMilli: 250 })).toBe('0.25')
    expect(deviceUse({ allocations: [{ fractionMilli: 500 }, { fractionMilli: 250 }] })).toBe(750)
  })
  it('csv round trip with quotes, commas, line breaks and formula guard', () => {
    const text = csv(['a', 'b'], [['x,y', 'say "hi"'], ['line\nbreak', '=SUM(A1)']])
    expect(parseCsv(text)).toEqual([
      ['a', 'b'],
      ['x,y', 'say "hi"'],
      ['line\nbreak', "'=SUM(A1)"],
    ])
  })
})
