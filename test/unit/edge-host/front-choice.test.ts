// host.front = "auto" resolves per start: HAProxy when a haproxy ≥ 2.4 is found (on the PATH, or in the
// directories searched after it), else the Node data plane, saying why; "haproxy" without one is refused.
import {chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterAll, expect, test} from 'vitest'
import {chooseFront} from '../../../src/edge-host/front/front-choice.js'

const root = mkdtempSync(path.join(tmpdir(), 'front-choice-'))
afterAll(() => rmSync(root, {recursive: true, force: true}))

/** A directory holding a `haproxy` that prints `versionLine` for `-v`, as real ones do. */
function fakeHaproxy(name: string, versionLine: string): string {
  const directory = path.join(root, name)
  mkdirSync(directory)
  writeFileSync(path.join(directory, 'haproxy'), `#!/bin/sh\necho '${versionLine}'\necho 'Status: long-term supported branch'\n`)
  chmodSync(path.join(directory, 'haproxy'), 0o755)
  return directory
}

const current = fakeHaproxy('current', 'HAProxy version 2.6.12-1+deb12u1 2023/12/16 - https://haproxy.org/')
const newer = fakeHaproxy('newer', 'HAProxy version 3.0.5-1 2024/09/19 - https://haproxy.org/')
const old = fakeHaproxy('old', 'HA-Proxy version 2.2.9-2+deb11u5 2023/04/10 - https://haproxy.org/')
const mute = fakeHaproxy('mute', 'not a version')
const empty = path.join(root, 'empty')
mkdirSync(empty)

test('auto takes a haproxy ≥ 2.4 on the PATH, or in a directory searched after it', async () => {
  expect(await chooseFront('auto', {path: [empty, current].join(path.delimiter), directories: []})).toEqual({
    front: 'haproxy',
    binary: path.join(current, 'haproxy'),
    version: '2.6.12-1+deb12u1',
  })
  expect(await chooseFront('auto', {path: '', directories: [newer]})).toMatchObject({front: 'haproxy', version: '3.0.5-1'})
  // The PATH's comes first.
  expect(await chooseFront('auto', {path: current, directories: [old]})).toMatchObject({front: 'haproxy', binary: path.join(current, 'haproxy')})
})

test('auto falls back to the Node data plane without a haproxy, with one older than 2.4, or one that names no version', async () => {
  expect(await chooseFront('auto', {path: empty, directories: []})).toEqual({front: 'node', reason: 'no haproxy binary on PATH'})
  expect(await chooseFront('auto', {path: empty, directories: ['/nonexistent']})).toEqual({
    front: 'node',
    reason: 'no haproxy binary on PATH or in /nonexistent',
  })
  expect(await chooseFront('auto', {path: old, directories: []})).toEqual({
    front: 'node',
    reason: `${path.join(old, 'haproxy')} is HAProxy 2.2.9-2+deb11u5, older than 2.4`,
  })
  expect(await chooseFront('auto', {path: mute, directories: []})).toEqual({
    front: 'node',
    reason: `${path.join(mute, 'haproxy')} -v reports no HAProxy version`,
  })
})

test('"haproxy" without a usable haproxy is a configuration error; "node" looks for none', async () => {
  expect(await chooseFront('haproxy', {path: current, directories: []})).toMatchObject({front: 'haproxy'})
  await expect(chooseFront('haproxy', {path: old, directories: []})).rejects.toMatchObject({
    code: 'config_invalid',
    message: `host.front = "haproxy": ${path.join(old, 'haproxy')} is HAProxy 2.2.9-2+deb11u5, older than 2.4 (Debian: apt-get install haproxy)`,
  })
  await expect(chooseFront('haproxy', {path: empty, directories: []})).rejects.toMatchObject({code: 'config_invalid'})
  expect(await chooseFront('node', {path: current, directories: []})).toEqual({front: 'node'})
})
