// The code listener (host.code_loading = "loader"): a Unix socket under the runtime dir that only the
// shards' loader Workers reach (../../workerd/loader-worker.ts). `GET /<load id>` answers the code and env of the
// script release a shard assigned that id, as JSON; an id no shard holds (or whose release is no
// longer stored) answers 404. The answer carries secret values: it never leaves the host user's
// sockets, and is never logged.
import http from 'node:http'
import type {RunnableScript} from '../../workerd/script.js'
import {serviceTargetOf, valueBindings} from '../../workerd/config.js'

/** What the loader Worker builds the Worker from. */
interface LoadableCode {
  script: string
  compatibilityDate: string
  compatibilityFlags: string[]
  mainModule: string
  /** Source modules as text, binary ones (data, wasm) as base64. */
  modules: Array<{name: string; type: string; text?: string; base64?: string}>
  values: ReturnType<typeof valueBindings>
  services: Array<{name: string; target: string}>
}

export function loadableCode(script: RunnableScript, moduleContent: (sha256: string) => Buffer): LoadableCode {
  return {
    script: script.name,
    compatibilityDate: script.compatibilityDate,
    compatibilityFlags: script.compatibilityFlags,
    mainModule: script.mainModule,
    // Source maps stay with the host (it maps stacks with them); workerd never loads one.
    modules: script.modules.flatMap((module) => {
      if (module.type === 'sourceMap') return []
      const content = moduleContent(module.sha256)
      return [
        module.type === 'data' || module.type === 'wasm'
          ? {name: module.name, type: module.type, base64: content.toString('base64')}
          : {name: module.name, type: module.type, text: content.toString('utf8')},
      ]
    }),
    values: valueBindings(script),
    services: script.bindings.flatMap((binding) => {
      const target = serviceTargetOf(script, binding)
      return target === null ? [] : [{name: binding.name, target}]
    }),
  }
}

export function createCodeServer(codeFor: (loadId: string) => RunnableScript | undefined, moduleContent: (sha256: string) => Buffer): http.Server {
  return http.createServer((request, response) => {
    const script = request.method === 'GET' ? codeFor(decodeURIComponent((request.url ?? '/').slice(1))) : undefined
    if (!script) {
      response.writeHead(404).end()
      return
    }
    let body: string
    try {
      body = JSON.stringify(loadableCode(script, moduleContent))
    } catch {
      // The release was replaced since its id was given, and its modules left the host state: it
      // can no longer be loaded (the data plane routes its requests to the release that replaced it).
      response.writeHead(404).end()
      return
    }
    response.writeHead(200, {'content-type': 'application/json', 'content-length': Buffer.byteLength(body)}).end(body)
  })
}
