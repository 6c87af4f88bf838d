// `fence run -- <command…>`: a backup command inside a fence that is always lifted — after success,
// failure, or SIGINT/SIGTERM to this process (forwarded to the command, which is waited for first).
// SIGKILL cannot be caught: then the host lifts the fence at its TTL and a reconcile pass records it.
import {execa} from 'execa'
import {artifactsDirOf} from '../../artifacts/store.js'
import type {Engine} from '../context.js'
import {beginFence, endFence, type BeginFenceInput, type EndFenceResult} from './lifecycle.js'
import {FENCE_RUN_ENV} from '../../config/fence-environment.js'
import type {FenceView} from './fence.js'

const FORWARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const

export interface FenceRunInput extends BeginFenceInput {
  command: string[]
  /** Called once the fence is held, before the command starts. */
  onBegun?: (fence: FenceView) => void
}

export interface FenceRunResult {
  fence: FenceView
  /** The command's exit code; 128 + n when a signal ended it; 127 when it could not start. */
  exitCode: number
  /** The signal that ended the command, if one did. */
  signal: string | null
  /** The failure to start the command, if it did not start. */
  startError: string | null
  /** The lift, or why it failed (the host then lifts the fence at its TTL). */
  end: EndFenceResult | {error: string}
}

export async function runInFence(engine: Engine, input: FenceRunInput): Promise<FenceRunResult> {
  const received: NodeJS.Signals[] = []
  let child: ReturnType<typeof execa> | undefined
  const forward = (signal: NodeJS.Signals) => {
    received.push(signal)
    child?.kill(signal)
  }
  // Installed before the begin: a signal while the host takes the fence must still lift it.
  for (const signal of FORWARDED_SIGNALS) process.on(signal, forward)
  try {
    const fence = await beginFence(engine, input)
    const interrupted = received[0]
    if (interrupted) {
      return {fence, exitCode: 128 + signalNumber(interrupted), signal: interrupted, startError: null, end: await lift(engine, fence, input)}
    }
    input.onBegun?.(fence)
    try {
      const [file, ...args] = input.command
      child = execa(file!, args, {stdio: 'inherit', reject: false, env: fenceEnvironment(engine, fence)})
      const outcome = await child
      const startError = outcome.failed && outcome.exitCode === undefined && !outcome.signal ? (outcome.shortMessage ?? String(outcome)) : null
      const exitCode = outcome.exitCode ?? (outcome.signal ? 128 + signalNumber(outcome.signal) : startError ? 127 : 1)
      return {fence, exitCode, signal: outcome.signal ?? null, startError, end: await lift(engine, fence, input)}
    } catch (error) {
      // execa itself failed (not the command): still lift, then report.
      await lift(engine, fence, input)
      throw error
    }
  } finally {
    for (const signal of FORWARDED_SIGNALS) process.off(signal, forward)
  }
}

async function lift(engine: Engine, fence: FenceView, input: FenceRunInput): Promise<FenceRunResult['end']> {
  try {
    return await endFence(engine, {fenceId: fence.id, actor: input.actor})
  } catch (error) {
    return {error: (error as Error).message}
  }
}

function fenceEnvironment(engine: Engine, fence: FenceView): Record<string, string> {
  return {
    [FENCE_RUN_ENV.fenceId]: fence.id,
    [FENCE_RUN_ENV.expiresAt]: fence.expiresAt,
    [FENCE_RUN_ENV.scope]: fence.scope,
    [FENCE_RUN_ENV.storeBackend]: engine.store.backend,
    [FENCE_RUN_ENV.storeLocation]: engine.store.location,
    [FENCE_RUN_ENV.artifactsDir]: artifactsDirOf(engine.settings.data_dir),
  }
}

function signalNumber(signal: string): number {
  const numbers: Record<string, number> = {SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15}
  return numbers[signal] ?? 1
}
