// The validation sandbox: a throwaway workerd that must start on a script before it may run anywhere
// else. One module that fails to compile makes a whole workerd exit, so nothing joins a shard untried.
import {rm, mkdir} from 'node:fs/promises'
import {socketPathsIn, unixAddressOf, writeConfig} from './config-files.js'
import type {RenderedConfig} from './config.js'
import {WorkerdProcess} from './process.js'

export type ValidationOutcome = {ok: true} | {ok: false; error: string}

/**
 * Starts a throwaway workerd on a validation config in `dir` until it listens (or fails), then kills
 * it and removes `dir`. Its sockets are Unix sockets in `dir`. The host validates every
 * upload in one, and the kit's build check (engine/project/check.ts) runs the same sandbox.
 */
export async function runValidationSandbox(
  dir: string,
  services: string[],
  render: (socketAddress: (service: string) => string) => RenderedConfig,
  options: {startTimeoutMs: number; experimental: boolean; pidRecord?: {dir: string; label: string}; redactOutput?: (line: string) => string},
): Promise<ValidationOutcome> {
  try {
    await mkdir(dir, {recursive: true, mode: 0o700})
    const config = render(unixAddressOf(socketPathsIn(dir, services)))
    const configPath = await writeConfig(dir, config.text)
    const outcome = await WorkerdProcess.start({configPath, sockets: config.sockets, cwd: dir, ...options})
    if (!outcome.ok) return outcome
    await outcome.process.kill()
    return {ok: true}
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
}
