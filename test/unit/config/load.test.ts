import {mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {describe, expect, test} from 'vitest'
import {envNameFor, loadConfig} from '../../../src/config/load.js'
import {KitError} from '../../../src/errors.js'

function tempDir(): string {
  return mkdtempSync(path.join(tmpdir(), 'edgeworkers-config-'))
}

describe('loadConfig', () => {
  test('defaults are the reference values and say so', () => {
    const dataDir = tempDir()
    const {settings, sources, configFile} = loadConfig({env: {EDGEWORKERS_DATA_DIR: dataDir}})
    expect(configFile).toBeNull()
    expect(settings.data_dir).toBe(dataDir)
    expect(settings.deploy.lease_seconds).toBe(90)
    expect(settings.deploy.readiness_deadline_seconds).toBe(600)
    expect(settings.deploy.readiness_probe_timeout_seconds).toBe(40)
    expect(settings.recovery).toEqual({dispatch_grace_seconds: 300, batch_size: 50, cooldown_seconds: 15})
    expect(settings.artifact_cleanup).toEqual({grace_seconds: 900, lease_seconds: 300, batch_size: 100})
    expect(settings.control_audit).toEqual({request_grace_seconds: 300, lease_seconds: 120, batch_size: 50})
    expect(settings.host_reconcile.pass_timeout_seconds).toBe(20)
    expect(settings.host_reconcile.new_retirement_budget_seconds).toBe(10)
    expect(settings.host_reconcile.stuck_threshold_seconds).toBe(300)
    expect(sources['deploy.lease_seconds']).toBe('default')
    expect(sources.data_dir).toBe('env')
  })

  test('default data dir follows XDG_DATA_HOME', () => {
    const xdg = tempDir()
    expect(loadConfig({env: {XDG_DATA_HOME: xdg}}).settings.data_dir).toBe(path.join(xdg, 'edgeworkers'))
  })

  test('flags beat env beat file beat defaults', () => {
    const dataDir = tempDir()
    writeFileSync(path.join(dataDir, 'edgeworkers.toml'), '[recovery]\nbatch_size = 10\ncooldown_seconds = 30\ndispatch_grace_seconds = 120\n')
    const env = {
      EDGEWORKERS_DATA_DIR: dataDir,
      [envNameFor('recovery.batch_size')]: '20',
      [envNameFor('recovery.cooldown_seconds')]: '40',
    }
    const {settings, sources} = loadConfig({env, flags: {'recovery.batch_size': 30}})
    expect(settings.recovery).toEqual({batch_size: 30, cooldown_seconds: 40, dispatch_grace_seconds: 120})
    expect(sources['recovery.batch_size']).toBe('flag')
    expect(sources['recovery.cooldown_seconds']).toBe('env')
    expect(sources['recovery.dispatch_grace_seconds']).toBe('file')
  })

  test('JSON config files are read when the name ends in .json', () => {
    const dir = tempDir()
    const file = path.join(dir, 'kit.json')
    writeFileSync(file, JSON.stringify({backoff: {ladder_seconds: [1, 2, 3], max_attempts: 4}}))
    const {settings, configFile} = loadConfig({configPath: file, env: {EDGEWORKERS_DATA_DIR: dir}})
    expect(configFile).toBe(file)
    expect(settings.backoff.ladder_seconds).toEqual([1, 2, 3])
    expect(settings.backoff.max_attempts).toBe(4)
  })

  const refusals: Array<[string, Record<string, string>, string | null, RegExp]> = [
    ['unknown file key', {}, '[recovery]\nbatch = 3\n', /invalid setting recovery: unknown key batch/],
    ['unknown section', {}, '[nope]\nx = 1\n', /unknown key nope/],
    ['out-of-range clamp', {}, '[recovery]\nbatch_size = 101\n', /invalid setting recovery\.batch_size: .*100/],
    ['wrong type', {}, '[deploy]\nlease_seconds = "soon"\n', /invalid setting deploy\.lease_seconds/],
    ['malformed TOML', {}, '[deploy\n', /is malformed/],
    ['unknown env variable', {EDGEWORKERS_DEPLOY__LEASE: '3'}, null, /EDGEWORKERS_DEPLOY__LEASE: unknown setting/],
    ['bad env value', {EDGEWORKERS_RECOVERY__COOLDOWN_SECONDS: '0'}, null, /recovery\.cooldown_seconds/],
  ]
  for (const [name, extraEnv, file, message] of refusals) {
    test(`refuses ${name} with the key path and reason`, () => {
      const dataDir = tempDir()
      if (file !== null) writeFileSync(path.join(dataDir, 'edgeworkers.toml'), file)
      let caught: unknown
      try {
        loadConfig({env: {EDGEWORKERS_DATA_DIR: dataDir, ...extraEnv}})
      } catch (error) {
        caught = error
      }
      expect(caught).toBeInstanceOf(KitError)
      expect((caught as KitError).code).toBe('config_invalid')
      expect((caught as KitError).message).toMatch(message)
      expect((caught as KitError).message).not.toContain('\n')
    })
  }

  test('an explicit config path that does not exist is refused', () => {
    expect(() => loadConfig({configPath: '/nonexistent/edgeworkers.toml', env: {}})).toThrow(/does not exist/)
  })
})
