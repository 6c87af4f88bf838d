/** A promise with its resolve and reject, for whoever settles it later. */
export interface Waiter<T> {
  promise: Promise<T>
  resolve(value: T): void
  reject(error: unknown): void
}

export function waiter<T = void>(): Waiter<T> {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  promise.catch(() => {}) // one nobody awaits may reject without an unhandled rejection
  return {promise, resolve, reject}
}
