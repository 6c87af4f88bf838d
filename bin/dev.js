#!/usr/bin/env -S node --import tsx --no-warnings
// Runs the TypeScript sources directly (no build step); for development and tests only. The
// checked-in oclif.manifest.json describes dist/, so the root plugin is loaded ignoring it.
import {fileURLToPath} from 'node:url'
import {execute, Plugin} from '@oclif/core'

process.env.NODE_ENV = 'development'
const root = fileURLToPath(new URL('..', import.meta.url))
const plugin = new Plugin({root, isRoot: true, ignoreManifest: true})
await plugin.load()
await execute({development: true, dir: import.meta.url, loadOptions: {root, plugins: new Map([[plugin.name, plugin]])}})
