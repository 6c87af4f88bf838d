// The options of the edge host benchmark (bench/host/run.ts), read once from the command line, and
// the work dir every part of it writes under (run.ts removes it).
import {mkdtempSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import {settingsSchema} from '../../src/config/schema.js'

const {values: options} = parseArgs({
  options: {
    seconds: {type: 'string', default: '10'},
    connections: {type: 'string', default: '32'},
    rounds: {type: 'string', default: '3'},
    swaps: {type: 'string', default: '5'},
    deploys: {type: 'string', default: '100'},
    workers: {type: 'string', default: '2000'},
    /** plane: throughput, deploy time, memory (1–3); neighbours: deploys of A against B (4); many: WORKERS Workers (5). */
    sections: {type: 'string', default: 'plane,neighbours,many'},
    /** ./operator.ts: environment settings for `host serve`, KEY=VALUE (repeatable). */
    env: {type: 'string', multiple: true, default: []},
    /** ./operator.ts: restart `host serve` after the deploy, so the Worker is served as after any start of the host. */
    'restart-after-deploy': {type: 'boolean', default: false},
    /** ./operator.ts: measure at once after the deploy, through the shard's loader (else after the settle swap, as an operator gets it). */
    loaded: {type: 'boolean', default: false},
    /** ./operator.ts: a Node option for the `host serve` process (repeatable), e.g. --cpu-prof. */
    'node-option': {type: 'string', multiple: true, default: []},
  },
})
export const SECONDS = Number(options.seconds)
export const CONNECTIONS = Number(options.connections)
export const ROUNDS = Number(options.rounds)
export const SWAPS = Number(options.swaps)
export const DEPLOYS = Number(options.deploys)
export const WORKERS = Number(options.workers)
export const EXTRA_ENV = options.env
export const HOST_NODE_OPTIONS = options['node-option']
export const RESTART_AFTER_DEPLOY = options['restart-after-deploy']
export const MEASURE_LOADED = options.loaded
export const SECTIONS = new Set(options.sections.split(','))
export const HELLO = fileURLToPath(new URL('../../fixtures/workers/hello/index.js', import.meta.url))
export const COUNTER = fileURLToPath(new URL('../../fixtures/workers/counter/index.js', import.meta.url))
export const workDir = mkdtempSync(path.join(os.tmpdir(), 'edgeworkers-bench-host-'))
export const DEFAULT_SHARDS = settingsSchema.parse({data_dir: workDir, store: {url: ''}}).host.shards
