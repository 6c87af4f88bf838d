// A zod refusal of a project file as one line naming the file and the key: an unknown key first
// (with the nearest known one: `compatibiltyDate` is a typo of a key zod also reports missing),
// then what is wrong inside the union branch the value was meant for.
import type {z} from 'zod'
import {didYouMean} from '../../did-you-mean.js'
import {KitError} from '../../errors.js'

/** `data` as `schema` reads it, or a `usage` KitError: `<source>: <what is wrong>`. */
export function parseWithSchema<Schema extends z.ZodType>(schema: Schema, data: unknown, source: string): z.infer<Schema> {
  // reportInput lets describeIssue tell a missing key (input undefined) from a wrong one.
  const result = schema.safeParse(data, {reportInput: true})
  if (result.success) return result.data
  // An unknown key first: `compatibiltyDate` is a typo of the required key zod also reports missing.
  const issue = result.error.issues.find((candidate) => candidate.code === 'unrecognized_keys') ?? result.error.issues[0]!
  throw new KitError('usage', `${source}: ${describeIssue(issue, schema)}`)
}

function describeIssue(issue: z.core.$ZodIssue, schema: z.ZodType): string {
  if (issue.code === 'invalid_union') {
    // Report what is wrong inside the branch the value was meant for (a module object, say).
    const branch = issue.errors.find((issues) => !(issues[0]?.code === 'invalid_type' && issues[0].path.length === 0))?.[0]
    if (branch) return describeIssue({...branch, path: [...issue.path, ...branch.path]} as z.core.$ZodIssue, schema)
  }
  if (issue.code === 'unrecognized_keys') {
    const known = knownKeysAt(schema, issue.path)
    const keys = issue.keys.map((key) => {
      const suggestion = didYouMean(key, known)
      const named = JSON.stringify(formatKeyPath([...issue.path, key]))
      return suggestion ? `${named} (did you mean ${JSON.stringify(suggestion)}?)` : named
    })
    return `unknown key${keys.length > 1 ? 's' : ''} ${keys.join(', ')}`
  }
  const key = issue.path.length === 0 ? 'the file' : `key ${JSON.stringify(formatKeyPath(issue.path))}`
  if (issue.path.length === 0 && issue.code === 'invalid_type') return 'must be a JSON object'
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined ? `${key} is required` : `${key} must be ${article(issue.expected)}`
    case 'invalid_value':
      return `${key} must be ${issue.values.map((value) => JSON.stringify(value)).join(' or ')}`
    case 'too_small':
      return issue.origin === 'string' ? `${key} must not be empty` : `${key} ${issue.message}`
    case 'too_big':
      return issue.origin === 'number' ? `${key} ${issue.message}` : `${key} is too long`
    case 'invalid_key':
      return `${key} ${issue.issues[0]?.message ?? 'is not an allowed key'}`
    default:
      // Refinements carry their own wording (e.g. "must be a date written YYYY-MM-DD").
      return `${key} ${issue.message}`
  }
}

/** The keys the schema allows in the object at `keyPath` (through arrays, optionals and defaults). */
function knownKeysAt(schema: z.ZodType, keyPath: readonly PropertyKey[]): string[] {
  let def = (schema as unknown as {_zod: {def: SchemaDef}})._zod.def
  const unwrap = () => {
    for (;;) {
      const inner = def.innerType ?? def.in ?? def.options?.find((option) => option._zod.def.shape)
      if (!inner) return
      def = inner._zod.def
    }
  }
  for (const part of keyPath) {
    unwrap()
    const next = typeof part === 'number' ? def.element : def.shape?.[String(part)]
    if (!next) return []
    def = next._zod.def
  }
  unwrap()
  return Object.keys(def.shape ?? {})
}

interface SchemaDef {
  options?: Array<{_zod: {def: SchemaDef}}>
  shape?: Record<string, {_zod: {def: SchemaDef}}>
  element?: {_zod: {def: SchemaDef}}
  innerType?: {_zod: {def: SchemaDef}}
  in?: {_zod: {def: SchemaDef}}
}

/** `["durableObjects", 0, "binding"]` → `durableObjects[0].binding` */
function formatKeyPath(keyPath: readonly PropertyKey[]): string {
  return keyPath.map((part, index) => (typeof part === 'number' ? `[${part}]` : index === 0 ? String(part) : `.${String(part)}`)).join('')
}

function article(expected: string): string {
  const noun = expected === 'record' ? 'object' : expected
  return /^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`
}
