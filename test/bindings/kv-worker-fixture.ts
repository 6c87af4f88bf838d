// One Worker that runs KV operations named in the request body, and the request sequence the KV
// tests send it: every operation, option and limit of Cloudflare's KV binding. The same Worker
// runs on the edge host and under miniflare (the oracle); answers are JSON, so they compare as data.

/** The Worker: POST {binding?, op, key?, keys?, value?, options?} → {result} or {error}. */
export const KV_WORKER = `
const hex = (buffer) => [...new Uint8Array(buffer)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
async function digest(buffer) {
  return {bytes: buffer.byteLength, sha256: hex(await crypto.subtle.digest("SHA-256", buffer))};
}
async function shown(value) {
  if (value instanceof ArrayBuffer) return {arrayBuffer: await digest(value)};
  if (value instanceof ReadableStream) return {stream: await digest(await new Response(value).arrayBuffer())};
  if (value instanceof Map) return {map: Object.fromEntries(value)};
  return value;
}
function valueOf(value) {
  if (typeof value !== "object") return value;
  if (value.repeat) return new Uint8Array(value.repeat.bytes).fill(value.repeat.byte);
  if (value.stream) return new Blob([value.stream]).stream();
  return new Uint8Array(value.bytes);
}
export default {
  async fetch(request, env) {
    const {binding = "CACHE", op, key, keys, value, options} = await request.json();
    const kv = env[binding];
    try {
      switch (op) {
        case "put": return Response.json({result: await kv.put(key, valueOf(value), options) ?? null});
        case "get": return Response.json({result: await shown(await kv.get(keys ?? key, options))});
        case "getWithMetadata": {
          const answer = await kv.getWithMetadata(keys ?? key, options);
          if (answer instanceof Map) return Response.json({result: await shown(answer)});
          return Response.json({result: {...answer, value: await shown(answer.value)}});
        }
        case "delete": return Response.json({result: await kv.delete(key) ?? null});
        // Gets in flight while the key is written, then one after: it answers the write.
        case "putWhileReading": {
          const during = Array.from({length: 20}, () => kv.get(key));
          await kv.put(key, valueOf(value));
          const read = await Promise.all(during);
          return Response.json({result: {after: await kv.get(key), during: read.length}});
        }
        case "list": return Response.json({result: await kv.list(options)});
        case "listAll": {
          const names = [];
          let cursor;
          for (let pages = 1; ; pages++) {
            const page = await kv.list({...options, cursor});
            names.push(...page.keys.map((entry) => entry.name));
            if (page.list_complete) return Response.json({result: {names, pages}});
            cursor = page.cursor;
          }
        }
      }
      return Response.json({error: "unknown op " + op});
    } catch (error) {
      return Response.json({error: String(error)});
    }
  },
};
`

export interface KvStep {
  binding?: string
  op: 'put' | 'get' | 'getWithMetadata' | 'delete' | 'list' | 'listAll' | 'putWhileReading'
  key?: string
  keys?: string[]
  value?: unknown
  options?: unknown
}

/** An expiration far in the future, the same wherever the sequence runs. */
export const FAR_EXPIRATION = 2_000_000_000
const MiB = 1024 * 1024

