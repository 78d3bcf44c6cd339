import { useState } from 'react'
import { call } from '../api'
import { problemText } from '../problems'
import { enumLabel, id } from '../format'
import type { NodePool } from '../types'

// parseSelector reads "gpu=a100, zone=eu" as a node selector; null when a
// part is not key=value.
export function parseSelector(s: string): Record<string, string> | null {
  const out: Record<string, string> = {}
  for (const part of s.split(',').map((p) => p.trim()).filter(Boolean)) {
    const i = part.indexOf('=')
    if (i <= 0) return null
    out[part.slice(0, i).trim()] = part.slice(i + 1).trim()
  }
  return out
}

export const selectorText = (m?: Record<string, string>) => Object.entries(m ?? {}).map(([k, v]) => `${k}=${v}`).join(', ')

const PLACEMENTS = ['PLACEMENT_STRATEGY_BINPACK', 'PLACEMENT_STRATEGY_SPREAD']
const SLICING = ['TIME_SLICING_MODE_OFF', 'TIME_SLICING_MODE_STRICT', 'TIME_SLICING_MODE_FAIR']

// NodePoolForm creates a node pool or edits one (CreateNodePool,
// UpdateNodePool); the server checks the selector and settings.
export function NodePoolForm({ editing, onDone, onCancel }: { editing?: NodePool & { nodeSelector?: Record<string, string> }; onDone: () => void; onCancel: () => void }) {
  const [name, setName] = useState(id(editing?.name))
  const [description, setDescription] = useState(editing?.description ?? '')
  const [selector, setSelector] = useState(selectorText(editing?.nodeSelector))
  const [placement, setPlacement] = useState(editing?.placementStrategy && editing.placementStrategy !== 'PLACEMENT_STRATEGY_UNSPECIFIED' ? editing.placementStrategy : PLACEMENTS[0])
  const [slicing, setSlicing] = useState(editing?.timeSlicing?.mode && editing.timeSlicing.mode !== 'TIME_SLICING_MODE_UNSPECIFIED' ? editing.timeSlicing.mode : SLICING[0])
  const [error, setError] = useState('')
  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    setError('')
    const nodeSelector = parseSelector(selector)
    if (nodeSelector === null) {
      setError('The node selector is labels as key=value, separated by commas.')
      return
    }
    const body = { description, nodeSelector, placementStrategy: placement, timeSlicing: { mode: slicing } }
    try {
      if (editing) await call('PATCH', `/v1/${editing.name}`, body)
      else await call('POST', `/v1/nodepools?nodePoolId=${encodeURIComponent(name.trim())}`, body)
      onDone()
    } catch (err) {
      setError(problemText(err, {
        node_pool_id: 'Node pool id', 'node_pool.description': 'Description', 'node_pool.node_selector': 'Node selector',
        'node_pool.placement_strategy': 'Placement', 'node_pool.time_slicing': 'Time slicing', 'node_pool.time_slicing.mode': 'Time slicing',
      }))
    }
  }
  return (
    <form className="form inline" aria-label={editing ? `Edit node pool ${id(editing.name)}` : 'Create a node pool'} onSubmit={submit}>
      <label>Node pool id<input value={name} onChange={(e) => setName(e.target.value)} required disabled={!!editing} /></label>
      <label>Description<input value={description} onChange={(e) => setDescription(e.target.value)} maxLength={1024} /></label>
      <label>Node selector<input value={selector} onChange={(e) => setSelector(e.target.value)} placeholder="gpu=a100, zone=eu" /></label>
      <label>
        Placement
        <select value={placement} onChange={(e) => setPlacement(e.target.value)}>
          {PLACEMENTS.map((p) => <option key={p} value={p}>{enumLabel(p, 'PLACEMENT_STRATEGY_')}</option>)}
        </select>
      </label>
      <label>
        Time slicing
        <select value={slicing} onChange={(e) => setSlicing(e.target.value)}>
          {SLICING.map((m) => <option key={m} value={m}>{enumLabel(m, 'TIME_SLICING_MODE_')}</option>)}
        </select>
      </label>
      <button type="submit">{editing ? 'Save node pool' : 'Create node pool'}</button>
      <button type="button" className="secondary" onClick={onCancel}>Cancel</button>
      {error && <p role="alert" className="error">{error}</p>}
    </form>
  )
}
