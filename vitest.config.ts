import {defineConfig} from 'vitest/config'

// Two projects: `unit` (test/unit: pure functions, no process, server or database; `npm run
// test:unit`, well under a minute) and `integration` (real edge host, workerd, PostgreSQL and CLI
// processes). `npm test` runs both.
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests start real workerd and PostgreSQL; two cores here, so keep parallelism modest.
    maxWorkers: 2,
    fileParallelism: true,
    // CI reads the JSON counts to print "N passed, N failed".
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: {json: 'test-results.json'},
    projects: [
      {extends: true, test: {name: 'unit', include: ['test/unit/**/*.test.{ts,tsx}']}},
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.{ts,tsx}'],
          exclude: ['test/unit/**'],
          globalSetup: ['test/support/global-setup.ts'],
        },
      },
    ],
  },
})
