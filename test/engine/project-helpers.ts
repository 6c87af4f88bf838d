// Shared set-up for the build and integrity tests: throwaway copies of test projects.
import {cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {afterEach} from 'vitest'
import type {ArtifactLimits} from '../../src/engine/project/build.js'

export const MiB = 1024 * 1024
/** The configured defaults (config `[deploy]`). */
export const DEFAULT_LIMITS: ArtifactLimits = {
  project_archive_max_bytes: 2 * MiB,
  bundle_max_bytes: 5 * MiB,
  project_files_max_bytes: 16 * MiB,
  assets_max_files: 20_000,
  asset_max_bytes: 25 * MiB,
}

const fixturesDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures')
const repoRoot = path.resolve(fixturesDir, '../../..')
const created: string[] = []

afterEach(() => {
  for (const dir of created.splice(0)) rmSync(dir, {recursive: true, force: true})
})

/** A fresh temp directory, removed after the test. */
export function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-build-'))
  created.push(dir)
  return dir
}

/** A copy of test/engine/fixtures/<name> in a temp directory (tests may change it). */
export function copyFixture(name: string): string {
  const dir = path.join(tempDir(), name)
  cpSync(path.join(fixturesDir, name), dir, {recursive: true})
  return dir
}

export function fixturePath(name: string): string {
  return path.join(fixturesDir, name)
}

export function repoPath(relative: string): string {
  return path.join(repoRoot, relative)
}

export function writeFile(dir: string, relative: string, content: string | Buffer): void {
  const file = path.join(dir, relative)
  mkdirSync(path.dirname(file), {recursive: true})
  writeFileSync(file, content)
}

export function readManifest(dir: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path.join(dir, 'edgeworker.json'), 'utf8')) as Record<string, unknown>
}

/** Rewrites edgeworker.json with `change` applied to its parsed content. */
export function editManifest(dir: string, change: (manifest: Record<string, unknown>) => void): void {
  const manifest = readManifest(dir)
  change(manifest)
  writeFile(dir, 'edgeworker.json', JSON.stringify(manifest, null, 2))
}
