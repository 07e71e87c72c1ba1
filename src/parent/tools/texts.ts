/**
 * What the model reads of the subagent and send_message tools: descriptions, argument help and
 * the continuable mode's system prompt section (the seed's guidance: start independent work
 * together, keep working while it runs, collect from the notices, wait only when the next action
 * depends on the result). Kept together so the wording of one tool agrees with the other's.
 */
const NOTICE = 'a notice "subagent <id> finished (<reason>)" with its final answer arrives in this conversation'

export const SUBAGENT_TOOL_TEXTS = {
  spawnPrompt: 'The complete task for the subagent. It starts with no memory of this conversation: include every fact, path and constraint it needs.',
  forkPrompt: 'The task for the forked subagent. It already sees this conversation up to your last completed turn, so say what to do, not what it already knows.',
  oneShotSpawn: 'Delegate a self-contained task to a fresh subagent. It starts with no memory of this conversation, works with its own tools, and returns only its final answer.',
  oneShotFork: 'Delegate a task to a forked subagent that starts from a copy of this conversation. It works with its own tools and returns only its final answer.',
  oneShotBackground: 'Run in the background (default false): you get a job id at once; collect the result with job_output, stop it with job_kill.',
  continuableSpawn: `Delegate a self-contained task to a fresh subagent. It starts with no memory of this conversation and works with its own tools. By default it runs in the background: you get its id at once, and when it is done ${NOTICE}. It keeps its context: send_message gives it more work.`,
  continuableFork: `Delegate a task to a forked subagent that starts from a copy of this conversation and works with its own tools. By default it runs in the background: you get its id at once, and when it is done ${NOTICE}. It keeps its context: send_message gives it more work.`,
  continuableBackground: `Run in the background (default true): you get the subagent's id at once and keep working; when it is done ${NOTICE}. Set false only when your next action depends on the result: you then wait here for its final answer.`,
  /** The `tool:<name>` system prompt section of a continuable instance that can run in the background. */
  continuableGuidance: (toolName: string) =>
    [
      `Delegating with ${toolName}: subagents run in the background by default.`,
      `- Start independent tasks together, in one response, so they run at the same time; then keep working on whatever does not depend on them.`,
      `- Do not wait or poll: when a subagent is done, ${NOTICE}. Collect results from those notices.`,
      `- A subagent keeps its context after it finishes: give it follow-up work with send_message { subagent_id, message }; its next answer arrives the same way.`,
      `- Use run_in_background: false only when your very next action depends on the result.`,
    ].join('\n'),
  sendMessage: 'Sends more work to a subagent you started in the background (its id came back when you started it). It works on it with the context of its earlier work; when it is done, a notice "subagent <id> finished (<reason>)" with its answer arrives in this conversation.',
  sendMessageId: 'The id the subagent tool returned when you started the subagent.',
  sendMessageText: 'The message for the subagent: the next task, or what to change in its last answer.',
} as const
