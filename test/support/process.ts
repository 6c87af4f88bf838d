// A CLI process a test watches while it runs (`host serve`, `tail`, a command it interrupts): its
// output collected as it comes, waits on a condition of that output (never on a fixed sleep), and
// its end (exit code, or the signal that killed it).
import {spawn, type ChildProcess} from 'node:child_process'
import {CLI_BIN} from './cli.js'

export interface WatchedProcess {
  readonly child: ChildProcess
  readonly stdout: string
  readonly stderr: string
  /** Resolves once `condition` holds of the output so far; rejects if the process ends first or after `timeoutMs`. */
  waitFor(condition: (output: {stdout: string; stderr: string}) => boolean, what: string, timeoutMs?: number): Promise<void>
  readonly exited: Promise<{code: number | null; signal: NodeJS.Signals | null}>
}

/** Spawns the CLI as runCli does (EDGEWORKERS_DATA_DIR/CONFIG of the caller never leak in; `env` last). */
export function spawnCli(args: string[], env: Record<string, string | undefined> = {}): WatchedProcess {
  const child = spawn(process.execPath, [CLI_BIN, ...args], {
    env: {...process.env, EDGEWORKERS_DATA_DIR: undefined, EDGEWORKERS_CONFIG: undefined, ...env},
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const output = {stdout: '', stderr: ''}
  const checks = new Set<() => void>()
  const check = () => {
    for (const each of checks) each()
  }
  child.stdout!.on('data', (chunk: Buffer) => {
    output.stdout += chunk.toString()
    check()
  })
  child.stderr!.on('data', (chunk: Buffer) => {
    output.stderr += chunk.toString()
    check()
  })
  const exited = new Promise<{code: number | null; signal: NodeJS.Signals | null}>((resolve) => {
    // 'close': the output streams are complete by then.
    child.once('close', (code, signal) => {
      resolve({code, signal})
      check()
    })
  })
  let ended = false
  void exited.then(() => (ended = true))
  return {
    child,
    get stdout() {
      return output.stdout
    },
    get stderr() {
      return output.stderr
    },
    exited,
    waitFor(condition, what, timeoutMs = 60_000) {
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => finish(new Error(`timed out waiting for ${what}; stderr: ${output.stderr.slice(-2000)}`)), timeoutMs)
        const finish = (error?: Error) => {
          clearTimeout(timer)
          checks.delete(probe)
          if (error) reject(error)
          else resolve()
        }
        const probe = () => {
          if (condition(output)) finish()
          else if (ended) finish(new Error(`the process ended before ${what}; stdout: ${output.stdout.slice(-2000)} stderr: ${output.stderr.slice(-2000)}`))
        }
        checks.add(probe)
        probe()
      })
    },
  }
}
