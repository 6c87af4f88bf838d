// Node parses a module's source map the first time it formats a stack trace through that module. In
// the edge host that first time can fall inside a runaway's replacement: aborting a neighbour's
// request destroys its socket with an error whose stack Node's stream code reads at once. Measured
// (bench/runaway, load 20–30): 150–290 ms of the first incident, while the neighbours wait. So the
// host parses them once, right after it starts.
import {readdirSync} from 'node:fs'
import {findSourceMap} from 'node:module'
import path from 'node:path'
import {packagePath} from '../package-root.js'

/** Parses now the source maps of the modules of dist/ loaded so far (nothing, where source maps are off). */
export function parseLoadedSourceMaps(): void {
  const dist = packagePath('dist')
  for (const file of readdirSync(dist, {recursive: true, encoding: 'utf8'})) if (file.endsWith('.js')) findSourceMap(path.join(dist, file))
}
