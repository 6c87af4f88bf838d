// host.worker_log_file: every Worker event as one JSON line (the tail shape, ../protocol/tail.ts),
// for operators who ship logs to their own stack. Size-based rotation: past max_bytes the file
// becomes <file>.1, the older ones shift up to <file>.<keep>, the oldest is dropped. A dozen lines
// of our own instead of a dependency: pino's transports rotate by time or run in worker threads, and
// this writer needs neither. Appends are synchronous, one per batch of events the tail Worker posts.
import {appendFileSync, existsSync, renameSync, rmSync, statSync} from 'node:fs'
import path from 'node:path'
import {createPrivateDir} from '../util/private-files.js'

export class WorkerLogFile {
  private size: number

  constructor(
    private readonly file: string,
    private readonly maxBytes: number,
    private readonly keep: number,
  ) {
    // The file's directory, when the host creates it, is as private as the file (0700).
    createPrivateDir(path.dirname(file))
    this.size = existsSync(file) ? statSync(file).size : 0
  }

  append(lines: string[]): void {
    const text = `${lines.join('\n')}\n`
    const bytes = Buffer.byteLength(text)
    if (this.size > 0 && this.size + bytes > this.maxBytes) this.rotate()
    appendFileSync(this.file, text, {mode: 0o600})
    this.size += bytes
  }

  private rotate(): void {
    rmSync(`${this.file}.${this.keep}`, {force: true})
    for (let index = this.keep - 1; index >= 1; index--) {
      if (existsSync(`${this.file}.${index}`)) renameSync(`${this.file}.${index}`, `${this.file}.${index + 1}`)
    }
    renameSync(this.file, `${this.file}.1`)
    this.size = 0
  }
}
