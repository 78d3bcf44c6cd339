import { afterEach, describe, expect, it, vi } from 'vitest'
import { cleanup, fireEvent, render, screen, within } from '@testing-library/react'
import { DataTable, type Col } from './table'
import { parseCsv } from './format'

interface R { name: string; project: string; gpu: string }
const rows: R[] = [
  { name: 'b1', project: 'team-b', gpu: '1.00' },
  { name: 'a1', project: 'team-a', gpu: '2.00' },
  { name: 'a2', project: 'team-a', gpu: '0.50' },
]
const cols: Col<R>[] = [
  { id: 'name', header: 'Name', text: (r) => r.name },
  { id: 'project', header: 'Project', text: (r) => r.project, filter: true },
  { id: 'gpu', header: 'GPU', text: (r) => r.gpu, hidden: true },
]
const names = () => screen.getAllByRole('row').slice(1).map((r) => within(r).getAllByRole('cell')[0].textContent)

afterEach(cleanup)

describe('DataTable', () => {
  it('searches, filters, sorts and chooses columns', () => {
    render(<DataTable label="Workloads" rows={rows} cols={cols} rowKey={(r) => r.name} />)
    expect(names()).toEqual(['b1', 'a1', 'a2'])
    expect(screen.queryByRole('columnheader', { name: /GPU/ })).toBeNull()
    fireEvent.click(screen.getByRole('button', { name: 'Name' }))
    expect(names()).toEqual(['a1', 'a2', 'b1'])
    expect(screen.getByRole('columnheader', { name: /Name/ }).getAttribute('aria-sort')).toBe('ascending')
    fireEvent.change(screen.getByLabelText('Search'), { target: { value: 'team-a' } })
    expect(names()).toEqual(['a1', 'a2'])
    fireEvent.change(screen.getByLabelText('Search'), { target: { value: '' } })
    fireEvent.change(screen.getByRole('combobox', { name: 'Project' }), { target: { value: 'team-b' } })
    expect(names()).toEqual(['b1'])
    fireEvent.click(screen.getByRole('checkbox', { name: 'GPU' }))
    expect(screen.getByRole('columnheader', { name: /GPU/ })).toBeTruthy()
  })

  it('downloads what is shown as CSV', async () => {
    let blob: Blob | undefined
    URL.createObjectURL = vi.fn((b: Blob) => {
      blob = b
      return 'blob:x'
    })
    URL.revokeObjectURL = vi.fn()
    const click = vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(() => {})
    render(<DataTable label="Workloads" rows={rows} cols={cols} rowKey={(r) => r.name} />)
    fireEvent.change(screen.getByLabelText('Search'), { target: { value: 'team-a' } })
    fireEvent.click(screen.getByRole('button', { name: 'Download CSV' }))
    expect(click).toHaveBeenCalled()
    const text = await new Promise<string>((ok) => {
      const r = new FileReader()
      r.onload = () => ok(r.result as string)
      r.readAsText(blob!)
    })
    expect(parseCsv(text)).toEqual([['Name', 'Project'], ['a1', 'team-a'], ['a2', 'team-a']])
  })
})
