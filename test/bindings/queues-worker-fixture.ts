// The Worker the queue tests run on the edge host and under miniflare (the oracle): POST /send puts
// messages on a queue (send() or sendBatch()), GET /received answers what its queue() handler was
// given, which it records in a Durable Object of its own. A message's body says how the consumer
// treats it: {tag, retryUntil: n} retries it until its nth attempt, {tag, throwUntil: n} makes the
// whole handler throw until then, {tag, retryAll: n} calls batch.retryAll() until then; {tag, ack}
// is acked before {tag, throwOnce} makes the handler throw on its first attempt, {tag, retryLater: n}
// is retried with a delay of 1 s until its nth attempt, and every batch of queue "ackall" is acked
// with ackAll() before the handler throws.
export const QUEUES_WORKER = `import {DurableObject} from "cloudflare:workers";

export class Log extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS batches (seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT, messages TEXT)");
  }
  record(queue, messages) {
    this.ctx.storage.sql.exec("INSERT INTO batches (queue, messages) VALUES (?, ?)", queue, JSON.stringify(messages));
  }
  all() {
    return this.ctx.storage.sql.exec("SELECT queue, messages FROM batches ORDER BY seq").toArray().map((row) => ({queue: row.queue, messages: JSON.parse(row.messages)}));
  }
}

const log = (env) => env.LOG.get(env.LOG.idFromName("log"));

function describe(body) {
  if (body instanceof ArrayBuffer) return {bytes: [...new Uint8Array(body)]};
  if (body instanceof Map) return {map: [...body]};
  if (body instanceof Date) return {date: body.toISOString()};
  return body;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/received") return Response.json(await log(env).all());
    const {binding, messages, batch, options} = await request.json();
    const body = (message) => (message.bytes ? new Uint8Array(message.bytes) : message.map ? new Map(message.map) : message.body);
    try {
      if (batch) await env[binding].sendBatch(messages.map((message) => ({body: body(message), contentType: message.contentType, delaySeconds: message.delaySeconds})), options);
      else for (const message of messages) await env[binding].send(body(message), {contentType: message.contentType, delaySeconds: message.delaySeconds});
      return Response.json({sent: messages.length});
    } catch (error) {
      return Response.json({error: String(error.message ?? error)});
    }
  },
  async queue(batch, env) {
    await log(env).record(batch.queue, batch.messages.map((message) => ({id: message.id, timestamp: message.timestamp.getTime(), attempts: message.attempts, body: describe(message.body)})));
    const bodies = batch.messages.map((message) => message.body);
    // An explicit ack wins over the handler's failure; ackAll() acks the whole batch.
    if (batch.queue === "ackall") {
      batch.ackAll();
      throw new Error("thrown after ackAll");
    }
    for (const message of batch.messages) if (message.body?.ack) message.ack();
    if (batch.messages.some((message) => message.body?.throwOnce && message.attempts < 2)) throw new Error("the handler failed once");
    if (bodies.some((body) => body?.throwUntil > 0 && batch.messages.find((m) => m.body === body).attempts < body.throwUntil)) throw new Error("the handler failed");
    if (bodies.some((body) => body?.retryAll > 0 && batch.messages.find((m) => m.body === body).attempts < body.retryAll)) return batch.retryAll();
    for (const message of batch.messages) {
      if (message.body?.retryUntil > message.attempts) message.retry();
      if (message.body?.retryLater > message.attempts) message.retry({delaySeconds: 1});
    }
  },
};
`

/** wrangler.toml's queues of the test Worker: one queue per behaviour, a dead-letter queue for `retried`. */
export const QUEUES_CONFIG = {
  producers: [
    {binding: 'BATCHED', queue: 'batched'},
    {binding: 'RETRIED', queue: 'retried'},
    {binding: 'THROWN', queue: 'thrown'},
    {binding: 'FORMATS', queue: 'formats'},
    {binding: 'SLOW', queue: 'slow'},
    {binding: 'ACKED', queue: 'acked'},
    {binding: 'ACKALL', queue: 'ackall'},
    {binding: 'DELAYED', queue: 'delayed'},
  ],
  consumers: [
    {queue: 'batched', max_batch_size: 3, max_batch_timeout: 1},
    {queue: 'retried', max_batch_size: 10, max_batch_timeout: 1, max_retries: 2, dead_letter_queue: 'dead'},
    {queue: 'thrown', max_batch_size: 10, max_batch_timeout: 1, max_retries: 1},
    {queue: 'formats', max_batch_size: 10, max_batch_timeout: 1},
    {queue: 'dead', max_batch_size: 10, max_batch_timeout: 1},
    {queue: 'slow', max_batch_size: 100, max_batch_timeout: 8},
    {queue: 'acked', max_batch_size: 10, max_batch_timeout: 1, retry_delay: 1},
    {queue: 'ackall', max_batch_size: 10, max_batch_timeout: 1},
    {queue: 'delayed', max_batch_size: 10, max_batch_timeout: 1},
  ],
} as const
