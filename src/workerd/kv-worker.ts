// The KV service Worker: what a Worker's `kvNamespace` bindings call. workerd turns each KV call into
// an HTTP request to the service the binding names (GET /<key>, PUT /<key>, DELETE /<key>,
// GET /?prefix=…&key_count_limit=…&cursor=… for list, POST /bulk/get for get(keys[])), with the
// binding's props naming the namespace — props the host writes from the Worker's own config, so a
// Worker reaches only its own namespaces. The service answers from one Durable Object per namespace
// (idFromName(namespace id)) whose SQLite database holds the entries; the objects live beside the
// Worker's own Durable Objects, so the data outlives redeploys, retirement and restarts and is in
// every host snapshot. Refusals are HTTP statuses whose status text workerd shows the Worker as
// "KV <METHOD> failed: <status> <text>", worded as Cloudflare words them.
//
// On disk, each namespace is one SQLite file (README "KV namespaces" describes the tables):
//   namespace(id)                                        the namespace id, one row
//   entries(key, value, expiration, metadata, chunks)    value: the first KV_CHUNK_BYTES bytes
//   value_chunks(key, seq, data)                         the rest of a longer value, seq from 1
// (workerd's SQLite refuses one blob of Cloudflare's largest value, hence the chunks).
import {BINDING_COUNTS_SOURCE} from './binding-metrics.js'
import {IO_TURN_SOURCE} from './io-turn.js'

/** The KV limits an operator may set (host.kv_max_*_bytes), in UTF-8 bytes: Cloudflare's by default. */
export interface KvSizeLimits {
  /** workerd itself refuses keys longer than Cloudflare's 512 bytes before calling: at most that. */
  keyBytes: number
  valueBytes: number
  metadataBytes: number
}

/** Cloudflare's KV sizes (KvSizeLimits). */
export const CLOUDFLARE_KV_SIZES: KvSizeLimits = {keyBytes: 512, valueBytes: 25 * 1024 * 1024, metadataBytes: 1024}

/** The KV limits that stay Cloudflare's. */
const KV_FIXED_LIMITS = {
  /** Keys one list() answers at most, and its default. */
  listLimit: 1000,
  /** Keys one get(keys[]) reads at most. */
  bulkKeys: 100,
  /** The shortest expirationTtl, and how far ahead an expiration must be, in seconds. */
  minTtlSeconds: 60,
  /** The shortest cacheTtl, in seconds (accepted and checked; the host has no edge cache to apply it to). */
  minCacheTtlSeconds: 30,
} as const

/** The Durable Object class in the KV service that holds one namespace. */
export const KV_OBJECT_CLASS = 'KvNamespaceObject'
/** Bytes of a value stored per row. */
export const KV_CHUNK_BYTES = 1024 * 1024
/** Bytes of values the KV service keeps in memory for gets (its read cache; values of one chunk only). */
export const KV_READ_CACHE_BYTES = 16 * 1024 * 1024

