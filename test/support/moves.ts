/**
 * Thread-mates survive (CONTRACT.md §8), one suite for every pooled transport: when a runner is
 * stopped or dies, every other child on it that waited on the host is rebuilt on another runner
 * and finishes its turn; one inside module code ends `error`, told why. Each mate's model holds
 * its first request ('hang': it streams 'partial', then waits until the request is aborted,
 * which a move does) and answers the second.
 *
 * `make` gives a host whose children run on the fault module, with the pool (a host's, or a
 * node's) as a test asks: mates go on one runner while it has room, moved ones to the next.
 */
import { describe, expect, it } from 'vitest'
import {
  createSubagentTool,
  defineTool,
  ScriptedModel,
  textResponse,
  toolCallResponse,
  toolCallsResponse,
  type Agent,
  type Model,
  type Host,
  type PoolOptions,
  type ScriptEntry,
  type SessionEvent,
  type StreamChunk,
  type SubagentEndEvent,
  type SubagentRun,
  type SubagentStartRequest,
} from 'subagent-worker'

export interface MatesHost {
  host: Host
  parent: Agent
}

/** A host on the transport under test: `script` is its parent's model ('scripted', also the children's default provider). */
export type MakeHost = (script: ScriptEntry[], options?: { pool?: PoolOptions }) => Promise<MatesHost>

const signal = () => new AbortController().signal

/** Resolves with the first event of child `id` (any child when undefined) that `match` accepts, from now on. */
export function nextEvent(host: Host, match: (event: SessionEvent) => boolean, id?: string): Promise<SessionEvent> {
  return new Promise((resolve) => {
    const off = host.on('subagent/event', (info) => {
      if ((id === undefined || info.id === id) && match(info.event)) {
        off()
        resolve(info.event)
      }
    })
  })
}

/** Resolves once `count` distinct children have streamed a chunk: each is waiting on its held host model. */
export function streaming(host: Host, count: number): Promise<void> {
  const seen = new Set<string>()
  return new Promise((resolve) => {
    const off = host.on('subagent/event', ({ id, event }) => {
      if (event.type !== 'assistant/chunk') return
      seen.add(id)
      if (seen.size === count) {
        off()
        resolve()
      }
    })
  })
}

export function endsOf(host: Host): Map<string, SubagentEndEvent> {
  const ends = new Map<string, SubagentEndEvent>()
  host.on('subagent/end', (event) => void ends.set(event.id, event))
  return ends
}

/**
 * A host model whose first request streams `first` (nothing when it is empty) and then waits
 * until it is aborted (a move aborts it); every later request answers `after` whole. `requested`
 * resolves once the first request was made.
 */
export function heldUntilMoved(first: string, after: string): Model & { requested: Promise<void>; requests(): number } {
  let requests = 0
  let asked!: () => void
  const requested = new Promise<void>((resolve) => (asked = resolve))
  return {
    requested,
    requests: () => requests,
    async *stream(request) {
      if (++requests > 1) return yield* textResponse(after)
      asked()
      if (first !== '') yield { type: 'text-delta', text: first }
      await new Promise((_, reject) => request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true }))
    },
  }
}

export const contiguous = (events: readonly SessionEvent[]) => events.every((event, i) => event.seq === i)
export const moved = (events: readonly SessionEvent[]) => events.filter((event) => event.type === 'child/moved').map((event) => (event.data as { reason: string }).reason)

/** A host tool that answers when the test releases it, counting its runs. */
function heldTool(host: Host) {
  let release!: (value: string) => void
  const held = new Promise<string>((resolve) => (release = resolve))
  let called!: () => void
  const calledOnce = new Promise<void>((resolve) => (called = resolve))
  const tool = { runs: 0, release, calledOnce }
  host.tools.register(
    defineTool({
      name: 'host_fetch',
      description: 'Answers when the test releases it.',
      parameters: { type: 'object', properties: {} },
      execute: () => {
        tool.runs++
        called()
        return held
      },
    }),
  )
  return tool
}

/** Starts a sibling on the host's script (a call of the module tool `spin`) and resolves once it is inside it, with its canceller. */
async function spinningSibling(h: Host, parent: Agent): Promise<{ spinner: SubagentRun; stuck: AbortController }> {
  const stuck = new AbortController()
  const spinning = nextEvent(h, (event) => event.type === 'assistant/message')
  const spinner = await h.spawn.start({ prompt: 'spin', parent, signal: stuck.signal })
  await spinning
  return { spinner, stuck }
}

