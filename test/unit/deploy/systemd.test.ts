// The systemd units an operator copies from deploy/systemd: enable-able, stopped the way the host
// expects, running commands and flags that exist.
import {readFileSync} from 'node:fs'
import {describe, expect, test} from 'vitest'

const unitText = (name: string) => readFileSync(new URL(`../../../deploy/systemd/${name}`, import.meta.url), 'utf8')

/** Section → key → values, in order (a key may repeat); comments and blank lines left out. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>()
  let section: Map<string, string[]> | undefined
  for (const line of text.split('\n').map((raw) => raw.trim())) {
    if (line === '' || line.startsWith('#')) continue
    const header = /^\[(\w+)\]$/.exec(line)
    if (header) {
      section = new Map()
      sections.set(header[1]!, section)
      continue
    }
    const [key, ...value] = line.split('=')
    section!.set(key!, [...(section!.get(key!) ?? []), value.join('=')])
  }
  return sections
}

const manifest = JSON.parse(readFileSync(new URL('../../../oclif.manifest.json', import.meta.url), 'utf8')) as {
  commands: Record<string, {flags: Record<string, unknown>}>
}

/** The command id and the long flags of an `ExecStart=/usr/bin/node …/bin/run.js <command…> --flag …` line. */
function commandOf(execStart: string): {id: string; flags: string[]} {
  const words = execStart.split(/\s+/).slice(2)
  const firstFlag = words.findIndex((word) => word.startsWith('--'))
  return {id: words.slice(0, firstFlag).join(':'), flags: words.filter((word) => word.startsWith('--')).map((word) => word.slice(2))}
}

describe('deploy/systemd', () => {
  test('the host unit can be enabled, is ready when the host says so (Type=notify), and stops through the host alone', () => {
    const host = parseUnit(unitText('edgeworkers-host.service'))
    expect(host.get('Install')?.get('WantedBy')).toEqual(['multi-user.target'])
    // SIGTERM to the host only: it drains and stops its workerd processes; nothing else is signalled first.
    expect(host.get('Service')?.get('KillMode')).toEqual(['mixed'])
    // READY=1 comes from systemd-notify, a child of the host: systemd takes it only with NotifyAccess=all.
    expect(host.get('Service')?.get('Type')).toEqual(['notify'])
    expect(host.get('Service')?.get('NotifyAccess')).toEqual(['all'])
  })

  test('the reconcile timer can be enabled', () => {
    expect(parseUnit(unitText('edgeworkers-reconcile.timer')).get('Install')?.get('WantedBy')).toEqual(['timers.target'])
  })

  test.each(['edgeworkers-host.service', 'edgeworkers-reconcile.service'])('%s runs a command and flags the CLI has', (name) => {
    const [execStart] = parseUnit(unitText(name)).get('Service')!.get('ExecStart')!
    const {id, flags} = commandOf(execStart!)
    expect(Object.keys(manifest.commands[id]?.flags ?? {}), id).toEqual(expect.arrayContaining(flags))
  })
})
