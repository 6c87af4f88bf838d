// The R2 service Worker: what a Worker's `r2Bucket` bindings call (the wire: ./r2-wire.ts). The
// binding's props name the bucket — props the host writes from the Worker's own config, so a Worker
// reaches only its own buckets. The service hands each call to one Durable Object per bucket
// (idFromName(bucket name)) whose SQLite database holds the objects; the objects live beside the
// Worker's own Durable Objects, so the data outlives redeploys, retirement and restarts and is in
// every host snapshot.
//
// On disk, each bucket is one SQLite file (README "R2 buckets" describes the tables):
//   bucket(name)                                   the bucket name, one row
//   objects(key, blob, version, size, etag, uploaded, checksums, http_metadata, custom_metadata)
//   chunks(blob, start, data)                      an object's bytes: `data` starts at byte `start`
//   uploads(upload_id, key, http_metadata, custom_metadata, state)   multipart uploads
//   parts(upload_id, part_number, blob, size, etag, md5)             their parts, bytes in chunks
// An object's bytes are stored as they stream in, in R2_CHUNK_BYTES rows (workerd's SQLite refuses
// one blob of a large object), under a fresh blob id that the object's row takes over at the end:
// a put is all or nothing, and a reader of the old bytes finishes before they are deleted.
import {R2_MULTIPART_SOURCE} from './r2-multipart.js'
import {R2_WIRE_SOURCE} from './r2-wire.js'
import {BINDING_COUNTS_SOURCE} from './binding-metrics.js'
import {IO_TURN_SOURCE} from './io-turn.js'

/** The Durable Object class in the R2 service that holds one bucket. */
export const R2_OBJECT_CLASS = 'R2BucketObject'
/** Bytes of an object stored per row (a multipart object keeps its parts' rows, the last one shorter). */
export const R2_CHUNK_BYTES = 1024 * 1024
const BUCKET_HEADER = 'x-edgeworkers-r2-bucket'
/** The binding a call came through (for its count), from the service to the bucket's object. */
const BINDING_HEADER = 'x-edgeworkers-r2-binding'

