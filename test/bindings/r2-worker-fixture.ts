// One Worker that runs R2 operations named in the request body, and the request sequence the R2
// tests send it: every operation and option of Cloudflare's R2 binding, and its refusals. The same
// Worker runs on the edge host and under miniflare (the oracle); answers are JSON, so they compare
// as data. What is the store's own choice (versions, upload times, upload ids, part etags, cursors)
// is shown by its kind only.
import {createHash} from 'node:crypto'

/** The Worker: POST {binding?, op, key?, keys?, value?, options?, read?, parts?, finish?} → {result} or {error}. */
export const R2_WORKER = `
const hex = (buffer) => [...new Uint8Array(buffer)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
async function digest(buffer) {
  return {bytes: buffer.byteLength, sha256: hex(await crypto.subtle.digest("SHA-256", buffer))};
}
function bytesOf(value) {
  if (typeof value === "string") return new TextEncoder().encode(value);
  if (value.repeat) return new Uint8Array(value.repeat.bytes).fill(value.repeat.byte);
  return new Uint8Array(value.bytes);
}
// A string, bytes, or a stream of known length (a Response body), as the step says.
function valueOf(value) {
  if (value === null || value === undefined) return value;
  if (typeof value === "string") return value;
  if (value.stream !== undefined) return new Response(bytesOf(value.stream)).body;
  if (value.unknownLength !== undefined) return new ReadableStream({start(controller) { controller.enqueue(bytesOf(value.unknownLength)); controller.close(); }});
  if (value.blob !== undefined) return new Blob([bytesOf(value.blob)]);
  return bytesOf(value).buffer;
}
const dateOf = (when) => (when === "future" ? new Date(Date.now() + 3600_000) : when === "past" ? new Date(1000) : when);
function optionsOf(options = {}) {
  const out = {...options};
  if (options.onlyIf?.headers) out.onlyIf = new Headers(options.onlyIf.headers);
  else if (options.onlyIf) out.onlyIf = {...options.onlyIf, uploadedBefore: dateOf(options.onlyIf.uploadedBefore), uploadedAfter: dateOf(options.onlyIf.uploadedAfter)};
  if (options.range?.header) out.range = new Headers({range: options.range.header});
  if (options.httpMetadata?.headers) out.httpMetadata = new Headers(options.httpMetadata.headers);
  else if (options.httpMetadata?.cacheExpiry) out.httpMetadata = {...options.httpMetadata, cacheExpiry: new Date(options.httpMetadata.cacheExpiry)};
  for (const hash of ["md5", "sha1", "sha256"]) if (options[hash]?.bytes) out[hash] = new Uint8Array(options[hash].bytes).buffer;
  return out;
}
async function shown(object, read) {
  if (object === null) return null;
  const headers = new Headers();
  let headersError = null;
  try {
    object.writeHttpMetadata(headers);
  } catch (error) {
    headersError = String(error);
  }
  const plain = {
    key: object.key, size: object.size, etag: object.etag, httpEtag: object.httpEtag, checksums: object.checksums.toJSON(),
    httpMetadata: object.httpMetadata ?? "absent", customMetadata: object.customMetadata ?? "absent", range: object.range ?? "absent",
    version: typeof object.version, uploaded: object.uploaded instanceof Date ? "a date" : typeof object.uploaded,
    headers: headersError ?? Object.fromEntries(headers), hasBody: "body" in object,
  };
  if (!("body" in object)) return plain;
  if (read === "text") plain.text = await object.text();
  else if (read === "json") plain.json = await object.json();
  else if (read === "blob") plain.blob = await digest(await (await object.blob()).arrayBuffer());
  else if (read === "stream") plain.stream = await digest(await new Response(object.body).arrayBuffer());
  else plain.arrayBuffer = await digest(await object.arrayBuffer());
  return plain;
}
const listed = async (page) => ({...page, cursor: page.cursor === undefined ? "absent" : "a cursor", objects: await Promise.all(page.objects.map((object) => shown(object)))});
async function multipart(bucket, {key, options, parts = [], finish = "complete"}) {
  const upload = await bucket.createMultipartUpload(key, optionsOf(options));
  const steps = {key: upload.key, uploadId: typeof upload.uploadId};
  const uploaded = [];
  for (const [index, part] of parts.entries()) uploaded.push(await upload.uploadPart(index + 1, valueOf(part)));
  steps.parts = uploaded.map((part) => ({partNumber: part.partNumber, etag: typeof part.etag}));
  const again = bucket.resumeMultipartUpload(key, upload.uploadId);
  const attempt = async (name, run) => {
    try {
      steps[name] = (await run()) ?? null;
    } catch (error) {
      steps[name] = {error: String(error)};
    }
  };
  if (finish === "complete") await attempt("complete", async () => shown(await again.complete(uploaded)));
  if (finish === "reversed") await attempt("complete", async () => shown(await again.complete([...uploaded].reverse())));
  if (finish === "wrongEtag") await attempt("complete", async () => shown(await again.complete(uploaded.map((part) => ({...part, etag: "nope"})))));
  if (finish === "abort") {
    await attempt("abort", () => again.abort());
    await attempt("complete", async () => shown(await again.complete(uploaded)));
    await attempt("uploadPart", async () => (await again.uploadPart(9, "late")).partNumber);
  }
  if (finish === "completeTwice") {
    await attempt("complete", async () => shown(await again.complete(uploaded)));
    await attempt("completeAgain", async () => shown(await again.complete(uploaded)));
  }
  return steps;
}
export default {
  async fetch(request, env) {
    const step = await request.json();
    const bucket = env[step.binding ?? "FILES"];
    try {
      switch (step.op) {
        case "put": return Response.json({result: await shown(await bucket.put(step.key, valueOf(step.value), optionsOf(step.options)))});
        case "get": return Response.json({result: await shown(await bucket.get(step.key, optionsOf(step.options)), step.read)});
        case "head": return Response.json({result: await shown(await bucket.head(step.key))});
        case "delete": return Response.json({result: (await bucket.delete(step.keys ?? step.key)) ?? null});
        case "list": return Response.json({result: await listed(await bucket.list(step.options))});
        case "listAll": {
          const entries = [];
          let cursor;
          for (let pages = 1; ; pages++) {
            const page = await bucket.list({...step.options, cursor});
            entries.push(...page.objects.map((object) => object.key), ...page.delimitedPrefixes.map((prefix) => "prefix " + prefix));
            if (!page.truncated) return Response.json({result: {entries, pages}});
            cursor = page.cursor;
          }
        }
        case "multipart": return Response.json({result: await multipart(bucket, step)});
        case "getWhileReplaced": {
          // A read under way keeps the bytes it started with while the key is replaced, then deleted.
          const object = await bucket.get(step.key);
          const reader = object.body.getReader();
          const first = await reader.read();
          const replaced = await shown(await bucket.put(step.key, valueOf(step.value)));
          await bucket.delete(step.key);
          const rest = [first.value];
          for (let part = await reader.read(); !part.done; part = await reader.read()) rest.push(part.value);
          return Response.json({result: {replaced, read: await digest(await new Blob(rest).arrayBuffer()), after: await shown(await bucket.get(step.key))}});
        }
      }
      return Response.json({error: "unknown op " + step.op});
    } catch (error) {
      return Response.json({error: String(error)});
    }
  },
};
`

