// One module writes edge_worker_outbox: src/store/outbox/statements.ts. Every other file of
// src/store reads the table at most, and calls those statements (inside its own transaction) to
// write it, so each write — a claim, a lease's end, a stamp — is spelled once.
import {readdirSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {expect, test} from 'vitest'

const STORE = fileURLToPath(new URL('../../../src/store', import.meta.url))
const OWNER = 'outbox/statements.ts'
/** Migrations rewrite the table as it was at their version: they are history, never changed again. */
const MIGRATIONS = 'migrations/'

/** A query-builder write of the table, or one in raw SQL. */
const WRITE = [/\.(insertInto|updateTable|deleteFrom)\(\s*'edge_worker_outbox\b/g, /\b(update|insert\s+into|delete\s+from)\s+edge_worker_outbox\b(?!_)/gi]

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, {withFileTypes: true}).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(full)
    return entry.name.endsWith('.ts') ? [full] : []
  })
}

function writesOf(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  return WRITE.flatMap((pattern) => [...text.matchAll(pattern)].map((match) => match[0]))
}

test('only the outbox statements module writes edge_worker_outbox', () => {
  const writers = sourceFiles(STORE)
    .map((file) => path.relative(STORE, file).split(path.sep).join('/'))
    .filter((file) => file !== OWNER && !file.startsWith(MIGRATIONS))
    .flatMap((file) => writesOf(path.join(STORE, file)).map((write) => `${file}: ${write}`))
  expect(writers).toEqual([])
})

test('the check sees the writes it forbids: the owner has both kinds', () => {
  const writes = writesOf(path.join(STORE, OWNER))
  expect(writes.some((write) => write.startsWith('.updateTable'))).toBe(true)
  expect(writes.some((write) => write.startsWith('.insertInto'))).toBe(true)
  expect(writes.some((write) => /^update edge_worker_outbox$/i.test(write))).toBe(true)
})
