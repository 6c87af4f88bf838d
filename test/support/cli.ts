// Tests run the CLI exactly as users do: the built bin/run.js with its oclif manifest. `npm test`
// builds first (the pretest script), so dist/ always matches the sources under test.
import path from 'node:path'
import {fileURLToPath} from 'node:url'

export const CLI_BIN = path.join(fileURLToPath(new URL('../..', import.meta.url)), 'bin', 'run.js')
