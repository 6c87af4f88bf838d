// The attacker of bench/connections/run.ts, its own process: holds IDLE idle connections and SLOW
// slowloris connections (a head started, one more header byte every 5 s, never finished) from one
// address, and opens a new one a second after each is closed — a persistent attacker. Reports its
// counts to the parent every 500 ms.
//
//   node --import tsx bench/connections/attacker.ts <url> <idle> <slow> <address>
import net from 'node:net'

const [url, idleArg, slowArg, address] = process.argv.slice(2) as [string, string, string, string]
const {hostname, port} = new URL(url)
const counts = {open: 0, closed: 0, opened: 0}
let stopping = false

function connection(slow: boolean): void {
  counts.opened++
  let connected = false
  let drip: NodeJS.Timeout | undefined
  const socket = net.connect({port: Number(port), host: hostname, localAddress: address})
  socket.on('connect', () => {
    connected = true
    counts.open++
    if (!slow) return
    socket.write('GET / HTTP/1.1\r\nhost: example\r\nx-a: ')
    drip = setInterval(() => socket.write('a'), 5_000)
  })
  // Whatever the host answers (a 408, a 503) is read and dropped.
  socket.resume()
  socket.on('error', () => {})
  socket.on('close', () => {
    clearInterval(drip)
    if (connected) counts.open--
    counts.closed++
    if (!stopping) setTimeout(() => connection(slow), 1_000)
  })
}

for (let i = 0; i < Number(idleArg); i++) connection(false)
for (let i = 0; i < Number(slowArg); i++) connection(true)
setInterval(() => process.send?.(counts), 500)
process.on('message', () => {
  stopping = true
  process.exit(0)
})
