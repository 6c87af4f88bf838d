// `edgeworkers init`: a small working wrangler project from a template under fixtures/templates,
// which `deploy` accepts at once (the hono template after `npm install`). Never overwrites a file.
import {existsSync} from 'node:fs'
import {mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {KitError} from '../../errors.js'
import {packagePath} from '../../package-root.js'
import {TENANT_ID_PATTERN} from '../../store/index.js'
import {WORKERD_VERSION} from '../../util/build-info.js'

export const TEMPLATES = ['hello', 'durable-object', 'websocket', 'hono', 'assets'] as const
export type TemplateName = (typeof TEMPLATES)[number]

const TEMPLATE_ROOT = packagePath('fixtures', 'templates')
/** npm strips `.gitignore` from packages, so templates carry it as `gitignore`. */
const RENAMED: Record<string, string> = {gitignore: '.gitignore'}

export interface InitResult {
  dir: string
  template: TemplateName
  name: string
  compatibilityDate: string
  files: string[]
  /** What to run next, in order. */
  next: string[]
}

/** The newest compatibility date the installed workerd knows: its version is 1.YYYYMMDD.N. */
export function workerdCompatibilityDate(): string {
  const date = /^\d+\.(\d{4})(\d{2})(\d{2})\./.exec(WORKERD_VERSION)
  if (!date) throw new Error(`cannot read a date from workerd ${WORKERD_VERSION}`)
  return `${date[1]}-${date[2]}-${date[3]}`
}

/** `department`: written as the config's [edgeworkers] department, so deploy needs no --department. */
export async function initProject(dir: string, options: {template: TemplateName; name?: string; department?: string}): Promise<InitResult> {
  const target = path.resolve(dir)
  const name = options.name ?? path.basename(target)
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name)) {
    throw new KitError('usage', `"${name}" cannot name a Worker: 1–64 letters, digits, ".", "_" or "-", starting with a letter or digit (use --name)`)
  }
  if (options.department !== undefined && !TENANT_ID_PATTERN.test(options.department)) {
    throw new KitError(
      'usage',
      `department id ${JSON.stringify(options.department)} is invalid: use 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    )
  }
  const edgeworkersTable = options.department === undefined ? '' : `\n[edgeworkers]\ndepartment = "${options.department}"\n`
  const source = path.join(TEMPLATE_ROOT, options.template)
  const files = (await readdir(source, {recursive: true, withFileTypes: true}))
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(source, path.join(entry.parentPath, entry.name)))
  const targetOf = (file: string) => path.join(path.dirname(file), RENAMED[path.basename(file)] ?? path.basename(file))
  const existing = files.map(targetOf).filter((file) => existsSync(path.join(target, file)))
  if (existing.length > 0) throw new KitError('usage', `${target} already has ${existing.join(', ')}; init never overwrites a file`)

  const compatibilityDate = workerdCompatibilityDate()
  const written: string[] = []
  for (const file of files.sort()) {
    const text = (await readFile(path.join(source, file), 'utf8'))
      .replaceAll('{{name}}', name)
      .replaceAll('{{compatibility_date}}', compatibilityDate)
      .replaceAll('{{edgeworkers_table}}\n', edgeworkersTable)
    const destination = path.join(target, targetOf(file))
    await mkdir(path.dirname(destination), {recursive: true})
    await writeFile(destination, text, {flag: 'wx'})
    written.push(targetOf(file))
  }
  const relative = path.relative(process.cwd(), target) || '.'
  const next = [
    ...(files.includes('package.json') ? [`(cd ${relative} && npm install)`] : []),
    `edgeworkers deploy ${relative}${options.department === undefined ? ' --department <department id>' : ''}`,
  ]
  return {dir: target, template: options.template, name, compatibilityDate, files: written, next}
}