export interface R2Step {
  binding?: string
  op: 'put' | 'get' | 'head' | 'delete' | 'list' | 'listAll' | 'multipart' | 'getWhileReplaced'
  key?: string
  keys?: string[]
  value?: unknown
  options?: Record<string, unknown>
  read?: 'text' | 'json' | 'arrayBuffer' | 'stream' | 'blob'
  parts?: unknown[]
  finish?: 'complete' | 'reversed' | 'wrongEtag' | 'abort' | 'completeTwice'
}

const md5 = (text: string): string => createHash('md5').update(text).digest('hex')
const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex')
const MIB = 1024 * 1024
const repeat = (bytes: number, byte: number) => ({repeat: {bytes, byte}})

export const R2_STEPS: R2Step[] = [
  // put: a string, bytes, a stream, a Blob; metadata; what head and get answer for each.
  {
    op: 'put',
    key: 'hello.txt',
    value: 'hello world',
    options: {httpMetadata: {contentType: 'text/plain', cacheControl: 'max-age=60'}, customMetadata: {owner: 'ana', n: '1'}},
  },
  {op: 'head', key: 'hello.txt'},
  {op: 'get', key: 'hello.txt', read: 'text'},
  {op: 'get', key: 'hello.txt', read: 'stream'},
  {op: 'get', key: 'hello.txt', read: 'blob'},
  {
    op: 'put',
    key: 'data.json',
    value: '{"a":[1,2,3]}',
    options: {
      httpMetadata: {
        headers: {
          'content-type': 'application/json',
          'content-language': 'en',
          'content-disposition': 'inline',
          'content-encoding': 'identity',
          expires: 'Wed, 21 Oct 2037 07:28:00 GMT',
        },
      },
    },
  },
  {op: 'get', key: 'data.json', read: 'json'},
  {op: 'put', key: 'bytes.bin', value: {bytes: [0, 1, 2, 250, 255]}, options: {httpMetadata: {cacheExpiry: '2037-10-21T07:28:00.000Z'}}},
  {op: 'get', key: 'bytes.bin', read: 'arrayBuffer'},
  {op: 'put', key: 'streamed.bin', value: {stream: repeat(3 * MIB + 17, 7)}},
  {op: 'get', key: 'streamed.bin', read: 'stream'},
  {op: 'put', key: 'replaced.bin', value: {stream: repeat(3 * MIB + 5, 8)}},
  {op: 'getWhileReplaced', key: 'replaced.bin', value: 'replacement'},
  {op: 'put', key: 'blob.bin', value: {blob: repeat(1000, 9)}},
  {op: 'put', key: 'empty', value: ''},
  {op: 'get', key: 'empty', read: 'text'},
  {op: 'put', key: 'null-body', value: null},
  {op: 'head', key: 'null-body'},
  {op: 'put', key: 'ünïcode/ключ 🔑', value: 'non-ASCII key'},
  {op: 'get', key: 'ünïcode/ключ 🔑', read: 'text'},
  // missing keys
  {op: 'get', key: 'missing'},
  {op: 'head', key: 'missing'},
  // ranges, across the host's 1 MiB chunk boundaries too
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {offset: 6}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {offset: 2, length: 3}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {length: 4}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {suffix: 5}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {suffix: 50}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {offset: 5, length: 100}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {header: 'bytes=0-4'}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {header: 'bytes=-3'}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {header: 'bytes=6-'}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {header: 'bytes=0-1,3-4'}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {range: {header: 'bytes=100-200'}}},
  {op: 'get', key: 'hello.txt', options: {range: {offset: 20}}},
  {op: 'get', key: 'hello.txt', options: {range: {offset: -1}}},
  {op: 'get', key: 'hello.txt', options: {range: {suffix: 0}}},
  {op: 'get', key: 'hello.txt', options: {range: {offset: 1, suffix: 2}}},
  {op: 'get', key: 'streamed.bin', read: 'arrayBuffer', options: {range: {offset: MIB - 10, length: MIB + 20}}},
  {op: 'get', key: 'streamed.bin', read: 'arrayBuffer', options: {range: {suffix: MIB + 3}}},
  // conditionals: etags are MD5s of the bytes, so the step can name them
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {etagMatches: md5('hello world')}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {etagMatches: 'different'}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {etagDoesNotMatch: md5('hello world')}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {etagDoesNotMatch: '*'}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {uploadedBefore: 'future'}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {uploadedBefore: 'past'}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {uploadedAfter: 'past'}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {uploadedAfter: 'future', etagDoesNotMatch: 'other'}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {headers: {'if-match': `"${md5('hello world')}"`}}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {headers: {'if-none-match': `W/"${md5('hello world')}", "x"`}}}},
  {op: 'get', key: 'hello.txt', read: 'text', options: {onlyIf: {headers: {'if-unmodified-since': 'Thu, 01 Jan 1970 00:00:01 GMT'}}}},
  {op: 'get', key: 'hello.txt', options: {onlyIf: {etagMatches: `"${md5('hello world')}"`}}},
  {op: 'put', key: 'hello.txt', value: 'not written', options: {onlyIf: {etagMatches: 'different'}}},
  {op: 'put', key: 'fresh', value: 'only if absent', options: {onlyIf: {etagDoesNotMatch: '*'}}},
  {op: 'put', key: 'fresh', value: 'not twice', options: {onlyIf: {etagDoesNotMatch: '*'}}},
  {op: 'put', key: 'not-there', value: 'needs a match', options: {onlyIf: {etagMatches: '*'}}},
  {op: 'put', key: 'hello.txt', value: 'hello again', options: {onlyIf: {etagMatches: md5('hello world')}}},
  {op: 'get', key: 'hello.txt', read: 'text'},
  {op: 'get', key: 'fresh', read: 'text'},
  // checksums: right ones are kept, a wrong one refuses the put and writes nothing
  {op: 'put', key: 'summed', value: 'checked', options: {md5: md5('checked')}},
  {op: 'put', key: 'summed', value: 'checked', options: {sha256: sha256('checked')}},
  {op: 'put', key: 'summed', value: 'checked', options: {sha1: createHash('sha1').update('checked').digest('hex')}},
  {op: 'put', key: 'summed', value: 'checked', options: {sha256: {bytes: [...createHash('sha256').update('checked').digest()]}}},
  {op: 'head', key: 'summed'},
  {op: 'put', key: 'summed-wrong', value: 'checked', options: {md5: md5('other')}},
  {op: 'put', key: 'summed-wrong', value: 'checked', options: {sha256: sha256('other')}},
  {op: 'put', key: 'summed-wrong', value: 'checked', options: {md5: 'abc'}},
  {op: 'put', key: 'summed-wrong', value: 'checked', options: {md5: md5('checked'), sha256: sha256('checked')}},
  {op: 'head', key: 'summed-wrong'},
  // limits
  {op: 'put', key: 'k'.repeat(1025), value: 'long key'},
  {op: 'get', key: 'k'.repeat(1025)},
  {op: 'put', key: 'k'.repeat(1024), value: 'longest key'},
  {op: 'put', key: 'meta', value: 'x', options: {customMetadata: {big: 'm'.repeat(2048)}}},
  {op: 'put', key: 'meta', value: 'x', options: {customMetadata: {big: 'm'.repeat(2045)}}},
  {op: 'put', key: 'stream-unknown', value: {unknownLength: 'x'}},
  {op: 'head', key: 'stream-unknown'},
  // list: prefix, delimiter, cursor, limit, startAfter, include
  ...['photos/2024/a.jpg', 'photos/2024/b.jpg', 'photos/2025/c.jpg', 'photos/d.jpg', 'photos.txt', 'videos/e.mp4'].map(
    (key): R2Step => ({op: 'put', key, value: key, options: {customMetadata: {key}, httpMetadata: {contentType: 'image/jpeg'}}}),
  ),
  {op: 'list'},
  {op: 'list', options: {prefix: 'photos/'}},
  {op: 'list', options: {prefix: 'photos/', delimiter: '/'}},
  {op: 'list', options: {delimiter: '/'}},
  {op: 'list', options: {prefix: 'photos', include: ['httpMetadata']}},
  {op: 'list', options: {prefix: 'photos', include: ['customMetadata', 'httpMetadata']}},
  {op: 'list', options: {prefix: 'photos/', limit: 2}},
  {op: 'list', options: {startAfter: 'photos/2025/c.jpg', limit: 3}},
  {op: 'listAll', options: {limit: 2}},
  {op: 'listAll', options: {limit: 1, delimiter: '/'}},
  {op: 'listAll', options: {prefix: 'photos/', delimiter: '/', limit: 1}},
  {op: 'list', options: {prefix: 'nothing/'}},
  {op: 'list', options: {limit: 0}},
  {op: 'list', options: {limit: 1001}},
  {op: 'list', options: {include: ['nonsense']}},
  // delete: one key, many keys, missing keys
  {op: 'delete', key: 'photos.txt'},
  {op: 'delete', keys: ['photos/2024/a.jpg', 'photos/2024/b.jpg', 'never-was']},
  {op: 'delete', key: 'never-was'},
  {op: 'head', key: 'photos/2024/a.jpg'},
  {op: 'listAll', options: {prefix: 'photos'}},
  // a second bucket of the same Worker is apart
  {binding: 'ARCHIVE', op: 'get', key: 'hello.txt'},
  {binding: 'ARCHIVE', op: 'put', key: 'hello.txt', value: 'archived'},
  {binding: 'ARCHIVE', op: 'list'},
  {op: 'get', key: 'hello.txt', read: 'text'},
  // multipart uploads: R2's rules on part sizes and etags, abort, resume
  {
    op: 'multipart',
    key: 'big.bin',
    options: {httpMetadata: {contentType: 'application/octet-stream'}, customMetadata: {parts: '2'}},
    parts: [repeat(5 * MIB, 1), repeat(1000, 2)],
  },
  {op: 'get', key: 'big.bin', read: 'arrayBuffer'},
  {op: 'get', key: 'big.bin', read: 'arrayBuffer', options: {range: {offset: 5 * MIB - 5, length: 10}}},
  {op: 'head', key: 'big.bin'},
  {op: 'multipart', key: 'three.bin', parts: [repeat(5 * MIB, 3), repeat(5 * MIB, 4), {stream: repeat(10, 5)}]},
  {op: 'get', key: 'three.bin', read: 'stream'},
  {op: 'get', key: 'three.bin', read: 'arrayBuffer', options: {range: {offset: 5 * MIB - 1, length: 5 * MIB + 2}}},
  {op: 'multipart', key: 'reversed.bin', parts: [repeat(5 * MIB, 6), repeat(5 * MIB, 7)], finish: 'reversed'},
  {op: 'get', key: 'reversed.bin', read: 'stream', options: {range: {suffix: 5 * MIB + 1}}},
  {op: 'multipart', key: 'three.bin', parts: ['replaced by one part']},
  {op: 'get', key: 'three.bin', read: 'text'},
  {op: 'multipart', key: 'small-parts', parts: ['tiny', 'parts']},
  {op: 'multipart', key: 'one-part', parts: ['just one']},
  {op: 'get', key: 'one-part', read: 'text'},
  {op: 'multipart', key: 'wrong', parts: ['a'], finish: 'wrongEtag'},
  {op: 'multipart', key: 'aborted', parts: ['a'], finish: 'abort'},
  {op: 'head', key: 'aborted'},
  {op: 'multipart', key: 'twice', parts: ['a'], finish: 'completeTwice'},
  {op: 'multipart', key: 'uneven', parts: [repeat(5 * MIB, 1), repeat(5 * MIB + 1, 2), 'end']},
]
