// The Worker log file rotates by size: past max_bytes the file becomes .1, older ones shift up to
// .<keep>, the oldest is dropped; every line is whole, and the file is private to the host user.
import {existsSync, mkdtempSync, readFileSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, expect, test} from 'vitest'
import {WorkerLogFile} from '../../src/edge-host/worker-log-file.js'

const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-worker-log-'))
afterAll(() => rmSync(dir, {recursive: true, force: true}))

test('rotates by size, keeps `keep` old files, never splits a line', () => {
  const file = path.join(dir, 'workers.log')
  const log = new WorkerLogFile(file, 100, 2)
  // 10 lines of 40 bytes (with the newline): two per file before the next one passes 100 bytes.
  for (let index = 0; index < 10; index++) log.append([`{"n":${index},"pad":"${'x'.repeat(22)}"}`])
  const lines = (name: string) =>
    readFileSync(name, 'utf8')
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as {n: number}).n)
  expect(lines(file)).toEqual([8, 9])
  expect(lines(`${file}.1`)).toEqual([6, 7])
  expect(lines(`${file}.2`)).toEqual([4, 5])
  expect(existsSync(`${file}.3`)).toBe(false)
  expect(statSync(file).mode & 0o777).toBe(0o600)

  // A host restart picks up the size of the file it appends to.
  const reopened = new WorkerLogFile(file, 100, 2)
  reopened.append([`{"n":10,"pad":"${'x'.repeat(21)}"}`])
  expect(lines(file)).toEqual([10])
  expect(lines(`${file}.1`)).toEqual([8, 9])
})
