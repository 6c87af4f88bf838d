// The layering of src/, checked on every import: each folder may import only the folders below it
// (docs/architecture.md draws the same map). A static import of a forbidden module fails here;
// the few exceptions are listed with their reason.
import {readdirSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {describe, expect, test} from 'vitest'

const SRC = fileURLToPath(new URL('../../src', import.meta.url))

/** What each top-level part of src/ must not import: folders of src/ (by name) and packages. */
const LAYERS: Record<string, {forbidden: string[]; why: string}> = {
  commands: {
    // The store is reached through engine query and action modules, which return the typed results
    // commands print (BaseCommand's store() is private, so a command cannot open it either).
    forbidden: ['store', 'provider', 'protocol', 'kysely', 'pg', 'better-sqlite3', 'undici'],
    why: 'commands parse, call the engine and render',
  },
  engine: {forbidden: ['cli', 'commands', 'tui', 'hooks', '@oclif/core', 'ink', 'react', 'listr2'], why: 'the engine knows nothing of oclif, Ink or listr2'},
  store: {forbidden: ['engine', 'provider', 'edge-host', 'cli', 'commands', 'tui', 'quickstart'], why: 'the store is below the engine'},
  provider: {forbidden: ['engine', 'store', 'edge-host', 'cli', 'commands', 'tui'], why: 'the provider only speaks the protocol'},
  'edge-host': {forbidden: ['engine', 'store', 'provider', 'cli', 'commands', 'tui', 'quickstart'], why: 'the daemon shares only the protocol with the kit'},
  protocol: {forbidden: ['engine', 'store', 'provider', 'edge-host', 'cli', 'commands', 'tui', 'config'], why: 'the wire contract depends on nothing of ours'},
  config: {forbidden: ['engine', 'store', 'provider', 'edge-host', 'cli', 'commands', 'tui'], why: 'settings are read by every layer'},
  util: {forbidden: ['engine', 'provider', 'edge-host', 'cli', 'commands', 'tui', 'config'], why: 'helpers sit at the bottom'},
  tui: {forbidden: ['commands', 'provider', 'edge-host', 'kysely', 'undici'], why: 'the view reads through the engine status source'},
}

/** Allowed by name, each for a reason. */
const EXCEPTIONS: Array<{file: string; imports: string; why: string}> = [
  {file: 'commands/host/serve.ts', imports: 'edge-host', why: '`host serve` is the daemon'},
  {file: 'commands/host/pairing-code.ts', imports: 'edge-host', why: 'reads the daemon data dir on the host machine'},
  {file: 'util/redact.ts', imports: 'store/schema', why: 'type-only: the JSON value type'},
  {file: 'commands/outbox/list.ts', imports: 'store/schema', why: 'its filter flags offer the outbox statuses and operations'},
]

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, {withFileTypes: true}).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(full)
    return /\.tsx?$/.test(entry.name) ? [full] : []
  })
}

/** Every module a file imports statically or dynamically, as `src/`-relative paths (no extension) or package names. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)].map((match) => match[1]!)
  return specs.map((spec) => {
    if (!spec.startsWith('.')) return spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!
    return path.relative(SRC, path.resolve(path.dirname(file), spec)).replace(/\.js$/, '')
  })
}

function matches(imported: string, forbidden: string): boolean {
  return imported === forbidden || imported.startsWith(`${forbidden}/`)
}

describe('architecture', () => {
  test('each part of src/ imports only what its layer allows', () => {
    const violations: string[] = []
    for (const file of sourceFiles(SRC)) {
      const relative = path.relative(SRC, file)
      const layer = LAYERS[relative.split(path.sep)[0]!]
      if (!layer) continue
      for (const imported of importsOf(file)) {
        const rule = layer.forbidden.find((forbidden) => matches(imported, forbidden))
        if (!rule) continue
        if (EXCEPTIONS.some((exception) => exception.file === relative && matches(imported, exception.imports))) continue
        violations.push(`${relative} imports ${imported} (${layer.why})`)
      }
    }
    expect(violations).toEqual([])
  })

  test('the rule catches a forbidden import', () => {
    expect(matches('store/repositories/outbox', 'store/repositories')).toBe(true)
    expect(matches('storehouse', 'store')).toBe(false)
  })
})
