// What this build is: the kit's version (its package.json), Node's and workerd's (the npm `workerd`
// package, whose version names the runtime's release date). The labels of `edgeworkers_build_info`,
// on the host's /metrics and in the reconcile pass's metrics file.
import {readFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import {packagePath} from '../package-root.js'

export interface BuildInfo {
  version: string
  node_version: string
  workerd_version: string
}

/** The installed workerd package's version: 1.YYYYMMDD.N. */
export const WORKERD_VERSION: string = (createRequire(import.meta.url)('workerd/package.json') as {version: string}).version

export function buildInfo(): BuildInfo {
  const {version} = JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as {version: string}
  return {version, node_version: process.versions.node, workerd_version: WORKERD_VERSION}
}

/** The Prometheus convention for build metadata: a gauge that is always 1, the facts in its labels. */
export const BUILD_INFO_METRIC = {
  name: 'edgeworkers_build_info',
  help: 'Always 1; the labels name the running build: the kit version, Node.js and workerd (the npm package version).',
  labelNames: ['version', 'node_version', 'workerd_version'],
} as const
