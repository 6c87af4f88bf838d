// oclif writes oclif.manifest.json in the order its commands happened to load, which varies from
// run to run. Sorting the keys makes the file a pure function of the sources, so CI can check that
// the committed one is fresh.
import {readFileSync, writeFileSync} from 'node:fs'

const sortKeys = (value) =>
  Array.isArray(value)
    ? value.map(sortKeys)
    : value && typeof value === 'object'
      ? Object.fromEntries(
          Object.keys(value)
            .sort()
            .map((key) => [key, sortKeys(value[key])]),
        )
      : value

const file = 'oclif.manifest.json'
writeFileSync(file, `${JSON.stringify(sortKeys(JSON.parse(readFileSync(file, 'utf8'))), null, 2)}\n`)
