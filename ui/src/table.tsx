import {
  type ColumnDef,
  type SortingState,
  type VisibilityState,
  type ColumnFiltersState,
  flexRender,
  getCoreRowModel,
  getFilteredRowModel,
  getSortedRowModel,
  useReactTable,
} from '@tanstack/react-table'
import { useMemo, useState } from 'react'
import { csv, download } from './format'

// Col is one column: its header, the text of a cell (what search, sort,
// filters and the CSV use) and optionally how the cell is drawn.
export interface Col<T> {
  id: string
  header: string
  text: (row: T) => string
  cell?: (row: T) => React.ReactNode
  hidden?: boolean // hidden until chosen
  filter?: boolean // offer a filter by value
}

interface Props<T> {
  label: string // the table's caption and the CSV's file name
  rows: T[]
  cols: Col<T>[]
  rowKey: (row: T) => string
  empty?: string
}

// DataTable is every list view's table: search, filter by value, sort by
// any column, column choice and a CSV download of what is shown.
export function DataTable<T>({ label, rows, cols, rowKey, empty }: Props<T>) {
  const [sorting, setSorting] = useState<SortingState>([])
  const [search, setSearch] = useState('')
  const [filters, setFilters] = useState<ColumnFiltersState>([])
  const [visibility, setVisibility] = useState<VisibilityState>(() =>
    Object.fromEntries(cols.filter((c) => c.hidden).map((c) => [c.id, false])),
  )
  const columns = useMemo<ColumnDef<T>[]>(
    () =>
      cols.map((c) => ({
        id: c.id,
        header: c.header,
        accessorFn: (r: T) => c.text(r),
        cell: (info) => (c.cell ? c.cell(info.row.original) : c.text(info.row.original)),
        filterFn: 'equalsString',
        sortingFn: 'alphanumeric',
      })),
    [cols],
  )
  const table = useReactTable({
    data: rows,
    columns,
    state: { sorting, globalFilter: search, columnVisibility: visibility, columnFilters: filters },
    onSortingChange: setSorting,
    onGlobalFilterChange: setSearch,
    onColumnVisibilityChange: setVisibility,
    onColumnFiltersChange: setFilters,
    getRowId: rowKey,
    globalFilterFn: 'includesString',
    getCoreRowModel: getCoreRowModel(),
    getFilteredRowModel: getFilteredRowModel(),
    getSortedRowModel: getSortedRowModel(),
  })
  const shown = table.getVisibleLeafColumns()
  const slug = label.toLowerCase().replace(/[^a-z0-9]+/g, '-')
  const exportCsv = () => {
    const visible = cols.filter((c) => shown.some((s) => s.id === c.id))
    const data = table.getRowModel().rows.map((r) => visible.map((c) => c.text(r.original)))
    download(`${slug}.csv`, 'text/csv', csv(visible.map((c) => c.header), data))
  }
  return (
    <div className="table-block">
      <div className="toolbar" role="group" aria-label={`${label} controls`}>
        <label>
          Search
          <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} />
        </label>
        {cols
          .filter((c) => c.filter)
          .map((c) => {
            const values = [...new Set(rows.map((r) => c.text(r)))].sort()
            const col = table.getColumn(c.id)!
            return (
              <label key={c.id}>
                {c.header}
                <select value={(col.getFilterValue() as string) ?? ''} onChange={(e) => col.setFilterValue(e.target.value || undefined)}>
                  <option value="">All</option>
                  {values.map((v) => (
                    <option key={v} value={v}>
                      {v || '(none)'}
                    </option>
                  ))}
                </select>
              </label>
            )
          })}
        <details className="columns">
          <summary>Columns</summary>
          <fieldset>
            <legend>Shown columns</legend>
            {table.getAllLeafColumns().map((c) => (
              <label key={c.id} className="check">
                <input type="checkbox" checked={c.getIsVisible()} onChange={c.getToggleVisibilityHandler()} />
                {String(c.columnDef.header)}
              </label>
            ))}
          </fieldset>
        </details>
        <button type="button" onClick={exportCsv}>
          Download CSV
        </button>
      </div>
      <div className="scroll">
        <table>
          <caption>
            {label} <span className="count">({table.getRowModel().rows.length} of {rows.length})</span>
          </caption>
          <thead>
            {table.getHeaderGroups().map((hg) => (
              <tr key={hg.id}>
                {hg.headers.map((h) => {
                  const s = h.column.getIsSorted()
                  return (
                    <th key={h.id} scope="col" aria-sort={s === 'asc' ? 'ascending' : s === 'desc' ? 'descending' : 'none'}>
                      <button type="button" className="sort" onClick={h.column.getToggleSortingHandler()}>
                        {flexRender(h.column.columnDef.header, h.getContext())}
                        <span aria-hidden="true">{s === 'asc' ? ' ▲' : s === 'desc' ? ' ▼' : ''}</span>
                      </button>
                    </th>
                  )
                })}
              </tr>
            ))}
          </thead>
          <tbody>
            {table.getRowModel().rows.map((r) => (
              <tr key={r.id}>
                {r.getVisibleCells().map((c) => (
                  <td key={c.id}>{flexRender(c.column.columnDef.cell, c.getContext())}</td>
                ))}
              </tr>
            ))}
            {table.getRowModel().rows.length === 0 && (
              <tr>
                <td colSpan={shown.length || 1} className="empty">
                  {empty ?? 'Nothing to show.'}
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </div>
  )
}
