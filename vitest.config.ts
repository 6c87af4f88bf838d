import {defineConfig} from 'vitest/config'

// Two projects: `unit` (test/unit: pure functions, no process, server or database; `npm run
// test:unit`, well under a minute) and `integration` (real edge host, workerd, PostgreSQL and CLI
// processes). `npm test` runs both.
export default defineConfig({
  test: {
    // Hang guards, not time limits: at load 30 on two cores (stress-ng beside other suites) a CLI-heavy
    // test that takes 5 s on an idle machine passed 60 s; nothing here asserts how long anything took.
    testTimeout: 180_000,
    hookTimeout: 300_000,
    // Integration tests start real workerd and PostgreSQL on two cores; much of a file's time is spent
    // waiting on those processes and on polls, so a third file at once keeps the cores busier.
    maxWorkers: 3,
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
