// HAProxy's runtime API (its admin stats socket): one connection per batch of commands, which
// HAProxy runs in order (`;`-separated) before it answers.
import net from 'node:net'

export function runtimeCommands(socketPath: string, commands: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const connection = net.connect(socketPath)
    let answer = ''
    connection.setEncoding('utf8')
    connection.on('connect', () => connection.end(`${commands.join(';')}\n`))
    connection.on('data', (chunk: string) => (answer += chunk))
    connection.on('end', () => resolve(answer))
    connection.on('error', reject)
  })
}

/** `show stat`'s CSV: one record per proxy and server, keyed by column name. */
export function parseStats(csv: string): Array<Record<string, string>> {
  const [header, ...lines] = csv.trim().split('\n')
  if (!header?.startsWith('# ')) return []
  const columns = header.slice(2).split(',')
  return lines.map((line) => {
    const values = line.split(',')
    return Object.fromEntries(columns.map((column, index) => [column, values[index] ?? '']))
  })
}