export const R2_WORKER_SOURCE = `import {DurableObject} from "cloudflare:workers";
${R2_WIRE_SOURCE}
${BINDING_COUNTS_SOURCE}
${IO_TURN_SOURCE}
// Refusals that are answers, not failures: no such object (get and head answer null) and a precondition that did not hold.
const ANSWERED_REFUSALS = new Set([10007, 10031]);
const CHUNK = ${R2_CHUNK_BYTES};
const UPLOAD = {inProgress: 0, completed: 1, aborted: 2};
const HASHES = [["md5", "MD5"], ["sha1", "SHA-1"], ["sha256", "SHA-256"], ["sha384", "SHA-384"], ["sha512", "SHA-512"]];
const OBJECT_COLUMNS = "key, blob, version, size, etag, uploaded, checksums, http_metadata, custom_metadata";

const randomHex = (bytes) => hex(crypto.getRandomValues(new Uint8Array(bytes)));
const randomId = () => btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32)))).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
// A list cursor is the last key of the page it ends, base64 of its UTF-8.
const cursorOf = (key) => btoa(Array.from(utf8.encode(key), (byte) => String.fromCharCode(byte)).join(""));
function keyAfterCursor(cursor) {
  try {
    return utf8Decoder.decode(Uint8Array.from(atob(cursor), (character) => character.charCodeAt(0)));
  } catch {
    throw refuse.invalidArgument();
  }
}

async function drain(value) {
  for await (const _ of value);
}

export class ${R2_OBJECT_CLASS} extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS bucket (name TEXT NOT NULL)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS objects (key TEXT PRIMARY KEY, blob TEXT NOT NULL, version TEXT NOT NULL, size INTEGER NOT NULL, etag TEXT NOT NULL, uploaded INTEGER NOT NULL, checksums TEXT NOT NULL, http_metadata TEXT NOT NULL, custom_metadata TEXT NOT NULL)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS chunks (blob TEXT NOT NULL, start INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (blob, start))");
    this.sql.exec("CREATE TABLE IF NOT EXISTS uploads (upload_id TEXT PRIMARY KEY, key TEXT NOT NULL, http_metadata TEXT NOT NULL, custom_metadata TEXT NOT NULL, state INTEGER NOT NULL)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS parts (upload_id TEXT NOT NULL, part_number INTEGER NOT NULL, blob TEXT NOT NULL, size INTEGER NOT NULL, etag TEXT NOT NULL, md5 TEXT NOT NULL, PRIMARY KEY (upload_id, part_number))");
    // A put cut short (a restart mid-upload) leaves chunks that no row names.
    this.sql.exec("DELETE FROM chunks WHERE blob NOT IN (SELECT blob FROM objects) AND blob NOT IN (SELECT blob FROM parts)");
    /** Blob → reads under way; a blob dropped while read is deleted when its last read ends. */
    this.readers = new Map();
    this.doomed = new Set();
  }

  async fetch(request) {
    // The service Worker and its objects share one isolate, and so the counts.
    const seen = {operation: "unknown"};
    let failed = true;
    try {
      const response = await this.answer(request, seen);
      failed = false;
      return response;
    } catch (error) {
      if (!(error instanceof R2Refusal)) throw error;
      failed = !ANSWERED_REFUSALS.has(error.v4code);
      return refusalResponse(error, error.object);
    } finally {
      countOperation(request.headers.get("${BINDING_HEADER}"), seen.operation, failed);
    }
  }

  // \`seen.operation\`: the R2 method of the call, once it is read.
  async answer(request, seen) {
    if (request.method === "GET") {
      const call = JSON.parse(request.headers.get("cf-r2-request") ?? "null");
      seen.operation = String(call?.method);
      if (call?.method === "head") return this.head(call);
      if (call?.method === "get") return this.get(call);
      if (call?.method === "list") return resultWithMetadata(this.list(call));
      throw refuse.invalidArgument();
    }
    if (request.method !== "PUT") throw refuse.internal();
    const bucket = request.headers.get("${BUCKET_HEADER}");
    const {request: call, value} = await splitBody(request);
    seen.operation = String(call.method);
    switch (call.method) {
      case "put":
        return this.put(bucket, call, value);
      case "delete":
        return this.delete(call);
      case "createMultipartUpload":
        return this.createMultipartUpload(bucket, call);
      case "uploadPart":
        return this.uploadPart(call, value);
      case "completeMultipartUpload":
        return this.completeMultipartUpload(bucket, call);
      case "abortMultipartUpload":
        return this.abortMultipartUpload(call);
    }
    await drain(value);
    throw refuse.internal();
  }

  row(key) {
    return this.sql.exec("SELECT " + OBJECT_COLUMNS + " FROM objects WHERE key = ?", key).toArray()[0];
  }

  head(call) {
    const row = this.row(checkKey(call.object));
    if (!row) throw refuse.noSuchKey();
    return resultWithMetadata(wireObject(row, {offset: 0, length: row.size}));
  }

  get(call) {
    const row = this.row(checkKey(call.object));
    if (!row) throw refuse.noSuchKey();
    const whole = {offset: 0, length: row.size};
    if (!conditionHolds(call.onlyIf, row)) {
      const refusal = refuse.preconditionFailed();
      refusal.object = wireObject(row, whole);
      throw refusal;
    }
    const range = rangeOf(call, row.size) ?? whole;
    return this.objectResponse(wireObject(row, range), row.blob, range);
  }

  // The object's JSON, then its bytes in \`range\`, read a chunk at a time as the Worker takes them.
  objectResponse(object, blob, range) {
    const metadata = utf8.encode(JSON.stringify(object));
    const end = range.offset + range.length;
    let position = range.offset;
    let metadataSent = false;
    this.readers.set(blob, (this.readers.get(blob) ?? 0) + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const left = this.readers.get(blob) - 1;
      if (left > 0) return this.readers.set(blob, left);
      this.readers.delete(blob);
      if (this.doomed.delete(blob)) this.dropBlob(blob);
    };
    const body = new ReadableStream({
      pull: async (controller) => {
        if (!metadataSent) {
          metadataSent = true;
          return controller.enqueue(metadata);
        }
        if (position >= end) {
          release();
          return controller.close();
        }
        const chunk = this.sql.exec("SELECT start, data FROM chunks WHERE blob = ? AND start <= ? ORDER BY start DESC LIMIT 1", blob, position).toArray()[0];
        const bytes = chunk === undefined ? new Uint8Array(0) : new Uint8Array(chunk.data);
        const from = chunk === undefined ? 0 : position - chunk.start;
        const to = Math.min(bytes.byteLength, end - (chunk?.start ?? 0));
        if (to <= from) {
          release();
          return controller.error(new Error("R2 object bytes missing at " + position));
        }
        controller.enqueue(bytes.subarray(from, to));
        position = chunk.start + to;
        await ioTurn();
      },
      cancel: release,
    });
    return new Response(body.pipeThrough(new FixedLengthStream(metadata.byteLength + range.length)), {
      headers: {"cf-r2-metadata-size": String(metadata.byteLength)},
    });
  }

  list(call) {
    let limit = call.limit === undefined ? LIMITS.listLimit : Number(call.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > LIMITS.listLimit) throw refuse.invalidMaxKeys();
    const include = (call.include ?? []).map(Number);
    if (include.length > 0) limit = Math.min(limit, LIMITS.listLimitWithMetadata);
    const prefix = call.prefix ?? "";
    let after = call.startAfter ?? null;
    if (call.cursor !== undefined && call.cursor !== "") {
      const cursorAfter = keyAfterCursor(call.cursor);
      if (after === null || cursorAfter > after) after = cursorAfter;
    }
    const delimiter = call.delimiter === "" ? undefined : call.delimiter;
    const rows = this.sql.exec("SELECT " + OBJECT_COLUMNS + " FROM objects WHERE key >= ? AND (?2 IS NULL OR key > ?2) ORDER BY key", prefix, after);
    const objects = [];
    const delimitedPrefixes = [];
    let entries = 0;
    let lastKey;
    let group = null;
    let truncated = false;
    // Keys in UTF-8 byte order (SQLite's BINARY collation); a delimited prefix is one entry, and a
    // page ends after the last key of its last entry.
    for (const row of rows) {
      if (!row.key.startsWith(prefix)) break;
      const cut = delimiter === undefined ? -1 : row.key.indexOf(delimiter, prefix.length);
      const delimited = cut === -1 ? null : row.key.slice(0, cut + delimiter.length);
      if (delimited !== null && delimited === group) {
        lastKey = row.key;
        continue;
      }
      if (entries === limit) {
        truncated = true;
        break;
      }
      entries++;
      lastKey = row.key;
      group = delimited;
      if (delimited !== null) delimitedPrefixes.push(delimited);
      else
        objects.push(
          wireObject({
            ...row,
            http_metadata: include.includes(0) ? row.http_metadata : "{}",
            custom_metadata: include.includes(1) ? row.custom_metadata : "{}",
          }),
        );
    }
    return {objects, truncated, ...(truncated ? {cursor: cursorOf(lastKey)} : {}), delimitedPrefixes};
  }

  async put(bucket, call, value) {
    const custom = customMetadataOf(call.customFields);
    try {
      checkKey(call.object);
      checkMetadataSize(custom);
    } catch (error) {
      // The whole body is read even when it is refused: workerd drops a call answered mid-upload.
      await drain(value);
      throw error;
    }
    const hashes = HASHES.filter(([field]) => field === "md5" || call[field] !== undefined);
    const stored = await this.storeBlob(value, hashes.map(([, algorithm]) => algorithm));
    try {
      if (stored.size > LIMITS.valueBytes) throw refuse.tooLarge();
      const checksums = {};
      for (const [field, algorithm] of hashes) {
        const computed = stored.digests.get(algorithm);
        if (call[field] !== undefined) {
          const provided = field === "md5" ? base64ToHex(call.md5) : call[field].toLowerCase();
          if (provided !== computed) throw refuse.badDigest(algorithm, provided, computed);
        }
        checksums[field] = computed;
      }
      const row = {
        key: call.object,
        blob: stored.blob,
        version: randomHex(16),
        size: stored.size,
        etag: stored.digests.get("MD5"),
        uploaded: Date.now(),
        checksums: JSON.stringify(checksums),
        http_metadata: JSON.stringify(call.httpFields ?? {}),
        custom_metadata: JSON.stringify(custom),
      };
      const previous = this.ctx.storage.transactionSync(() => {
        const previous = this.row(row.key);
        if (!conditionHolds(call.onlyIf, previous)) throw refuse.preconditionFailed();
        this.recordBucket(bucket);
        this.writeRow(row);
        return previous;
      });
      if (previous) this.dropBlob(previous.blob);
      return resultResponse(wireObject(row));
    } catch (error) {
      this.dropBlob(stored.blob);
      throw error;
    }
  }

  // Stores the value's bytes as they stream in, digesting them; past R2's largest object the rest is
  // only counted (and the put refused).
  async storeBlob(value, algorithms) {
    const blob = randomId();
    const digests = algorithms.map((algorithm) => {
      const stream = new crypto.DigestStream(algorithm);
      return {algorithm, stream, writer: stream.getWriter()};
    });
    let chunk = new Uint8Array(CHUNK);
    let filled = 0;
    let size = 0;
    let flushed = 0;
    const flush = (buffer) => {
      this.sql.exec("INSERT INTO chunks (blob, start, data) VALUES (?, ?, ?)", blob, flushed, buffer);
      flushed += buffer.byteLength;
    };
    for await (const part of value) {
      size += part.byteLength;
      if (size > LIMITS.valueBytes) continue;
      for (const digest of digests) await digest.writer.write(part);
      for (let offset = 0; offset < part.byteLength; ) {
        const taken = Math.min(CHUNK - filled, part.byteLength - offset);
        chunk.set(part.subarray(offset, offset + taken), filled);
        filled += taken;
        offset += taken;
        if (filled === CHUNK) {
          flush(chunk.buffer);
          chunk = new Uint8Array(CHUNK);
          filled = 0;
          await ioTurn();
        }
      }
    }
    if (filled > 0 && size <= LIMITS.valueBytes) flush(chunk.buffer.slice(0, filled));
    const computed = new Map();
    for (const digest of digests) {
      await digest.writer.close();
      computed.set(digest.algorithm, hex(await digest.stream.digest));
    }
    return {blob, size, digests: computed};
  }

  writeRow(row) {
    this.sql.exec(
      "INSERT OR REPLACE INTO objects (" + OBJECT_COLUMNS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      row.key, row.blob, row.version, row.size, row.etag, row.uploaded, row.checksums, row.http_metadata, row.custom_metadata,
    );
  }

  recordBucket(bucket) {
    if (this.sql.exec("SELECT count(*) AS n FROM bucket").one().n === 0) this.sql.exec("INSERT INTO bucket (name) VALUES (?)", bucket);
  }

  dropBlob(blob) {
    if (this.readers.has(blob)) this.doomed.add(blob);
    else this.sql.exec("DELETE FROM chunks WHERE blob = ?", blob);
  }

  delete(call) {
    const keys = call.objects ?? [call.object];
    for (const key of keys) checkKey(key);
    const blobs = this.ctx.storage.transactionSync(() =>
      keys.flatMap((key) => this.sql.exec("DELETE FROM objects WHERE key = ? RETURNING blob", key).toArray().map((row) => row.blob)),
    );
    for (const blob of blobs) this.dropBlob(blob);
    return resultResponse(undefined);
  }

  ${R2_MULTIPART_SOURCE}
}

function resultWithMetadata(result) {
  const json = utf8.encode(JSON.stringify(result));
  return new Response(json, {headers: {"cf-r2-metadata-size": String(json.byteLength)}});
}

export default {
  async fetch(request, env, ctx) {
    await yieldToIo();
    if (ctx.props.metrics) return takeOperationCounts();
    const bucket = ctx.props.bucket;
    const forwarded = new Request(request);
    forwarded.headers.set("${BUCKET_HEADER}", bucket);
    forwarded.headers.set("${BINDING_HEADER}", ctx.props.binding);
    return env.BUCKETS.get(env.BUCKETS.idFromName(bucket)).fetch(forwarded);
  },
};
`
