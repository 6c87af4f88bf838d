import {readFileSync} from 'node:fs'
import {expect, test} from 'vitest'
import {withEndpointReference} from '../../../src/protocol/reference.js'

test('docs/management-api.md lists every endpoint of the table (npm run docs:endpoints)', () => {
  const doc = readFileSync('docs/management-api.md', 'utf8')
  expect(doc).toBe(withEndpointReference(doc))
})
