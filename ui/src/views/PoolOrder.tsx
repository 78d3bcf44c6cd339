import { useId, useState } from 'react'

// PoolOrder picks node pools in order of preference from those that exist:
// add one, move it up, remove it. The workload goes to the first where it
// fits.
export function PoolOrder({ label, pools, value, onChange, problem, hint }: {
  label: string; pools: string[]; value: string[]; onChange: (v: string[]) => void; problem?: string; hint?: string
}) {
  const uid = useId()
  const [next, setNext] = useState('')
  const names = value.map((v) => v.replace(/^nodepools\//, ''))
  const left = pools.filter((p) => !names.includes(p))
  const set = (ns: string[]) => onChange(ns.map((n) => `nodepools/${n}`))
  const chosen = next && left.includes(next) ? next : left[0] ?? ''
  return (
    <fieldset aria-describedby={[hint && `${uid}-hint`, problem && `${uid}-problem`].filter(Boolean).join(' ') || undefined}>
      <legend>{label}</legend>
      {names.length > 0 && (
        <ol className="pool-order" aria-label={`${label}: chosen`}>
          {names.map((n, i) => (
            <li key={n}>
              <span>{n}</span>
              <button type="button" className="secondary" disabled={i === 0} aria-label={`Move ${n} up`}
                onClick={() => set([...names.slice(0, i - 1), n, names[i - 1], ...names.slice(i + 1)])}>Up</button>
              <button type="button" className="secondary" aria-label={`Remove ${n}`} onClick={() => set(names.filter((x) => x !== n))}>Remove</button>
            </li>
          ))}
        </ol>
      )}
      {left.length > 0 && (
        <div className="inline">
          <label>
            Add a node pool
            <select value={chosen} onChange={(e) => setNext(e.target.value)}>
              {left.map((p) => <option key={p} value={p}>{p}</option>)}
            </select>
          </label>
          <button type="button" className="secondary" onClick={() => chosen && set([...names, chosen])}>Add</button>
        </div>
      )}
      {hint && <span id={`${uid}-hint`} className="hint">{hint}</span>}
      {problem && <span id={`${uid}-problem`} className="problem">{problem}</span>}
    </fieldset>
  )
}
