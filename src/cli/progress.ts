// Stage-by-stage progress for long commands (listr2): redrawn in place on a terminal; nothing in CI,
// pipes or with --json, so stdout carries only the result and a failure stays one line on stderr.
// withProgress draws nothing until the work reports its first stage: input refused up front leaves
// even a terminal untouched.
import {Listr} from 'listr2'

/** listr2's renderer for a command: redrawn on a terminal, silent otherwise and under --json. */
function progressRenderer(json: boolean): 'silent' | 'default' {
  return json || !process.stdout.isTTY ? 'silent' : 'default'
}

/**
 * Runs `work` as one task titled `title`; `report` shows the current stage under it, and `doneTitle`
 * (when given) replaces the title once the work has its result.
 */
export async function withProgress<T>(
  title: string,
  json: boolean,
  work: (report: (stage: string) => void) => Promise<T>,
  doneTitle?: (result: T) => string,
): Promise<T> {
  let show: (stage: string) => void = () => {}
  let firstStage!: (stage: string) => void
  const started = new Promise<string>((resolve) => (firstStage = resolve))
  const running = work((stage) => {
    firstStage(stage)
    show(stage)
  })
  const first = await Promise.race([started, running.then(() => null)])
  if (first === null) return running
  const tasks = new Listr(
    [
      {
        title,
        task: async (_ctx, task) => {
          show = (stage) => {
            task.output = stage
          }
          show(first)
          const result = await running
          if (doneTitle) task.title = doneTitle(result)
        },
        rendererOptions: {outputBar: 1},
      },
    ],
    // listr2's own SIGINT handler exits 127 at once; signals are the command's (./interrupt.ts).
    {renderer: progressRenderer(json), exitOnError: true, registerSignalListeners: false},
  )
  await tasks.run()
  return running
}
