// A script's whole control state as one value (docs/many-hosts.md): what the kit reads from a host
// that took every control mutation and writes to one that missed some while it was down, so the
// returning host enforces the kit's policy and binds its secrets before it is confirmed ready.
// Unlike every other read of control state it carries secret values and passwords: it is signed
// like every management call, goes host → kit → host in memory, and is written nowhere on the way.
import {z} from 'zod'
import {hex64, identifierSchema, releaseGenerationSchema, serviceAccountIdSchema} from './common.js'
import {accessPolicyModes, jsonObjectTextSchema as jsonText, MAX_SECRET_VALUE_LENGTH, revisionSchema as revision} from './control.js'

export const controlCopySchema = z.strictObject({
  accessPolicy: z.strictObject({
    mode: z.enum(accessPolicyModes),
    apiKeySha256: hex64.nullable(),
    apiKeyLastFour: z.string().length(4).nullable(),
    ipAllowlist: z.array(z.string()).max(1_000),
    revision,
  }),
  runtimeConfig: z.strictObject({revision, entries: z.array(z.strictObject({key: identifierSchema, valueJson: jsonText})).max(1_000)}),
  operationSettings: z.strictObject({settingsJson: jsonText.nullable(), releaseGeneration: releaseGenerationSchema.nullable(), revision}),
  secrets: z.array(z.strictObject({name: identifierSchema, value: z.string().max(MAX_SECRET_VALUE_LENGTH)})).max(1_000),
  serviceAccounts: z
    .array(z.strictObject({id: serviceAccountIdSchema, username: z.string().min(1).max(256), password: z.string().min(1).max(4_096)}))
    .max(1_000),
})
export type ControlCopy = z.infer<typeof controlCopySchema>

/** Whether writing the copy changed anything on the host. */
export const controlCopyWrittenSchema = z.strictObject({changed: z.boolean()})
