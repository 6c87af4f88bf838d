// Owner hosts of stateful Workers (docs/many-hosts.md) on both stores: the first claim wins and
// holds, a move is recorded before the switch and switches in one update, one move at a time, and
// the previous owner is named until its copy is dropped.
import {expect, test} from 'vitest'
import {describeEachStore} from '../support/stores.js'

const KIT = 'onprem:aaaaaaaaaaaa'
const OTHER_KIT = 'onprem:bbbbbbbbbbbb'
const [A, B, C] = ['onprem:aaaaaaaaaaaa', 'onprem:222222222222', 'onprem:333333333333']
const SCRIPT = `dw-${'1'.repeat(48)}`
const OTHER = `dw-${'2'.repeat(48)}`

describeEachStore('worker owners', (t) => {
  test('the first claim fixes the owner: a later claim by another host gets the same owner', async () => {
    expect(await t.store.owners.get(SCRIPT)).toBeUndefined()
    expect(await t.store.owners.claim(KIT, SCRIPT, A)).toMatchObject({script_name: SCRIPT, scope: KIT, host_scope: A, moving_to: null, released_from: null})
    t.clock.advance(1_000)
    expect(await t.store.owners.claim(KIT, SCRIPT, B)).toMatchObject({host_scope: A})
    await t.store.owners.claim(OTHER_KIT, OTHER, C)
    expect((await t.store.owners.list(KIT)).map((row) => row.script_name)).toEqual([SCRIPT])
    expect((await t.store.owners.ownedBy(A)).map((row) => row.script_name)).toEqual([SCRIPT])
  })

  test('a move: recorded, one at a time, switched in one update only from its own owner, then released', async () => {
    await t.store.owners.claim(KIT, SCRIPT, A)
    // Not the owner: refused, nothing written.
    expect(await t.store.owners.beginMove(SCRIPT, B, C)).toBe(false)
    expect(await t.store.owners.get(SCRIPT)).toMatchObject({host_scope: A, moving_to: null})

    expect(await t.store.owners.beginMove(SCRIPT, A, B)).toBe(true)
    // The same move again (a re-run) is fine; another target is not.
    expect(await t.store.owners.beginMove(SCRIPT, A, B)).toBe(true)
    expect(await t.store.owners.beginMove(SCRIPT, A, C)).toBe(false)
    expect(await t.store.owners.get(SCRIPT)).toMatchObject({host_scope: A, moving_to: B})
    expect((await t.store.owners.ownedBy(B)).map((row) => row.script_name)).toEqual([SCRIPT])

    expect(await t.store.owners.completeMove(SCRIPT, A, C)).toBe(false)
    expect(await t.store.owners.completeMove(SCRIPT, A, B)).toBe(true)
    expect(await t.store.owners.get(SCRIPT)).toMatchObject({host_scope: B, moving_to: null, released_from: A})
    // Switched once: a repeat matches nothing.
    expect(await t.store.owners.completeMove(SCRIPT, A, B)).toBe(false)
    expect(await t.store.owners.ownedBy(A)).toEqual([])

    await t.store.owners.released(SCRIPT, C)
    expect(await t.store.owners.get(SCRIPT)).toMatchObject({released_from: A})
    await t.store.owners.released(SCRIPT, A)
    expect(await t.store.owners.get(SCRIPT)).toMatchObject({host_scope: B, released_from: null})
  })
})
