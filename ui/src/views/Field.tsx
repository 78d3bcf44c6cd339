import { cloneElement, useId } from 'react'

// Field is one labelled form field: its label and the policy's rule, the
// control, a hint, and the problem with what was typed (the form's early
// check or the server's answer, in the form's words), which the control
// is described by.
export function Field({ label, rule, problem, hint, children }: {
  label: string; rule?: string; problem?: string; hint?: string; children: React.ReactElement
}) {
  const uid = useId()
  const described = [hint && `${uid}-hint`, problem && `${uid}-problem`].filter(Boolean).join(' ') || undefined
  return (
    <div className="field">
      <label>
        <span>{label} {rule && <span className="rule">{rule}</span>}</span>
        {cloneElement(children, { 'aria-describedby': described, 'aria-invalid': problem ? true : undefined })}
      </label>
      {hint && <span id={`${uid}-hint`} className="hint">{hint}</span>}
      {problem && <span id={`${uid}-problem`} className="problem">{problem}</span>}
    </div>
  )
}
