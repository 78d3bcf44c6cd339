import { defineConfig } from 'vitest/config'

// The end-to-end run: each file's steps in order, one file at a time, against a real
// `runway dev` (bin/runway) driven through Debian's Chromium.
export default defineConfig({
  test: {
    environment: 'node',
    include: ['e2e/**/*.e2e.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    globalSetup: ['e2e/setup.ts'],
  },
})
