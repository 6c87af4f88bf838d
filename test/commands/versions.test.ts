// versions list|show|diff|deploy and rollback's refusal of a cleaned-up version, through the real CLI
// against a real edge host: text, --json typed results, exit codes, one-line errors.
import {rmSync} from 'node:fs'
import path from 'node:path'
import {describe, expect, test} from 'vitest'
import {artifactsDirOf} from '../../src/artifacts/store.js'
import type {RollbackOutcome} from '../../src/engine/deploy/rollback.js'
import type {VersionDiff} from '../../src/engine/versions/diff.js'
import type {VersionDetails, VersionList} from '../../src/engine/versions/queries.js'
import {kitWithHost} from '../support/cli-kit.js'
import {FIXTURES_DIR} from '../support/worker-fixtures.js'

const kit = kitWithHost('versions-cli', {settings: {shards: 1}})
const HELLO = path.join(FIXTURES_DIR, 'hello')
const HELLO_V2 = path.join(FIXTURES_DIR, 'hello-v2')

describe('versions and deployments commands', {timeout: 300_000}, () => {
  test('versions list, show and diff and deployments list and status in text and --json; rollback to a cleaned-up version is refused with one line, exit 6', async () => {
    const department = await kit.newDepartment()
    const deploy = async (dir: string, ...notes: string[]) => {
      const result = await kit.cli('deploy', dir, '--department', department, ...notes, '--json')
      expect(result.code).toBe(0)
      return JSON.parse(result.stdout) as {versionId: string}
    }
    const first = await deploy(HELLO, '--message', 'first cut', '--tag', 'v1')
    const second = await deploy(HELLO_V2, '--tag', 'v2')

    const [listText, listJson, showText, showJson, diffText, diffJson, missing, deploymentsText, statusJson] = await Promise.all([
      kit.cli('versions', 'list', department),
      kit.cli('versions', 'list', department, '--json'),
      kit.cli('versions', 'show', department, 'v1'),
      kit.cli('versions', 'show', department, second.versionId.slice(0, 8), '--json'),
      kit.cli('versions', 'diff', department, 'v1', 'v2'),
      kit.cli('versions', 'diff', department, 'v1', 'v2', '--json'),
      kit.cli('versions', 'show', department, 'v9'),
      kit.cli('deployments', 'list', department),
      kit.cli('deployments', 'status', department, '--json'),
    ])
    expect(listText.code).toBe(0)
    const rows = listText.stdout.trimEnd().split('\n')
    expect(rows[0]).toMatch(/^VERSION +CREATED +STATE +TAG +AUTHOR +SIZE +MESSAGE$/)
    expect(rows[1]).toMatch(new RegExp(`^${second.versionId} \\* .* deployed +v2 .* -$`))
    expect(rows[2]).toMatch(new RegExp(`^${first.versionId} .* superseded +v1 .* first cut$`))
    const list = JSON.parse(listJson.stdout) as VersionList
    expect(list.versions.map((v) => [v.id, v.tag, v.state, v.current])).toEqual([
      [first.versionId, 'v1', 'superseded', false],
      [second.versionId, 'v2', 'deployed', true],
    ])
    expect(list.versions[0]!.author).toEqual(expect.any(String))

    expect(showText.code).toBe(0)
    expect(showText.stdout).toMatch(new RegExp(`^version: +${first.versionId}$`, 'm'))
    expect(showText.stdout).toMatch(/^message: +first cut$/m)
    expect(showText.stdout).toMatch(new RegExp(`^source: +${HELLO} \\(edgeworker\\.json\\)$`, 'm'))
    expect(showText.stdout).toMatch(/^index\.js +[0-9a-f]{64}$/m)
    expect((JSON.parse(showJson.stdout) as VersionDetails).id).toBe(second.versionId)

    expect(diffText.code).toBe(0)
    expect(diffText.stdout.trimEnd().split('\n')).toEqual([
      `--- ${first.versionId} (v1)`,
      `+++ ${second.versionId} (v2)`,
      'modules:',
      expect.stringMatching(/^ {2}~ index\.js sha256:[0-9a-f]{12} → sha256:[0-9a-f]{12}$/),
    ])
    expect((JSON.parse(diffJson.stdout) as VersionDiff).changes.modules.map((c) => c.name)).toEqual(['index.js'])
    expect(deploymentsText.code).toBe(0)
    expect(deploymentsText.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(/^DEPLOYED +VERSIONS +KIND +AUTHOR +MESSAGE$/),
      expect.stringMatching(new RegExp(`^\\S+Z \\* +${second.versionId} \\(v2\\) 100% +deploy +\\S+ +-$`)),
      expect.stringMatching(new RegExp(`^\\S+Z +${first.versionId} \\(v1\\) 100% +deploy +\\S+ +first cut$`)),
    ])
    expect(JSON.parse(statusJson.stdout)).toMatchObject({departmentId: department, deployment: {versions: [{versionId: second.versionId, percentage: 100}]}})
    expect({code: missing.code, stderr: missing.stderr}).toEqual({
      code: 5,
      stderr: 'error: version v9 not found (give a version id, a unique prefix of at least 4 characters, or a tag)\n',
    })

    // The first version's bundle is cleaned up: rolling back to it is refused, nothing written.
    const shown = JSON.parse((await kit.cli('versions', 'show', department, 'v1', '--json')).stdout) as VersionDetails
    const digest = shown.digests.bundleDigest!
    rmSync(path.join(artifactsDirOf(kit.dataDir), 'bundle', 'sha256', digest.slice(0, 2), digest))
    const refused = await kit.cli('rollback', department, '--to', 'v1')
    expect({code: refused.code, stdout: refused.stdout, stderr: refused.stderr}).toEqual({
      code: 6,
      stdout: '',
      stderr: `error: version ${first.versionId} cannot be rolled back to: bundle artifact bundle/sha256/${digest.slice(0, 2)}/${digest} is missing\n`,
    })
    expect(JSON.parse((await kit.cli('versions', 'list', department, '--json')).stdout)).toEqual(list)
  })
  test('versions deploy serves a stored version again or a split of two (exit 0), deployments promote ends the split; a bad split is refused with one line, exit 2', async () => {
    const department = await kit.newDepartment()
    for (const [dir, tag] of [
      [HELLO, 'v1'],
      [HELLO_V2, 'v2'],
    ]) {
      expect((await kit.cli('deploy', dir!, '--department', department, '--tag', tag!)).code).toBe(0)
    }
    const before = JSON.parse((await kit.cli('versions', 'list', department, '--json')).stdout) as VersionList
    const [v1, v2] = [before.versions[0]!.id, before.versions[1]!.id]
    const badSum = await kit.cli('versions', 'deploy', department, 'v1@90', 'v2@20')
    expect({code: badSum.code, stderr: badSum.stderr}).toEqual({code: 2, stderr: 'error: the percentages add up to 110; they must add up to 100\n'})
    expect(JSON.parse((await kit.cli('versions', 'list', department, '--json')).stdout)).toEqual(before)

    // v2 is served: the split uploads v1 (as a new version) at 90 % and keeps v2 beside it at 10 %.
    const split = JSON.parse((await kit.cli('versions', 'deploy', department, 'v1@90%', 'v2@10%', '--json')).stdout) as RollbackOutcome
    expect(split).toMatchObject({state: 'completed', rolledBackTo: v1})
    const splitStatus = JSON.parse((await kit.cli('deployments', 'status', department, '--json')).stdout)
    expect(splitStatus.deployment.versions.map((v: {versionId: string; percentage: number}) => [v.versionId, v.percentage])).toEqual([
      [split.versionId, 90],
      [v2, 10],
    ])
    const promote = await kit.cli('deployments', 'promote', department, '--message', 'v2 breaks checkout')
    expect(promote.code).toBe(0)
    expect(promote.stdout).toMatch(new RegExp(`^version +\\S+ \\(promote of ${split.versionId}\\)$`, 'm'))
    expect(promote.stdout).toMatch(/^state +completed$/m)
    const promoted = JSON.parse((await kit.cli('versions', 'deploy', department, 'v2@100', '--json')).stdout) as RollbackOutcome
    expect(promoted).toMatchObject({state: 'completed', rolledBackTo: v2})
    const status = JSON.parse((await kit.cli('deployments', 'status', department, '--json')).stdout)
    expect(status).toMatchObject({deployment: {versions: [{versionId: promoted.versionId, percentage: 100}]}})
  })
})
