// One OS process of the multi-process claim test: claims `deploy` rows of one scope in batches and
// settles each, until a claim comes back empty. Prints {owner, settled, lost} as JSON on stdout.
// Usage: node --import tsx test/store/claim-runner.ts <store-url> <data-dir> <scope> <owner>
import {settingsSchema} from '../../src/config/schema.js'
import {openStore} from '../../src/store/index.js'

const [url, dataDir, scope, owner] = process.argv.slice(2) as [string, string, string, string]
const store = await openStore(settingsSchema.parse({data_dir: dataDir, store: {url}}))
const settled: string[] = []
let lost = 0
try {
  for (;;) {
    const rows = await store.outbox.claim({operation: 'deploy', scope, owner, limit: 10, leaseSeconds: 600})
    if (rows.length === 0) break
    for (const row of rows) {
      if (await store.outbox.settle(row.id, row.lease_token!, {status: 'completed', attempted: true})) settled.push(row.id)
      else lost++
    }
  }
} finally {
  await store.close()
}
process.stdout.write(JSON.stringify({owner, settled, lost}))
