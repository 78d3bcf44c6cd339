import { useEffect, useId, useRef, useState } from 'react'
import type uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import { useLoad } from './hooks'
import { time } from './format'
import { align, fmt, queryMetrics, summary, WINDOWS, type Line, type Metrics, type Unit } from './metrics'

// Line colours, each at least 3:1 against white (WCAG non-text contrast).
const COLOURS = ['#0b5cad', '#a4161a', '#1a6b34', '#6a3fa0', '#8a4b00', '#00707a', '#b0306a', '#4a5360']

// TimeChart draws lines over time with uPlot. The canvas is one image with
// a one-sentence label; the figure's legend names each line in text, and a
// table of the same numbers is one click away (for screen readers and for
// copying).
// An empty scale's top, per unit (so ticks are round numbers).
const EMPTY_TOP: Record<Unit, number> = { gpus: 1, cores: 1, ratio: 1, bytes: 1024 ** 3 }

export function TimeChart({ title, lines, unit, span, height = 180 }: { title: string; lines: Line[]; unit: Unit; span?: [number, number]; height?: number }) {
  const box = useRef<HTMLDivElement>(null)
  const [width, setWidth] = useState(0)
  const capId = useId()
  const { xs, ys } = align(lines)
  const text = summary(lines, unit)
  useEffect(() => {
    const el = box.current
    if (!el) return
    const f = () => setWidth(Math.max(200, Math.floor(el.getBoundingClientRect().width)))
    f()
    const ro = new ResizeObserver(f)
    ro.observe(el)
    return () => ro.disconnect()
  }, [])
  const key = JSON.stringify([lines.map((l) => l.label), xs, ys])
  useEffect(() => {
    const el = box.current
    if (!el || width === 0 || xs.length === 0) return
    // Loaded on first use: its own chunk, off the sign-in page's path.
    let plot: uPlot | undefined
    let gone = false
    import('uplot').then(({ default: UPlot }) => {
      if (gone) return
      plot = new UPlot(
        {
          width,
          height,
          legend: { show: false },
          cursor: { show: true, points: { show: false } },
          // The x axis is the window asked for, whatever part of it has points.
        scales: {
          x: { time: true, ...(span ? { range: (): uPlot.Range.MinMax => span } : {}) },
          y: { range: (_u, min, max) => [Math.min(0, min), unit === 'ratio' ? Math.max(1, max) : max > 0 ? max * 1.1 : EMPTY_TOP[unit]] },
        },
          axes: [{}, { size: 70, values: (_u, vs) => vs.map((v) => fmt(v, unit)) }],
          series: [{}, ...lines.map((l, i) => ({ label: l.label, stroke: COLOURS[i % COLOURS.length], width: 2, spanGaps: false, points: { show: xs.length < 3 } }))],
        },
        [xs, ...ys] as uPlot.AlignedData,
        el,
      )
    })
    return () => {
      gone = true
      plot?.destroy()
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key, width, height, unit, span?.[0], span?.[1]])
  return (
    <figure className="chart" aria-labelledby={capId}>
      <figcaption id={capId}>{title}</figcaption>
      <div ref={box} className="plot" role="img" aria-label={`${title}. ${text}`} />
      <ul className="legend">
        {lines.map((l, i) => (
          <li key={l.label}>
            <span className="swatch" data-colour={i % COLOURS.length} aria-hidden="true" /> {l.label}
          </li>
        ))}
      </ul>
      <p className="hint">{text}</p>
      {xs.length > 0 && (
        <details>
          <summary>Data table: {title}</summary>
          <div className="scroll">
            <table>
              <caption>{title}</caption>
              <thead>
                <tr>
                  <th scope="col">Time (UTC)</th>
                  {lines.map((l) => <th key={l.label} scope="col">{l.label}</th>)}
                </tr>
              </thead>
              <tbody>
                {xs.map((x, r) => (
                  <tr key={x}>
                    <td>{time(new Date(x * 1000).toISOString())}</td>
                    {ys.map((y, c) => <td key={c}>{fmt(y[r], unit)}</td>)}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </details>
      )}
    </figure>
  )
}

const windowLabel = (w: number) => WINDOWS.find(([s]) => s === w)?.[1] ?? `the last ${w} s`

export function WindowPicker({ value, onChange }: { value: number; onChange: (v: number) => void }) {
  return (
    <label className="window">
      Time range
      <select value={value} onChange={(e) => onChange(Number(e.target.value))}>
        {WINDOWS.map(([s, l]) => <option key={s} value={s}>{l}</option>)}
      </select>
    </label>
  )
}

// spanOf is the window the server evaluated (the first entity's), in
// seconds since the epoch.
function spanOf(m: Map<string, Metrics>): [number, number] | undefined {
  const first = m.values().next().value
  const [a, b] = [Date.parse(first?.startTime ?? ''), Date.parse(first?.endTime ?? '')]
  return Number.isNaN(a) || Number.isNaN(b) ? undefined : [Math.floor(a / 1000), Math.ceil(b / 1000)]
}

// ChartSpec is one chart: its title, unit, and the lines it takes from the
// entities' metrics.
export interface ChartSpec { title: string; unit: Unit; lines: (m: Map<string, Metrics>) => Line[] }

// MetricCharts reads the named entities' metrics over the window (again
// every 15 s) and draws each chart from them. An entity the caller may not
// read is left out; if none can be read the error is shown.
export function MetricCharts({ names, window, charts, label }: { names: string[]; window: number; charts: ChartSpec[]; label: string }) {
  const { data, error } = useLoad(
    async (s) => {
      const got = await Promise.allSettled(names.map((n) => queryMetrics(n, window, s)))
      const m = new Map<string, Metrics>()
      got.forEach((g, i) => g.status === 'fulfilled' && m.set(names[i], g.value))
      const failed = got.find((g) => g.status === 'rejected') as PromiseRejectedResult | undefined
      if (m.size === 0 && failed) throw failed.reason
      return { m, window }
    },
    [names.join(','), window],
    15000,
  )
  // While another range loads, the charts keep the last one drawn and say
  // which it is.
  const stale = data !== undefined && data.window !== window
  return (
    <section className="charts" aria-label={label} aria-busy={stale || !data}>
      {error && <p role="alert" className="error">{error}</p>}
      {stale && <p className="hint loading" role="status">Loading {windowLabel(window).toLowerCase()}; showing {windowLabel(data.window).toLowerCase()} until then.</p>}
      {data && charts.map((c) => <TimeChart key={c.title} title={c.title} unit={c.unit} lines={c.lines(data.m)} span={spanOf(data.m)} />)}
    </section>
  )
}
