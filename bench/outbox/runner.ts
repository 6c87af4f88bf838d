// One benchmark runner process: opens the store, says `ready`, waits for `go` on stdin, then claims
// and settles `deploy` rows until a claim comes back empty, and prints how many it settled.
// Usage: node --import tsx bench/outbox/runner.ts <store-url> <data-dir> <scope> <owner> <batch>
import {once} from 'node:events'
import {createInterface} from 'node:readline'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore} from '../../src/store/index.js'

const [url, dataDir, scope, owner, batch] = process.argv.slice(2) as [string, string, string, string, string]
const store = await openStore(settingsSchema.parse({data_dir: dataDir, store: {url}}))
const lines = createInterface({input: process.stdin})
process.stdout.write('ready\n')
await once(lines, 'line')
lines.close()

let settled = 0
for (;;) {
  const rows = await store.outbox.claim({operation: 'deploy', scope, owner, limit: Number(batch), leaseSeconds: 600})
  if (rows.length === 0) break
  for (const row of rows) {
    if (await store.outbox.settle(row.id, row.lease_token!, {status: 'completed'})) settled++
  }
}
await store.close()
process.stdout.write(`${JSON.stringify({settled})}\n`)
