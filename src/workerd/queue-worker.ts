// The queue service Worker: what a Worker's `queue` bindings call, and what delivers the batches.
// workerd turns `send()` into POST /message (the body as sent, its format in X-Msg-Fmt, a delay in
// X-Msg-Delay-Secs) and `sendBatch()` into POST /batch ({messages: [{body: base64, contentType,
// delaySecs}]}), to the service the binding names, with the binding's props naming the queue — props
// the host writes from the Worker's own config, so a Worker reaches only its own queues. Each queue
// is one Durable Object (idFromName(queue name)) whose SQLite database holds its messages, beside the
// Worker's own Durable Objects: a message is on disk before send() returns, and stays there across
// redeploys, restarts and kill -9 until its consumer acknowledges it.
//
// Delivery is driven by the object's alarm: a batch goes to the consumer (the Worker's own queue()
// handler, through `Fetcher.queue()` on a service binding to the Worker) once max_batch_size messages
// are visible or the oldest visible one has waited max_batch_timeout. Each delivery counts an attempt
// on disk before it is made, so a message whose delivery was cut by a crash is delivered again with
// its attempt counted (at least once). Settled per message: acknowledged → deleted; retried → visible
// again after its delay, or past max_retries moved to the dead-letter queue (same id and timestamp),
// or dropped with a log line when there is none.
//
// On disk, each queue is one SQLite file (README "Queues" describes the tables):
//   queue(name)                                                         the queue's name, one row
//   messages(seq, id, timestamp, content_type, body, attempts, visible_at)
//   dead_letters(count)                                                 messages moved to the dead-letter queue or dropped, one row
//
// The host reads each queue's counts (`edgeworkers queues list|show`) with POST /status {queues} on
// the service's own socket, which only the host reaches (no Worker binding sends that path).
import {QUEUE_LIMITS} from '../protocol/api/queues.js'
import {BINDING_COUNTS_SOURCE} from './binding-metrics.js'
import {IO_TURN_SOURCE} from './io-turn.js'

/** The Durable Object class in the queue service that holds one queue. */
export const QUEUE_OBJECT_CLASS = 'QueueObject'

