// oclif writes oclif.manifest.json in the order its commands happened to load, which varies from
// run to run. Sorting the keys makes the file a pure function of the sources, so CI can check that
// the committed one is fresh. A command's `args` keep their declared order: it is the order they
// are typed in, and help prints usage lines from it.
import {readFileSync, writeFileSync} from 'node:fs'

const sortKeys = (value, key) =>
  Array.isArray(value)
    ? value.map((item) => sortKeys(item))
    : value && typeof value === 'object'
      ? Object.fromEntries((key === 'args' ? Object.keys(value) : Object.keys(value).sort()).map((name) => [name, sortKeys(value[name], name)]))
      : value

const file = 'oclif.manifest.json'
writeFileSync(file, `${JSON.stringify(sortKeys(JSON.parse(readFileSync(file, 'utf8'))), null, 2)}\n`)
