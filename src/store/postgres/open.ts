// Opens the shared PostgreSQL store through a pg pool. BIGINT (our epoch-ms timestamps, counts)
// is parsed as a JS number on this pool only, so rows look the same as on SQLite.
import {Kysely, PostgresDialect} from 'kysely'
import pg from 'pg'
import type {Settings} from '../../config/schema.js'
import {KitError} from '../../errors.js'
import type {Database} from '../schema.js'
import {redactedUrl} from '../../util/redact.js'

const INT8_OID = 20

export async function openPostgres(url: string, settings: Settings): Promise<Kysely<Database>> {
  const location = redactedUrl(url)
  const unavailable = (error: unknown) => {
    // Belt and braces: no driver message may echo the password back.
    const password = passwordOf(url)
    const reason = password ? connectFailure(error).replaceAll(password, '***') : connectFailure(error)
    return new KitError('store_unavailable', `PostgreSQL store ${location} is unavailable: ${reason}`)
  }
  let pool: pg.Pool
  try {
    pool = new pg.Pool({
      connectionString: url,
      max: settings.store.postgres_pool_max,
      connectionTimeoutMillis: settings.store.connect_timeout_ms,
      types: {
        getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
          oid === INT8_OID ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
      },
    })
  } catch (error) {
    throw unavailable(error)
  }
  // An idle connection the server drops is replaced on the next checkout; without a listener the
  // pool's 'error' event would crash the process.
  pool.on('error', () => {})
  try {
    await pool.query('select 1')
  } catch (error) {
    await pool.end().catch(() => {})
    throw unavailable(error)
  }
  return new Kysely<Database>({dialect: new PostgresDialect({pool})})
}

/** The URL an operator may see: the password is never shown. */

function passwordOf(url: string): string {
  try {
    return decodeURIComponent(new URL(url).password)
  } catch {
    return ''
  }
}

/** pg reports "connect to every address failed" as an AggregateError with an empty message. */
function connectFailure(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return connectFailure(error.errors[0])
  if (error instanceof Error) return error.message || (error as NodeJS.ErrnoException).code || error.name
  return String(error)
}
