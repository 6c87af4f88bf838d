#!/usr/bin/env node
// The CLI with host.spare_process off: bench/runaway's baseline (`--bin bench/runaway/no-spare.js`).
import {run} from '../../dist/main.js'

process.env.EDGEWORKERS_HOST__SPARE_PROCESS = 'false'
await run(new URL('../../bin/run.js', import.meta.url).href)
