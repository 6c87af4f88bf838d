// Text for `versions list|show|diff` (their --json output is the engine's typed result).
import path from 'node:path'
import type {DeploymentRecord} from '../engine/versions/deployments.js'
import type {Change, VersionDiff} from '../engine/versions/diff.js'
import {DIFF_SECTIONS} from '../engine/versions/diff.js'
import type {VersionDetails, VersionSummary} from '../engine/versions/queries.js'
import {fields, isoTime, table} from './table.js'

export function versionsTable(versions: VersionSummary[]): string {
  return table(
    ['VERSION', 'CREATED', 'STATE', 'TAG', 'AUTHOR', 'SIZE', 'MESSAGE'],
    versions
      .toReversed()
      .map((v) => [`${v.id}${v.current ? ' *' : ''}`, isoTime(v.createdAt), v.state, v.tag ?? '-', v.author ?? '-', sizeText(v.sizeBytes), v.message ?? '-']),
    'no versions',
  )
}

export function deploymentsTable(deployments: DeploymentRecord[]): string {
  return table(
    ['DEPLOYED', 'VERSIONS', 'KIND', 'AUTHOR', 'MESSAGE'],
    deployments.map((d) => [
      `${isoTime(d.deployedAt)}${d.current ? ' *' : ''}`,
      d.versions.map((v) => `${v.versionId}${v.tag ? ` (${v.tag})` : ''} ${v.percentage}%`).join(', '),
      d.kind === 'rollback' ? `rollback of ${d.rollbackOf}` : 'deploy',
      d.author ?? '-',
      d.message ?? '-',
    ]),
    'no deployments',
  )
}

export function versionFields(v: VersionDetails): string {
  return [
    fields([
      ['version', v.id],
      ['created', isoTime(v.createdAt)],
      ['state', `${v.state}${v.current ? ' (current)' : ''}`],
      ['message', v.message ?? '-'],
      ['tag', v.tag ?? '-'],
      ['author', v.author ?? '-'],
      ['source', sourceText(v.source)],
      ['size', sizeText(v.sizeBytes)],
      ['rollback of', v.rollbackOf ?? '-'],
      ['deployed', isoTime(v.deployedAt)],
      ['release generation', v.releaseGeneration],
      ['builder policy', v.builderPolicy],
      ['compatibility', [v.compatibilityDate ?? '-', ...v.compatibilityFlags].join(' ')],
      ...Object.entries(v.digests).map(([name, digest]): [string, string] => [name, digest ?? '-']),
    ]),
    '',
    table(
      ['MODULE', 'SHA-256'],
      v.modules.map((module) => [module.name, module.sha256]),
      'no modules recorded',
    ),
  ].join('\n')
}

export function diffText(diff: VersionDiff): string {
  const lines = [`--- ${diff.from.id}${diff.from.tag ? ` (${diff.from.tag})` : ''}`, `+++ ${diff.to.id}${diff.to.tag ? ` (${diff.to.tag})` : ''}`]
  if (diff.identical) lines.push('identical: same release generation')
  for (const section of DIFF_SECTIONS) {
    const changes = diff.changes[section]
    if (changes.length > 0) lines.push(`${section}:`, ...changes.map(changeLine))
  }
  if (!diff.identical && DIFF_SECTIONS.every((section) => diff.changes[section].length === 0))
    lines.push('no change in modules, bindings, vars, compatibility or assets')
  for (const id of diff.assetFilesUnknown) lines.push(`asset files of ${id} not compared: its bundle is no longer in the artifact store`)
  return lines.join('\n')
}

function changeLine(change: Change): string {
  if (change.change === 'added') return `  + ${change.name} ${valueText(change.to)}`
  if (change.change === 'removed') return `  - ${change.name} ${valueText(change.from)}`
  return `  ~ ${change.name} ${valueText(change.from)} → ${valueText(change.to)}`
}

function valueText(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value)
  const short = text.startsWith('sha256:') ? text.slice(0, 19) : text
  return short.length > 80 ? `${short.slice(0, 77)}...` : short
}

function sizeText(bytes: number | null): string {
  if (bytes === null) return '-'
  return bytes < 1024 ? `${bytes} B` : bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(2)} MiB`
}

function sourceText(source: VersionSummary['source']): string {
  if (!source) return '-'
  const {projectDir, file, env} = source as {projectDir?: string; file?: string | null; env?: string | null}
  const config = file && projectDir ? path.relative(projectDir, file) : file
  return [projectDir, config ? `(${config})` : null, env ? `env ${env}` : null].filter(Boolean).join(' ') || '-'
}
