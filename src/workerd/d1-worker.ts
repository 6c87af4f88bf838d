// The D1 service Worker: what a Worker's D1 bindings call. Each binding is workerd's own D1 client
// (the internal module `cloudflare-internal:d1-api`, wrapped around a service binding to this
// Worker), which turns prepare().all()/first()/raw()/run(), batch() and exec() into HTTP requests:
// POST /query or /execute?resultsFormat=ROWS_AND_COLUMNS|ARRAY_OF_OBJECTS|NONE with a JSON body of
// one {sql, params} or an array of them, answered with one {success, results, meta} per statement
// or a single {success: false, error} (status 200: the client reads the body, then adds "D1_ERROR: ").
// The binding's props name the database — props the host writes from the Worker's own config, so a
// Worker reaches only its own databases. The service answers from one Durable Object per database
// (idFromName(database id)) whose SQLite database is the D1 database itself; the objects live beside
// the Worker's own Durable Objects, so the data outlives redeploys, retirement and restarts and is
// in every host snapshot. A request's statements run in one transaction: all of them or none.
//
// The host reaches the same service (`edgeworkers d1 execute`) through a socket of its own, naming
// the database in the D1_DATABASE_HEADER header instead of props.
import {BINDING_COUNTS_SOURCE} from './binding-metrics.js'
import {IO_TURN_SOURCE} from './io-turn.js'

/** The Durable Object class in the D1 service that holds one database. */
export const D1_OBJECT_CLASS = 'D1DatabaseObject'
/** The header naming the database on requests from the host (which have no props). */
export const D1_DATABASE_HEADER = 'x-edgeworkers-d1-database'

export const D1_WORKER_SOURCE = `import {DurableObject} from "cloudflare:workers";
${BINDING_COUNTS_SOURCE}
${IO_TURN_SOURCE}
const SERVED_BY = "edgeworkers.db";
const BOOKMARK_HEADER = "x-cf-d1-session-commit-token";
const FORMATS = ["ARRAY_OF_OBJECTS", "ROWS_AND_COLUMNS", "NONE"];

// Blobs travel as arrays of byte values, both ways.
const paramOf = (value) => (Array.isArray(value) ? new Uint8Array(value).buffer : value);
const cellOf = (value) => (value instanceof ArrayBuffer ? Array.from(new Uint8Array(value)) : value);
// A statement that is only comments and blanks is no statement.
const isBlank = (sql) => sql.replace(/^\\s+--.*/gm, "").trim().length === 0;

export class ${D1_OBJECT_CLASS} extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.bookmarked = false;
  }

  counters() {
    return this.sql.exec("SELECT total_changes() AS changes, last_insert_rowid() AS lastRowId").one();
  }

  run(format, query) {
    const started = performance.now();
    const sizeBefore = this.sql.databaseSize;
    const before = this.counters();
    const cursor = this.sql.exec(query.sql, ...(query.params ?? []).map(paramOf));
    const columns = cursor.columnNames;
    const rows = Array.from(cursor.raw(), (row) => row.map(cellOf));
    const results = format === "ROWS_AND_COLUMNS" ? {columns, rows} : rows.map((row) => Object.fromEntries(columns.map((name, index) => [name, row[index]])));
    const after = this.counters();
    const sizeAfter = this.sql.databaseSize;
    const changes = after.changes - before.changes;
    return {
      success: true,
      results,
      meta: {
        served_by: SERVED_BY,
        duration: performance.now() - started,
        changes,
        last_row_id: after.lastRowId,
        changed_db: changes !== 0 || after.lastRowId !== before.lastRowId || sizeAfter !== sizeBefore,
        size_after: sizeAfter,
        rows_read: cursor.rowsRead,
        rows_written: cursor.rowsWritten,
      },
    };
  }

  /** Every statement or none: one result per statement, or one {success: false, error}. */
  async queries(format, queries, inSession) {
    const statements = queries.filter((query) => !isBlank(query.sql));
    if (statements.length === 0) return {answer: {success: false, error: "No SQL statements detected."}};
    let answer;
    try {
      answer = this.ctx.storage.transactionSync(() => statements.map((query) => this.run(format, query)));
    } catch (error) {
      return {answer: {success: false, error: error instanceof Error ? error.message : String(error)}};
    }
    // workerd's local bookmark is a row it writes in the database on every getCurrentBookmark(), so
    // asking for it turns each read into a committed write. Only a withSession() call (it sends a
    // bookmark or constraint) reads the bookmark. The first successful call of this object asks
    // anyway: that first write (a table, a row) is the only one that shows in later meta
    // (size_after, last_row_id), and miniflare, which asks after every successful call, makes it too.
    if (!inSession && this.bookmarked) return {answer};
    this.bookmarked = true;
    return {answer, bookmark: await this.ctx.storage.getCurrentBookmark()};
  }
}

function queriesOf(body) {
  const queries = Array.isArray(body) ? body : [body];
  const valid = queries.every((query) => query !== null && typeof query === "object" && typeof query.sql === "string" && (query.params == null || Array.isArray(query.params)));
  return valid ? queries : null;
}

// A call as the metrics name it: run() and exec() post to /execute, first(), all() and raw() one
// statement to /query, batch() an array of them.
function operationOf(url, body) {
  if (url.pathname === "/execute") return "execute";
  if (url.pathname === "/dump") return "dump";
  return Array.isArray(body) ? "batch" : "query";
}

// \`count(operation, failed)\` is told what each call was and whether D1 refused it.
async function handle(request, env, database, count) {
  const url = new URL(request.url);
  let operation = operationOf(url, null);
  const reply = (answer, init) => {
    count(operation, answer.success === false);
    return Response.json(answer, init);
  };
  if (request.method !== "POST") return reply({success: false, error: "Method Not Allowed"}, {status: 405});
  if (url.pathname === "/dump") return reply({success: false, error: "dump() is not supported for this database; use the SQL of exec() or 'edgeworkers d1 execute' instead"}, {status: 400});
  if (url.pathname !== "/query" && url.pathname !== "/execute") return reply({success: false, error: "Not Found"}, {status: 404});
  let body;
  try {
    body = await request.json();
  } catch {
    return reply({success: false, error: "the request body is not JSON"});
  }
  operation = operationOf(url, body);
  const queries = queriesOf(body);
  if (queries === null) return reply({success: false, error: "each query must be {sql, params?}"});
  const requested = url.searchParams.get("resultsFormat");
  const format = FORMATS.includes(requested) ? requested : "ARRAY_OF_OBJECTS";
  const store = env.DATABASES.get(env.DATABASES.idFromName(database));
  const {answer, bookmark} = await store.queries(format, queries, request.headers.has(BOOKMARK_HEADER));
  return reply(answer, {headers: bookmark ? {[BOOKMARK_HEADER]: bookmark} : {}});
}

export default {
  async fetch(request, env, ctx) {
    await yieldToIo();
    if (ctx.props?.metrics) return takeOperationCounts();
    const database = ctx.props?.database ?? request.headers.get("${D1_DATABASE_HEADER}");
    if (!database) return Response.json({success: false, error: "no database named"}, {status: 400});
    // The host's own calls (d1 execute) name no binding and are not counted.
    return handle(request, env, database, (operation, failed) => countOperation(ctx.props?.binding, operation, failed));
  },
};
`
