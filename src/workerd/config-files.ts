// A rendered config on disk, and the Unix socket paths of one workerd process: shared by the
// shards and the validation sandbox.
import {chmod, mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

/** Configs inline secret values: private to the host user, and short-lived. */
export async function writeConfig(dir: string, text: string): Promise<string> {
  await mkdir(dir, {recursive: true, mode: 0o700})
  const configPath = path.join(dir, 'config.capnp')
  await writeFile(configPath, text, {mode: 0o600})
  await chmod(configPath, 0o600)
  return configPath
}

export function unixAddressOf(socketPaths: ReadonlyMap<string, string>): (service: string) => string {
  return (service) => {
    const socketPath = socketPaths.get(service)
    if (socketPath === undefined) throw new Error(`no socket path for ${service}`)
    return `unix:${socketPath}`
  }
}

/** Longest Unix socket path Linux accepts (sun_path is 108 bytes with its NUL). */
const MAX_SOCKET_PATH_BYTES = 107

/** Socket paths in `dir`, numbered (script names are too long for sun_path). */
export function socketPathsIn(dir: string, services: string[]): Map<string, string> {
  const paths = new Map(services.map((service, index) => [service, path.join(dir, String(index))]))
  const longest = path.join(dir, String(Math.max(0, services.length - 1)))
  if (Buffer.byteLength(longest) > MAX_SOCKET_PATH_BYTES) {
    throw new Error(`the data dir path is too long for workerd's Unix sockets (${longest} is over ${MAX_SOCKET_PATH_BYTES} bytes); use a shorter --data-dir`)
  }
  return paths
}
