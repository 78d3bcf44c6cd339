import type { FieldRule } from './types'

// ruleText shows a field's rule as the policy states it.
export function ruleText(r?: FieldRule): string {
  if (!r) return ''
  const parts: string[] = []
  if (r.required) parts.push('required')
  if (r.min !== undefined) parts.push(`min ${r.min}`)
  if (r.max !== undefined) parts.push(`max ${r.max}`)
  if (r.step !== undefined) parts.push(`step ${r.step}`)
  if (r.options?.length) parts.push(`one of ${r.options.join(', ')}`)
  if (r.canEdit === false) parts.push('fixed by policy')
  return parts.join('; ')
}

// checkRule is the client's early answer while typing; the server's answer
// on submit is the truth.
export function checkRule(value: number | undefined, r?: FieldRule): string {
  if (!r || value === undefined) return ''
  if (r.max !== undefined && value > r.max) return `at most ${r.max}`
  if (r.min !== undefined && value < r.min) return `at least ${r.min}`
  return ''
}
