// A kit of several real edge hosts for the many-hosts tests: hosts started as a load balancer wants
// them (host.await_kit_confirmation), the store migrated, every host paired (the first, then the
// others with --add), a company `acme` and the given departments of it.
import {startTestHost, type TestHost} from './host.js'

/** `ok` runs the CLI against the kit's data dir and fails the test on a non-zero exit. */
export async function pairedHosts(count: number, ok: (...args: string[]) => Promise<unknown>, departments: Record<string, string>): Promise<TestHost[]> {
  const hosts = await Promise.all(Array.from({length: count}, () => startTestHost({settings: {shards: 1, await_kit_confirmation: true}})))
  await ok('db', 'migrate')
  for (const [index, host] of hosts.entries()) await ok('host', 'pair', host.adminUrl, '--code', host.pairingCode!, ...(index === 0 ? [] : ['--add']))
  await ok('company', 'create', 'Acme', '--id', 'acme')
  for (const [id, name] of Object.entries(departments)) await ok('department', 'create', 'acme', name, '--id', id)
  return hosts
}