/** A host model whose first request streams part of `answer`, then, once released, the rest; the next request answers whole. */
class AnsweredWhileBusy implements Model {
  requests = 0
  readonly answered: Promise<void>
  release!: () => void
  readonly #released = new Promise<void>((resolve) => (this.release = resolve))
  #answered!: () => void

  constructor(readonly answer: string) {
    this.answered = new Promise((resolve) => (this.#answered = resolve))
  }

  async *stream(): AsyncGenerator<StreamChunk> {
    if (++this.requests > 1) return yield* textResponse(this.answer)
    const [head, tail] = [this.answer.slice(0, 3), this.answer.slice(3)]
    yield { type: 'text-delta', text: head }
    await this.#released
    try {
      yield* textResponse(tail)
    } finally {
      // Pulled to its end (or returned after its finish chunk): the host has the whole answer.
      this.#answered()
    }
  }
}

/** A sibling crashes the runner under `mate` (the fault module's `exit` tool); resolves with it once the mate moved. */
async function crashBeside(h: Host, parent: Agent, mate: SubagentRun): Promise<SubagentRun> {
  const movedEvent = nextEvent(h, (event) => event.type === 'child/moved', mate.id)
  const crasher = await h.spawn.start({ prompt: 'crash', parent, signal: signal() })
  expect((await crasher.result).stopReason).toBe('error')
  await movedEvent
  return crasher
}

/** `stopped`: what stopping a runner does to it, as its diagnostics say. */
export function describeMoves(name: string, make: MakeHost, stopped: string): void {
  describe(`${name}: thread-mates survive`, () => {
    const host = (script: ScriptEntry[], pool: PoolOptions = {}) => make(script, { pool: { minThreads: 1, maxThreads: 2, childrenPerWorker: 10, ...pool } })

    /** Nine mates, each on a model of its own that holds its first request and answers the second. */
    async function mates(host: Host, parent: Agent): Promise<SubagentRun[]> {
      const waiting = streaming(host, 9)
      const runs: SubagentRun[] = []
      for (let i = 0; i < 9; i++) {
        host.models.register(`mate-${i}`, new ScriptedModel(['hang', textResponse(`answer ${i}`)]))
        runs.push(await host.spawn.start({ prompt: `task ${i}`, parent, signal: signal(), agentOptions: { provider: `mate-${i}` } }))
      }
      await waiting
      return runs
    }

    async function expectMoved(host: Host, runs: SubagentRun[], ends: Map<string, SubagentEndEvent>, reason: RegExp): Promise<void> {
      for (const [i, run] of runs.entries()) {
        const result = await run.result
        // Only the answer's request counts: the held one streamed 'partial' and no usage.
        const usage = { inputTokens: 0, outputTokens: 2 }
        expect(result).toEqual({ stopReason: 'completed', output: [{ type: 'text', text: `answer ${i}` }], usage, totalUsage: usage })
        const events = host.agents.get(run.id)!.session.events
        expect(contiguous(events)).toBe(true)
        const reasons = moved(events)
        expect(reasons).toHaveLength(1)
        expect(reasons[0]).toMatch(reason)
        expect(events.filter((event) => event.type === 'turn/start')).toHaveLength(1)
        expect(events.at(-1)!.type).toBe('turn/end')
        await run.dispose()
        expect(ends.get(run.id)).toMatchObject({ stopReason: 'completed', moves: 1, lastAssistantMessage: `answer ${i}` })
      }
    }

    it('nine mates waiting on their host model survive a sibling stopped past the grace, each with one child/moved', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'spin', {})])
      const ends = endsOf(h)
      let starts = 0
      h.on('subagent/start', () => void starts++)
      const runs = await mates(h, parent)
      const { spinner, stuck } = await spinningSibling(h, parent)
      stuck.abort()
      const stuckResult = await spinner.result
      expect(stuckResult.stopReason).toBe('aborted')
      expect(stuckResult.diagnostic).toContain(stopped)
      await expectMoved(h, runs, ends, new RegExp(`sibling subagent ${spinner.id} did not stop`))
      // No second subagent/start: ten starts for ten children.
      expect(starts).toBe(10)
      expect(ends.get(spinner.id)!.moves).toBeUndefined()
      await spinner.dispose()
    })

