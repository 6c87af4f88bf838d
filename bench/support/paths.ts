// Request targets for benchmarks that speak the management API by hand, built from the endpoint
// table (src/protocol/endpoints.ts) so they stay what the kit sends.
import {pathOf} from '../../src/protocol/endpoint.js'
import {endpoints as e} from '../../src/protocol/endpoints.js'

export const paths = {
  pair: pathOf(e.pair, {}),
  inventory: pathOf(e.inventory, {}),
  script: (name: string) => pathOf(e.script, {name}),
  accessPolicy: (name: string) => pathOf(e.accessPolicy, {name}),
  readinessProbe: (name: string, releaseGeneration: string, waitMs = 0) =>
    pathOf(e.accessPolicy, {name}, {releaseGeneration, waitMs: waitMs > 0 ? waitMs : null}),
  secret: (name: string, secret: string) => pathOf(e.putSecret, {name, secret}),
}
