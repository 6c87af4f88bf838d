// The R2 wire protocol, as workerd's native `r2Bucket` binding speaks it to the service it names
// (the service Worker is ./r2-worker.ts; this module is the part of its source that knows the wire):
//
// - head, get, list: GET with the request as JSON in the `cf-r2-request` header; the answer's body is
//   the result's JSON, `cf-r2-metadata-size` bytes of it, followed by the object's bytes for a get.
// - put, delete and the multipart calls: PUT whose body is `cf-r2-metadata-size` bytes of request
//   JSON followed by the value; the answer's whole body is the result's JSON.
// - a refusal: an HTTP status with `cf-r2-error: {"version":1,"v4code":…,"message":…}`, which the
//   Worker sees as `Error: <method>: <message> (<v4code>)`. 404/10007 is "no such object" (get and
//   head answer null) and 412/10031 "precondition failed" (put answers null, get the object's
//   metadata without a body, sent after the error header as a get's result is).
//
// Numbers of 64 bits (offsets, lengths, dates in ms) arrive as strings (capnp's JSON); objects go
// back as {name, version, size, etag, uploaded, httpFields, customFields: [{k, v}], range,
// checksums: {"0": md5 hex, "1": sha1, "2": sha256, "3": sha384, "4": sha512}}.

/** Cloudflare's R2 limits. */
export const R2_LIMITS = {
  keyBytes: 1024,
  /** The largest object one put stores: 5 GiB − 5 MiB. */
  valueBytes: 5 * 1024 * 1024 * 1024 - 5 * 1024 * 1024,
  /** Custom metadata, counted as R2 counts it (keys and values; a string with a character past U+00FF counts twice). */
  metadataBytes: 2048,
  listLimit: 1000,
  /** One list answers at most this many objects when it includes metadata. */
  listLimitWithMetadata: 100,
  /** Every part of a multipart upload but the last is at least this long, and all those are one length. */
  minPartBytes: 5 * 1024 * 1024,
  maxParts: 10000,
} as const

