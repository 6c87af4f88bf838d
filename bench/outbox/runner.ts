// One benchmark runner process: opens the store, says `ready`, waits for `go` on stdin, then claims
// and settles `deploy` rows until a claim comes back empty, and prints how many it settled.
// `row` settles each row in its own commit (as a lane doing slow work per row does); `batch` settles
// a claimed batch in one transaction.
// Usage: node --import tsx bench/outbox/runner.ts <store-url> <data-dir> <scope> <owner> <batch> <row|batch>
import {once} from 'node:events'
import {createInterface} from 'node:readline'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore, type Repositories} from '../../src/store/index.js'

const [url, dataDir, scope, owner, batch, commitPer] = process.argv.slice(2) as [string, string, string, string, string, 'row' | 'batch']
const store = await openStore(settingsSchema.parse({data_dir: dataDir, store: {url}}))
const lines = createInterface({input: process.stdin})
process.stdout.write('ready\n')
await once(lines, 'line')
lines.close()

let settled = 0
for (;;) {
  const rows = await store.outbox.claim({operation: 'deploy', scope, owner, limit: Number(batch), leaseSeconds: 600})
  if (rows.length === 0) break
  const settleAll = async (repositories: Repositories) => {
    for (const row of rows) {
      if (await repositories.outbox.settle(row.id, row.lease_token!, {status: 'completed'})) settled++
    }
  }
  if (commitPer === 'batch') await store.transaction(settleAll)
  else await settleAll(store)
}
await store.close()
process.stdout.write(`${JSON.stringify({settled})}\n`)
