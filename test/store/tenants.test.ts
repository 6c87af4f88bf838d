import {expect, test} from 'vitest'
import {KitError} from '../../src/errors.js'
import {deterministicId, scriptNameFor, type Repositories, type VersionCreateInput} from '../../src/store/index.js'
import {describeEachStore} from '../support/stores.js'

const SCOPE = 'onprem:0123456789ab'

function versionOf(workerId: string, id: string): VersionCreateInput {
  return {
    id,
    worker_id: workerId,
    release_generation: `rg-${id}`,
    builder_policy: 'department-worker-project-v2.9',
    project_artifact_key: `sha256/${'1'.repeat(64)}`,
    project_digest: '1'.repeat(64),
    bundle_artifact_key: `sha256/${'2'.repeat(64)}`,
    bundle_digest: '2'.repeat(64),
    manifest: {main: 'index.js'},
    receipt: {receiptVersion: '1'},
  }
}

/** A company with one department, two service accounts, a Worker and two versions. */
async function seedCompany(store: Repositories, companyId: string): Promise<{workerId: string}> {
  await store.tenants.createCompany({id: companyId, name: `Company ${companyId}`})
  const departmentId = `${companyId}-sales`
  await store.tenants.createDepartment({id: departmentId, company_id: companyId, name: 'Sales'})
  await store.tenants.createServiceAccount({department_id: departmentId, name: 'ci'})
  await store.tenants.createServiceAccount({department_id: departmentId, name: 'backup'})
  const worker = await store.workers.create({
    id: `${companyId}-worker`,
    company_id: companyId,
    department_id: departmentId,
    script_name: scriptNameFor(companyId, departmentId),
    status: 'active',
  })
  await store.workers.createVersion(versionOf(worker.id, `${companyId}-v1`))
  await store.workers.createVersion(versionOf(worker.id, `${companyId}-v2`))
  return {workerId: worker.id}
}

function kitErrorCode(error: unknown): string | undefined {
  return error instanceof KitError ? error.code : undefined
}

describeEachStore('tenants and Workers', (t) => {
  test('companies, departments and service accounts are created with checked ids and names', async () => {
    const company = await t.store.tenants.createCompany({id: 'acme', name: '  Acme Corp '})
    expect(company).toEqual({id: 'acme', name: 'Acme Corp', created_at: t.clock.now(), updated_at: t.clock.now()})
    const generated = await t.store.tenants.createCompany({name: 'Generated'})
    expect(generated.id).toMatch(/^[0-9a-f-]{36}$/)

    const department = await t.store.tenants.createDepartment({id: 'acme-sales', company_id: 'acme', name: 'Sales'})
    expect(await t.store.tenants.getDepartment('acme-sales')).toEqual(department)
    await t.store.tenants.createServiceAccount({department_id: 'acme-sales', name: 'ci'})
    expect((await t.store.tenants.listServiceAccounts('acme-sales')).map((account) => account.name)).toEqual(['ci'])

    expect(kitErrorCode(await t.store.tenants.createCompany({id: 'acme', name: 'Again'}).catch((e) => e))).toBe('conflict')
    expect(kitErrorCode(await t.store.tenants.createCompany({id: 'a:b', name: 'Colon'}).catch((e) => e))).toBe('usage')
    expect(kitErrorCode(await t.store.tenants.createCompany({name: '   '}).catch((e) => e))).toBe('usage')
    expect(kitErrorCode(await t.store.tenants.createDepartment({company_id: 'nope', name: 'X'}).catch((e) => e))).toBe('not_found')
    expect(kitErrorCode(await t.store.tenants.createServiceAccount({department_id: 'acme-sales', name: 'ci'}).catch((e) => e))).toBe('conflict')
    expect(await t.store.tenants.getCompany('a:b')).toBeUndefined()
  })

  test('Workers: one per department, valid script names only, looked up by id or script name', async () => {
    const {workerId} = await seedCompany(t.store, 'acme')
    const worker = (await t.store.workers.get(workerId))!
    expect(await t.store.workers.getByScriptName(worker.script_name)).toEqual(worker)
    expect(await t.store.workers.list({companyId: 'acme', status: 'active'})).toEqual([worker])
    expect(await t.store.workers.list({status: 'paused'})).toEqual([])
    expect((await t.store.workers.listVersions(workerId)).map((version) => [version.id, version.state, version.manifest])).toEqual([
      ['acme-v1', 'built', {main: 'index.js'}],
      ['acme-v2', 'built', {main: 'index.js'}],
    ])

    const base = {company_id: 'acme', department_id: 'acme-sales', status: 'active'}
    expect(kitErrorCode(await t.store.workers.create({...base, script_name: 'dw-NOT-HEX'}).catch((e) => e))).toBe('usage')
    expect(kitErrorCode(await t.store.workers.create({...base, script_name: scriptNameFor('x', 'y')}).catch((e) => e))).toBe('conflict')
    expect(kitErrorCode(await t.store.workers.create({...base, department_id: 'nope', script_name: scriptNameFor('x', 'y')}).catch((e) => e))).toBe('not_found')
  })

  test('a transaction commits all of its writes or none', async () => {
    const {workerId} = await seedCompany(t.store, 'acme')
    await expect(
      t.store.transaction(async (tx) => {
        await tx.workers.setVersionState('acme-v2', 'deploying')
        await tx.workers.setStatus(workerId, 'paused')
        await tx.outbox.enqueue({operation: 'deploy', dedupe_key: 'deploy:x', dispatch_namespace: SCOPE, payload: {}})
        throw new Error('the upload failed before commit')
      }),
    ).rejects.toThrow('the upload failed before commit')
    expect((await t.store.workers.getVersion('acme-v2'))!.state).toBe('built')
    expect((await t.store.workers.get(workerId))!.status).toBe('active')
    expect(await t.store.outbox.list()).toEqual([])

    await t.store.transaction(async (tx) => {
      await tx.workers.setVersionState('acme-v2', 'deploying')
      await tx.workers.setStatus(workerId, 'paused')
    })
    expect((await t.store.workers.getVersion('acme-v2'))!.state).toBe('deploying')
    expect((await t.store.workers.get(workerId))!.status).toBe('paused')
  })

  test('purging a company cascades to departments, accounts, Workers and versions; outbox and audit rows stay', async () => {
    const {workerId} = await seedCompany(t.store, 'acme')
    await seedCompany(t.store, 'other')
    const worker = (await t.store.workers.get(workerId))!
    const {row: deploy} = await t.store.outbox.enqueue({
      operation: 'deploy',
      dedupe_key: `deploy:${workerId}:acme-v2:0`,
      dispatch_namespace: SCOPE,
      company_id: 'acme',
      department_id: 'acme-sales',
      worker_id: workerId,
      version_id: 'acme-v2',
      script_name: worker.script_name,
      payload: {},
    })
    const {row: audit} = await t.store.audit.append({
      id: deterministicId('department.worker_script_deleted', workerId, SCOPE),
      action: 'department.worker_script_deleted',
      resource_type: 'edge_worker',
      resource_id: workerId,
      actor_type: 'system',
      actor_id: '',
      auth_method: 'system',
      result: 'success',
      reason_code: SCOPE,
      facts: {},
    })

    expect(await t.store.tenants.purgeCompany('acme')).toEqual({departments: 1, service_accounts: 2, workers: 1, versions: 2})
    expect(await t.store.tenants.getCompany('acme')).toBeUndefined()
    expect(await t.store.tenants.getDepartment('acme-sales')).toBeUndefined()
    expect(await t.store.tenants.listServiceAccounts('acme-sales')).toEqual([])
    expect(await t.store.workers.get(workerId)).toBeUndefined()
    expect(await t.store.workers.getVersion('acme-v1')).toBeUndefined()
    expect(await t.store.outbox.get(deploy.id)).toEqual(deploy)
    expect(await t.store.audit.get(audit.id)).toEqual(audit)

    expect(await t.store.tenants.purgeCompany('acme')).toBeUndefined()
    expect((await t.store.workers.list({companyId: 'other'})).length).toBe(1)
    expect((await t.store.tenants.listServiceAccounts('other-sales')).length).toBe(2)
  })
})

