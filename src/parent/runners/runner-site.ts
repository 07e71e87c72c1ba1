/**
 * One runner the pool owns (whatever endpoint opened it, see endpoints/table.ts) and the channel to it. The
 * runner is ours from start to exit: its exit is the one moment its children are settled, once
 * every frame it sent before it died has been delivered, so nothing a child emitted is lost. Why
 * it ended is decided once: the host's own reason for stopping it, else the crash it reported,
 * else how it exited.
 */
import type { RunnerConfig } from '../../protocol/messages.js'
import { RunnerChannel, type Culprit, type Fault, type RunnerKind } from './channel.js'
import type { Mobility } from './move-point.js'

/** How long a stopped runner may take to exit before its children are settled without it (a native call can block termination). */
const EXIT_WAIT_MS = 1000

/** How a runner ended, as its endpoint saw it. */
export interface Exit {
  /** The exit code; undefined when it was ended by a signal or never reported its end. */
  code: number | undefined
  signal?: string
}

/** What the endpoint reports to the site. */
export interface EndpointEvents {
  frame(frame: unknown): void
  /** A frame arrived that could not be decoded. */
  unreadable(error: Error): void
  /** An uncaught error is ending the runner. */
  crashed(error: Error): void
  /** The runner is gone and everything it sent has been delivered. */
  exited(exit: Exit): void
}

/** The part that differs between a thread and a process. */
export interface Endpoint {
  readonly kind: RunnerKind
  /** Names this runner in diagnostics, e.g. "worker thread 7". */
  readonly label: string
  send(frame: unknown[]): void
  /** Ends the runner at once (terminate, SIGKILL); `exited` follows. */
  terminate(): void
  /** Whether the runner keeps the host's process alive. */
  hold(held: boolean): void
  /** Why the runner ended when the host did not stop it. */
  faultOf(exit: Exit, crash: Error | undefined): Fault
  /** Stops (true) or resumes (false) delivering frames, where the wire can. */
  pause?(paused: boolean): void
  /** Drops, unread, every frame not yet delivered (the runner broke the protocol); `exited` still follows. */
  discard?(): void
}

export type OpenEndpoint = (events: EndpointEvents) => Endpoint

export interface SiteOptions {
  open: OpenEndpoint
  config: RunnerConfig
  /** A child left the runner, or the runner is gone: slots changed. */
  changed(site: RunnerSite): void
  exited(site: RunnerSite): void
}

export class RunnerSite {
  readonly channel: RunnerChannel
  readonly exit: Promise<void>
  readonly #endpoint: Endpoint
  readonly #options: SiteOptions
  #stopping: { fault: Fault; culprit?: Culprit; movable: Mobility | undefined } | undefined
  #crash: Error | undefined
  #gone = false
  /** Settles the children if a stopped runner never reports its exit. */
  #exitWait: NodeJS.Timeout | undefined
  #markExited!: () => void
  #held = false

  constructor(options: SiteOptions) {
    this.#options = options
    this.exit = new Promise((resolve) => (this.#markExited = resolve))
    this.#endpoint = options.open({
      frame: (frame) => this.channel.receive(frame),
      // The frame is lost whole, and what any child did after it is unknown: only those a host
      // call holds (and so did nothing since) move.
      unreadable: (error) =>
        this.stop({ stopReason: 'error', diagnostic: `protocol error: a frame from the ${this.channel.label} could not be read (${error.message}), so it was stopped` }, undefined, 'held'),
      crashed: (error) => void (this.#crash ??= error),
      exited: (exit) => this.#exited(exit),
    })
    const endpoint = this.#endpoint
    this.channel = new RunnerChannel({
      kind: endpoint.kind,
      label: endpoint.label,
      config: options.config,
      send: (frame) => endpoint.send(frame),
      kill: (fault, culprit, movable) => this.stop(fault, culprit, movable ?? (culprit === undefined ? undefined : 'heard')),
      crashed: (error) => void (this.#crash ??= error),
      changed: () => {
        this.#hold()
        options.changed(this)
      },
      ...(endpoint.pause ? { pause: endpoint.pause } : {}),
      ...(endpoint.discard ? { discard: endpoint.discard } : {}),
    })
  }

  get stopping(): boolean {
    return this.#stopping !== undefined || this.#gone
  }

  /**
   * Ends the runner; its children end with `fault` (the culprit with its own) once it exited.
   * `movable`: its other children may move to another runner (CONTRACT.md §8), judged as the
   * mobility says ('held': only those a host call holds, since its last frames may be unread).
   */
  stop(fault: Fault, culprit?: Culprit, movable?: Mobility): void {
    if (this.#stopping || this.#gone) return
    this.#stopping = culprit ? { fault, culprit, movable } : { fault, movable }
    // Until it is gone: whoever awaits its children (or host.close()) is owed its exit.
    this.#endpoint.hold(true)
    this.#endpoint.terminate()
    this.#exitWait = setTimeout(() => this.#exited({ code: undefined }), EXIT_WAIT_MS).unref()
  }

  #exited(exit: Exit): void {
    if (this.#gone) return
    this.#gone = true
    clearTimeout(this.#exitWait)
    const fault = this.#stopping?.fault ?? this.#endpoint.faultOf(exit, this.#crash)
    // A runner that went of itself (a crash, the heap limit) leaves its children movable.
    this.channel.end(fault, this.#stopping?.culprit, this.#stopping ? this.#stopping.movable : 'heard')
    this.#endpoint.hold(false)
    this.#markExited()
    this.#options.exited(this)
  }

  /** Keeps the host's process alive while the runner has children: a caller may be awaiting one. */
  #hold(): void {
    const wanted = this.channel.load > 0 && !this.#gone
    if (wanted === this.#held) return
    this.#held = wanted
    this.#endpoint.hold(wanted)
  }
}
