// Workers' stack frames mapped back to the original source, with the source maps a version carries:
// `sourceMap` modules, each named after the module it maps plus ".map" (wrangler's
// upload_source_maps). A frame `at fn (index.js:12:5)` of a mapped module becomes
// `at fn (src/index.ts:7:11)`; frames of other modules, and any text that is not a frame, stay as
// they are. Maps are parsed on first use, by digest, and a few are kept.
import {originalPositionFor, TraceMap} from '@jridgewell/trace-mapping'
import type {ModuleInfo} from '../protocol/management-api.js'
import {scriptOfService} from '../workerd/script.js'

/** Parsed maps kept at once: a parse costs milliseconds, a large bundle's parsed map tens of MB. */
const PARSED_MAPS_KEPT = 8

/** `file:line:column` at the end of a stack line (V8's frame format), inside parentheses or not. */
const FRAME_LOCATION = /([^\s()]+):(\d+):(\d+)(\)?)$/gm

export type StackMapper = (text: string) => string

export interface SourceMapSource {
  modulesOf(script: string): ModuleInfo[]
  moduleContent(sha256: string): Buffer
  /** A gradual deployment's second release (./state/script-splits.ts). */
  splits: {modulesOf(script: string): ModuleInfo[]}
}

export class SourceMaps {
  /** By the map's sha256; null: the map does not parse (its frames stay as they are). */
  private readonly parsed = new Map<string, TraceMap | null>()

  constructor(private readonly source: SourceMapSource) {}

  /**
   * The mapper for the release workerd runs as `service` — a script's current release, or its split
   * release (splitServiceName), whose frames its own maps map — or null when it carries no source map.
   */
  mapperOf(service: string): StackMapper | null {
    const {script, split} = scriptOfService(service)
    const mapsByModule = new Map<string, string>()
    for (const module of split ? this.source.splits.modulesOf(script) : this.source.modulesOf(script))
      if (module.type === 'sourceMap') mapsByModule.set(module.name.replace(/\.map$/, ''), module.sha256)
    if (mapsByModule.size === 0) return null
    return (text) => {
      if (!text.includes(' at ')) return text
      return text.replace(FRAME_LOCATION, (frame, file: string, line: string, column: string, close: string) => {
        const sha256 = mapsByModule.get(file)
        const map = sha256 === undefined ? null : this.map(sha256, file)
        if (!map) return frame
        const original = originalPositionFor(map, {line: Number(line), column: Number(column) - 1})
        return original.source === null ? frame : `${original.source}:${original.line}:${original.column + 1}${close}`
      })
    }
  }

  private map(sha256: string, file: string): TraceMap | null {
    let map = this.parsed.get(sha256)
    if (map === undefined) {
      try {
        // Sources resolve against the module's own name, as a browser resolves them against its URL.
        map = new TraceMap(this.source.moduleContent(sha256).toString('utf8'), file)
      } catch {
        map = null
      }
      if (this.parsed.size >= PARSED_MAPS_KEPT) this.parsed.delete(this.parsed.keys().next().value!)
    } else this.parsed.delete(sha256)
    this.parsed.set(sha256, map)
    return map
  }
}
