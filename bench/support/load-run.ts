// One run of the load generator (../host/load.ts) as its own process, so it shares no event loop
// with the server it measures: its JSON line, parsed.
import {spawn} from 'node:child_process'
import {fileURLToPath} from 'node:url'

const LOAD = fileURLToPath(new URL('../host/load.ts', import.meta.url))

export interface LoadRun {
  requests: number
  rps: number
  p50Ms: number
  p99Ms: number
  failures: number
}

/** GET `url` back to back on `connections` keep-alive connections for `seconds`. */
export function runLoad(url: string, connections: number, seconds: number): Promise<LoadRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', LOAD, url, String(connections), String(seconds)], {stdio: ['ignore', 'pipe', 'inherit']})
    let out = ''
    child.stdout.on('data', (chunk) => (out += chunk))
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as LoadRun) : reject(new Error(`load exited ${code}`))))
  })
}
