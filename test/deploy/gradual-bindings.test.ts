// Gradual deployments of Workers with bindings and static assets, against a real edge host running
// real workerd, under both host.code_loading modes: the two versions of a split read and write the
// same KV namespace, D1 database, R2 bucket and queue (a Worker's data is one whatever the version,
// as on Cloudflare); the current version's queue() consumes what either version sends; each version
// serves its own static assets — by the percentages, under a Cloudflare-Workers-Version-Key (the
// asset and the Worker's answer of one key come from one version) and under the overrides header —
// through the data plane and through its own ASSETS binding.
import {request} from 'undici'
import {describe, expect, test} from 'vitest'
import {kitWithHost} from '../support/cli-kit.js'
import {splitWorkerFiles as files} from '../support/split-worker.js'

describe.each(['restart', 'loader'] as const)('gradual deployments with bindings and assets, code_loading = %s', (codeLoading) => {
  const kit = kitWithHost(`gradual-bindings-${codeLoading}`, {settings: {shards: 1, code_loading: codeLoading}})

  /** v1 at 100 %, then v2 at 50 % beside it: the script and both version ids. */
  async function split(label: string, data: boolean) {
    const department = await kit.newDepartment()
    const deploy = async (version: string, ...flags: string[]) => {
      const result = await kit.cli('deploy', kit.project(`${label}-${version}`, files(version, data)), '--department', department, ...flags, '--json')
      expect({code: result.code, stderr: result.stderr}).toEqual({code: 0, stderr: expect.any(String)})
      const outcome = JSON.parse(result.stdout) as {state: string; url: string; versionId: string}
      expect(outcome.state).toBe('completed')
      return outcome
    }
    const v1 = await deploy('v1')
    const v2 = await deploy('v2', '--percentage', '50')
    const script = new URL(v1.url).pathname.split('/')[1]!
    const on = {v1: v1.versionId, v2: v2.versionId}
    /** The answer of the Worker at `pathname`, from `version` (the overrides header) or as the percentages or a key choose. */
    const get = async (pathname: string, choice: {version?: 'v1' | 'v2'; key?: string} = {}) => {
      const headers: Record<string, string> = {}
      if (choice.version) headers['cloudflare-workers-version-overrides'] = `${script}="${on[choice.version]}"`
      if (choice.key) headers['cloudflare-workers-version-key'] = choice.key
      const response = await request(`${kit.host.publicUrl}/${script}${pathname}`, {headers})
      expect(response.statusCode, pathname).toBe(200)
      return {text: await response.body.text(), version: response.headers['x-version']}
    }
    return {get}
  }

  test('the two versions read and write the same KV, D1, R2 and queue; the current version consumes', {timeout: 240_000}, async () => {
    const {get} = await split('data', true)
    for (const kind of ['kv', 'd1', 'r2']) {
      for (const [writer, reader] of [
        ['v1', 'v2'],
        ['v2', 'v1'],
      ] as const) {
        const key = `${kind}-from-${writer}`
        expect(await get(`/${kind}/put?key=${key}&value=${writer}`, {version: writer})).toEqual({text: 'ok', version: writer})
        expect(await get(`/${kind}/get?key=${key}`, {version: reader})).toEqual({text: writer, version: reader})
      }
    }
    // Sent from either version into the Worker's one queue; queue() runs on the current version (v2), as scheduled() does.
    for (const sender of ['v1', 'v2'] as const) expect((await get(`/queue/send?value=from-${sender}`, {version: sender})).text).toBe('ok')
    for (const sender of ['v1', 'v2']) {
      await expect.poll(async () => (await get(`/kv/get?key=consumed:from-${sender}`, {version: 'v1'})).text, {timeout: 30_000, interval: 200}).toBe('v2')
    }
  })

  for (const data of [false, true]) {
    test(`each version serves its own static assets (${data ? 'with' : 'without'} storage bindings)`, {timeout: 240_000}, async () => {
      const {get} = await split(data ? 'site-data' : 'site', data)
      for (const version of ['v1', 'v2'] as const) {
        expect((await get('/version.txt', {version})).text).toBe(`assets of ${version}`)
        expect(await get('/binding-asset', {version})).toEqual({text: `assets of ${version}`, version})
      }
      // A key's asset and its Worker answer come from one version; both versions have keys.
      const seen = new Set<string>()
      for (let i = 0; i < 40; i++) {
        const key = `session-${i}`
        const {version} = await get('/', {key})
        expect((await get('/version.txt', {key})).text).toBe(`assets of ${version}`)
        seen.add(String(version))
      }
      expect(seen).toEqual(new Set(['v1', 'v2']))
      // By the percentages alone: both versions' assets, each whole.
      const drawn = new Set<string>()
      for (let i = 0; i < 60; i++) drawn.add((await get('/version.txt')).text)
      expect(drawn).toEqual(new Set(['assets of v1', 'assets of v2']))
    })
  }
})
