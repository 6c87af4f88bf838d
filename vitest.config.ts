import {defineConfig} from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'test/**/*.test.tsx'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests start real workerd and PostgreSQL; two cores here, so keep parallelism modest.
    maxWorkers: 2,
    fileParallelism: true,
    // CI reads the JSON counts to print "N passed, N failed".
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: {json: 'test-results.json'},
  },
})
