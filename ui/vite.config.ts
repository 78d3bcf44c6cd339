import { defineConfig } from 'vitest/config'
import react from '@vitejs/plugin-react'

// The bundle goes straight into the Go package that embeds it. OUT_DIR lets
// scripts/check-ui.sh build a second copy to compare with the committed one.
export default defineConfig({
  plugins: [react()],
  build: {
    outDir: process.env.OUT_DIR ?? '../pkg/webui/dist',
    emptyOutDir: true,
    // No inline assets: the CSP allows nothing inline.
    assetsInlineLimit: 0,
    sourcemap: false,
  },
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.{ts,tsx}'],
  },
})
