// Outbox row ids as git and docker take ids: the full id or a unique prefix (the status view shows 8
// characters), an ambiguous prefix as one line naming the candidates; and retry/cancel of every row a
// selection names. Through the real CLI on a SQLite data dir.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, beforeAll, expect, test} from 'vitest'
import {settingsSchema} from '../../src/config/schema.js'
import {openStore, type Store} from '../../src/store/index.js'
import {runCli, type CliResult} from '../support/cli.js'

const dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-outbox-ids-'))
const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--data-dir', dataDir])
const IDS = ['aaaa1111-0000-4000-8000-000000000001', 'aaaa2222-0000-4000-8000-000000000002', 'bbbb3333-0000-4000-8000-000000000003']
let store: Store

beforeAll(async () => {
  store = await openStore(settingsSchema.parse({data_dir: dataDir}))
  await store.migrate()
  for (const id of IDS) {
    await store.outbox.enqueue({id, operation: 'artifact_cleanup', dedupe_key: `test:${id}`, dispatch_namespace: 'onprem:0123456789ab', payload: {}})
  }
})
afterAll(async () => {
  await store?.close()
  rmSync(dataDir, {recursive: true, force: true})
})

const oneLine = (result: CliResult, code: number, line: string) => expect(result).toEqual({code, stdout: '', stderr: `error: ${line}\n`})

test('a unique prefix names its row; an ambiguous one lists the candidates (exit 2); an unknown one is not found (exit 5)', {timeout: 300_000}, async () => {
  const [shown, ambiguous, unknown, tooShort] = await Promise.all([
    cli('outbox', 'show', 'bbbb3333', '--json'),
    cli('outbox', 'cancel', 'aaaa'),
    cli('outbox', 'retry', 'cccc'),
    cli('outbox', 'show', 'bbb'),
  ])
  expect(shown.code).toBe(0)
  expect(JSON.parse(shown.stdout)).toMatchObject({id: IDS[2], status: 'pending'})
  oneLine(ambiguous, 2, `outbox row id prefix aaaa is ambiguous: ${IDS[0]}, ${IDS[1]}; give more characters`)
  oneLine(unknown, 5, 'outbox row cccc not found')
  oneLine(tooShort, 5, 'outbox row bbb not found')
  const cancelled = await cli('outbox', 'cancel', 'AAAA1111')
  expect(cancelled).toMatchObject({code: 0, stdout: `outbox row ${IDS[0]} cancelled (was pending); no lane takes it again\n`})
  expect((await store.outbox.get(IDS[1]!))?.status).toBe('pending')
})

test('retry and cancel act on every row a selection names; an id and a selection together are a usage error', {timeout: 300_000}, async () => {
  oneLine(await cli('outbox', 'cancel', 'bbbb3333', '--status', 'pending'), 2, 'give an id or a selection (--status, --operation, --older-than), not both')
  oneLine(await cli('outbox', 'cancel'), 2, 'give an outbox row id, or select rows with --status, --operation or --older-than')
  // Created just now: none is older than an hour.
  expect(await cli('outbox', 'cancel', '--status', 'pending', '--older-than', '1h')).toMatchObject({code: 0, stdout: '0 of 0 matching rows cancelled\n'})
  const bulk = await cli('outbox', 'cancel', '--status', 'pending', '--lane', 'artifact_cleanup', '--json')
  expect(bulk.code).toBe(0)
  expect(JSON.parse(bulk.stdout)).toMatchObject({done: [IDS[1], IDS[2]], refused: []})
  expect((await store.outbox.list({status: 'cancelled'})).map((row) => row.id).sort()).toEqual(IDS)
  // Finished rows are refused one by one; the command says which (exit 6).
  const again = await cli('outbox', 'retry', '--status', 'cancelled')
  expect(again.code).toBe(6)
  expect(again.stdout.split('\n')[0]).toBe('0 of 3 matching rows retried')
})
