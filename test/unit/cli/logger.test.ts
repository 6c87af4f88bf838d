// Whether a log stream is the journal: systemd names it in JOURNAL_STREAM by device and inode.
import {closeSync, fstatSync, mkdtempSync, openSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {afterEach, expect, test} from 'vitest'
import {writesToJournal} from '../../../src/cli/logger.js'

const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-journal-'))
const saved = process.env.JOURNAL_STREAM
afterEach(() => {
  if (saved === undefined) delete process.env.JOURNAL_STREAM
  else process.env.JOURNAL_STREAM = saved
})

test('a descriptor is the journal only when JOURNAL_STREAM names its device and inode', () => {
  const journal = openSync(path.join(dir, 'journal'), 'w')
  const other = openSync(path.join(dir, 'other'), 'w')
  try {
    const {dev, ino} = fstatSync(journal)
    process.env.JOURNAL_STREAM = `${dev}:${ino}`
    expect([writesToJournal(journal), writesToJournal(other)]).toEqual([true, false])
    // Unset, or not device:inode numbers.
    for (const value of [undefined, '', `${dev}`, 'x:y']) {
      if (value === undefined) delete process.env.JOURNAL_STREAM
      else process.env.JOURNAL_STREAM = value
      expect(writesToJournal(journal), String(value)).toBe(false)
    }
  } finally {
    closeSync(journal)
    closeSync(other)
    rmSync(dir, {recursive: true, force: true})
  }
})
