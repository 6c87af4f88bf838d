// Queues as Cloudflare configures them: a producer is a `queue` binding naming a queue; a consumer
// is an entry of the upload's `queueConsumers` naming a queue of the same Worker, with its batching,
// retry and dead-letter settings. The limits are Cloudflare's. One rule for the kit's manifest check
// and the host's upload check (queueConsumersProblem): a Worker consumes only its own queues.
import {z} from 'zod'

/** Cloudflare's queue limits: message and batch sizes in bytes, delays in seconds. */
export const QUEUE_LIMITS = {
  messageBytes: 128_000,
  batchMessages: 100,
  batchBytes: 256_000,
  maxDelaySeconds: 43_200,
  maxBatchSize: 100,
  maxBatchTimeoutSeconds: 60,
  maxRetries: 100,
  maxConcurrency: 250,
} as const

/** Cloudflare's consumer defaults (max_concurrency: on-prem one batch at a time unless set). */
export const QUEUE_CONSUMER_DEFAULTS = {maxBatchSize: 10, maxBatchTimeout: 5, maxRetries: 3, retryDelay: 0, maxConcurrency: 1} as const

/** A queue name: Cloudflare's 1–63 letters, digits, "-" and "_". */
export const QUEUE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/
export const queueNameSchema = z.string().regex(QUEUE_NAME_PATTERN, {error: 'must be a queue name (1–63 letters, digits, "-" or "_")'})

export const queueDelaySchema = z
  .number()
  .int({error: 'must be whole seconds'})
  .min(0, {error: 'must be at least 0'})
  .max(QUEUE_LIMITS.maxDelaySeconds, {error: `must be at most ${QUEUE_LIMITS.maxDelaySeconds} seconds`})

/** A consumer's settings, each optional (the defaults above fill them in): the manifest's form. */
export const queueConsumerSettingsShape = {
  maxBatchSize: z
    .number()
    .int()
    .min(1, {error: 'must be at least 1'})
    .max(QUEUE_LIMITS.maxBatchSize, {error: `must be at most ${QUEUE_LIMITS.maxBatchSize}`})
    .optional(),
  maxBatchTimeout: z
    .number()
    .min(0, {error: 'must be at least 0'})
    .max(QUEUE_LIMITS.maxBatchTimeoutSeconds, {error: `must be at most ${QUEUE_LIMITS.maxBatchTimeoutSeconds} seconds`})
    .optional(),
  maxRetries: z
    .number()
    .int()
    .min(0, {error: 'must be at least 0'})
    .max(QUEUE_LIMITS.maxRetries, {error: `must be at most ${QUEUE_LIMITS.maxRetries}`})
    .optional(),
  retryDelay: queueDelaySchema.optional(),
  deadLetterQueue: queueNameSchema.optional(),
  maxConcurrency: z
    .number()
    .int()
    .min(1, {error: 'must be at least 1'})
    .max(QUEUE_LIMITS.maxConcurrency, {error: `must be at most ${QUEUE_LIMITS.maxConcurrency}`})
    .optional(),
}

/** A consumer as uploaded: every setting given. */
export const queueConsumerSchema = z.strictObject({
  queue: queueNameSchema,
  maxBatchSize: queueConsumerSettingsShape.maxBatchSize.unwrap(),
  maxBatchTimeout: queueConsumerSettingsShape.maxBatchTimeout.unwrap(),
  maxRetries: queueConsumerSettingsShape.maxRetries.unwrap(),
  retryDelay: queueDelaySchema,
  deadLetterQueue: queueNameSchema.nullable(),
  maxConcurrency: queueConsumerSettingsShape.maxConcurrency.unwrap(),
})
export type QueueConsumer = z.infer<typeof queueConsumerSchema>

export type QueueConsumerSettings = {queue: string} & {[key in keyof typeof queueConsumerSettingsShape]?: z.infer<(typeof queueConsumerSettingsShape)[key]>}

