// Every tunable of the kit. Defaults are the reference system's constants (batch 50, 60 s loops,
// 15 s cooldown, …); keys are snake_case
// as they appear in the TOML file, and the env override of `section.key` is
// EDGEWORKERS_SECTION__KEY (see ./load.ts). Unknown keys are rejected at every level.
import {z} from 'zod'

const seconds = (def: number, min = 1, max = 86_400) => z.number().int().min(min).max(max).default(def)
const count = (def: number, min = 1, max = 100_000) => z.number().int().min(min).max(max).default(def)
const listenAddress = z.string().regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be HOST:PORT (port 0 picks a free port)')

export const settingsSchema = z.strictObject({
  /** Holds the embedded store, the artifact store and local state. Resolved by ./load.ts. */
  data_dir: z.string().min(1).default(''),
  log_level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'silent']).default('info'),
  /** `auto`: one human line per event when stderr is a terminal, JSON lines (journald, cron mail) otherwise. */
  log_format: z.enum(['auto', 'human', 'json']).default('auto'),

  store: z
    .strictObject({
      /** A file path, `sqlite:<path>`, or `postgres://…`. Empty = `<data_dir>/edgeworkers.sqlite`. */
      url: z.string().default(''),
      sqlite_busy_timeout_ms: count(5_000, 0, 600_000),
      /** FULL makes every commit durable (fsync); NORMAL trades the last commits on power loss for speed. */
      sqlite_synchronous: z.enum(['full', 'normal']).default('full'),
      postgres_pool_max: count(10, 1, 500),
      connect_timeout_ms: count(5_000, 100, 120_000),
    })
    .prefault({}),

  deploy: z
    .strictObject({
      lease_seconds: seconds(90),
      readiness_deadline_seconds: seconds(600),
      readiness_probe_timeout_seconds: seconds(40),
      /** Probes start at most this often (each waits on the host for the release to go live meanwhile). */
      readiness_probe_interval_ms: count(500, 10, 60_000),
      project_archive_max_bytes: count(2 * 1024 * 1024, 1, 64 * 1024 * 1024),
      bundle_max_bytes: count(5 * 1024 * 1024, 1, 64 * 1024 * 1024),
      /** Total size of the project's files before compression, checked before any is read (a zero-filled file compresses to almost nothing). */
      project_files_max_bytes: count(16 * 1024 * 1024, 1, 1024 * 1024 * 1024),
      /** Static assets per version and bytes per asset file: Cloudflare's limits by default. */
      assets_max_files: count(20_000, 1, 100_000),
      asset_max_bytes: count(25 * 1024 * 1024, 1, 512 * 1024 * 1024),
    })
    .prefault({}),

  recovery: z
    .strictObject({
      dispatch_grace_seconds: seconds(300),
      /** Reference batch 50, clamped to 1–100. */
      batch_size: count(50, 1, 100),
      /** How long a deploy a runner rescheduled is left alone before the lane takes it again: 15 s, clamped to 1–300. */
      cooldown_seconds: seconds(15, 1, 300),
    })
    .prefault({}),

  deferred: z
    .strictObject({
      /** The same hold for a deploy the host refused while fenced (it waits in the deferred lane). */
      cooldown_seconds: seconds(15, 1, 300),
    })
    .prefault({}),

  artifact_cleanup: z
    .strictObject({
      grace_seconds: seconds(900),
      lease_seconds: seconds(300),
      batch_size: count(100, 1, 1_000),
    })
    .prefault({}),

  control_audit: z
    .strictObject({
      request_grace_seconds: seconds(300),
      lease_seconds: seconds(120),
      batch_size: count(50, 1, 1_000),
    })
    .prefault({}),

  host_reconcile: z
    .strictObject({
      interval_seconds: seconds(15),
      pass_timeout_seconds: seconds(20),
      new_retirement_budget_seconds: seconds(10),
      stuck_threshold_seconds: seconds(300),
      upload_grace_seconds: seconds(900),
      lockdown_budget_seconds: seconds(8),
      lockdown_retry_delay_ms: count(500, 10, 60_000),
      listing_max_pages: count(100, 1, 10_000),
    })
    .prefault({}),

  hosts: z
    .strictObject({
      /**
       * Many hosts per kit (docs/many-hosts.md): a host that has not answered for this long no longer
       * holds up a change the kit's other hosts take; it is marked behind and catches up on return.
       */
      unreachable_grace_seconds: seconds(30, 0, 86_400),
    })
    .prefault({}),

  reconcile: z
    .strictObject({
      /** `reconcile --watch` cadence: 60 s between rounds, the specified loop period. */
      watch_interval_seconds: seconds(60, 1, 3_600),
      lane_budget_seconds: seconds(60, 1, 3_600),
      /**
       * Deploy rows of a claimed batch a pass runs at once (never two of one Worker), so their
       * uploads land in one shard restart on the host; 1 = one row at a time.
       */
      deploy_concurrency: count(8, 1, 64),
    })
    .prefault({}),

  status: z
    .strictObject({
      /** How often the live `edgeworkers status` view refreshes (`--interval` overrides it). */
      refresh_interval_ms: count(2_000, 250, 600_000),
      /** Finished rows (completed, cancelled) are counted over this recent window; open rows always whole. */
      finished_window_seconds: seconds(86_400, 60, 90 * 86_400),
      /** How long one refresh waits for the edge host before the host panel says it did not answer. */
      host_timeout_ms: count(3_000, 100, 120_000),
      /**
       * A Worker needs attention (and `status` exits 13) when at least this share of its requests
       * failed over the host's activity window (host.worker_activity_window_seconds)…
       */
      worker_error_rate_percent: count(10, 1, 100),
      /** …and it had at least this many requests there: one failed request of two is no signal. */
      worker_error_min_requests: count(10, 1, 1_000_000),
      /** A queue needs attention when it holds at least this many messages (`edgeworkers queues list` shows them); a cron trigger whose last run failed always does. */
      queue_backlog_threshold: count(1_000, 1, 1_000_000_000),
    })
    .prefault({}),

  backoff: z
    .strictObject({
      /** After n attempts the next waits ladder[min(n-1, len-1)] seconds, ± jitter. */
      ladder_seconds: z.array(z.number().int().min(0).max(86_400)).min(1).default([5, 15, 30, 60, 120, 300, 600, 1_800, 3_600]),
      jitter_ratio: z.number().min(0).max(1).default(0.2),
      max_attempts: count(12, 1, 1_000),
    })
    .prefault({}),

  provider: z
    .strictObject({
      kind: z.enum(['onprem']).default('onprem'),
      /** The kit scope (`onprem:<12 hex>`) this runner works for; empty = the store's only pairing. */
      scope: z
        .string()
        .regex(/^(onprem:[0-9a-f]{12})?$/, 'must be onprem:<12 hex> or empty')
        .default(''),
      connect_timeout_ms: count(5_000, 100, 120_000),
      read_timeout_ms: count(30_000, 100, 600_000),
    })
    .prefault({}),

  fence: z
    .strictObject({
      default_ttl_seconds: seconds(3_600, 10, 7 * 86_400),
      max_ttl_seconds: seconds(24 * 3_600, 10, 7 * 86_400),
    })
    .prefault({}),

  host: z
    .strictObject({
      listen: listenAddress.default('127.0.0.1:8787'),
      admin_listen: listenAddress.default('127.0.0.1:8788'),
      /**
       * What owns the data-plane listener. "node": the host's Node.js data plane. "haproxy": an HAProxy
       * child of the host (haproxy ≥ 2.4 on PATH or in /usr/sbin; restarted if it exits, dies with the host)
       * sends requests for Workers it can answer identically — settled on their own workerd socket,
       * public, not tailed, no assets, no gradual deployment, no Durable Objects on their shard, not
       * WebSockets — straight to workerd, and everything else to the Node data plane behind it
       * (about a third of the host's CPU per request, BENCHMARKS.md). Those requests count in
       * edgeworkers_host_requests_total by status class, not by status. "auto": "haproxy" when such a
       * haproxy is installed, else "node"; each start logs the one it runs (`front door: …`) and host.json
       * names it.
       */
      front: z.enum(['node', 'haproxy', 'auto']).default('node'),
      base_domain: z
        .string()
        .regex(/^[a-z0-9.-]+$/, 'must be a DNS name')
        .default('workers.localhost'),
      shards: count(4, 1, 256),
      /**
       * One of several hosts of a kit behind a load balancer (docs/many-hosts.md): after every start
       * `/readyz` answers 503 until the kit has brought the host current and confirmed it.
       */
      await_kit_confirmation: z.boolean().default(false),
      max_scripts_per_shard: count(500, 1, 10_000),
      /** Deploys arriving within this window share one shard restart. */
      coalesce_window_ms: count(50, 0, 10_000),
      signature_window_seconds: seconds(300, 5, 3_600),
      script_listing_page_size: count(1_000, 1, 1_000),
      /** URL the host advertises for its data plane; empty = derived from `listen`. */
      public_url: z
        .string()
        .regex(/^(https?:\/\/[^\s/]+)?$/, 'must be http(s)://HOST[:PORT] or empty')
        .default(''),
      /** Decoded size limit of one script's modules. */
      max_script_bytes: count(5 * 1024 * 1024, 1, 64 * 1024 * 1024),
      /** Largest static asset file the host stores (Cloudflare's 25 MiB per file). */
      max_asset_bytes: count(25 * 1024 * 1024, 1, 512 * 1024 * 1024),
      /** Largest value a Worker may put in a KV namespace (Cloudflare's 25 MiB); a larger one is refused as Cloudflare refuses it. */
      kv_max_value_bytes: count(25 * 1024 * 1024, 1, 100 * 1024 * 1024),
      /** Longest KV key in UTF-8 bytes (Cloudflare's 512, the most: workerd refuses longer keys itself). */
      kv_max_key_bytes: count(512, 1, 512),
      /** Largest KV metadata, as JSON in UTF-8 bytes (Cloudflare's 1 KiB). */
      kv_max_metadata_bytes: count(1024, 1, 64 * 1024),
      /** How long a data-plane request may wait for its shard to (re)start before a 503. */
      request_hold_timeout_ms: count(30_000, 100, 600_000),
      /** How long a swap or shutdown waits for requests inside a shard before stopping it anyway. */
      drain_timeout_ms: count(30_000, 100, 600_000),
      /** How long a workerd process may take to start listening (about 3 s for 500 scripts). */
      start_timeout_ms: count(60_000, 1_000, 600_000),
      /** Uploads validated in throwaway workerd processes at once. */
      validation_concurrency: count(2, 1, 64),
      /** How long a client of the data plane may take to send its request headers, from connecting or from the end of its previous answer (then 408 and closed). */
      header_timeout_ms: count(10_000, 1_000, 600_000),
      /** How long a client of the data plane may take to send its whole request, body included (a slower upload is cut); keep it at or above header_timeout_ms. */
      request_timeout_ms: count(60_000, 1_000, 3_600_000),
      /** How long a data-plane keep-alive connection may stay idle between requests before the host closes it. */
      idle_timeout_ms: count(5_000, 100, 600_000),
      /** How long a client of the management listener may take to send its request headers. */
      admin_header_timeout_ms: count(10_000, 1_000, 600_000),
      /** How long a client of the management listener may take to send its whole request (an upload is up to ~11 MB). */
      admin_request_timeout_ms: count(30_000, 1_000, 600_000),
      /** How long a management keep-alive connection may stay idle between requests. */
      admin_idle_timeout_ms: count(5_000, 100, 600_000),
      /**
       * Client connections both listeners hold at once; 0 = from the fd limit (Node raises its soft
       * limit to the hard one at start): (limit − 256) / 2. When it is reached, a new connection
       * closes the one idle the longest (no request in flight), or is refused (503) if none is idle.
       */
      max_connections: count(0, 0, 10_000_000),
      /** Connections one client address (an IPv6 /64) may hold at once on each listener; more are refused (one 503 a second, the rest closed unanswered). Behind a proxy every client shares its address: raise it. */
      max_connections_per_address: count(256, 1, 10_000_000),
      /** Request bodies both listeners hold in memory at once; past it a body is refused (503 host_busy). */
      max_held_body_bytes: count(32 * 1024 * 1024, 1024 * 1024, 1024 * 1024 * 1024),
      /** Largest body of a kit-signed data-plane request to a Worker its policy would refuse (the body is buffered to check its digest). */
      max_signed_request_body_bytes: count(1024 * 1024, 1024, 64 * 1024 * 1024),
      /** Failed pairing attempts one source address may make per window before it is refused (429). */
      pairing_max_failures: count(5, 1, 1_000),
      pairing_failure_window_seconds: seconds(60, 1, 86_400),
      /** How often the watchdog probes each shard and samples its memory. */
      watchdog_interval_ms: count(100, 50, 60_000),
      /** A shard whose process answered nothing (health probe included) for this long, while a request was inside and its thread ran on the CPU for 40 % of this (more than a legitimate hold, e.g. a garbage collection, takes), is stalled (a Worker holds its thread, e.g. a loop): it is replaced at once. Effectively the per-request CPU time limit; every Worker of the shard waits that long. */
      request_cpu_limit_ms: count(500, 100, 600_000),
      /** Resident memory one shard's workerd may use; past it the shard is restarted at once (as it is when it grows by 256 MB while answering nothing). */
      // Sized for a full shard: max_scripts_per_shard (500) loaded Workers at ~2.4 MiB, plus the
      // replaced versions it holds until recycled (BENCHMARKS.md, 2,000 Workers).
      shard_memory_limit_mb: count(2_048, 64, 1_048_576),
      /** Incidents (stall, crash, memory limit) one release of a Worker may cause before it is quarantined until its next deploy. */
      quarantine_after_incidents: count(3, 1, 100),
      /**
       * Under the loader, keep one idle workerd started (about 12 MB of its own, 52 MB resident) that the replacement of a runaway
       * or crashed shard takes at once, instead of its Workers waiting for a start (seconds under load).
       */
      spare_process: z.boolean().default(true),
      /** Workers that caused an incident are each moved to a workerd process of their own, up to this many at once (0: never moved); a new release goes back to the shared shards. */
      isolation_shards: count(8, 0, 256),
      /** Where Workers' fetch() may connect (workerd network allow list); "public" = no private networks. */
      egress_allow: z
        .array(z.string().regex(/^(public|private|local|network|unicast|multicast|[0-9a-fA-F.:]+\/[0-9]{1,3})$/, 'must be a workerd network class or CIDR'))
        .min(1)
        .default(['public']),
      /**
       * Run workerd with --experimental, so Workers may use the flags and features workerd marks
       * experimental (e.g. the `experimental` compatibility flag). Off: such uploads are refused.
       */
      experimental: z.boolean().default(false),
      /**
       * Workers' events (tail, per-Worker metrics, the Workers panel, the log file): a Worker someone
       * reads (a live tail, the log file; or with Durable Objects) is traced for the shard's tail
       * Worker, any other is counted by a module wrapped around its main module; off, none of them exist.
       */
      worker_events: z.boolean().default(true),
      /**
       * Events of one Worker a live tail gets per second at most; past it the rest are counted, not
       * sent (a Worker nobody else traces: not traced), and tails get a `sampled` notice (the Worker
       * log file and the metrics still get every event). Bounds what a tail on a busy Worker costs.
       */
      tail_max_events_per_second: count(100, 1, 100_000),
      /**
       * Static asset files no release of a served script names are removed after each upload and
       * retirement, once this long has passed since they were sent or a deploy asked about them (a
       * deploy sends its files before the upload that names them).
       */
      asset_unreferenced_grace_seconds: count(3600, 0, 30 * 86_400),
      /**
       * How a deploy reaches a running shard. "loader": a deploy of a Worker without Durable Objects
       * loads the new code into the running process through workerd's Worker Loader (its neighbours
       * untouched; each process the host starts has every Worker on its own socket again); Workers
       * with Durable Objects, and every Worker under "restart", are picked up by replacing the
       * shard's process.
       */
      code_loading: z.enum(['restart', 'loader']).default('loader'),
      /** Replaced Worker versions a shard may hold loaded (workerd never unloads them) before its process is recycled. */
      loader_max_stale_loads: count(200, 1, 100_000),
      /** Past this resident memory a shard holding replaced Worker versions is recycled; keep it below shard_memory_limit_mb. */
      loader_recycle_memory_mb: count(1_536, 64, 1_048_576),
      /**
       * A shard that loaded Workers into its running process moves to a new one with each Worker on its own socket (about
       * half of workerd's CPU per request through the loader; the move restarts the shard's other Workers, as any swap
       * does) once no deploy reached it for this long; 0: only at the next start, swap or recycle. Shards with Durable
       * Objects wait for those: their swap holds requests.
       */
      loader_settle_seconds: count(300, 0, 86_400),
      /** Write every Worker event as a JSON line to this file (absolute path); empty = no file. */
      worker_log_file: z
        .string()
        .regex(/^(\/.*)?$/, 'must be an absolute path or empty')
        .default(''),
      /** Past this size the Worker log file is rotated (<file>.1 … <file>.<worker_log_keep>). */
      worker_log_max_bytes: count(50 * 1024 * 1024, 1024, 1024 * 1024 * 1024 * 1024),
      worker_log_keep: count(5, 1, 100),
      /** The window over which the host sums each Worker's requests, errors and p99 for `status`. */
      worker_activity_window_seconds: seconds(300, 10, 3_600),
    })
    .prefault({}),
})

export type Settings = z.infer<typeof settingsSchema>
