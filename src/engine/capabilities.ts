// The one capability table for builder policies `department-worker-project-v2.N`. A release's
// capabilities follow from the policy it was built with; the deploy task, retirement and the
// control lanes ask this module instead of comparing policy strings themselves.
import {KitError} from '../errors.js'

const BUILDER_POLICY_PREFIX = 'department-worker-project-v2.'

/**
 * The policies this kit knows: v2.0 through v2.9, the newest one specified; a
 * newer policy could carry capabilities we would not honour (e.g. on retirement), so it is refused
 * rather than treated as v2.9.
 */
export const KNOWN_POLICY_MINORS = {lowest: 0, highest: 9} as const

export interface Capabilities {
  /** v2.6+: the Worker holds secrets, deleted by name (`secrets.delete`). */
  workerSecrets: boolean
  /** v2.7+: all secrets can be dropped at once (`secrets.purge`). */
  secretsPurge: boolean
  /** v2.8+: retirement sets the `retirement.lockdown` flag (403 `worker_retired`). */
  retirementLockdown: boolean
  /** v2.9+: the Worker holds service-account credentials. */
  serviceAccountCredentials: boolean
}

/** The first policy minor that has each capability. */
const CAPABILITY_SINCE_MINOR: Readonly<Record<keyof Capabilities, number>> = {
  workerSecrets: 6,
  secretsPurge: 7,
  retirementLockdown: 8,
  serviceAccountCredentials: 9,
}

const POLICY_PATTERN = /^department-worker-project-v2\.(0|[1-9][0-9]*)$/

/** The minor N of a known policy, or null for anything else (malformed or outside v2.0–v2.9). */
function knownPolicyMinor(policy: string): number | null {
  const match = POLICY_PATTERN.exec(policy)
  if (!match) return null
  const minor = Number(match[1])
  return minor >= KNOWN_POLICY_MINORS.lowest && minor <= KNOWN_POLICY_MINORS.highest ? minor : null
}

export function isKnownBuilderPolicy(policy: string): boolean {
  return knownPolicyMinor(policy) !== null
}

/** One line naming the policy and the known range, for every refusal of a policy. */
export function unknownBuilderPolicyMessage(policy: string): string {
  const {lowest, highest} = KNOWN_POLICY_MINORS
  return (
    `unknown builder policy ${JSON.stringify(policy)}; ` + `known policies are ${BUILDER_POLICY_PREFIX}${lowest} through ${BUILDER_POLICY_PREFIX}${highest}`
  )
}

/** The minor N of a known policy; anything else is a usage error. */
export function builderPolicyMinor(policy: string): number {
  const minor = knownPolicyMinor(policy)
  if (minor === null) throw new KitError('usage', unknownBuilderPolicyMessage(policy))
  return minor
}

export function capabilitiesOf(policy: string): Capabilities {
  const minor = builderPolicyMinor(policy)
  return {
    workerSecrets: minor >= CAPABILITY_SINCE_MINOR.workerSecrets,
    secretsPurge: minor >= CAPABILITY_SINCE_MINOR.secretsPurge,
    retirementLockdown: minor >= CAPABILITY_SINCE_MINOR.retirementLockdown,
    serviceAccountCredentials: minor >= CAPABILITY_SINCE_MINOR.serviceAccountCredentials,
  }
}

/**
 * How the deploy task must clear the deployed release's secrets before deploying `targetPolicy`:
 * a release built without Worker secrets must not inherit the ones a v2.6+ release may hold.
 * `purge` = one `secrets.purge` (deployed release v2.7+); `delete_by_name` = `secrets.delete` per
 * name (deployed release v2.6); null = nothing to clear.
 */
export function legacySecretPurgeBeforeDeploy(targetPolicy: string, deployedPolicy: string | null): 'purge' | 'delete_by_name' | null {
  if (deployedPolicy === null || capabilitiesOf(targetPolicy).workerSecrets) return null
  const deployed = capabilitiesOf(deployedPolicy)
  if (deployed.secretsPurge) return 'purge'
  return deployed.workerSecrets ? 'delete_by_name' : null
}
