// The workerd runtime's files under the host's data dir, and the paths other parts of the host name.
//
// Files under <data dir>:
//   runtime/modules/<sha256>         module bytes, content-addressed (a cache of the host state)
//   runtime/shard-<i>/<start id>/    a rendered config, deleted once workerd has read it
//   runtime/spare/<start id>/         the spare process's config (./process-lifecycle.ts), deleted once read
//   runtime/pids/<shard-i|spare|validate>.<pid>  a running workerd (its start time), to clean up after a host crash
//   runtime/sock/<id>/<n>            the Unix sockets of one running workerd, removed once it exited
//   runtime/validate/<id>/           a validation sandbox's config and sockets, deleted right after
//   runtime/services.sock            the service-binding listener (see ../http/data-plane.ts)
//   runtime/tail.sock                the tail listener: Workers' traces (see ../tail-hub.ts)
//   runtime/code.sock                the code listener of the loader Workers (see ./code-server.ts)
//   do/<script>/                     the script's Durable Object storage (kept until a company purge)
import path from 'node:path'

/** A script's Durable Object storage (its KV, D1, R2 and queue data too): all the data a Worker keeps on a host. */
export function durableObjectRoot(dataDir: string, script: string): string {
  return path.join(dataDir, 'do', script)
}

/** Where the host listens for service-binding calls from its Workers. */
export function serviceBindingSocketPath(dataDir: string): string {
  return path.join(dataDir, 'runtime', 'services.sock')
}

/** Where the loader Workers fetch the code they load. */
export function codeSocketPath(dataDir: string): string {
  return path.join(dataDir, 'runtime', 'code.sock')
}

/** Where the host takes the traces of its Workers from the shards' tail Worker. */
export function tailSocketPath(dataDir: string): string {
  return path.join(dataDir, 'runtime', 'tail.sock')
}
