import { describe, expect, it } from 'vitest'
import { commandOf, parseBytes, parseCpu, parseEnv, runsText } from './spec'
import { inWords, problemsOf } from './problems'
import { ApiError, statusWords } from './api'

describe('spec fields as typed', () => {
  it('reads cores and sizes, and refuses what it cannot read', () => {
    expect([parseCpu(''), parseCpu('0.5'), parseCpu('4'), parseCpu('.25')]).toEqual([undefined, 500, 4000, 250])
    expect([parseCpu('0'), parseCpu('two'), parseCpu('-1'), parseCpu('0.0001')]).toEqual([null, null, null, null])
    expect([parseBytes(''), parseBytes('16Gi'), parseBytes('512 MiB'), parseBytes('20G'), parseBytes('1.5Gi'), parseBytes('100')])
      .toEqual([undefined, 16 * 2 ** 30, 512 * 2 ** 20, 20e9, 1.5 * 2 ** 30, 100])
    expect([parseBytes('lots'), parseBytes('5Xi'), parseBytes('0')]).toEqual([null, null, null])
  })
  it('never splits a line on spaces: a shell line goes to sh -c whole, arguments one a line', () => {
    expect(commandOf('shell', `echo "a  b" | tr a-z A-Z`, '', '')).toEqual({ command: ['sh', '-c', `echo "a  b" | tr a-z A-Z`], args: [] })
    expect(commandOf('shell', '  ', '', '')).toEqual({ command: [], args: [] })
    expect(commandOf('exec', '', 'python', 'train.py\n--name\nrun 1\n')).toEqual({ command: ['python'], args: ['train.py', '--name', 'run 1'] })
    expect(commandOf('exec', '', '', '--epochs\n3')).toEqual({ command: [], args: ['--epochs', '3'] })
    expect(commandOf('exec', '', 'echo', 'a\n\nb')).toEqual({ command: ['echo'], args: ['a', '', 'b'] })
  })
  it('prints what will run so a shell reads it back', () => {
    expect(runsText(['sh', '-c', `echo "it's"`])).toBe(`sh -c 'echo "it'\\''s"'`)
    expect(runsText(['printf', '%s|', 'a b'])).toBe(`printf '%s|' 'a b'`)
  })
  it('reads environment variables, values with = and spaces kept', () => {
    expect(parseEnv('A=1\n\nB=x = y\nC=')).toEqual({ env: [{ name: 'A', value: '1' }, { name: 'B', value: 'x = y' }, { name: 'C', value: '' }] })
    expect(parseEnv('A=1\nnot a pair')).toEqual({ bad: 'not a pair' })
    expect(parseEnv('1A=x')).toEqual({ bad: '1A=x' })
  })
})

describe('server errors in the form’s words', () => {
  const labels = { workload_id: 'Name', 'workload.spec.gpu.devices': 'GPUs per pod', 'workload.spec.gpu.fraction_milli': 'Fraction of one GPU', 'workload.spec.node_pools': 'Node pools' }
  it('puts each violation next to its field and names the fields in the summary', () => {
    const err = new ApiError(400, {
      code: 3, message: 'Fields are invalid',
      details: [{ fieldViolations: [
        { field: 'workload.spec.gpu.devices', description: 'must be 1 or more whole GPUs; use fraction_milli for part of one' },
        { field: 'workload.spec.node_pools[1]', description: 'no such node pool' },
        { field: 'workload.spec.security', description: 'not allowed' },
      ] }],
    })
    const p = problemsOf(err, labels)
    expect(p.fields).toEqual({ 'GPUs per pod': 'must be 1 or more whole GPUs; use “Fraction of one GPU” for part of one', 'Node pools': 'no such node pool' })
    expect(p.rest).toBe('Check “GPUs per pod”, “Node pools”: each says what to fix. workload.spec.security: not allowed')
  })
  it('keeps a message with no violations, and never says a bare HTTP status', () => {
    expect(problemsOf(new ApiError(409, { code: 6, message: 'exists' }), labels)).toEqual({ fields: {}, rest: 'exists' })
    expect(new ApiError(400, { code: 0, message: '' }).message).toBe(statusWords(400))
    expect(statusWords(502)).not.toMatch(/HTTP/)
    expect(inWords('set workload_id', labels)).toBe('set “Name”')
  })
})

describe('a form’s one-line error', () => {
  it('leads each violation with the label of its field', async () => {
    const { quotaLabels } = await import('./views/Projects')
    const { problemText } = await import('./problems')
    const err = new ApiError(400, { code: 3, message: 'x', details: [{ fieldViolations: [
      { field: 'project.node_pool_quotas[0].gpu.limit_milli_gpus', description: 'must be at least deserved_milli_gpus' },
      { field: 'project.other', description: 'bad' },
    ] }] })
    expect(problemText(err, quotaLabels('project'))).toBe('“GPU limit”: must be at least “GPU quota”; project.other: bad')
  })
})
