// One OS process of the concurrent-passes test: runs reconcile passes (recovery and artifact
// cleanup) until one finds nothing to claim, with a recording dispatch (no host) and a real
// FileArtifactStore whose deletes are recorded, for the kit of <scope> (default the tests' SCOPE).
// Prints {owner, dispatched, deleted, remaining} as JSON (remaining: the last pass's failed/uncertain count).
// Usage: node --import tsx test/engine/pass/pass-runner.ts <store-url> <data-dir> <owner> [scope]
import {FileArtifactStore, type ArtifactStore} from '../../../src/artifacts/store.js'
import {settingsSchema} from '../../../src/config/schema.js'
import {silentLogger} from '../../../src/engine/context.js'
import {runPass} from '../../../src/engine/pass/index.js'
import {openStore} from '../../../src/store/index.js'
import {readyProvider, recordingDispatch, SCOPE} from './support.js'
import {onPremHosts} from '../../../src/provider/onprem/hosts.js'

const [url, dataDir, owner, scope = SCOPE] = process.argv.slice(2) as [string, string, string, string?]
// Exclusivity is under test, not durability: commits need not wait for the disk (see the test for PostgreSQL).
const settings = settingsSchema.parse({data_dir: dataDir, store: {url, sqlite_synchronous: 'normal'}})
const store = await openStore(settings)
const files = await FileArtifactStore.open(dataDir)
const deleted: string[] = []
const artifacts: ArtifactStore = {
  put: (kind, bytes) => files.put(kind, bytes),
  get: (key, maxBytes) => files.get(key, maxBytes),
  has: (key) => files.has(key),
  list: (kind) => files.list(kind),
  deleteIfNotPutSince: (key, cutoff) => files.deleteIfNotPutSince(key, cutoff),
  delete: async (key) => {
    deleted.push(key)
    await files.delete(key)
  },
}
const dispatch = recordingDispatch(undefined, scope)
const resolution = readyProvider({}, scope)
let remaining: unknown = null
try {
  const engine = {store, settings, artifacts, owner, log: silentLogger, hosts: onPremHosts, resolveProvider: async () => resolution}
  for (;;) {
    const result = await runPass(engine, {lanes: ['recovery', 'artifact_cleanup'], dispatchDeploy: dispatch})
    const errors = result.lanes.flatMap((lane) => (lane.error ? [`${lane.lane}: ${lane.error}`] : []))
    if (errors.length > 0) throw new Error(errors.join('; '))
    remaining = result.remaining
    if (result.lanes.every((lane) => lane.claimed === 0)) break
  }
} finally {
  await store.close()
}
process.stdout.write(JSON.stringify({owner, dispatched: dispatch.calls.map((call) => call.outboxId), deleted, remaining}))
