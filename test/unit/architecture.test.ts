// The layering of src/, checked on every import: every folder and root file of src/ is in a layer,
// and each layer may import only the layers below it (docs/architecture.md draws the same map). A
// file in no layer, or an import of a forbidden module, fails here; the few exceptions are listed
// with their reason.
import {readdirSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {describe, expect, test} from 'vitest'

const SRC = fileURLToPath(new URL('../../src', import.meta.url))

/** A top-level entry of src/ by module name: a folder, or a root file without its extension. */
const entryOf = (name: string): string => name.replace(/\.tsx?$/, '')

/** Every top-level entry of src/. */
const OURS = readdirSync(SRC).map(entryOf)

/** Every entry of ours but the ones named: for the bottom layers, which import (almost) nothing of ours. */
function oursBut(...allowed: string[]): string[] {
  return OURS.filter((entry) => !allowed.includes(entry))
}

interface Layer {
  /** The top-level entries of src/ in the layer; the layer's name alone when not given. */
  members?: string[]
  /** Entries of src/ (by name, or a path below one) and packages its files must not import. */
  forbidden: string[]
  why: string
}

/** Every top-level entry of src/ belongs to one layer, top of the map first. */
const LAYERS: Record<string, Layer> = {
  entry: {
    members: ['main', 'hooks', 'hot-commands', 'code-cache'],
    forbidden: ['engine', 'store', 'provider', 'edge-host', 'workerd', 'quickstart', 'tui'],
    why: "the process entry and oclif's hooks start commands and do no work",
  },
  commands: {
    // The store is reached through engine query and action modules, which return the typed results
    // commands print (BaseCommand's store() is private, so a command cannot open it either).
    forbidden: ['store', 'provider', 'protocol', 'workerd', 'kysely', 'pg', 'better-sqlite3', 'undici'],
    why: 'commands parse, call the engine and render',
  },
  tui: {forbidden: ['commands', 'provider', 'edge-host', 'workerd', 'quickstart', 'kysely', 'undici'], why: 'the view reads through the engine status source'},
  cli: {
    forbidden: ['commands', 'tui', 'hooks', 'main', 'quickstart', 'edge-host', 'workerd'],
    why: 'the command plumbing builds the engine (with the on-prem hosts); commands and views sit above it',
  },
  quickstart: {forbidden: ['cli', 'commands', 'tui', 'hooks', 'main'], why: 'the quickstart composes a host and the engine; commands render it'},
  engine: {
    forbidden: ['cli', 'commands', 'tui', 'hooks', 'main', 'quickstart', 'edge-host', 'provider/onprem', '@oclif/core', 'ink', 'react', 'listr2'],
    why: 'the engine knows nothing of oclif, Ink or listr2, and reaches hosts only through the provider interface',
  },
  store: {forbidden: ['engine', 'provider', 'edge-host', 'workerd', 'artifacts', 'cli', 'commands', 'tui', 'quickstart'], why: 'the store is below the engine'},
  artifacts: {
    forbidden: ['engine', 'store', 'provider', 'edge-host', 'workerd', 'cli', 'commands', 'tui', 'quickstart'],
    why: 'the artifact store is below the engine',
  },
  provider: {
    forbidden: ['engine', 'store', 'artifacts', 'edge-host', 'workerd', 'cli', 'commands', 'tui', 'quickstart'],
    why: 'the provider only speaks the protocol',
  },
  'edge-host': {
    forbidden: ['engine', 'store', 'artifacts', 'provider', 'cli', 'commands', 'tui', 'quickstart'],
    why: 'the daemon shares only the protocol and the workerd layer with the kit',
  },
  workerd: {
    forbidden: ['engine', 'store', 'artifacts', 'provider', 'edge-host', 'cli', 'commands', 'tui', 'quickstart', 'config'],
    why: 'the workerd layer (configs, processes, the validation sandbox) serves the engine and the edge host alike',
  },
  protocol: {forbidden: oursBut('protocol', 'canonical-json'), why: 'the wire contract depends on nothing of ours'},
  config: {
    forbidden: ['engine', 'store', 'artifacts', 'provider', 'edge-host', 'workerd', 'cli', 'commands', 'tui', 'quickstart'],
    why: 'settings are read by every layer',
  },
  util: {
    forbidden: ['engine', 'store', 'artifacts', 'provider', 'edge-host', 'workerd', 'cli', 'commands', 'tui', 'quickstart', 'config'],
    why: 'helpers sit at the bottom',
  },
  base: {
    members: ['errors', 'canonical-json', 'did-you-mean', 'file-digest', 'package-root'],
    forbidden: OURS,
    why: 'the error type and the hashing, spelling and package-path helpers import nothing of ours',
  },
}

/** The layer of each top-level entry of src/. */
const LAYER_OF = new Map(Object.entries(LAYERS).flatMap(([name, layer]) => (layer.members ?? [name]).map((member) => [member, layer] as const)))

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
  test('every file of src/ is in a layer', () => {
    const unlayered = sourceFiles(SRC)
      .map((file) => path.relative(SRC, file))
      .filter((relative) => !LAYER_OF.has(entryOf(relative.split(path.sep)[0]!)))
    expect(unlayered).toEqual([])
    expect([...LAYER_OF.keys()].filter((member) => !OURS.includes(member))).toEqual([])
  })

  test("the edge host's front door (edge-host/front) does not import the Node data plane (edge-host/http): it gets its tables from the host", () => {
    const front = path.join(SRC, 'edge-host', 'front')
    const violations = sourceFiles(front).flatMap((file) =>
      importsOf(file)
        .filter((imported) => matches(imported, 'edge-host/http'))
        .map((imported) => `${path.relative(SRC, file)} → ${imported}`),
    )
    expect(sourceFiles(front).length).toBeGreaterThan(0)
    expect(violations).toEqual([])
  })

  test('each part of src/ imports only what its layer allows', () => {
    const violations: string[] = []
    for (const file of sourceFiles(SRC)) {
      const relative = path.relative(SRC, file)
      const entry = entryOf(relative.split(path.sep)[0]!)
      const layer = LAYER_OF.get(entry)
      if (!layer) continue
      for (const imported of importsOf(file)) {
        const rule = layer.forbidden.find((forbidden) => forbidden !== entry && matches(imported, forbidden))
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
