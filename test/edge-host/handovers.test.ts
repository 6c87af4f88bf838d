// A script handed over to another host of the kit (docs/many-hosts.md), in the host state file alone:
// no shard runs it and no cron trigger fires for it, the data plane's route says so, and an import of
// its data makes it run here again; handing it over twice keeps the first time.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterEach, beforeEach, expect, test} from 'vitest'
import {HostState, type ScriptUpload} from '../../src/edge-host/state/host-state.js'
import {scriptNameFor, stateUpload} from '../support/worker-fixtures.js'

let dataDir: string
let state: HostState

beforeEach(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-handovers-'))
  state = HostState.open(dataDir)
})
afterEach(() => {
  state.close()
  rmSync(dataDir, {recursive: true, force: true})
})

const name = scriptNameFor('handovers/counter')
const other = scriptNameFor('handovers/other')

function upload(text: string): ScriptUpload {
  return stateUpload(text, `export default {scheduled() {}, fetch() {return new Response(${JSON.stringify(text)})}}`, {crons: ['* * * * *']})
}

const running = (shard: number) => state.scripts.runnableScripts(shard).map((script) => script.name)
const cronScripts = () => state.cronRuns.triggers().map((trigger) => trigger.script)

test('a handed-over script is not run and fires no cron; an import makes it run again', () => {
  const shard = state.saveUpload(name, upload('one'), {count: 1, maxScriptsPerShard: 10})!
  state.saveUpload(other, upload('other'), {count: 1, maxScriptsPerShard: 10})
  expect(running(shard)).toEqual([name, other].sort())
  expect(cronScripts().sort()).toEqual([name, other].sort())

  expect(state.handovers.handOver(name, 1_000)).toBe(true)
  expect(state.handovers.handOver(name, 2_000)).toBe(false)
  expect(state.handovers.isHandedOver(name)).toBe(true)
  expect(running(shard)).toEqual([other])
  expect(cronScripts()).toEqual([other])
  expect(state.scripts.route(name)).toMatchObject({handedOver: true, retired: false})
  expect(state.scripts.route(other)).toMatchObject({handedOver: false})

  state.handovers.imported(name)
  expect(state.handovers.isHandedOver(name)).toBe(false)
  expect(state.handovers.wasImported(name)).toBe(true)
  expect(running(shard)).toEqual([name, other].sort())
  expect(cronScripts().sort()).toEqual([name, other].sort())
  expect(state.scripts.route(name)).toMatchObject({handedOver: false})

  // Handed over again (moved away once more): not run.
  expect(state.handovers.handOver(name)).toBe(true)
  expect(running(shard)).toEqual([other])
})

test('a name the host never held can be handed over: an upload of it is then kept, not run', () => {
  expect(state.handovers.handOver(name)).toBe(true)
  const shard = state.saveUpload(name, upload('one'), {count: 1, maxScriptsPerShard: 10})!
  expect(running(shard)).toEqual([])
  expect(state.scripts.route(name)).toMatchObject({handedOver: true})
})
