// What a person types into the New workload form, read as the API's
// WorkloadSpec fields (pure and unit tested). Each parser returns null for
// text it cannot read, so the form can say so next to the field.

// parseCpu reads cores ("0.5", "4") as thousandths of a core; "" is unset.
export function parseCpu(s: string): number | undefined | null {
  const t = s.trim()
  if (t === '') return undefined
  if (!/^\d+(\.\d{1,3})?$/.test(t) && !/^\.\d{1,3}$/.test(t)) return null
  const m = Math.round(Number(t) * 1000)
  return m > 0 ? m : null
}

const UNITS: [RegExp, number][] = [
  [/^(ki|kib)$/i, 2 ** 10], [/^(mi|mib)$/i, 2 ** 20], [/^(gi|gib)$/i, 2 ** 30], [/^(ti|tib)$/i, 2 ** 40],
  [/^(k|kb)$/i, 1e3], [/^(m|mb)$/i, 1e6], [/^(g|gb)$/i, 1e9], [/^(t|tb)$/i, 1e12], [/^b?$/i, 1],
]

// parseBytes reads a size as the CLI does ("16Gi", "512 MiB", "20G",
// "1.5Gi"; a bare number is bytes); "" is unset.
export function parseBytes(s: string): number | undefined | null {
  const t = s.trim()
  if (t === '') return undefined
  const m = t.match(/^(\d+(?:\.\d+)?)\s*([a-z]*)$/i)
  if (!m) return null
  const unit = UNITS.find(([re]) => re.test(m[2]))
  if (!unit) return null
  const b = Math.round(Number(m[1]) * unit[1])
  return b > 0 && Number.isSafeInteger(b) ? b : null
}

export type CommandMode = 'shell' | 'exec'

// commandOf is the command and arguments the pod runs: a shell line goes to
// `sh -c` whole (the shell reads its quotes); a command and its arguments
// are taken as typed, one argument a line, never split on spaces. Empty
// leaves the image's entrypoint (and, with no arguments, its arguments).
export function commandOf(mode: CommandMode, line: string, program: string, argsText: string): { command: string[]; args: string[] } {
  if (mode === 'shell') return line.trim() ? { command: ['sh', '-c', line], args: [] } : { command: [], args: [] }
  const args = argsText === '' ? [] : argsText.split('\n').map((a) => a.replace(/\r$/, ''))
  while (args.length && args[args.length - 1] === '') args.pop()
  return { command: program.trim() ? [program.trim()] : [], args }
}

// shellWord quotes one argument so a POSIX shell reads it back unchanged
// (the preview of what will run).
export function shellWord(w: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`
}

export const runsText = (words: string[]) => words.map(shellWord).join(' ')

// parseEnv reads NAME=VALUE lines (the value may hold = and spaces); null
// names the first line that is not NAME=VALUE.
export function parseEnv(text: string): { env: { name: string; value: string }[] } | { bad: string } {
  const env: { name: string; value: string }[] = []
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    const i = line.indexOf('=')
    const name = i < 0 ? '' : line.slice(0, i).trim()
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return { bad: line }
    env.push({ name, value: line.slice(i + 1) })
  }
  return { env }
}

export interface Priority { name: string; value: number; preemptible: boolean }

// PRIORITIES are the priority classes, highest first, and the types that
// may ask for each (the workload service's AllowedPriorities).
export const PRIORITIES: (Priority & { types: string[] })[] = [
  { name: 'inference', value: 125, preemptible: false, types: ['inference'] },
  { name: 'build', value: 100, preemptible: false, types: ['workspace'] },
  { name: 'interactive-preemptible', value: 75, preemptible: true, types: ['workspace', 'training'] },
  { name: 'train', value: 50, preemptible: true, types: ['training'] },
]

// DEFAULT_PRIORITY is the class of a type that names none.
export const DEFAULT_PRIORITY: Record<string, string> = { training: 'train', workspace: 'build', inference: 'inference' }

// priorityText says what a class means for the workload, in the product's
// words: a preemptible class may exceed the project's quota.
export function priorityText(p: Priority): string {
  return p.preemptible
    ? `${p.name} (${p.value}): allow the workload to exceed the project's quota; it may be preempted`
    : `${p.name} (${p.value}): stays within the project's quota; never preempted`
}
