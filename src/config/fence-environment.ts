// The environment `fence run` gives its command. Kept apart (no imports) because config loading must
// know these names too — they are EDGEWORKERS_* variables that are not settings.
/** What the command finds in its environment (none of them is a setting; see config/load.ts). */
export const FENCE_RUN_ENV = {
  fenceId: 'EDGEWORKERS_FENCE_ID',
  expiresAt: 'EDGEWORKERS_FENCE_EXPIRES_AT',
  scope: 'EDGEWORKERS_FENCE_SCOPE',
  storeBackend: 'EDGEWORKERS_BACKUP_STORE_BACKEND',
  /** The SQLite file, or the PostgreSQL location without its password. */
  storeLocation: 'EDGEWORKERS_BACKUP_STORE_LOCATION',
  artifactsDir: 'EDGEWORKERS_BACKUP_ARTIFACTS_DIR',
} as const
