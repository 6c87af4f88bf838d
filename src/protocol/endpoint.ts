// What one management API endpoint is (method, path, parameters, bodies, signing) and how a call's
// path is written and matched: shared by the endpoint table (./endpoints.ts), the host's router and
// the kit's client.
import type {z} from 'zod'

export type HttpMethod = 'GET' | 'PUT' | 'POST' | 'DELETE'

/** What the answer's body is: JSON (the response schema), NDJSON (one response per line), a tar stream, or Prometheus text. */
export type AnswerFormat = 'json' | 'ndjson' | 'tar' | 'prometheus'

export const answerContentTypes: Record<Exclude<AnswerFormat, 'prometheus'>, string> = {
  json: 'application/json',
  ndjson: 'application/x-ndjson',
  tar: 'application/x-tar',
}

export interface Endpoint {
  method: HttpMethod
  /** Parameters are `:name` segments; a value is one path segment, sent as it is (every parameter's alphabet is URL-safe). */
  path: string
  /** Path parameters the host checks before anything else, with the name its error message uses. */
  params?: Readonly<Record<string, {schema: z.ZodType<string>; what: string}>>
  /** Query parameters, in the order the kit writes them. */
  query?: readonly string[]
  /** false: `GET /v1/identity`, `POST /v1/pair` and the health endpoints; everything else is signed. */
  signed: boolean
  /** The JSON body; absent when the endpoint reads none. */
  request?: z.ZodType
  /** The body may be left out, and then counts as `{}` (control calls whose only fields are optional). */
  bodyOptional?: boolean
  response: z.ZodType | null
  answer: AnswerFormat
  /** Health and metrics: answered without reading a body; not versioned. */
  health?: boolean
  /** One line for the endpoint list. */
  summary: string
}

type ParamNames<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? Name | ParamNames<`/${Rest}`>
  : P extends `${string}:${infer Name}`
    ? Name
    : never
/** The path parameters of an endpoint, by name. */
export type PathParams<E extends Endpoint> = {[K in ParamNames<E['path']>]: string}
/** The query parameters of an endpoint; absent or null ones are left out. */
export type QueryParams<E extends Endpoint> = E extends {query: readonly (infer Q extends string)[]}
  ? {[K in Q]?: string | number | null}
  : Record<never, never>
/** What the kit sends: the request schema's input. */
export type RequestBody<E extends Endpoint> = E extends {request: infer S extends z.ZodType} ? z.input<S> : undefined
/** What the host answers (for NDJSON: each line). */
export type ResponseBody<E extends Endpoint> = E['response'] extends z.ZodType ? z.output<E['response']> : never

/** The request target of a call: the path with its parameters, then the query in the table's order. */
export function pathOf<E extends Endpoint>(endpoint: E, params: PathParams<E>, query?: QueryParams<E>): string {
  const values = params as Record<string, string>
  const path = endpoint.path.replace(/:([A-Za-z]+)/g, (_, name: string) => values[name]!)
  const search = new URLSearchParams()
  for (const name of endpoint.query ?? []) {
    const value = (query as Record<string, string | number | null | undefined> | undefined)?.[name]
    if (value !== undefined && value !== null) search.set(name, String(value))
  }
  const text = search.toString()
  return text ? `${path}?${text}` : path
}

/** The path parameters of `pathname` when it matches the endpoint's path, else null. Values are not decoded. */
export function matchPath(endpoint: Endpoint, pathname: string): Record<string, string> | null {
  const pattern = (compiled[endpoint.path] ??= new RegExp(`^${endpoint.path.replace(/:([A-Za-z]+)/g, '(?<$1>[^/]+)')}$`))
  const match = pattern.exec(pathname)
  return match ? {...match.groups} : null
}

const compiled: Record<string, RegExp> = {}
