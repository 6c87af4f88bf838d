// One OS process of the concurrent-passes test: runs reconcile passes (recovery and artifact
// cleanup) until one finds nothing to claim, with a recording dispatch (no host) and a real
// FileArtifactStore whose deletes are recorded. Prints {owner, dispatched, deleted} as JSON.
// Usage: node --import tsx test/engine/pass/pass-runner.ts <store-url> <data-dir> <owner>
import {FileArtifactStore, type ArtifactStore} from '../../../src/artifacts/store.js'
import {settingsSchema} from '../../../src/config/schema.js'
import {silentLogger} from '../../../src/engine/context.js'
import {runPass} from '../../../src/engine/pass/index.js'
import {openStore} from '../../../src/store/index.js'
import {readyProvider, recordingDispatch} from './support.js'

const [url, dataDir, owner] = process.argv.slice(2) as [string, string, string]
// Exclusivity is under test, not durability: commits need not wait for the disk (see the test for PostgreSQL).
const settings = settingsSchema.parse({data_dir: dataDir, store: {url, sqlite_synchronous: 'normal'}})
const store = await openStore(settings)
const files = await FileArtifactStore.open(dataDir)
const deleted: string[] = []
const artifacts: ArtifactStore = {
  put: (kind, bytes) => files.put(kind, bytes),
  get: (key, maxBytes) => files.get(key, maxBytes),
  has: (key) => files.has(key),
  delete: async (key) => {
    deleted.push(key)
    await files.delete(key)
  },
}
const dispatch = recordingDispatch()
const resolution = readyProvider()
try {
  const engine = {store, settings, artifacts, owner, log: silentLogger, resolveProvider: async () => resolution}
  for (;;) {
    const result = await runPass(engine, {lanes: ['recovery', 'artifact_cleanup'], dispatchDeploy: dispatch})
    const errors = result.lanes.flatMap((lane) => (lane.error ? [`${lane.lane}: ${lane.error}`] : []))
    if (errors.length > 0) throw new Error(errors.join('; '))
    if (result.lanes.every((lane) => lane.claimed === 0)) break
  }
} finally {
  await store.close()
}
process.stdout.write(JSON.stringify({owner, dispatched: dispatch.calls.map((call) => call.outboxId), deleted}))
