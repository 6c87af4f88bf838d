// Rewrites the configuration table in README.md from the settings schema.
import {readFileSync, writeFileSync} from 'node:fs'
import {withConfigReference} from '../src/config/reference.js'

writeFileSync('README.md', withConfigReference(readFileSync('README.md', 'utf8')))
