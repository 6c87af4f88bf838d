// Identifier rules shared by the store and everything above it.
import {randomUUID} from 'node:crypto'
import {sha256Hex} from '../canonical-json.js'

export function newId(): string {
  return randomUUID()
}

/**
 * A UUID-shaped id derived from SHA-256 of the parts (version 8, RFC 9562 "custom"). The same parts
 * always give the same id, so replaying a write that carries it is idempotent (audit rows).
 */
export function deterministicId(...parts: string[]): string {
  const hex = sha256Hex(JSON.stringify(parts)).slice(0, 32).split('')
  hex[12] = '8'
  hex[16] = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)
  const h = hex.join('')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`
}

/**
 * Company, department and service-account ids an operator may choose. No `:` — ids are joined with
 * it to derive script names.
 */
export const TENANT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/

/** The only script names the kit accepts; names are never reused. */
export const SCRIPT_NAME_PATTERN = /^dw-[0-9a-f]{48}$/

/** The script name a department's Worker gets when its row does not already carry one. */
export function scriptNameFor(companyId: string, departmentId: string): string {
  return `dw-${sha256Hex(`${companyId}:${departmentId}`).slice(0, 48)}`
}
