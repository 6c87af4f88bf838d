// Validation of uploads before they may join a shard: one module that fails to compile makes a whole
// workerd exit, so every script first runs in a throwaway sandbox process (../../workerd/sandbox.ts), apart from its shard.
//
// Starting a workerd costs ~0.15 s, so uploads that arrive while sandboxes are busy are validated
// together in the next one. A failing sandbox names the culprit (`service <script>: …` on workerd's
// stderr): it is refused with that error and the others run again without it. A failure that names
// no script sends each script of the batch to a sandbox of its own.
import type {RunnableScript} from '../../workerd/script.js'
import type {ValidationOutcome} from '../../workerd/sandbox.js'

/** Runs the scripts together in a throwaway workerd until it listens (or fails), then kills it. */
export type Sandbox = (scripts: RunnableScript[], modules: Map<string, Buffer>) => Promise<ValidationOutcome>

interface Pending {
  script: RunnableScript
  modules: Map<string, Buffer>
  settle(outcome: ValidationOutcome): void
}

/** Scripts per sandbox at most: a bigger batch starts slower than it saves. */
const MAX_BATCH = 64

export class Validator {
  private readonly queue: Pending[] = []
  private running = 0

  constructor(
    private readonly sandbox: Sandbox,
    private readonly concurrency: number,
  ) {}

  validate(script: RunnableScript, modules: Map<string, Buffer>): Promise<ValidationOutcome> {
    return new Promise((settle) => {
      this.queue.push({script, modules, settle})
      this.pump()
    })
  }

  private pump(): void {
    while (this.running < this.concurrency && this.queue.length > 0) {
      const batch = this.takeBatch()
      this.running++
      void this.validateBatch(batch).finally(() => {
        this.running--
        this.pump()
      })
    }
  }

  /** Queued uploads in arrival order, one per script name (a sandbox has one service per name). */
  private takeBatch(): Pending[] {
    const batch: Pending[] = []
    const names = new Set<string>()
    for (let index = 0; index < this.queue.length && batch.length < MAX_BATCH; ) {
      const pending = this.queue[index]!
      if (names.has(pending.script.name)) {
        index++
        continue
      }
      names.add(pending.script.name)
      batch.push(pending)
      this.queue.splice(index, 1)
    }
    return batch
  }

  private async validateBatch(batch: Pending[]): Promise<void> {
    let remaining = batch
    while (remaining.length > 0) {
      const outcome = await this.run(remaining)
      if (outcome.ok) {
        for (const pending of remaining) pending.settle(outcome)
        return
      }
      const culprits = remaining.filter((pending) => outcome.error.includes(`service ${pending.script.name}:`))
      if (culprits.length === 0 || remaining.length === 1) {
        if (remaining.length === 1) remaining[0]!.settle(outcome)
        else for (const pending of remaining) pending.settle(await this.run([pending]))
        return
      }
      for (const pending of culprits) pending.settle(outcome)
      remaining = remaining.filter((pending) => !culprits.includes(pending))
    }
  }

  private run(batch: Pending[]): Promise<ValidationOutcome> {
    const modules = new Map(batch.flatMap((pending) => [...pending.modules]))
    return this.sandbox(
      batch.map((pending) => pending.script),
      modules,
    ).catch((error: unknown) => ({ok: false, error: `the validation sandbox failed: ${(error as Error).message}`}))
  }
}
