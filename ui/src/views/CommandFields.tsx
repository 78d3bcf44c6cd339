import { useState } from 'react'
import { commandOf, runsText, type CommandMode } from '../spec'
import { Field } from './Field'

export const COMMAND_LABELS = { shell: 'Shell line', command: 'Command', args: 'Arguments, one per line' }

// useCommand holds what a pod runs as typed: a shell line (run with
// sh -c) or a command and its arguments, never split on spaces.
export function useCommand() {
  const [mode, setMode] = useState<CommandMode>('shell')
  const [shell, setShell] = useState('')
  const [program, setProgram] = useState('')
  const [argsText, setArgsText] = useState('')
  const reset = () => [setMode('shell'), setShell(''), setProgram(''), setArgsText('')]
  return { mode, setMode, shell, setShell, program, setProgram, argsText, setArgsText, reset, run: commandOf(mode, shell, program, argsText) }
}

// CommandFields asks for it and shows exactly what will run, word by word.
export function CommandFields({ c, problem, name = 'cmd' }: { c: ReturnType<typeof useCommand>; problem: (label: string) => string; name?: string }) {
  const words = [...c.run.command, ...c.run.args]
  return (
    <fieldset>
      <legend>What it runs</legend>
      <label className="check">
        <input type="radio" name={name} checked={c.mode === 'shell'} onChange={() => c.setMode('shell')} /> Through the shell (sh -c)
      </label>
      <label className="check">
        <input type="radio" name={name} checked={c.mode === 'exec'} onChange={() => c.setMode('exec')} /> As typed: a program and its arguments
      </label>
      {c.mode === 'shell' ? (
        <Field label={COMMAND_LABELS.shell} problem={problem(COMMAND_LABELS.shell)} hint="Quotes, pipes and variables are the shell's; empty runs the image's own command.">
          <input value={c.shell} onChange={(e) => c.setShell(e.target.value)} placeholder={`python train.py --name "run 1"`} spellCheck={false} />
        </Field>
      ) : (
        <>
          <Field label={COMMAND_LABELS.command} problem={problem(COMMAND_LABELS.command)} hint="The program alone; empty keeps the image's entrypoint.">
            <input value={c.program} onChange={(e) => c.setProgram(e.target.value)} placeholder="python" spellCheck={false} />
          </Field>
          <Field label={COMMAND_LABELS.args} problem={problem(COMMAND_LABELS.args)} hint="Each line is one argument, spaces and quotes kept.">
            <textarea rows={3} value={c.argsText} onChange={(e) => c.setArgsText(e.target.value)} spellCheck={false} />
          </Field>
        </>
      )}
      <p className="runs" aria-live="polite">
        {words.length ? (
          <>Runs <code data-testid="runs">{runsText(words)}</code>: {words.length} argument{words.length > 1 ? 's' : ''}, {words.map((w, i) => <code key={i} className="word">{w}</code>)}</>
        ) : (
          <>Runs the image's own command.</>
        )}
      </p>
    </fieldset>
  )
}
