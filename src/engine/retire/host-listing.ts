// The host's scripts, page by page (cursor paging), bounded by host_reconcile.listing_max_pages: a
// listing that would go on past the cap is an error, not a partial answer — a report or an orphan
// sweep over half the scripts would be wrong without saying so.
import {KitError} from '../../errors.js'
import {ProviderError, type EdgeProvider, type ScriptListPage} from '../../provider/types.js'

export type ListedScript = ScriptListPage['scripts'][number]

export async function listHostScripts(provider: EdgeProvider, maxPages: number, signal?: AbortSignal): Promise<ListedScript[]> {
  const scripts: ListedScript[] = []
  let cursor: string | null = null
  for (let page = 0; page < maxPages; page++) {
    let answer: ScriptListPage
    try {
      answer = await provider.listScripts(cursor, signal)
    } catch (error) {
      if (error instanceof ProviderError && error.status !== undefined) throw new KitError('host_error', `edge host script listing answered ${error.status}`)
      throw new KitError('host_unreachable', `edge host script listing failed: ${(error as Error).message}`)
    }
    scripts.push(...answer.scripts)
    if (answer.nextCursor === null) return scripts
    cursor = answer.nextCursor
  }
  throw new KitError('host_error', 'edge host script listing did not end')
}
