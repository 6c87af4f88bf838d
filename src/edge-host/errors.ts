// The one error type the host's layers throw for a refusal the caller should see; the management
// server turns it into the HTTP status and {code, message} body the protocol documents.
import {errorStatus, type ErrorCode} from '../protocol/management-api.js'

export class HostError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message)
    this.name = 'HostError'
  }

  get status(): number {
    return errorStatus[this.code]
  }
}
