import {describe, expect, test} from 'vitest'
import {builderPolicyMinor, capabilitiesOf, isKnownBuilderPolicy, legacySecretPurgeBeforeDeploy} from '../../../src/engine/capabilities.js'
import {KitError} from '../../../src/errors.js'

const policy = (minor: number) => `department-worker-project-v2.${minor}`

describe('builder policy capabilities', () => {
  test.each([
    [0, {workerSecrets: false, secretsPurge: false, retirementLockdown: false, serviceAccountCredentials: false}],
    [5, {workerSecrets: false, secretsPurge: false, retirementLockdown: false, serviceAccountCredentials: false}],
    [6, {workerSecrets: true, secretsPurge: false, retirementLockdown: false, serviceAccountCredentials: false}],
    [7, {workerSecrets: true, secretsPurge: true, retirementLockdown: false, serviceAccountCredentials: false}],
    [8, {workerSecrets: true, secretsPurge: true, retirementLockdown: true, serviceAccountCredentials: false}],
    [9, {workerSecrets: true, secretsPurge: true, retirementLockdown: true, serviceAccountCredentials: true}],
  ])('v2.%i', (minor, capabilities) => {
    expect(builderPolicyMinor(policy(minor))).toBe(minor)
    expect(capabilitiesOf(policy(minor))).toEqual(capabilities)
  })

  test.each([
    'department-worker-project-v2.10',
    'department-worker-project-v3.0',
    'department-worker-project-v2.07',
    'department-worker-project-v2.',
    'department-worker-project-v2.9 ',
    'v2.9',
    '',
  ])('%j is not a known policy', (unknown) => {
    expect(isKnownBuilderPolicy(unknown)).toBe(false)
    expect(() => capabilitiesOf(unknown)).toThrow(KitError)
    expect(() => capabilitiesOf(unknown)).toThrow(`unknown builder policy ${JSON.stringify(unknown)}; known policies are ${policy(0)} through ${policy(9)}`)
  })
})

describe('legacy secret purge before a deploy', () => {
  test.each([
    {target: 5, deployed: 9, purge: 'purge'},
    {target: 5, deployed: 7, purge: 'purge'},
    {target: 0, deployed: 6, purge: 'delete_by_name'},
    {target: 5, deployed: 5, purge: null},
    {target: 6, deployed: 9, purge: null},
    {target: 9, deployed: 5, purge: null},
    {target: 5, deployed: null, purge: null},
  ])('deploying v2.$target over v2.$deployed → $purge', ({target, deployed, purge}) => {
    expect(legacySecretPurgeBeforeDeploy(policy(target), deployed === null ? null : policy(deployed))).toBe(purge)
  })
})
