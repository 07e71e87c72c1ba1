/**
 * The abort grace, the one place its policy lives: once a child is cancelled it has `graceMs` to
 * end its turn, after which the runner it shares is stopped, naming it as the culprit to its
 * siblings. Used by the host's child (remote-child) and a node's relayed child alike.
 */
import type { ChannelChild, RunnerChannel } from './channel.js'

/** The cooperative cancel budget when none is configured. */
export const DEFAULT_ABORT_GRACE_MS = 2000

/**
 * Starts the grace for `child` on `channel`; the caller clears the timer when the child ends.
 * `where` names the machine the runner is on, for runners a node holds.
 */
export function startGrace(channel: RunnerChannel, child: ChannelChild, graceMs: number, where?: string): NodeJS.Timeout {
  const runner = where === undefined ? channel.kind.noun : `${channel.kind.noun} on ${where}`
  const ended = channel.kind.ended
  return setTimeout(() => {
    channel.kill(
      {
        stopReason: 'error',
        diagnostic: `the ${runner} this child shared was ${ended} because sibling subagent ${child.id} did not stop within ${graceMs} ms of being cancelled`,
      },
      {
        child,
        fault: {
          stopReason: 'aborted',
          diagnostic: `the child did not stop within abortGraceMs (${graceMs} ms) of being cancelled, so its ${runner} was ${ended}`,
        },
      },
    )
  }, graceMs)
}
