// The endpoint list of docs/management-api.md, generated from the endpoint table so the two never
// drift (test/unit/protocol/reference.test.ts compares them; `npm run docs:endpoints` rewrites the block).
import type {z} from 'zod'
import {endpoints} from './endpoints.js'
import type {Endpoint} from './endpoint.js'
import * as api from './management-api.js'
import * as tail from './tail.js'

export const ENDPOINTS_BLOCK_START = '<!-- endpoints:start -->'
export const ENDPOINTS_BLOCK_END = '<!-- endpoints:end -->'

/** Exported schemas by identity, named as their type is: `uploadScriptSchema` → UploadScript. */
const schemaNames = new Map<unknown, string>(
  Object.entries({...api, ...tail})
    .filter(([name]) => name.endsWith('Schema'))
    .map(([name, schema]) => [schema, name[0]!.toUpperCase() + name.slice(1, -'Schema'.length)]),
)

/** Control results are built per call from the schema of what they hold: named after their shape. */
function schemaName(schema: z.ZodType): string {
  const known = schemaNames.get(schema)
  if (known) return known
  const shape = (schema as unknown as {shape?: Record<string, z.ZodType>}).shape
  if (shape?.conflict && shape.current) {
    const wrapper = shape.deleted ? 'DeleteResult' : shape.revoked ? 'RevokeResult' : 'ControlResult'
    return `${wrapper}<${schemaName(shape.current)}>`
  }
  if (shape) return `{${Object.keys(shape).join(', ')}}`
  throw new Error('an endpoint schema has no name: export it from src/protocol')
}

function answerOf(endpoint: Endpoint): string {
  switch (endpoint.answer) {
    case 'json':
      return schemaName(endpoint.response!)
    case 'ndjson':
      return `NDJSON of ${schemaName(endpoint.response!)}`
    case 'tar':
      return 'application/x-tar'
    case 'prometheus':
      return 'Prometheus text'
  }
}

function requestOf(endpoint: Endpoint): string {
  if (!endpoint.request) return ''
  return `${schemaName(endpoint.request)}${endpoint.bodyOptional ? ' (may be empty)' : ''}`
}

export function endpointReferenceTable(): string {
  const rows = Object.values(endpoints as Record<string, Endpoint>).map((endpoint) => {
    const query = (endpoint.query ?? []).join(', ')
    const cells = [endpoint.method, `\`${endpoint.path}\``, query, endpoint.signed ? 'yes' : 'no', requestOf(endpoint), answerOf(endpoint), endpoint.summary]
    return `| ${cells.map((cell) => cell.replaceAll('|', '\\|')).join(' | ')} |`
  })
  const errors = Object.entries(api.errorStatus).map(([code, status]) => `| \`${code}\` | ${status} |`)
  return [
    '| method | path | query | signed | request | answer | notes |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
    'Errors answer `{code, message}` with these statuses:',
    '',
    '| code | status |',
    '|---|---|',
    ...errors,
  ].join('\n')
}

/** The document with its endpoints block replaced by the generated list. */
export function withEndpointReference(doc: string): string {
  const start = doc.indexOf(ENDPOINTS_BLOCK_START)
  const end = doc.indexOf(ENDPOINTS_BLOCK_END)
  if (start < 0 || end < start) throw new Error('docs/management-api.md lacks the endpoints:start/endpoints:end markers')
  return `${doc.slice(0, start + ENDPOINTS_BLOCK_START.length)}\n${endpointReferenceTable()}\n${doc.slice(end)}`
}
