import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import { App } from './App'
import { handleCallback } from './sso'
import './styles.css'

const root = createRoot(document.getElementById('root')!)
if (handleCallback()) {
  // The single sign-on window, back from the provider (see sso.ts).
  root.render(
    <main className="login">
      <h1>Runway</h1>
      <p>Signing in. If this window stays open, close it and sign in again from Runway.</p>
    </main>,
  )
} else {
  root.render(
    <StrictMode>
      <App />
    </StrictMode>,
  )
}