export const QUEUE_WORKER_SOURCE = `import {DurableObject} from "cloudflare:workers";
${BINDING_COUNTS_SOURCE}
${IO_TURN_SOURCE}
const LIMITS = ${JSON.stringify(QUEUE_LIMITS)};
const FORMATS = ["text", "json", "bytes", "v8"];
// The alarm set while a delivery runs: if the process dies mid-delivery, it fires again after this.
const REDELIVERY_MS = 30_000;

class Refusal extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();
const newId = () => crypto.randomUUID().replaceAll("-", "");

function bodyOf(row) {
  if (row.content_type === "text") return utf8Decoder.decode(row.body);
  if (row.content_type === "json") return JSON.parse(utf8Decoder.decode(row.body));
  return row.body;
}

export class ${QUEUE_OBJECT_CLASS} extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS queue (name TEXT NOT NULL)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, timestamp INTEGER NOT NULL, content_type TEXT NOT NULL, body BLOB NOT NULL, attempts INTEGER NOT NULL, visible_at INTEGER NOT NULL)");
    this.sql.exec("CREATE INDEX IF NOT EXISTS messages_visible ON messages (visible_at, seq)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS dead_letters (count INTEGER NOT NULL)");
    // Ids of the messages being delivered: lost with the process, so a cut delivery is made again.
    this.inFlight = new Set();
  }

  name() {
    return this.sql.exec("SELECT name FROM queue").toArray()[0]?.name ?? null;
  }

  consumer() {
    const name = this.name();
    return name === null ? null : (this.env.SETTINGS.consumers[name] ?? null);
  }

  // \`messages\`: [{contentType, body (ArrayBuffer), delaySeconds, id?, timestamp?}]; a repeated id (a
  // dead letter moved twice after a crash) is kept once.
  async enqueue(queue, messages) {
    const now = Date.now();
    this.ctx.storage.transactionSync(() => {
      if (this.name() === null) this.sql.exec("INSERT INTO queue (name) VALUES (?)", queue);
      for (const message of messages)
        this.sql.exec(
          "INSERT OR IGNORE INTO messages (id, timestamp, content_type, body, attempts, visible_at) VALUES (?, ?, ?, ?, 0, ?)",
          message.id ?? newId(), message.timestamp ?? now, message.contentType, message.body, now + message.delaySeconds * 1000,
        );
    });
    await this.schedule();
    return this.metrics();
  }

  metrics() {
    const row = this.sql.exec("SELECT count(*) AS count, coalesce(sum(length(body)), 0) AS bytes, coalesce(min(timestamp), 0) AS oldest FROM messages").one();
    return {backlogCount: row.count, backlogBytes: row.bytes, oldestMessageTimestamp: row.oldest};
  }

  // The queue's counts now, for the host (see status in the service below).
  status() {
    const now = Date.now();
    const row = this.sql.exec("SELECT count(*) AS backlog, coalesce(sum(visible_at > ?), 0) AS delayed, min(timestamp) AS oldest FROM messages", now).one();
    const deadLettered = this.sql.exec("SELECT coalesce(sum(count), 0) AS count FROM dead_letters").one().count;
    return {backlog: row.backlog, inFlight: this.inFlight.size, delayed: row.delayed, deadLettered, oldestMessageAgeMs: row.oldest === null ? null : Math.max(0, now - row.oldest)};
  }

  // The next messages in delivery order (visible first, then by arrival), leaving out those in flight.
  waiting(limit, visibleBy) {
    const rows = this.sql.exec("SELECT * FROM messages WHERE visible_at <= ? ORDER BY visible_at, seq LIMIT ?", visibleBy, limit + this.inFlight.size).toArray();
    return rows.filter((row) => !this.inFlight.has(row.id)).slice(0, limit);
  }

  // When the next batch is due: when max_batch_size messages are visible, or when the first has
  // waited max_batch_timeout, whichever is first. Computed from the disk alone, so a restart keeps it.
  dueAt(consumer) {
    const rows = this.waiting(consumer.maxBatchSize, Number.MAX_SAFE_INTEGER);
    if (rows.length === 0) return null;
    const windowEnd = rows[0].visible_at + consumer.maxBatchTimeout * 1000;
    return rows.length === consumer.maxBatchSize ? Math.min(rows.at(-1).visible_at, windowEnd) : windowEnd;
  }

  async schedule() {
    const consumer = this.consumer();
    const at = consumer === null ? null : this.dueAt(consumer);
    if (at === null) return;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > at) await this.ctx.storage.setAlarm(at);
  }

  async alarm() {
    const consumer = this.consumer();
    if (consumer === null) return;
    await this.ctx.storage.setAlarm(Date.now() + REDELIVERY_MS);
    const deliveries = [];
    while (deliveries.length < consumer.maxConcurrency) {
      const batch = this.takeBatch(consumer);
      if (batch === null) break;
      deliveries.push(this.deliver(consumer, batch));
    }
    await Promise.all(deliveries);
    await this.ctx.storage.deleteAlarm();
    await this.schedule();
  }

  // A due batch, its attempts counted on disk, or null when none is due.
  takeBatch(consumer) {
    const now = Date.now();
    const rows = this.waiting(consumer.maxBatchSize, now);
    if (rows.length === 0) return null;
    if (rows.length < consumer.maxBatchSize && rows[0].visible_at + consumer.maxBatchTimeout * 1000 > now) return null;
    this.ctx.storage.transactionSync(() => {
      for (const row of rows) this.sql.exec("UPDATE messages SET attempts = attempts + 1 WHERE id = ?", row.id);
    });
    for (const row of rows) {
      row.attempts += 1;
      this.inFlight.add(row.id);
    }
    return rows;
  }

  async deliver(consumer, rows) {
    const queue = this.name();
    const messages = rows.map((row) => {
      const message = {id: row.id, timestamp: new Date(row.timestamp), attempts: row.attempts};
      return row.content_type === "v8" ? {...message, serializedBody: row.body} : {...message, body: bodyOf(row)};
    });
    let result = null;
    try {
      result = await this.env.CONSUMER.queue(queue, messages);
    } catch (error) {
      console.error("queue " + queue + ": delivering " + rows.length + " messages failed: " + error);
    }
    try {
      await this.settle(queue, consumer, rows, result);
    } finally {
      for (const row of rows) this.inFlight.delete(row.id);
    }
  }

  // Explicit per-message calls win, then the batch's retryAll / ackAll, then the outcome: a handler
  // that threw (or could not be reached) retries every message it did not acknowledge.
  async settle(queue, consumer, rows, result) {
    const retried = new Map((result?.retryMessages ?? []).map((retry) => [retry.msgId, retry.delaySeconds]));
    const acked = new Set(result?.explicitAcks ?? []);
    const batchRetry = result?.retryBatch?.retry === true;
    const failed = result === null || result.outcome !== "ok";
    const retryDelay = (id) => retried.get(id) ?? result?.retryBatch?.delaySeconds ?? consumer.retryDelay;
    const retry = (row) => retried.has(row.id) || (!acked.has(row.id) && (batchRetry || (!result?.ackAll && failed)));
    const now = Date.now();
    const again = rows.filter(retry);
    const dead = again.filter((row) => row.attempts > consumer.maxRetries);
    if (dead.length > 0 && consumer.deadLetterQueue !== null) {
      const letters = this.env.QUEUES.get(this.env.QUEUES.idFromName(consumer.deadLetterQueue));
      await letters.enqueue(consumer.deadLetterQueue, dead.map((row) => ({id: row.id, timestamp: row.timestamp, contentType: row.content_type, body: row.body, delaySeconds: 0})));
    }
    for (const row of dead)
      console.warn("queue " + queue + ": message " + row.id + " " + (consumer.deadLetterQueue === null ? "dropped" : "moved to dead-letter queue " + consumer.deadLetterQueue) + " after " + row.attempts + " attempts");
    const deadIds = new Set(dead.map((row) => row.id));
    this.ctx.storage.transactionSync(() => {
      if (dead.length > 0) {
        if (this.sql.exec("SELECT count(*) AS rows FROM dead_letters").one().rows === 0) this.sql.exec("INSERT INTO dead_letters (count) VALUES (0)");
        this.sql.exec("UPDATE dead_letters SET count = count + ?", dead.length);
      }
      for (const row of rows) {
        if (retry(row) && !deadIds.has(row.id)) this.sql.exec("UPDATE messages SET visible_at = ? WHERE id = ?", now + retryDelay(row.id) * 1000, row.id);
        else this.sql.exec("DELETE FROM messages WHERE id = ?", row.id);
      }
    });
  }
}

function delayOf(text, fallback) {
  if (text === null || text === undefined) return fallback;
  const delay = Number(text);
  if (!Number.isInteger(delay) || delay < 0 || delay > LIMITS.maxDelaySeconds)
    throw new Refusal(400, "Invalid delaySeconds " + text + ": it must be whole seconds from 0 to " + LIMITS.maxDelaySeconds);
  return delay;
}

function formatOf(format) {
  const contentType = format ?? "v8";
  if (!FORMATS.includes(contentType)) throw new Refusal(400, "Invalid contentType " + contentType + ": it must be text, json, bytes or v8");
  return contentType;
}

function checkSize(bytes) {
  if (bytes > LIMITS.messageBytes) throw new Refusal(413, "Message of " + bytes + " bytes exceeds the limit of " + LIMITS.messageBytes + " bytes");
}

async function oneMessage(request, deliveryDelay) {
  const body = await request.arrayBuffer();
  checkSize(body.byteLength);
  return {contentType: formatOf(request.headers.get("x-msg-fmt")), body, delaySeconds: delayOf(request.headers.get("x-msg-delay-secs"), deliveryDelay)};
}

async function batchOfMessages(request, deliveryDelay) {
  const {messages} = await request.json();
  if (!Array.isArray(messages) || messages.length === 0) throw new Refusal(400, "A batch needs at least one message");
  if (messages.length > LIMITS.batchMessages) throw new Refusal(413, "Batch of " + messages.length + " messages exceeds the limit of " + LIMITS.batchMessages);
  const batchDelay = delayOf(request.headers.get("x-msg-delay-secs"), deliveryDelay);
  let total = 0;
  const decoded = messages.map((message) => {
    const body = Uint8Array.from(atob(message.body), (character) => character.charCodeAt(0)).buffer;
    checkSize(body.byteLength);
    total += body.byteLength;
    return {contentType: formatOf(message.contentType), body, delaySeconds: delayOf(message.delaySecs, batchDelay)};
  });
  if (total > LIMITS.batchBytes) throw new Refusal(413, "Batch of " + total + " bytes exceeds the limit of " + LIMITS.batchBytes + " bytes");
  return decoded;
}

export default {
  async fetch(request, env, ctx) {
    await yieldToIo();
    if (ctx.props?.metrics) return takeOperationCounts();
    const url = new URL(request.url);
    if (request.method === "POST" && url.pathname === "/status" && ctx.props?.queue === undefined) {
      const {queues} = await request.json();
      return Response.json(await Promise.all(queues.map((queue) => env.QUEUES.get(env.QUEUES.idFromName(queue)).status())));
    }
    const operation = url.pathname === "/batch" ? "sendBatch" : url.pathname === "/message" ? "send" : "unknown";
    let failed = true;
    try {
      const {queue, deliveryDelay} = ctx.props;
      let messages;
      if (request.method === "POST" && operation === "send") messages = [await oneMessage(request, deliveryDelay)];
      else if (request.method === "POST" && operation === "sendBatch") messages = await batchOfMessages(request, deliveryDelay);
      else throw new Refusal(404, "Not Found");
      const metrics = await env.QUEUES.get(env.QUEUES.idFromName(queue)).enqueue(queue, messages);
      failed = false;
      return Response.json({metadata: {metrics}});
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      return new Response(error.message, {status: error.status, statusText: error.message});
    } finally {
      countOperation(ctx.props?.binding, operation, failed);
    }
  },
};
`
