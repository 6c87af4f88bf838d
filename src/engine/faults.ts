// Test-only crash points. Setting EDGEWORKERS_FAULT=<point> makes the process kill itself with
// SIGKILL when it reaches that point — no cleanup, no finally — so crash-safety tests can prove
// that a later pass converges from every stage. Unset (always, in production) it does nothing.
export type FaultPoint =
  | 'deploy.after_lease'
  | 'deploy.after_commit_deploying'
  | 'deploy.after_upload'
  | 'deploy.after_readback'
  | 'deploy.before_settle'
  | 'submit.after_intents'
  | 'submit.after_artifacts'
  | 'control.after_mutation'
  | 'rollback.after_commit'
  | 'cleanup.after_asset_delete'
  | 'move.after_begin'
  | 'move.after_fence'
  | 'move.after_copy'
  | 'move.after_deploy'
  | 'move.after_switch'

export function faultPoint(point: FaultPoint): void {
  if (process.env.EDGEWORKERS_FAULT === point) process.kill(process.pid, 'SIGKILL')
}
