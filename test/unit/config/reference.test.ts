import {readFileSync} from 'node:fs'
import {expect, test} from 'vitest'
import {withConfigReference} from '../../../src/config/reference.js'

test('the README documents every setting with its default and environment variable (npm run docs:config)', () => {
  const readme = readFileSync('README.md', 'utf8')
  expect(readme).toBe(withConfigReference(readme))
})
