import { ApiError } from './api'

// A form's fields as the API names them (AIP-193 paths, proto names) and
// as the form labels them. The server's answer is put next to the field it
// names, in the form's words.
export type Labels = Record<string, string>

// Problems are the server's refusals: per form field, and the rest.
export interface Problems { fields: Record<string, string>; rest: string }

// labelFor finds the label of a field path: the longest known prefix
// ("workload.spec.gpu.devices" under "workload.spec.gpu"), else ''.
function labelFor(path: string, labels: Labels): string {
  for (let p = path; p; p = p.includes('.') ? p.slice(0, p.lastIndexOf('.')) : '') {
    if (labels[p]) return labels[p]
    const bare = p.replace(/\[[^\]]*\]/g, '')
    if (labels[bare]) return labels[bare]
  }
  return ''
}

// inWords replaces the API's field names in a server message with the
// form's labels ("use fraction_milli" -> "use “Fraction of one GPU”").
export function inWords(text: string, labels: Labels): string {
  const leaves = Object.entries(labels).map(([path, label]) => [path.slice(path.lastIndexOf('.') + 1), label] as const)
  return leaves
    .filter(([leaf]) => leaf.includes('_'))
    .reduce((t, [leaf, label]) => t.replace(new RegExp(`\\b${leaf}\\b`, 'g'), `“${label}”`), text)
}

// problemText is an error as one line for a form that shows it once: each
// violation led by the label of its field (the API's path where the form
// has none).
export function problemText(err: unknown, labels: Labels): string {
  if (!(err instanceof ApiError) || !err.violations.length) return problemsOf(err, labels).rest
  return err.violations.map((v) => `${labelFor(v.field, labels) ? `“${labelFor(v.field, labels)}”` : v.field}: ${inWords(v.description, labels)}`).join('; ')
}

// problemsOf reads an error: each field violation goes to the field its
// label names (keyed by label), with the rule that failed in the form's
// words; what names no field of the form stays in rest.
export function problemsOf(err: unknown, labels: Labels): Problems {
  if (!(err instanceof ApiError)) return { fields: {}, rest: err instanceof Error ? err.message : String(err) }
  const fields: Record<string, string> = {}
  const rest: string[] = []
  for (const v of err.violations) {
    const label = labelFor(v.field, labels)
    const desc = inWords(v.description, labels)
    if (label) fields[label] = fields[label] ? `${fields[label]}; ${desc}` : desc
    else rest.push(`${v.field}: ${desc}`)
  }
  if (!err.violations.length) return { fields, rest: inWords(err.message, labels) }
  const named = Object.keys(fields)
  const head = named.length ? `Check ${named.map((l) => `“${l}”`).join(', ')}: each says what to fix.` : ''
  return { fields, rest: [head, ...rest].filter(Boolean).join(' ') }
}