export const R2_WIRE_SOURCE = `
const LIMITS = ${JSON.stringify(R2_LIMITS)};
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

class R2Refusal extends Error {
  constructor(status, v4code, message) {
    super(message);
    this.status = status;
    this.v4code = v4code;
  }
}

// Cloudflare's own wording of each refusal.
const refuse = {
  noSuchKey: () => new R2Refusal(404, 10007, "The specified key does not exist."),
  internal: () => new R2Refusal(500, 10001, "We encountered an internal error. Please try again."),
  tooLarge: () => new R2Refusal(400, 100100, "Your proposed upload exceeds the maximum allowed object size."),
  tooSmall: () => new R2Refusal(400, 10011, "Your proposed upload is smaller than the minimum allowed object size."),
  metadataTooLarge: () => new R2Refusal(400, 10012, "Your metadata headers exceed the maximum allowed metadata size."),
  invalidName: () => new R2Refusal(400, 10020, "The specified object name is not valid."),
  invalidMaxKeys: () => new R2Refusal(400, 10022, "MaxKeys params must be positive integer <= 1000."),
  invalidArgument: () => new R2Refusal(400, 10029, "Metadata missing or invalid"),
  noSuchUpload: () => new R2Refusal(400, 10024, "The specified multipart upload does not exist."),
  invalidPart: () => new R2Refusal(400, 10025, "One or more of the specified parts could not be found."),
  preconditionFailed: () => new R2Refusal(412, 10031, "At least one of the pre-conditions you specified did not hold."),
  invalidRange: () => new R2Refusal(416, 10039, "The requested range is not satisfiable"),
  badUpload: () => new R2Refusal(500, 10048, "There was a problem with the multipart upload."),
  badDigest: (algorithm, provided, computed) =>
    new R2Refusal(400, 10037, "The " + algorithm + " checksum you specified did not match what we received.\\nYou provided a " + algorithm +
      " checksum with value: " + provided + "\\nActual " + algorithm + " was: " + computed),
};

function refusalResponse(refusal, object) {
  const headers = {"cf-r2-error": JSON.stringify({version: 1, v4code: refusal.v4code, message: refusal.message})};
  if (object === undefined) return new Response(null, {status: refusal.status, headers});
  const json = utf8.encode(JSON.stringify(object));
  return new Response(json, {status: refusal.status, headers: {...headers, "cf-r2-metadata-size": String(json.byteLength)}});
}

/** A result answered to a PUT: its JSON is the whole body. */
const resultResponse = (result) => (result === undefined ? new Response(null) : Response.json(result));

const hex = (bytes) => Array.from(new Uint8Array(bytes), (byte) => byte.toString(16).padStart(2, "0")).join("");
const base64ToHex = (text) => hex(Uint8Array.from(atob(text), (character) => character.charCodeAt(0)));

// An object row as the Worker receives it; \`range\` only where the call answers one.
function wireObject(row, range) {
  const checksums = JSON.parse(row.checksums);
  const custom = JSON.parse(row.custom_metadata);
  return {
    name: row.key,
    version: row.version,
    size: row.size,
    etag: row.etag,
    uploaded: row.uploaded,
    httpFields: JSON.parse(row.http_metadata),
    customFields: Object.entries(custom).map(([k, v]) => ({k, v})),
    ...(range === undefined ? {} : {range}),
    checksums: {0: checksums.md5, 1: checksums.sha1, 2: checksums.sha256, 3: checksums.sha384, 4: checksums.sha512},
  };
}

function checkKey(key) {
  if (typeof key !== "string" || utf8.encode(key).byteLength > LIMITS.keyBytes) throw refuse.invalidName();
  return key;
}

const customMetadataOf = (fields) => Object.fromEntries((fields ?? []).map(({k, v}) => [k, v]));
const countedLength = (text) => ([...text].some((character) => character.codePointAt(0) > 0xff) ? text.length * 2 : text.length);
function checkMetadataSize(custom) {
  let length = 0;
  for (const [key, value] of Object.entries(custom)) length += countedLength(key) + countedLength(value);
  if (length > LIMITS.metadataBytes) throw refuse.metadataTooLarge();
}

// onlyIf against the object's row (undefined: no object). Etags match strongly for etagMatches and
// weakly for etagDoesNotMatch; dates are ms, optionally compared at seconds granularity; a date
// condition gives way to an etag condition given with it (RFC 9110's order of preconditions).
function conditionHolds(condition, row) {
  if (condition === undefined) return true;
  if (row === undefined) return condition.etagMatches === undefined && condition.uploadedAfter === undefined;
  const listed = (etags, weakToo) => etags.some((etag) => etag.type === "wildcard" || (etag.value === row.etag && (etag.type === "strong" || weakToo)));
  const granular = (ms) => (condition.secondsGranularity ? Math.floor(ms / 1000) * 1000 : ms);
  const uploaded = granular(row.uploaded);
  const ifMatch = condition.etagMatches === undefined || listed(condition.etagMatches, false);
  const ifNoneMatch = condition.etagDoesNotMatch === undefined || !listed(condition.etagDoesNotMatch, true);
  const ifModifiedSince =
    condition.uploadedAfter === undefined || granular(Number(condition.uploadedAfter)) < uploaded || (condition.etagDoesNotMatch !== undefined && ifNoneMatch);
  const ifUnmodifiedSince =
    condition.uploadedBefore === undefined || uploaded < granular(Number(condition.uploadedBefore)) || (condition.etagMatches !== undefined && ifMatch);
  return ifMatch && ifNoneMatch && ifModifiedSince && ifUnmodifiedSince;
}

// The bytes a get answers, {offset, length}, or undefined for the whole object. A Range header
// naming anything but one satisfiable range answers the whole object, as R2 does.
function rangeOf(request, size) {
  if (request.rangeHeader !== undefined) return rangeOfHeader(request.rangeHeader, size);
  if (request.range === undefined) return undefined;
  let offset = request.range.offset === undefined ? undefined : Number(request.range.offset);
  let length = request.range.length === undefined ? undefined : Number(request.range.length);
  if (request.range.suffix !== undefined) {
    const suffix = Number(request.range.suffix);
    if (suffix <= 0) throw refuse.invalidRange();
    length = Math.min(suffix, size);
    offset = size - length;
  }
  offset ??= 0;
  length ??= size - offset;
  if (offset < 0 || offset > size || length <= 0) throw refuse.invalidRange();
  return {offset, length: Math.min(length, size - offset)};
}

function rangeOfHeader(header, size) {
  const match = /^\\s*bytes\\s*=\\s*(\\d*)\\s*-\\s*(\\d*)\\s*$/i.exec(header);
  if (match === null || (match[1] === "" && match[2] === "")) return undefined;
  if (match[1] === "") {
    const suffix = Number(match[2]);
    if (suffix === 0 || suffix >= size) return undefined;
    return {offset: size - suffix, length: suffix};
  }
  const start = Number(match[1]);
  const end = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1);
  if (start > end || start >= size) return undefined;
  return {offset: start, length: end - start + 1};
}

// The request JSON at the front of a PUT's body, and a reader of the value after it.
async function splitBody(request) {
  const size = Number(request.headers.get("cf-r2-metadata-size"));
  if (!Number.isInteger(size) || size < 0 || request.body === null) throw refuse.invalidArgument();
  const reader = request.body.getReader();
  const prefix = new Uint8Array(size);
  let filled = 0;
  let leftover = null;
  while (filled < size) {
    const {done, value} = await reader.read();
    if (done) throw refuse.invalidArgument();
    const taken = Math.min(size - filled, value.byteLength);
    prefix.set(value.subarray(0, taken), filled);
    filled += taken;
    if (taken < value.byteLength) leftover = value.subarray(taken);
  }
  async function* value() {
    if (leftover !== null) yield leftover;
    for (;;) {
      const {done, value: part} = await reader.read();
      if (done) return;
      yield part;
    }
  }
  return {request: JSON.parse(utf8Decoder.decode(prefix)), value: value()};
}
`
