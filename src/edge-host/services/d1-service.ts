// SQL an operator runs on one of a script's D1 databases (`edgeworkers d1 execute`, `d1 migrations
// apply`): the host sends it to the script's D1 service in the shard that runs the script, on that
// service's own socket (../../workerd/d1-config.ts), naming the database as the script's binding
// names it — the same database the Worker's env.<binding> reaches. Like a Worker's writes, these are
// data writes, not changes of scripts or control state: they run during a backup fence too.
import type {z} from 'zod'
import type {D1QueryResult, d1QueryRequestSchema, ValidUploadScript} from '../../protocol/management-api.js'
import {D1_STORAGE} from '../../workerd/d1-config.js'
import {D1_DATABASE_HEADER} from '../../workerd/d1-worker.js'
import {HostError} from '../errors.js'
import {requireLiveScript, withScriptShard} from './common.js'
import type {WorkerdRuntime} from '../runtime/runtime.js'
import type {HostState} from '../state/host-state.js'

type D1Query = z.output<typeof d1QueryRequestSchema>
type Binding = ValidUploadScript['bindings'][number]

/** What the D1 service answers: one result per query, or D1's refusal. */
type ServiceAnswer =
  | Array<{success: true; results: Omit<D1QueryResult['results'][number], 'meta'>; meta: D1QueryResult['results'][number]['meta']}>
  | {success: false; error: string}

export class D1Service {
  constructor(
    private readonly state: HostState,
    private readonly runtime: WorkerdRuntime,
    private readonly holdTimeoutMs: number,
  ) {}

  async query(scriptName: string, query: D1Query): Promise<D1QueryResult> {
    const script = requireLiveScript(this.state, scriptName, 'D1 databases')
    const binding = script.bindings.find(
      (candidate): candidate is Extract<Binding, {type: 'd1_database'}> => candidate.type === 'd1_database' && candidate.name === query.binding,
    )
    if (!binding) throw new HostError('d1_database_not_found', `script ${scriptName} has no D1 binding ${query.binding}`)
    return withScriptShard(this.runtime, this.holdTimeoutMs, script, async (dispatcher) => {
      const response = await dispatcher.request({
        origin: `http://${D1_STORAGE.serviceName(scriptName)}`,
        path: '/query?resultsFormat=ROWS_AND_COLUMNS',
        method: 'POST',
        headers: {'content-type': 'application/json', [D1_DATABASE_HEADER]: binding.databaseId},
        body: JSON.stringify(query.queries),
      })
      const answer = (await response.body.json()) as ServiceAnswer
      if (!Array.isArray(answer)) throw new HostError('d1_error', `D1_ERROR: ${answer.error}`)
      return {results: answer.map((result) => ({columns: result.results.columns, rows: result.results.rows, meta: result.meta}))}
    })
  }
}