export const KV_STEPS: KvStep[] = [
  {op: 'get', key: 'missing'},
  {op: 'put', key: 'greeting', value: 'hello'},
  {op: 'get', key: 'greeting'},
  {op: 'get', key: 'greeting', options: 'text'},
  {op: 'get', key: 'greeting', options: {type: 'arrayBuffer'}},
  {op: 'get', key: 'greeting', options: {type: 'stream'}},
  {op: 'get', key: 'greeting', options: {type: 'text', cacheTtl: 60}},
  {op: 'put', key: 'doc', value: JSON.stringify({a: [1, 2], b: 'é'})},
  {op: 'get', key: 'doc', options: 'json'},
  {op: 'put', key: 'bytes', value: {bytes: [0, 1, 2, 255, 128]}},
  {op: 'get', key: 'bytes', options: 'arrayBuffer'},
  {op: 'put', key: 'streamed', value: {stream: 'from a stream'}},
  {op: 'get', key: 'streamed'},
  {op: 'put', key: 'empty', value: ''},
  {op: 'get', key: 'empty'},
  {op: 'put', key: 'meta', value: 'with metadata', options: {metadata: {owner: 'ünïcode ✓', n: 3, nested: {list: [true, null]}}}},
  {op: 'getWithMetadata', key: 'meta'},
  {op: 'getWithMetadata', key: 'meta', options: 'arrayBuffer'},
  {op: 'getWithMetadata', key: 'greeting'},
  {op: 'getWithMetadata', key: 'missing'},
  {op: 'put', key: 'meta', value: 'replaced'},
  {op: 'getWithMetadata', key: 'meta'},
  // The same key read again and again across writes: each read answers the last write.
  {op: 'get', key: 'meta', options: 'arrayBuffer'},
  {op: 'get', key: 'meta', options: 'arrayBuffer'},
  {op: 'putWhileReading', key: 'meta', value: 'written while read'},
  {op: 'putWhileReading', key: 'meta', value: {bytes: [1, 2, 3]}},
  {op: 'get', key: 'meta', options: 'arrayBuffer'},
  {op: 'put', key: 'far', value: 'until 2100', options: {expiration: FAR_EXPIRATION, metadata: 'a string'}},
  {op: 'put', key: 'ttl', value: 'an hour', options: {expirationTtl: 3600}},
  {op: 'get', key: 'ttl'},
  // Keys of every sort: slashes, percent signs, query characters, non-ASCII (listed in UTF-8 byte order).
  {op: 'put', key: 'user:1/profile?x=%20#y', value: 'one'},
  {op: 'put', key: 'user:2', value: 'two'},
  {op: 'put', key: 'user:10', value: 'ten'},
  {op: 'put', key: 'user:ключ', value: 'cyrillic'},
  {op: 'put', key: 'user:😀', value: 'emoji'},
  {op: 'put', key: 'user:\uffff', value: 'last of the BMP'},
  {op: 'get', key: 'user:1/profile?x=%20#y'},
  {op: 'get', key: 'user:😀'},
  {op: 'list'},
  {op: 'list', options: {prefix: 'user:'}},
  {op: 'list', options: {prefix: 'user:', limit: 2}},
  {op: 'listAll', options: {prefix: 'user:', limit: 2}},
  {op: 'listAll', options: {limit: 1}},
  {op: 'list', options: {prefix: 'nothing-here'}},
  {op: 'get', keys: ['greeting', 'doc', 'missing']},
  {op: 'get', keys: ['doc'], options: 'json'},
  {op: 'getWithMetadata', keys: ['far', 'greeting', 'missing']},
  {op: 'delete', key: 'greeting'},
  {op: 'delete', key: 'never-there'},
  {op: 'get', key: 'greeting'},
  {op: 'list', options: {prefix: 'g'}},
  // Another binding of the same Worker is another namespace.
  {binding: 'OTHER', op: 'get', key: 'doc'},
  {binding: 'OTHER', op: 'put', key: 'doc', value: 'other namespace'},
  {binding: 'OTHER', op: 'list'},
  {op: 'get', key: 'doc', options: 'json'},
  // Values past one storage row, and Cloudflare's largest value.
  {op: 'put', key: 'large', value: {repeat: {bytes: 5 * MiB + 3, byte: 7}}},
  {op: 'get', key: 'large', options: 'arrayBuffer'},
  {op: 'put', key: 'largest', value: {repeat: {bytes: 25 * MiB, byte: 9}}},
  {op: 'get', key: 'largest', options: 'stream'},
  {op: 'delete', key: 'largest'},
  // Cloudflare's limits and option checks.
  {op: 'put', key: 'too-large', value: {repeat: {bytes: 25 * MiB + 1, byte: 1}}},
  {op: 'put', key: 'k'.repeat(513), value: 'long key'},
  {op: 'put', key: 'k'.repeat(512), value: 'longest key'},
  {op: 'get', key: 'k'.repeat(512)},
  {op: 'get', key: 'é'.repeat(257)},
  {op: 'put', key: '', value: 'empty key'},
  {op: 'put', key: 'meta-large', value: 'x', options: {metadata: {blob: 'm'.repeat(1100)}}},
  {op: 'put', key: 'ttl-short', value: 'x', options: {expirationTtl: 30}},
  {op: 'put', key: 'past', value: 'x', options: {expiration: 1000}},
  {op: 'get', key: 'doc', options: {cacheTtl: 10}},
  {op: 'list', options: {limit: 1001}},
  {op: 'get', key: 'too-large'},
  {op: 'get', key: 'meta-large'},
  {op: 'list', options: {prefix: 'k'}},
]