describeEachStore('kit state', (t) => {
  test('pairing reads never carry the shared secret; pairingSecret does while paired', async () => {
    const saved = await t.store.kit.savePairing({
      scope: SCOPE,
      host_url: 'http://127.0.0.1:8788',
      host_fingerprint: 'sha256:abc',
      host_public_key: 'pk',
      shared_secret: 'very-secret',
    })
    expect(JSON.stringify(saved)).not.toContain('very-secret')
    const read = await t.store.kit.getPairing(SCOPE)
    expect(read).toEqual({
      scope: SCOPE,
      host_url: 'http://127.0.0.1:8788',
      host_fingerprint: 'sha256:abc',
      host_public_key: 'pk',
      paired_at: t.clock.now(),
      unpaired_at: null,
    })
    expect(await t.store.kit.pairingSecret(SCOPE)).toBe('very-secret')
    expect(await t.store.kit.listActivePairings()).toEqual([read])

    expect(await t.store.kit.unpair(SCOPE)).toBe(true)
    expect(await t.store.kit.listActivePairings()).toEqual([])
    expect(await t.store.kit.unpair(SCOPE)).toBe(false)
    expect(await t.store.kit.pairingSecret(SCOPE)).toBeUndefined()
    expect((await t.store.kit.getPairing(SCOPE))!.unpaired_at).toBe(t.clock.now())
  })

  test('a fence goes requested → active → ended', async () => {
    const fence = await t.store.kit.beginFence({scope: SCOPE, reason: 'nightly backup', ttlSeconds: 600})
    expect(fence).toMatchObject({state: 'requested', expires_at: t.clock.now() + 600_000, host_acked_at: null})
    expect(await t.store.kit.openFence(SCOPE)).toEqual(fence)
    expect(await t.store.kit.ackFence(fence.id)).toBe(true)
    expect((await t.store.kit.openFence(SCOPE))!.state).toBe('active')
    expect(await t.store.kit.endFence(fence.id, 'ended')).toBe(true)
    expect(await t.store.kit.endFence(fence.id, 'ended')).toBe(false)
    expect(await t.store.kit.openFence(SCOPE)).toBeUndefined()
  })

  test('gates are open by default and close and open one at a time', async () => {
    expect(await t.store.kit.getGates(SCOPE)).toEqual({scope: SCOPE, maintenance: false, restore_pending: false, reasons: {}, updated_at: null})
    await t.store.kit.setGate(SCOPE, 'maintenance', 'disk swap')
    await t.store.kit.setGate(SCOPE, 'restore_pending', 'restored from backup')
    expect(await t.store.kit.getGates(SCOPE)).toMatchObject({
      maintenance: true,
      restore_pending: true,
      reasons: {maintenance: 'disk swap', restore_pending: 'restored from backup'},
    })
    const reopened = await t.store.kit.setGate(SCOPE, 'maintenance', null)
    expect(reopened).toMatchObject({maintenance: false, restore_pending: true, reasons: {restore_pending: 'restored from backup'}})
  })
})
