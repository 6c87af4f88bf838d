// Canonical JSON: object keys sorted, no whitespace. Every digest over structured data (receipts,
// manifests, audit facts) goes through here so the same facts always hash the same.
import {createHash} from 'node:crypto'

export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value))
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex')
}

export function canonicalDigest(value: unknown): string {
  return sha256Hex(canonicalJson(value))
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sortKeys((value as Record<string, unknown>)[key])]),
    )
  }
  return value
}
