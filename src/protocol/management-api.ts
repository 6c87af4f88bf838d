// The edge host's management API, version 1: request and response bodies, error codes. Shared by
// the host (src/edge-host) and the kit's on-prem provider (src/provider). Bodies are JSON
// (`content-type: application/json`); requests are signed as ./signing.ts describes, except those
// the endpoint table (./endpoints.ts) marks unsigned. Timestamps on the wire are ISO 8601 strings (UTC).
// While a fence is active every mutating call except ending the fence answers 423 edge_host_fenced
// and changes nothing. docs/management-api.md lists the endpoints, generated from the table.
export * from './api/common.js'
export * from './api/control.js'
export * from './api/control-copy.js'
export * from './api/host.js'
export * from './api/scripts.js'
export * from './api/assets.js'
export * from './api/handover.js'
export * from './api/crons.js'
export * from './api/d1.js'
export * from './api/queues.js'