/** The KV service's module, refusing what passes `sizes`. */
export const kvWorkerSource = (sizes: KvSizeLimits): string => `import {DurableObject} from "cloudflare:workers";
${BINDING_COUNTS_SOURCE}
${IO_TURN_SOURCE}
const LIMITS = ${JSON.stringify({...KV_FIXED_LIMITS, ...sizes})};
const CHUNK = ${KV_CHUNK_BYTES};
const EXPIRED_SWEEP = 100;

class Refusal extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const nowSeconds = () => Math.floor(Date.now() / 1000);
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

// Entries read recently, so that a get of a hot key skips the hop to its namespace's Durable Object
// (most of what a get costs). Every call of every namespace of this Worker passes through this one
// isolate, in the one process that holds their files, so the cache can be exact: a write takes the
// key out before it starts and again once it is answered, and bumps the generation; a get fills the
// cache only if no write began since it asked, so no get answers older than the last answered write.
// Fills come from answers the object sent, which its output gate released only once on disk.
const readCache = {
  entries: new Map(),
  bytes: 0,
  generation: 0,
  get(cacheKey) {
    const entry = this.entries.get(cacheKey);
    if (entry === undefined) return null;
    if (entry.expiration !== null && entry.expiration <= nowSeconds()) {
      this.drop(cacheKey);
      return null;
    }
    this.entries.delete(cacheKey); // to the back: the least recently read leave first
    this.entries.set(cacheKey, entry);
    return entry;
  },
  fill(cacheKey, entry, generation) {
    if (generation !== this.generation || entry.chunks.length !== 1) return;
    this.drop(cacheKey);
    this.entries.set(cacheKey, entry);
    this.bytes += entry.chunks[0].byteLength;
    for (const [oldest, old] of this.entries) {
      if (this.bytes <= ${KV_READ_CACHE_BYTES}) break;
      this.entries.delete(oldest);
      this.bytes -= old.chunks[0].byteLength;
    }
  },
  drop(cacheKey) {
    const entry = this.entries.get(cacheKey);
    if (entry === undefined) return;
    this.entries.delete(cacheKey);
    this.bytes -= entry.chunks[0].byteLength;
  },
  // Around every write of the key: before it starts and once it is answered.
  writing(cacheKey) {
    this.generation++;
    this.drop(cacheKey);
  },
};

export class ${KV_OBJECT_CLASS} extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS namespace (id TEXT NOT NULL)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB NOT NULL, expiration INTEGER, metadata TEXT, chunks INTEGER NOT NULL)");
    this.sql.exec("CREATE INDEX IF NOT EXISTS entries_expiration ON entries (expiration) WHERE expiration IS NOT NULL");
    this.sql.exec("CREATE TABLE IF NOT EXISTS value_chunks (key TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (key, seq))");
  }

  read(key) {
    const row = this.sql.exec("SELECT value, expiration, metadata, chunks FROM entries WHERE key = ?", key).toArray()[0];
    if (!row) return null;
    if (row.expiration !== null && row.expiration <= nowSeconds()) {
      this.ctx.storage.transactionSync(() => this.removeEntry(key));
      return null;
    }
    const rest = row.chunks === 0 ? [] : this.sql.exec("SELECT data FROM value_chunks WHERE key = ? ORDER BY seq", key).toArray().map((chunk) => chunk.data);
    return {chunks: [row.value, ...rest], metadata: row.metadata, expiration: row.expiration};
  }

  readMany(keys) {
    return keys.map((key) => this.read(key));
  }

  // \`chunks\`: the value in CHUNK-byte ArrayBuffers (the last one shorter), at least one.
  write(namespace, key, chunks, expiration, metadata) {
    this.ctx.storage.transactionSync(() => {
      if (this.sql.exec("SELECT count(*) AS n FROM namespace").one().n === 0) this.sql.exec("INSERT INTO namespace (id) VALUES (?)", namespace);
      this.sweepExpired();
      this.removeEntry(key);
      this.sql.exec("INSERT INTO entries (key, value, expiration, metadata, chunks) VALUES (?, ?, ?, ?, ?)", key, chunks[0], expiration, metadata, chunks.length - 1);
      for (let seq = 1; seq < chunks.length; seq++) this.sql.exec("INSERT INTO value_chunks (key, seq, data) VALUES (?, ?, ?)", key, seq, chunks[seq]);
    });
  }

  remove(key) {
    this.ctx.storage.transactionSync(() => this.removeEntry(key));
  }

  // Keys after \`after\` (exclusive) that start with \`prefix\`, in UTF-8 byte order (SQLite's BINARY
  // collation), unexpired; one more than \`limit\` is read to tell whether the list is complete.
  keys(prefix, limit, after) {
    const now = nowSeconds();
    const rows = this.sql.exec(
      "SELECT key, expiration, metadata FROM entries WHERE key >= ? AND key > ? AND (expiration IS NULL OR expiration > ?) ORDER BY key",
      prefix, after, now,
    );
    const keys = [];
    let complete = true;
    for (const row of rows) {
      if (!row.key.startsWith(prefix)) break;
      if (keys.length === limit) {
        complete = false;
        break;
      }
      keys.push(row);
    }
    return {keys, complete};
  }

  removeEntry(key) {
    this.sql.exec("DELETE FROM value_chunks WHERE key = ?", key);
    this.sql.exec("DELETE FROM entries WHERE key = ?", key);
  }

  // Expired entries are never answered; they are removed when read and, a few at a time, on writes.
  sweepExpired() {
    const expired = this.sql.exec("SELECT key FROM entries WHERE expiration <= ? LIMIT ?", nowSeconds(), EXPIRED_SWEEP).toArray();
    for (const row of expired) this.removeEntry(row.key);
  }
}

function keyOf(url) {
  const key = decodeURIComponent(url.pathname.slice(1));
  const bytes = utf8.encode(key).byteLength;
  if (bytes > LIMITS.keyBytes) throw new Refusal(414, "UTF-8 encoded length of " + bytes + " exceeds key length limit of " + LIMITS.keyBytes + ".");
  return key;
}

function checkCacheTtl(url) {
  const text = url.searchParams.get("cache_ttl");
  if (text === null) return;
  const ttl = Number(text);
  if (!Number.isInteger(ttl) || ttl <= 0) throw new Refusal(400, "Invalid cache_ttl of " + text + ". Please specify integer greater than 0.");
  if (ttl < LIMITS.minCacheTtlSeconds) throw new Refusal(400, "Invalid cache_ttl of " + text + ". Cache TTL must be at least " + LIMITS.minCacheTtlSeconds + ".");
}

// An expiration in seconds since the epoch, or null; expiration_ttl wins over expiration.
function expirationOf(url) {
  const now = nowSeconds();
  const ttlText = url.searchParams.get("expiration_ttl");
  if (ttlText !== null) {
    const ttl = Number(ttlText);
    if (!Number.isInteger(ttl) || ttl <= 0) throw new Refusal(400, "Invalid expiration_ttl of " + ttlText + ". Please specify integer greater than 0.");
    if (ttl < LIMITS.minTtlSeconds) throw new Refusal(400, "Invalid expiration_ttl of " + ttlText + ". Expiration TTL must be at least " + LIMITS.minTtlSeconds + ".");
    return now + ttl;
  }
  const text = url.searchParams.get("expiration");
  if (text === null) return null;
  const expiration = Number(text);
  if (!Number.isInteger(expiration) || expiration <= now)
    throw new Refusal(400, "Invalid expiration of " + text + ". Please specify integer greater than the current number of seconds since the UNIX epoch.");
  if (expiration < now + LIMITS.minTtlSeconds)
    throw new Refusal(400, "Invalid expiration of " + text + ". Expiration times must be at least " + LIMITS.minTtlSeconds + " seconds in the future.");
  return expiration;
}

// The value in CHUNK-byte ArrayBuffers, cut as it streams in: a large value is copied once here.
// The whole body is read even when it is refused: workerd drops a call answered mid-upload.
// Chunks are sized to the length the call declares where it declares one: most values are far
// shorter than a chunk, and a chunk-sized buffer per put costs more than the rest of it.
async function chunksOf(request) {
  const declared = Number(request.headers.get("content-length") ?? Number.NaN);
  let left = Number.isSafeInteger(declared) ? declared : 0;
  const nextChunk = () => new Uint8Array(left > 0 ? Math.min(CHUNK, left) : CHUNK);
  const chunks = [];
  let chunk = nextChunk();
  let filled = 0;
  let length = 0;
  for await (const part of request.body ?? []) {
    length += part.byteLength;
    if (length > LIMITS.valueBytes) continue;
    for (let offset = 0; offset < part.byteLength; ) {
      const taken = Math.min(chunk.byteLength - filled, part.byteLength - offset);
      chunk.set(part.subarray(offset, offset + taken), filled);
      filled += taken;
      offset += taken;
      if (filled === chunk.byteLength) {
        chunks.push(chunk.buffer);
        left -= filled;
        // A whole megabyte in: a turn of the shard's I/O (a small value, in one chunk, takes none).
        if (filled === CHUNK) await ioTurn();
        chunk = nextChunk();
        filled = 0;
      }
    }
  }
  if (length > LIMITS.valueBytes) throw new Refusal(413, "Value length of " + length + " exceeds limit of " + LIMITS.valueBytes + ".");
  if (filled > 0 || chunks.length === 0) chunks.push(chunk.buffer.slice(0, filled));
  return chunks;
}

function metadataOf(request) {
  const header = request.headers.get("cf-kv-metadata");
  if (header === null) return null;
  const bytes = utf8.encode(header).byteLength;
  if (bytes > LIMITS.metadataBytes) throw new Refusal(413, "Metadata length of " + bytes + " exceeds limit of " + LIMITS.metadataBytes + ".");
  return header;
}

// A cursor is the last key of the page it ends, base64 of its UTF-8.
const cursorOf = (key) => btoa(Array.from(utf8.encode(key), (byte) => String.fromCharCode(byte)).join(""));
function keyAfter(cursor) {
  if (cursor === null || cursor === "") return "";
  try {
    return utf8Decoder.decode(Uint8Array.from(atob(cursor), (character) => character.charCodeAt(0)));
  } catch {
    throw new Refusal(400, "Invalid cursor " + cursor + ".");
  }
}

async function list(store, url) {
  const limitText = url.searchParams.get("key_count_limit");
  const limit = limitText === null ? LIMITS.listLimit : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1) throw new Refusal(400, "Invalid key_count_limit of " + limitText + ". Please specify an integer greater than 0.");
  if (limit > LIMITS.listLimit) throw new Refusal(400, "Invalid key_count_limit of " + limitText + ". Please specify an integer less than " + LIMITS.listLimit + ".");
  const prefix = url.searchParams.get("prefix") ?? "";
  const page = await store.keys(prefix, limit, keyAfter(url.searchParams.get("cursor")));
  const keys = page.keys.map((row) => ({
    name: row.key,
    ...(row.expiration === null ? {} : {expiration: row.expiration}),
    ...(row.metadata === null ? {} : {metadata: row.metadata}),
  }));
  const last = keys.at(-1);
  const body = page.complete ? {keys, list_complete: true} : {keys, list_complete: false, cursor: cursorOf(last.name)};
  return Response.json(body);
}

function jsonOf(text) {
  try {
    return JSON.parse(text);
  } catch {
    throw new Refusal(400, "At least one of the requested keys corresponds to a non-json value");
  }
}

async function bulkGet(store, request) {
  const query = await request.json();
  const keys = query.keys;
  if (!Array.isArray(keys) || keys.length === 0) throw new Refusal(400, "You must specify at least one key.");
  if (keys.length > LIMITS.bulkKeys) throw new Refusal(400, "You can request a maximum of " + LIMITS.bulkKeys + " keys.");
  const type = query.type ?? "text";
  if (type !== "text" && type !== "json") throw new Refusal(400, "Invalid type \\"" + type + "\\". Only \\"text\\" and \\"json\\" are supported.");
  if (query.cacheTtl !== undefined) checkCacheTtl(new URL("https://kv/?cache_ttl=" + query.cacheTtl));
  const entries = await store.readMany(keys);
  const answer = {};
  for (const [index, key] of keys.entries()) {
    const entry = entries[index];
    if (!entry) {
      answer[key] = null;
      continue;
    }
    const text = await new Blob(entry.chunks).text();
    const value = type === "json" ? jsonOf(text) : text;
    answer[key] = query.withMetadata ? {value, metadata: entry.metadata === null ? null : JSON.parse(entry.metadata)} : value;
  }
  return Response.json(answer);
}

// The KV method a call is, as the metrics name it: get(keys[]) is a get.
function operationOf(request, url) {
  if (request.method === "GET") return url.pathname === "/" ? "list" : "get";
  if (request.method === "POST") return "get";
  return request.method === "PUT" ? "put" : request.method === "DELETE" ? "delete" : "unknown";
}

async function handle(request, url, env, namespace) {
  const store = env.NAMESPACES.get(env.NAMESPACES.idFromName(namespace));
  if (request.method === "GET" && url.pathname === "/") return list(store, url);
  if (request.method === "POST" && url.pathname === "/bulk/get") return bulkGet(store, request);
  const key = keyOf(url);
  const cacheKey = namespace + "\\0" + key;
  switch (request.method) {
    case "GET": {
      checkCacheTtl(url);
      let entry = readCache.get(cacheKey);
      if (entry === null) {
        const generation = readCache.generation;
        entry = await store.read(key);
        if (!entry) return new Response(null, {status: 404, statusText: "Not Found"});
        readCache.fill(cacheKey, entry, generation);
      }
      const headers = entry.metadata === null ? {} : {"cf-kv-metadata": entry.metadata};
      return new Response(entry.chunks.length === 1 ? entry.chunks[0] : new Blob(entry.chunks), {headers});
    }
    case "PUT": {
      const chunks = await chunksOf(request);
      const expiration = expirationOf(url);
      const metadata = metadataOf(request);
      readCache.writing(cacheKey);
      try {
        await store.write(namespace, key, chunks, expiration, metadata);
      } finally {
        readCache.writing(cacheKey);
      }
      return new Response(null);
    }
    case "DELETE":
      readCache.writing(cacheKey);
      try {
        await store.remove(key);
      } finally {
        readCache.writing(cacheKey);
      }
      return new Response(null);
    default:
      throw new Refusal(405, "Method Not Allowed");
  }
}

export default {
  async fetch(request, env, ctx) {
    await yieldToIo();
    if (ctx.props.metrics) return takeOperationCounts();
    const url = new URL(request.url);
    let failed = true;
    try {
      const response = await handle(request, url, env, ctx.props.namespace);
      failed = false;
      return response;
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      // A refusal that leaves the value unread (a put's key too long) reaches the Worker as a lost
      // connection, not as the refusal: read it to the end first.
      if (request.body !== null && !request.bodyUsed) for await (const _ of request.body);
      return new Response(null, {status: error.status, statusText: error.message});
    } finally {
      countOperation(ctx.props.binding, operationOf(request, url), failed);
    }
  },
};
`
