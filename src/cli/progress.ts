// Stage-by-stage progress for long commands (listr2): redrawn in place on a terminal, one line per
// stage in CI and pipes, nothing with --json (stdout then carries only the result). Nothing is drawn
// until the work reports its first stage, so input it refuses up front leaves stdout empty.
import {Listr} from 'listr2'

/** listr2's renderer for a command: silent under --json, redrawn on a terminal, line by line otherwise. */
export function progressRenderer(json: boolean): 'silent' | 'default' | 'simple' {
  return json ? 'silent' : process.stdout.isTTY ? 'default' : 'simple'
}

/** Runs `work` as one task titled `title`; `report` shows the current stage under it. */
export async function withProgress<T>(title: string, json: boolean, work: (report: (stage: string) => void) => Promise<T>): Promise<T> {
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
          await running
        },
        rendererOptions: {outputBar: 1},
      },
    ],
    {renderer: progressRenderer(json), exitOnError: true},
  )
  await tasks.run()
  return running
}
