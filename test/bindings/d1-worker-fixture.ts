// One Worker that runs D1 operations named in the request body, and the request sequence the D1
// tests send it: prepare/bind with first/all/run/raw, batch (one transaction), exec, errors, blobs.
// The same Worker runs on the edge host and under miniflare (the oracle); answers are JSON, so they
// compare as data.

/** The Worker: POST {binding?, op, sql?, params?, column?, columnNames?, statements?, times?} → {result} or {error}. */
export const D1_WORKER = `
// Blobs arrive as {bytes: [...]} and leave as arrays of byte values (what D1 answers).
const paramOf = (value) => (value !== null && typeof value === "object" && value.bytes ? new Uint8Array(value.bytes) : value);
export default {
  async fetch(request, env) {
    const {binding = "DB", op, sql, params = [], column, columnNames, statements, times} = await request.json();
    const db = env[binding];
    const statement = () => db.prepare(sql).bind(...params.map(paramOf));
    try {
      switch (op) {
        case "first": return Response.json({result: await statement().first(column)});
        case "all": return Response.json({result: await statement().all()});
        case "run": return Response.json({result: await statement().run()});
        case "raw": return Response.json({result: await statement().raw(columnNames === undefined ? undefined : {columnNames})});
        case "batch": return Response.json({result: await db.batch(statements.map((s) => db.prepare(s.sql).bind(...(s.params ?? []).map(paramOf))))});
        case "exec": return Response.json({result: await db.exec(sql)});
        case "session": {
          const session = db.withSession("first-primary");
          const answer = await session.prepare(sql).bind(...params.map(paramOf)).all();
          return Response.json({result: answer.results, bookmark: typeof session.getBookmark()});
        }
        case "dump": return Response.json({result: (await db.dump()).byteLength});
        case "repeat": {
          let row;
          for (let time = 0; time < times; time++) row = await statement().first();
          return Response.json({result: {row, times}});
        }
      }
      return Response.json({error: "unknown op " + op});
    } catch (error) {
      return Response.json({error: String(error), cause: error.cause === undefined ? null : String(error.cause)});
    }
  },
};
`

export interface D1Step {
  binding?: string
  op: 'first' | 'all' | 'run' | 'raw' | 'batch' | 'exec' | 'session' | 'dump' | 'repeat'
  /** repeat: how many times the statement's first() runs, one after another. */
  times?: number
  sql?: string
  params?: unknown[]
  column?: string
  columnNames?: boolean
  statements?: Array<{sql: string; params?: unknown[]}>
}

export const D1_STEPS: D1Step[] = [
  {
    op: 'exec',
    sql: 'CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, age INTEGER, avatar BLOB);\nCREATE INDEX users_age ON users (age);',
  },
  {op: 'run', sql: 'INSERT INTO users (name, age) VALUES (?, ?)', params: ['ada', 36]},
  {op: 'run', sql: 'INSERT INTO users (name, age, avatar) VALUES (?1, ?2, ?3)', params: ['grace', 45, {bytes: [0, 1, 2, 255]}]},
  {op: 'run', sql: 'INSERT INTO users (name, age) VALUES (?, ?)', params: ['linus', null]},
  {op: 'all', sql: 'SELECT * FROM users ORDER BY id'},
  {op: 'first', sql: 'SELECT name, age FROM users WHERE age > ? ORDER BY age', params: [40]},
  {op: 'first', sql: 'SELECT name FROM users WHERE id = ?', params: [2], column: 'name'},
  {op: 'first', sql: 'SELECT name FROM users WHERE id = ?', params: [99]},
  {op: 'first', sql: 'SELECT name FROM users WHERE id = ?', params: [1], column: 'nope'},
  {op: 'raw', sql: 'SELECT id, name FROM users ORDER BY id'},
  {op: 'raw', sql: 'SELECT id, name FROM users ORDER BY id', columnNames: true},
  {op: 'raw', sql: 'SELECT avatar FROM users WHERE avatar IS NOT NULL'},
  {op: 'all', sql: 'SELECT count(*) AS n, sum(age) AS total, avg(age) AS mean FROM users'},
  {op: 'run', sql: 'UPDATE users SET age = age + 1 WHERE age IS NOT NULL'},
  {op: 'run', sql: 'DELETE FROM users WHERE name = ?', params: ['linus']},
  {op: 'all', sql: 'SELECT 1 AS one, 2.5 AS half, NULL AS empty, ? AS yes, ? AS no', params: [true, false]},
  {
    op: 'batch',
    statements: [
      {sql: 'INSERT INTO users (name, age) VALUES (?, ?)', params: ['barbara', 50]},
      {sql: 'UPDATE users SET age = ? WHERE name = ?', params: [51, 'barbara']},
      {sql: 'SELECT name, age FROM users ORDER BY id'},
    ],
  },
  // The second statement fails (a duplicate name): the first is rolled back with it.
  {
    op: 'batch',
    statements: [
      {sql: 'INSERT INTO users (name, age) VALUES (?, ?)', params: ['edsger', 72]},
      {sql: 'INSERT INTO users (name, age) VALUES (?, ?)', params: ['ada', 1]},
    ],
  },
  {op: 'all', sql: 'SELECT name FROM users ORDER BY id'},
  {op: 'session', sql: 'SELECT name FROM users WHERE age > ? ORDER BY id', params: [40]},
  {op: 'all', sql: 'SELECT * FROM missing_table'},
  {op: 'run', sql: 'INSERT INTO users (name) VALUES (NULL)'},
  {op: 'all', sql: 'SELEKT nonsense'},
  {op: 'all', sql: '-- only a comment'},
  {op: 'exec', sql: 'INSERT INTO users (name, age) VALUES ("alan", 41);\n\nUPDATE users SET age = 42 WHERE name = "alan";'},
  {op: 'exec', sql: 'INSERT INTO users (name) VALUES ("kurt");\nINSERT INTO nowhere VALUES (1);'},
  {op: 'all', sql: 'SELECT name, age FROM users ORDER BY id'},
  {op: 'all', sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%' ORDER BY name"},
  {op: 'run', sql: 'SELECT * FROM _cf_KV'},
  {binding: 'OTHER', op: 'all', sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%'"},
  {binding: 'OTHER', op: 'exec', sql: 'CREATE TABLE notes (body TEXT)'},
  {binding: 'OTHER', op: 'run', sql: 'INSERT INTO notes VALUES (?)', params: ['separate']},
  {binding: 'OTHER', op: 'all', sql: 'SELECT * FROM notes'},
  {op: 'all', sql: 'SELECT * FROM notes'},
  {op: 'run', sql: 'SELECT ?', params: [{bad: 'object'}]},
]
