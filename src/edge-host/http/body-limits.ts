// Request bodies the host holds in memory, bounded twice: per request (the listener's cap) and in
// total (one budget shared by both listeners). Held bodies are what an unauthenticated peer could
// grow the host with, so every body is read through here, and only after everything that can be
// checked without it (route, signature headers, pairing) passed.
import type http from 'node:http'
import {HostError} from '../errors.js'

export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`the request body exceeds ${limit} bytes`)
  }
}

/** Bytes of request bodies held at once, across both listeners. */
export class BodyBudget {
  private held = 0

  constructor(readonly limitBytes: number) {}

  get heldBytes(): number {
    return this.held
  }

  /** False (and nothing reserved) when `bytes` more would pass the limit. */
  reserve(bytes: number): boolean {
    if (this.held + bytes > this.limitBytes) return false
    this.held += bytes
    return true
  }

  release(bytes: number): void {
    this.held -= bytes
  }
}

/**
 * Reads the whole body, refusing more than `limit` bytes (413) and, while the shared budget is
 * spent, any body at all (503 host_busy). Its bytes stay reserved until the response is done.
 */
export async function readBoundedBody(request: http.IncomingMessage, response: http.ServerResponse, limit: number, budget: BodyBudget): Promise<Buffer> {
  const declared = Number(request.headers['content-length'])
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLargeError(limit)
  let reserved = 0
  const releaseAll = () => {
    budget.release(reserved)
    reserved = 0
  }
  response.once('close', releaseAll)
  const chunks: Buffer[] = []
  try {
    for await (const chunk of request) {
      const bytes = (chunk as Buffer).length
      if (reserved + bytes > limit) throw new BodyTooLargeError(limit)
      if (!budget.reserve(bytes)) throw new HostError('host_busy', 'the host holds too many request bodies; try again shortly')
      reserved += bytes
      chunks.push(chunk as Buffer)
    }
  } catch (error) {
    releaseAll()
    throw error
  }
  return Buffer.concat(chunks)
}
