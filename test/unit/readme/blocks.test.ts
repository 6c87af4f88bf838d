// Every fenced block of README.md is accounted for: a command block is run verbatim by
// test/readme/walkthrough.test.ts (`<!-- walkthrough:NAME -->`) or says why no test can run it
// (`<!-- not-run: why; what runs the same instead -->`), and an example of a file or an output
// (`<!-- example:manifest|tail -->`) is checked here against the schema that reads it.
import {existsSync, readFileSync} from 'node:fs'
import {expect, test} from 'vitest'
import {parseManifest} from '../../../src/engine/project/manifest.js'
import {tailLineSchema} from '../../../src/protocol/tail.js'

const readme = readFileSync('README.md', 'utf8').split('\n')
const walkthroughTest = readFileSync('test/readme/walkthrough.test.ts', 'utf8')

interface Block {
  line: number
  marker: string
  text: string
}

/** The fenced blocks, each with the line before its opening fence and its content. */
function fencedBlocks(): Block[] {
  const blocks: Block[] = []
  for (let line = 0; line < readme.length; line++) {
    if (!readme[line]!.startsWith('```')) continue
    const close = readme.findIndex((text, index) => index > line && text.startsWith('```'))
    blocks.push({line: line + 1, marker: readme[line - 1] ?? '', text: readme.slice(line + 1, close).join('\n')})
    line = close
  }
  return blocks
}

const blocks = fencedBlocks()
/** An edgeworker.json fragment is checked inside the smallest manifest around it. */
const BASE_MANIFEST = {
  name: 'example',
  main: 'index.js',
  modules: ['index.js'],
  compatibilityDate: '2026-11-01',
  builderPolicy: 'department-worker-project-v2.9',
}

test('README has command blocks, and each block is run, an example checked here, or says why no test runs it', () => {
  expect(blocks.filter((block) => block.marker.startsWith('<!-- walkthrough:')).length).toBeGreaterThan(0)
  for (const block of blocks) {
    expect({line: block.line, marker: block.marker}).toEqual({
      line: block.line,
      marker: expect.stringMatching(/^<!-- (walkthrough:[a-z-]+|example:(manifest|tail)|not-run: .{20,}) -->$/),
    })
  }
})

test.each(blocks.filter((block) => block.marker.startsWith('<!-- walkthrough:')).map((block) => [block.marker.slice(17, -4), block.line]))(
  'the %s block (line %i) is run by test/readme/walkthrough.test.ts',
  (name) => {
    expect(walkthroughTest).toMatch(new RegExp(`(walkthroughBlock|runBlock)\\('${name}'`))
  },
)

test('every test a not-run block names instead exists', () => {
  const named = blocks.flatMap((block) =>
    block.marker.startsWith('<!-- not-run:') ? [...block.marker.matchAll(/test\/[\w/.-]+\.ts/g)].map((match) => match[0]) : [],
  )
  expect(named.length).toBeGreaterThan(0)
  for (const file of named) expect({file, exists: existsSync(file)}).toEqual({file, exists: true})
})

test.each(blocks.filter((block) => block.marker === '<!-- example:manifest -->').map((block) => [block.line, block.text]))(
  'the edgeworker.json example at line %i is a manifest the build accepts',
  (_line, text) => {
    expect(() => parseManifest({...BASE_MANIFEST, ...(JSON.parse(text) as object)})).not.toThrow()
  },
)

test.each(blocks.filter((block) => block.marker === '<!-- example:tail -->').map((block) => [block.line, block.text]))(
  'the tail line at line %i is one `tail --format json` prints',
  (_line, text) => {
    expect(tailLineSchema.safeParse(JSON.parse(text)).error).toBeUndefined()
  },
)
