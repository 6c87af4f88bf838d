// A shard's workerd config for a Worker under a gradual deployment: the split release reaches its
// Worker's storage services — one set per Worker, serving the storage bindings of both releases,
// in the Worker's Durable Object storage — and the Worker's cron triggers and queue consumers are
// run by the current release alone.
import {expect, test} from 'vitest'
import {renderShardConfig, workersOf} from '../../../src/workerd/config.js'
import {type RunnableScript, splitServiceName} from '../../../src/workerd/script.js'

const NAME = `dw-${'a'.repeat(48)}`
const base: Omit<RunnableScript, 'name' | 'bindings'> = {
  releaseGeneration: 'g',
  mainModule: 'worker.js',
  compatibilityDate: '2025-06-01',
  compatibilityFlags: [],
  modules: [{name: 'worker.js', type: 'esModule', sha256: 'f'.repeat(64), size: 1}],
  crons: [],
  queueConsumers: [],
  secrets: [],
  serviceAccounts: [],
  runtimeConfig: [],
  operationSettingsJson: null,
}
const current: RunnableScript = {
  ...base,
  name: NAME,
  bindings: [{type: 'kv_namespace', name: 'CACHE', namespaceId: 'cache'}],
  crons: ['* * * * *'],
  queueConsumers: [{queue: 'jobs', maxBatchSize: 1, maxBatchTimeout: 5, maxRetries: 3, deadLetterQueue: null, retryDelay: 0, maxConcurrency: 1}],
}
// The kept release has a D1 database the current one dropped, and sends to the queue.
const kept: RunnableScript = {
  ...base,
  name: splitServiceName(NAME),
  bindings: [
    {type: 'kv_namespace', name: 'CACHE', namespaceId: 'cache'},
    {type: 'd1_database', name: 'DB', databaseId: 'db'},
    {type: 'queue', name: 'JOBS', queue: 'jobs', deliveryDelay: 0},
  ],
}

test("one set of storage services per Worker, serving both releases' bindings; triggers stay with the current release", () => {
  const workers = workersOf([current, kept])
  expect(workers.map((worker) => [worker.name, worker.bindings.map((binding) => binding.type), worker.crons, worker.queueConsumers.length])).toEqual([
    [NAME, ['kv_namespace', 'kv_namespace', 'd1_database', 'queue'], ['* * * * *'], 1],
  ])
  // The kept release alone (the current one not on this shard) still names its Worker's services, with no triggers.
  expect(workersOf([kept]).map((worker) => [worker.name, worker.crons, worker.queueConsumers])).toEqual([[NAME, [], []]])

  const {text, sockets} = renderShardConfig([current, kept], {
    modulePath: (sha256) => sha256,
    egressAllow: ['public'],
    serviceBindingAddress: 'unix:/services.sock',
    socketAddress: (service) => `unix:/sock/${service}`,
    durableObjectRoot: (script) => `/do/${script}`,
    tailSinkAddress: null,
    traced: () => false,
    loaderCodeAddress: null,
    experimental: false,
  })
  const services = [...text.matchAll(/^ {4}\(name = "([^"]+)", (?:worker|disk|external) =/gm)].map((match) => match[1])
  expect(services.filter((service) => service!.includes(NAME)).sort()).toEqual(
    [NAME, kept.name, `kv:${NAME}`, `d1-${NAME}`, `queues-${NAME}`, `do:${NAME}`].sort(),
  )
  expect(sockets.filter((socket) => socket.includes(NAME)).sort()).toEqual([NAME, kept.name, `d1-${NAME}`, `queues-${NAME}`].sort())
  // The kept release's bindings name the Worker's services.
  expect(text).toContain(
    `(name = "DB", wrapped = (moduleName = "cloudflare-internal:d1-api", innerBindings = [(name = "fetcher", service = (name = "d1-${NAME}"`,
  )
  expect(text).toContain(`(name = "JOBS", queue = (name = "queues-${NAME}"`)
  // The cron Worker and the queue's consumer are the current release.
  expect(text).toContain(`bindings = [(name = "${NAME}", service = "${NAME}")]`)
  expect(text).toContain(`(name = "CONSUMER", service = "${NAME}")`)
  expect(text).not.toContain(`service = "${kept.name}")]`)
})
