// KV's size limits are host settings (host.kv_max_value_bytes, kv_max_key_bytes,
// kv_max_metadata_bytes; Cloudflare's by default, which test/bindings/kv.test.ts holds against
// miniflare): a host with smaller ones takes a put at each limit and refuses one byte past it, worded
// as Cloudflare words the refusal. One code-loading mode: a Worker with KV runs on its own socket in
// either (test/bindings/kv.test.ts holds the KV service against miniflare in both).
import {request} from 'undici'
import {describe, expect, test} from 'vitest'
import {kitWithHost} from '../support/cli-kit.js'
import {KV_WORKER, type KvStep} from './kv-worker-fixture.js'

const TOML = ['name = "limits"', 'main = "worker.js"', 'compatibility_date = "2025-06-01"', '[[kv_namespaces]]', 'binding = "CACHE"'].join('\n')

describe.each(['loader'] as const)('code_loading = %s', (codeLoading) => {
  const kit = kitWithHost(`kv-limits-${codeLoading}`, {
    settings: {shards: 1, code_loading: codeLoading, kv_max_value_bytes: 1000, kv_max_key_bytes: 16, kv_max_metadata_bytes: 40},
  })

  test('a put at each set limit is stored; one byte past it is refused as Cloudflare refuses it', {timeout: 120_000}, async () => {
    const {url} = await kit.deploy(kit.project('limits', {'wrangler.toml': TOML, 'worker.js': KV_WORKER}))
    const run = async (step: KvStep) => (await request(url, {method: 'POST', body: JSON.stringify(step)})).body.json()
    const steps: Array<[KvStep, unknown]> = [
      [{op: 'put', key: 'value', value: {repeat: {bytes: 1000, byte: 1}}}, {result: null}],
      [{op: 'put', key: 'value', value: {repeat: {bytes: 1001, byte: 1}}}, {error: 'Error: KV PUT failed: 413 Value length of 1001 exceeds limit of 1000.'}],
      [{op: 'put', key: 'k'.repeat(16), value: 'x'}, {result: null}],
      [{op: 'put', key: 'k'.repeat(17), value: 'x'}, {error: 'Error: KV PUT failed: 414 UTF-8 encoded length of 17 exceeds key length limit of 16.'}],
      [{op: 'get', key: 'k'.repeat(17)}, {error: 'Error: KV GET failed: 414 UTF-8 encoded length of 17 exceeds key length limit of 16.'}],
      // {"m":"…"} is 8 bytes around the text.
      [{op: 'put', key: 'meta', value: 'x', options: {metadata: {m: 'm'.repeat(32)}}}, {result: null}],
      [
        {op: 'put', key: 'meta', value: 'x', options: {metadata: {m: 'm'.repeat(33)}}},
        {error: 'Error: KV PUT failed: 413 Metadata length of 41 exceeds limit of 40.'},
      ],
      [{op: 'get', key: 'value', options: 'arrayBuffer'}, {result: {arrayBuffer: {bytes: 1000, sha256: expect.any(String)}}}],
      [{op: 'getWithMetadata', key: 'meta'}, {result: {value: 'x', metadata: {m: 'm'.repeat(32)}, cacheStatus: null}}],
    ]
    const answers = []
    for (const [step] of steps) answers.push(await run(step))
    expect(answers).toEqual(steps.map(([, answer]) => answer))
  })
})