    it('nine mates survive a sibling that crashes the runner', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'exit', { code: 7 })])
      const ends = endsOf(h)
      const runs = await mates(h, parent)
      const crasher = await h.spawn.start({ prompt: 'crash', parent, signal: signal() })
      const crashed = await crasher.result
      expect(crashed.stopReason).toBe('error')
      expect(crashed.diagnostic).toMatch(/exited with code 7/)
      await expectMoved(h, runs, ends, /exited with code 7/)
      await crasher.dispose()
    })

    it('a mate allowed one step (limits.maxSteps 1), moved while that step waits, completes: the request made again is that step', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'exit', { code: 7 })])
      h.models.register('one-step', new ScriptedModel(['hang', textResponse('within its one step')]))
      const waiting = streaming(h, 1)
      const mate = await h.spawn.start({ prompt: 'one step', parent, signal: signal(), agentOptions: { provider: 'one-step' }, limits: { maxSteps: 1 } })
      await waiting
      const crasher = await h.spawn.start({ prompt: 'crash', parent, signal: signal() })
      expect((await crasher.result).stopReason).toBe('error')
      expect(await mate.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'within its one step' }] })
      expect(moved(h.agents.get(mate.id)!.session.events)).toHaveLength(1)
      await mate.dispose()
      await crasher.dispose()
    })

    it('nine mates survive a sibling that hits the heap limit', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'hog_memory', {})], { resourceLimits: { maxOldGenerationSizeMb: 24, maxYoungGenerationSizeMb: 8 } })
      const ends = endsOf(h)
      const runs = await mates(h, parent)
      const hog = await h.spawn.start({ prompt: 'hog', parent, signal: signal() })
      expect((await hog.result).diagnostic).toMatch(/out of memory/)
      await expectMoved(h, runs, ends, /out of memory/)
      await hog.dispose()
    })

    it('a mate waiting on a host tool moves; the tool runs once and its result reaches the child where it now runs', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'exit', { code: 7 })])
      const tool = heldTool(h)
      const mateModel = new ScriptedModel([toolCallResponse('h1', 'host_fetch', {}), textResponse('used the fetched value')])
      h.models.register('mate', mateModel)
      const mate = await h.spawn.start({ prompt: 'fetch', parent, signal: signal(), agentOptions: { provider: 'mate' } })
      await tool.calledOnce
      const crasher = await crashBeside(h, parent, mate)
      tool.release('fetched value')
      const result = await mate.result
      expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'used the fetched value' }] })
      expect(tool.runs).toBe(1)
      const events = h.agents.get(mate.id)!.session.events
      expect(contiguous(events)).toBe(true)
      const results = events.filter((event) => event.type === 'tool/result')
      expect(results.map((event) => event.data)).toMatchObject([{ callId: 'h1', name: 'host_fetch', isError: false, content: [{ type: 'text', text: 'fetched value' }] }])
      // The second request saw the tool's result: the child went on with its step, not a new turn.
      expect(mateModel.requests).toHaveLength(2)
      await Promise.all([mate.dispose(), crasher.dispose()])
    })

    it('a mate waiting on a host tool beside structured_output in one step moves (the runner answers that call without module code), and completes with its structured value', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'exit', { code: 7 })])
      const tool = heldTool(h)
      const mateModel = new ScriptedModel([toolCallsResponse([{ id: 'h1', name: 'host_fetch', args: {} }, { id: 's1', name: 'structured_output', args: { n: 1 } }])])
      h.models.register('mate', mateModel)
      const outputSchema = { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] } as const
      const mate = await h.spawn.start({ prompt: 'fetch and shape', parent, signal: signal(), outputSchema, agentOptions: { provider: 'mate' } })
      await tool.calledOnce
      const crasher = await crashBeside(h, parent, mate)
      tool.release('fetched value')
      expect(await mate.result).toMatchObject({ stopReason: 'completed', structured: { n: 1 } })
      expect(tool.runs).toBe(1)
      // The step went on where it was: no request was made again.
      expect(mateModel.requests).toHaveLength(1)
      const events = h.agents.get(mate.id)!.session.events
      expect(contiguous(events)).toBe(true)
      expect(events.filter((event) => event.type === 'tool/result').map((event) => (event.data as { name: string }).name)).toEqual(['host_fetch', 'structured_output'])
      await Promise.all([mate.dispose(), crasher.dispose()])
    })

    // A captured value ends the turn at once (the guard denies every later call), so a child is
    // never found waiting with one: it moves while waiting on its model, and captures it there.
    // Restoring a captured value on a rebuild is test/unit/moves.test.ts's.
    it('a structured-output child moves with its output schema and completes with its structured value', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'exit', { code: 7 })])
      const model = new ScriptedModel(['hang', toolCallResponse('s1', 'structured_output', { n: 1 })])
      h.models.register('shaped', model)
      const outputSchema = { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] } as const
      const waiting = streaming(h, 1)
      const child = await h.spawn.start({ prompt: 'shape', parent, signal: signal(), outputSchema, agentOptions: { provider: 'shaped' } })
      await waiting
      const crasher = await h.spawn.start({ prompt: 'crash', parent, signal: signal() })
      await crasher.result
      const result = await child.result
      expect(result).toMatchObject({ stopReason: 'completed', structured: { n: 1 } })
      expect(model.requests).toHaveLength(2)
      // The new runner's request carried the schema: the tool, and its instruction in the system prompt.
      expect(model.requests[1]!.tools?.map((tool) => tool.name)).toContain('structured_output')
      expect(model.requests[1]!.system).toBe(model.requests[0]!.system)
      const events = h.agents.get(child.id)!.session.events
      expect(contiguous(events)).toBe(true)
      expect(moved(events)).toHaveLength(1)
      await Promise.all([child.dispose(), crasher.dispose()])
    })

    // The host's copy says its model request returned and nothing after it began: no module code
    // runs before its next request only on a runner whose module has no beforeStep hook, which
    // the host knows from the runner's `ready` (a node's link, on BullMQ).
    /** A mate whose answer ('answer 0') its runner never reads, being inside a sibling's module tool, until the sibling is stopped past the grace. */
    async function answeredWhileBusy(h: Host, parent: Agent, limits?: SubagentStartRequest['limits']) {
      const model = new AnsweredWhileBusy('answer 0')
      h.models.register('mate-0', model)
      const waiting = streaming(h, 1)
      const mate = await h.spawn.start({ prompt: 'task 0', parent, signal: signal(), agentOptions: { provider: 'mate-0' }, ...(limits ? { limits } : {}) })
      await waiting
      const { spinner, stuck } = await spinningSibling(h, parent)
      model.release()
      await model.answered
      stuck.abort()
      expect((await spinner.result).stopReason).toBe('aborted')
      return { model, mate, spinner }
    }

    it('a mate between steps (its model request answered while its runner spins) moves and completes with exactly its answer', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'spin', {})])
      const ends = endsOf(h)
      const { model, mate, spinner } = await answeredWhileBusy(h, parent)
      await expectMoved(h, [mate], ends, new RegExp(`sibling subagent ${spinner.id} did not stop`))
      // The answer the dead runner never read was asked for again.
      expect(model.requests).toBe(2)
      await spinner.dispose()
    })

    it('a mate inside a module tool ends error, naming the sibling', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'spin', {})])
      h.models.register('holder', new ScriptedModel([toolCallResponse('m1', 'hold', {})]))
      const holding = nextEvent(h, (event) => event.type === 'assistant/message')
      const holder = await h.spawn.start({ prompt: 'hold', parent, signal: signal(), agentOptions: { provider: 'holder' } })
      await holding
      const { spinner, stuck } = await spinningSibling(h, parent)
      stuck.abort()
      const result = await holder.result
      expect(result.stopReason).toBe('error')
      expect(result.diagnostic).toContain(`sibling subagent ${spinner.id}`)
      expect(moved(h.agents.get(holder.id)!.session.events)).toEqual([])
      await Promise.all([holder.dispose(), spinner.dispose()])
    })

    it('a child moved three times ends error the fourth time its runner goes, saying so', async () => {
      const { host: h, parent } = await host([], { minThreads: 1, maxThreads: 1, childrenPerWorker: 2 })
      const mateModel = new ScriptedModel(['hang', 'hang', 'hang', 'hang'])
      h.models.register('mate', mateModel)
      let waiting = streaming(h, 1)
      const mate = await h.spawn.start({ prompt: 'wait', parent, signal: signal(), agentOptions: { provider: 'mate' } })
      await waiting
      for (let crash = 1; crash <= 4; crash++) {
        h.models.register(`crash-${crash}`, new ScriptedModel([toolCallResponse('c1', 'exit', { code: crash })]))
        // After a move, the mate's next request streams again on its new runner.
        waiting = nextEvent(h, (event) => event.type === 'assistant/chunk', mate.id).then(() => {})
        const crasher = await h.spawn.start({ prompt: 'crash', parent, signal: signal(), agentOptions: { provider: `crash-${crash}` } })
        expect((await crasher.result).diagnostic).toMatch(new RegExp(`exited with code ${crash}`))
        await crasher.dispose()
        if (crash < 4) await waiting
      }
      const result = await mate.result
      expect(result.stopReason).toBe('error')
      expect(result.diagnostic).toMatch(/exited with code 4.*moved to another runner 3 times/)
      expect(moved(h.agents.get(mate.id)!.session.events)).toHaveLength(3)
      expect(mateModel.requests).toHaveLength(4)
      await mate.dispose()
    })

    it('a mate whose token budget the answer its dead runner never read spent moves and completes: the request made again spends it', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'spin', {})])
      // textResponse reports 2 output tokens: the answer alone reaches the budget.
      const { model, mate, spinner } = await answeredWhileBusy(h, parent, { maxTotalTokens: 2 })
      const usage = { inputTokens: 0, outputTokens: 2 }
      expect(await mate.result).toEqual({ stopReason: 'completed', output: [{ type: 'text', text: 'answer 0' }], usage, totalUsage: usage })
      expect(model.requests).toBe(2)
      await Promise.all([mate.dispose(), spinner.dispose()])
    })

    it('the tokens a moved request reported before its runner went do not count: it is made again, and counts there', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'exit', { code: 7 })])
      h.models.register('mate', new ScriptedModel([{ hangAfter: [{ type: 'text-delta', text: 'partial' }, { type: 'usage', inputTokens: 5, outputTokens: 5 }] }, textResponse('answer')]))
      const waiting = streaming(h, 1)
      const mate = await h.spawn.start({ prompt: 'wait', parent, signal: signal(), agentOptions: { provider: 'mate' } })
      await waiting
      const crasher = await h.spawn.start({ prompt: 'crash', parent, signal: signal() })
      expect((await crasher.result).stopReason).toBe('error')
      const usage = { inputTokens: 0, outputTokens: 2 }
      expect(await mate.result).toEqual({ stopReason: 'completed', output: [{ type: 'text', text: 'answer' }], usage, totalUsage: usage })
      await Promise.all([mate.dispose(), crasher.dispose()])
    })

    it('a mate cancelled by a listener of its child/moved event ends aborted there: it is not rebuilt and asks its model nothing more', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'exit', { code: 7 })])
      const model = new ScriptedModel(['hang', textResponse('never')])
      h.models.register('mate', model)
      const waiting = streaming(h, 1)
      const mate = await h.spawn.start({ prompt: 'wait', parent, signal: signal(), agentOptions: { provider: 'mate' } })
      await waiting
      let disposed: Promise<void> | undefined
      h.on('subagent/event', ({ id, event }) => {
        if (id === mate.id && event.type === 'child/moved') disposed = mate.dispose()
      })
      const crasher = await h.spawn.start({ prompt: 'crash', parent, signal: signal() })
      expect((await crasher.result).stopReason).toBe('error')
      expect(await mate.result).toEqual({ stopReason: 'aborted', output: [], diagnostic: 'the child was cancelled while it was being moved to another runner' })
      await disposed
      expect(model.requests).toHaveLength(1)
      expect(h.agents.get(mate.id)).toBeUndefined()
      await crasher.dispose()
    })

    it('a settlement notice its dead runner held, untaken, reaches the mate where it now runs: its next step takes it', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'exit', { code: 7 })])
      let openLeaf!: () => void
      const leafGate = new Promise<void>((resolve) => (openLeaf = resolve))
      h.models.register('leaf', new ScriptedModel([async () => (await leafGate, textResponse('leaf answer'))]))
      h.tools.register(createSubagentTool(h, { provider: 'spawn', toolName: 'delegate', backgroundMode: 'continuable', agentOptions: { provider: 'leaf' } }))
      // Starts the leaf, then holds its next request until moved; the request made again answers.
      const mateModel = new ScriptedModel([toolCallResponse('d1', 'delegate', { description: 'leaf', prompt: 'leaf task' }), 'hang', textResponse('mate done')])
      h.models.register('mate', mateModel)
      const waiting = nextEvent(h, (event) => event.type === 'assistant/chunk')
      const mate = await h.spawn.start({ prompt: 'wait', parent, signal: signal(), agentOptions: { provider: 'mate' } })
      await waiting
      const settled = new Promise<void>((resolve) => h.on('subagent/settled', () => resolve()))
      openLeaf()
      await settled // its notice went to the mate's runner, which the held request keeps from taking it
      const crasher = await h.spawn.start({ prompt: 'crash', parent, signal: signal() })
      expect((await crasher.result).stopReason).toBe('error')
      expect((await mate.result).output).toEqual([{ type: 'text', text: 'mate done' }])
      const notices = h.agents.get(mate.id)!.session.events.filter((event) => event.type === 'user/message' && (event.data.source as { kind: string }).kind === 'subagent-settlement')
      expect(notices).toHaveLength(1)
      expect(JSON.stringify(mateModel.requests[2]!.messages)).toContain('leaf answer')
      await Promise.all([mate.dispose(), crasher.dispose()])
    })

    it('a mate aborted while its remade request waits has none of the moved request\'s chunks in its output', async () => {
      const { host: h, parent } = await host([toolCallResponse('c1', 'exit', { code: 7 })])
      // Its first request streams 'partial' and waits; the one made again after the move streams nothing.
      const script = new ScriptedModel(['hang', { hangAfter: [] }])
      let askedAgain!: () => void
      const remade = new Promise<void>((resolve) => (askedAgain = resolve))
      h.models.register('mate', {
        stream: (request) => {
          if (script.requests.length === 1) askedAgain()
          return script.stream(request)
        },
      })
      const waiting = streaming(h, 1)
      const stop = new AbortController()
      const mate = await h.spawn.start({ prompt: 'wait', parent, signal: stop.signal, agentOptions: { provider: 'mate' } })
      await waiting
      const crasher = await h.spawn.start({ prompt: 'crash', parent, signal: signal() })
      expect((await crasher.result).stopReason).toBe('error')
      await remade
      stop.abort()
      const result = await mate.result
      expect(result.stopReason).toBe('aborted')
      expect(result.output).toEqual([])
      const events = h.agents.get(mate.id)!.session.events
      // The chunk stays in the record; it only does not count.
      expect(events.filter((event) => event.type === 'assistant/chunk')).toHaveLength(1)
      expect(moved(events)).toHaveLength(1)
      await Promise.all([mate.dispose(), crasher.dispose()])
    })

    it('a fork child keeps its seed out of its output after a move', async () => {
      const { host: h, parent } = await host([textResponse('seed reply')])
      await parent.run('seed conversation')
      h.models.register('forked', new ScriptedModel(['hang', textResponse('forked answer')]))
      const waiting = streaming(h, 1)
      const fork = await h.fork.start({ prompt: 'forked task', parent, signal: signal(), agentOptions: { provider: 'forked' } })
      await waiting
      h.models.register('crash', new ScriptedModel([toolCallResponse('c1', 'exit', { code: 7 })]))
      const crasher = await h.spawn.start({ prompt: 'crash', parent, signal: signal(), agentOptions: { provider: 'crash' } })
      await crasher.result
      const result = await fork.result
      expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'forked answer' }] })
      const mirror = h.agents.get(fork.id)!.session
      const seedLength = mirror.header.seedLength!
      expect(seedLength).toBeGreaterThan(0)
      expect(contiguous(mirror.events)).toBe(true)
      // The parent's turn in the seed, and the child's one turn: the move began none.
      expect(mirror.events.filter((event) => event.type === 'turn/start')).toHaveLength(2)
      expect(moved(mirror.events.slice(seedLength))).toHaveLength(1)
      await Promise.all([fork.dispose(), crasher.dispose()])
    })
  })
}
