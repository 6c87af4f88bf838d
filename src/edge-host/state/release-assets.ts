// The asset manifest of each release: written with its upload (one fenced transaction), read by
// the data plane for the release the shard serves right now — so a request sees the code and the
// assets of one release, never new code with old assets or the reverse.
import type {ReleaseAssets} from '../../protocol/management-api.js'
import type {HostDatabase} from './database.js'
import type {FencedTx} from './fences.js'

export class ReleaseAssetsRepository {
  constructor(private readonly db: HostDatabase) {}

  /** The assets of `script` at `releaseGeneration`, or null when that release has none. */
  of(script: string, releaseGeneration: string): ReleaseAssets | null {
    const row = this.db.one<{assets_json: string}>(
      'SELECT assets_json FROM release_assets WHERE script = ? AND release_generation = ?',
      script,
      releaseGeneration,
    )
    return row ? (JSON.parse(row.assets_json) as ReleaseAssets) : null
  }

  /**
   * Records the new release's assets (when it has any) and keeps those of `kept`: the previous
   * release, which serves until the swap, and a gradual deployment's other release, which serves
   * beside it (./script-splits.ts); older ones go.
   */
  save(tx: FencedTx, script: string, releaseGeneration: string, kept: ReadonlyArray<string | null>, assets: ReleaseAssets | null): void {
    const keep = [releaseGeneration, ...kept.filter((generation) => generation !== null)]
    tx.run(`DELETE FROM release_assets WHERE script = ? AND release_generation NOT IN (${keep.map(() => '?').join(', ')})`, script, ...keep)
    if (assets === null) tx.run('DELETE FROM release_assets WHERE script = ? AND release_generation = ?', script, releaseGeneration)
    else tx.upsert('release_assets', ['script', 'release_generation'], {script, release_generation: releaseGeneration, assets_json: JSON.stringify(assets)}, [])
  }

  /** Every asset SHA-256 a release of a script not retired names (what the asset files must keep). */
  referencedHashes(): Set<string> {
    const hashes = new Set<string>()
    const rows = this.db.all<{assets_json: string}>(
      'SELECT assets_json FROM release_assets JOIN scripts ON scripts.name = release_assets.script WHERE scripts.retired_at IS NULL',
    )
    for (const row of rows) {
      for (const file of (JSON.parse(row.assets_json) as ReleaseAssets).files) hashes.add(file.sha256)
    }
    return hashes
  }
}