/** A consumer with the defaults filled in. */
export function queueConsumerOf(settings: QueueConsumerSettings): QueueConsumer {
  return {
    queue: settings.queue,
    maxBatchSize: settings.maxBatchSize ?? QUEUE_CONSUMER_DEFAULTS.maxBatchSize,
    maxBatchTimeout: settings.maxBatchTimeout ?? QUEUE_CONSUMER_DEFAULTS.maxBatchTimeout,
    maxRetries: settings.maxRetries ?? QUEUE_CONSUMER_DEFAULTS.maxRetries,
    retryDelay: settings.retryDelay ?? QUEUE_CONSUMER_DEFAULTS.retryDelay,
    deadLetterQueue: settings.deadLetterQueue ?? null,
    maxConcurrency: settings.maxConcurrency ?? QUEUE_CONSUMER_DEFAULTS.maxConcurrency,
  }
}

/**
 * Why a queue's consumer is in its producer's Worker: the messages are that Worker's data, kept in
 * its storage like a KV namespace's, and no Worker reaches another's (another department's, even
 * in the same company: a service binding is how departments call each other). README "Queues".
 */
const OWN_QUEUES_ONLY = 'a queue belongs to the Worker that produces it, and only that Worker consumes it'

/**
 * Why a Worker's queues do not hold together, or null: every queue it produces has its consumer
 * here (never in another Worker: OWN_QUEUES_ONLY), every consumer reads a queue the
 * Worker produces or a dead-letter queue of its own, a queue has one consumer, and no consumer
 * dead-letters into its own queue. `index`: the consumer at fault, null for a producer's queue.
 */
export function queueConsumersProblem(
  produced: readonly string[],
  consumers: ReadonlyArray<{queue: string; deadLetterQueue?: string | null | undefined}>,
): {index: number | null; message: string} | null {
  const consumed = consumers.map((consumer) => consumer.queue)
  const deadLetters = new Set(consumers.flatMap((consumer) => (consumer.deadLetterQueue ? [consumer.deadLetterQueue] : [])))
  for (const [index, consumer] of consumers.entries()) {
    if (consumed.indexOf(consumer.queue) !== index) return {index, message: `queue "${consumer.queue}" has more than one consumer`}
    if (consumer.deadLetterQueue === consumer.queue) return {index, message: `queue "${consumer.queue}" cannot be its own dead-letter queue`}
    if (!produced.includes(consumer.queue) && !deadLetters.has(consumer.queue))
      return {
        index,
        message: `queue "${consumer.queue}" is neither produced by this Worker nor one of its dead-letter queues: ${OWN_QUEUES_ONLY}`,
      }
  }
  const unconsumed = produced.find((queue) => !consumed.includes(queue))
  if (unconsumed !== undefined) return {index: null, message: `queue "${unconsumed}" has no consumer in this Worker: ${OWN_QUEUES_ONLY}`}
  return null
}

/** One of a script's queues as `edgeworkers queues list|show` shows it: counts read from its store now. */
export const queueStatusSchema = z.strictObject({
  queue: queueNameSchema,
  /** The script's producer bindings that send to it (none for a dead-letter queue only). */
  producers: z.array(z.string()),
  /** Its consumer's settings; null for a dead-letter queue nothing consumes. */
  consumer: queueConsumerSchema.nullable(),
  /** Messages stored (not yet acknowledged), in flight and delayed included. */
  backlog: z.number().int().min(0),
  /** Messages handed to the consumer whose batch has not settled. */
  inFlight: z.number().int().min(0),
  /** Messages not yet visible: sent with a delay, or retried with one. */
  delayed: z.number().int().min(0),
  /** Messages this queue has moved to its dead-letter queue, or dropped past max_retries without one, since it was created. */
  deadLettered: z.number().int().min(0),
  /** How long the oldest stored message has waited (ms, host clock); null when the queue is empty. */
  oldestMessageAgeMs: z.number().int().min(0).nullable(),
})
export type QueueStatus = z.infer<typeof queueStatusSchema>

export const queueListSchema = z.strictObject({queues: z.array(queueStatusSchema)})
export type QueueList = z.infer<typeof queueListSchema>
