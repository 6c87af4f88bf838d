// Owner hosts of a kit's stateful Workers (docs/many-hosts.md): which host runs each one and holds
// its data, fixed at its first deploy, changed only by a move that copied the data first. A row is
// never deleted: script names are never reused, and an owner row outlives the Worker's retirement.
import type {StoreContext} from '../context.js'
import type {WorkerOwnerRow} from '../schema.js'

export class OwnersRepository {
  constructor(private readonly ctx: StoreContext) {}

  async get(scriptName: string): Promise<WorkerOwnerRow | undefined> {
    return this.ctx.db.selectFrom('kit_worker_owners').selectAll().where('script_name', '=', scriptName).executeTakeFirst()
  }

  /** The Worker's owner: `hostScope` when it has none yet (the first claim wins, whoever races it). */
  async claim(scope: string, scriptName: string, hostScope: string): Promise<WorkerOwnerRow> {
    const now = this.ctx.now()
    await this.ctx.write(({db}) =>
      db
        .insertInto('kit_worker_owners')
        .values({
          script_name: scriptName,
          scope,
          host_scope: hostScope,
          moving_to: null,
          move_started_at: null,
          released_from: null,
          claimed_at: now,
          updated_at: now,
        })
        .onConflict((oc) => oc.column('script_name').doNothing())
        .execute(),
    )
    return (await this.get(scriptName))!
  }

  /** The kit's owner rows, by script name. */
  async list(scope: string): Promise<WorkerOwnerRow[]> {
    return this.ctx.db.selectFrom('kit_worker_owners').selectAll().where('scope', '=', scope).orderBy('script_name').execute()
  }

  /**
   * Records that the Worker's data is being copied from `from` to `to`. false when `from` is not
   * its owner or another move (to another host) is under way: one move at a time.
   */
  async beginMove(scriptName: string, from: string, to: string): Promise<boolean> {
    const now = this.ctx.now()
    return this.ctx.write(async ({db}) => {
      const result = await db
        .updateTable('kit_worker_owners')
        .set({moving_to: to, move_started_at: now, updated_at: now})
        .where('script_name', '=', scriptName)
        .where('host_scope', '=', from)
        .where((eb) => eb.or([eb('moving_to', 'is', null), eb('moving_to', '=', to)]))
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }

  /** The switch: `to` owns the Worker from now on, `from` is left to drop its copy; one update. false when the row is not that move's. */
  async completeMove(scriptName: string, from: string, to: string): Promise<boolean> {
    const now = this.ctx.now()
    return this.ctx.write(async ({db}) => {
      const result = await db
        .updateTable('kit_worker_owners')
        .set({host_scope: to, moving_to: null, move_started_at: null, released_from: from, updated_at: now})
        .where('script_name', '=', scriptName)
        .where('host_scope', '=', from)
        .where('moving_to', '=', to)
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
    })
  }

  /** The previous owner `from` dropped its copy of the data. */
  async released(scriptName: string, from: string): Promise<void> {
    const now = this.ctx.now()
    await this.ctx.write(({db}) =>
      db
        .updateTable('kit_worker_owners')
        .set({released_from: null, updated_at: now})
        .where('script_name', '=', scriptName)
        .where('released_from', '=', from)
        .execute(),
    )
  }

  /** The Workers the host owns, or that are moving to it. */
  async ownedBy(hostScope: string): Promise<WorkerOwnerRow[]> {
    return this.ctx.db
      .selectFrom('kit_worker_owners')
      .selectAll()
      .where((eb) => eb.or([eb('host_scope', '=', hostScope), eb('moving_to', '=', hostScope)]))
      .orderBy('script_name')
      .execute()
  }
}
