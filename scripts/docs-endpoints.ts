// Rewrites the endpoint list in docs/management-api.md from the endpoint table.
import {readFileSync, writeFileSync} from 'node:fs'
import {withEndpointReference} from '../src/protocol/reference.js'

const DOC = 'docs/management-api.md'
writeFileSync(DOC, withEndpointReference(readFileSync(DOC, 'utf8')))
