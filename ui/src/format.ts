// Pure formatting and parsing shared by the views (unit tested).

// id is the last part of a resource name: projects/team-a -> team-a.
export function id(name?: string): string {
  if (!name) return ''
  const i = name.lastIndexOf('/')
  return i < 0 ? name : name.slice(i + 1)
}

// enumLabel turns WORKLOAD_PHASE_PENDING into Pending (the prefix is the
// enum's type name, everything up to the last of its known words).
export function enumLabel(v: string | undefined, prefix: string): string {
  if (!v) return ''
  const s = v.startsWith(prefix) ? v.slice(prefix.length) : v
  if (s === 'UNSPECIFIED') return ''
  return s
    .split('_')
    .map((w, i) => (i === 0 ? w[0] + w.slice(1).toLowerCase() : w.toLowerCase()))
    .join(' ')
}

export const phase = (v?: string) => enumLabel(v, 'WORKLOAD_PHASE_')
export const workloadType = (v?: string) => enumLabel(v, 'WORKLOAD_TYPE_')

// gpus prints thousandths of a GPU with two decimals, as the CLI does;
// negative means unlimited.
export function gpus(milli?: string | number): string {
  if (milli === undefined || milli === '') return '0.00'
  const n = Number(milli)
  if (n < 0) return 'unlimited'
  return (n / 1000).toFixed(2)
}

// parseGpu reads what a person types as a GPU amount: "1", "2", "0.5".
// Whole numbers are devices; a value below 1 is a fraction in thousandths.
export function parseGpu(s: string): { devices?: number; fractionMilli?: number } | null {
  const t = s.trim()
  if (t === '' || t === '0') return {}
  if (!/^\d+(\.\d+)?$/.test(t)) return null
  const v = Number(t)
  if (Number.isInteger(v)) return { devices: v }
  if (v < 1) return { fractionMilli: Math.round(v * 1000) }
  return null
}

// gpuRequest prints a pod's GPU request.
export function gpuRequest(g?: { devices?: number; fractionMilli?: number; gpuMemoryBytes?: string }): string {
  if (!g) return '0'
  if (g.devices) return String(g.devices)
  if (g.fractionMilli) return (g.fractionMilli / 1000).toString()
  if (g.gpuMemoryBytes) return `${bytes(g.gpuMemoryBytes)} GPU memory`
  return '0'
}

export function bytes(b?: string | number): string {
  const n = Number(b ?? 0)
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = n
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[i]}`
}

export function time(t?: string): string {
  if (!t) return ''
  const d = new Date(t)
  if (isNaN(d.getTime())) return t
  return d.toISOString().replace('T', ' ').slice(0, 19)
}

// csv encodes rows as RFC 4180 text: fields with a comma, quote or line
// break are quoted, quotes doubled. A leading =,+,-,@ is prefixed with a
// quote mark so a spreadsheet does not run it as a formula.
export function csv(header: string[], rows: string[][]): string {
  const field = (v: string) => {
    let s = v ?? ''
    if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s
  }
  return [header, ...rows].map((r) => r.map(field).join(',')).join('\r\n') + '\r\n'
}

// parseCsv is the inverse of csv (without the formula guard); used by tests
// and by nothing else that needs a CSV library.
export function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let f = ''
  let q = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (q) {
      if (c === '"' && text[i + 1] === '"') {
        f += '"'
        i++
      } else if (c === '"') q = false
      else f += c
    } else if (c === '"') q = true
    else if (c === ',') {
      row.push(f)
      f = ''
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++
      row.push(f)
      rows.push(row)
      row = []
      f = ''
    } else f += c
  }
  if (f !== '' || row.length) {
    row.push(f)
    rows.push(row)
  }
  return rows
}

export function download(filename: string, type: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type }))
  const a = document.createElement('a')
  a.href = url
  a.download = filename
  document.body.appendChild(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 1000)
}

// Free GPU of one device, in thousandths, from its allocations.
export function deviceUse(d: { allocations?: { fractionMilli?: number }[] }): number {
  return Math.min(1000, (d.allocations ?? []).reduce((s, a) => s + (a.fractionMilli ?? 0), 0))
}

// labelText is a workload's labels as KEY=VALUE, sorted, comma-separated.
export function labelText(labels?: Record<string, string>): string {
  return Object.entries(labels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${k}=${v}`).join(', ')
}
