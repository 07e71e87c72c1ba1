/** The bench's agent module (module.ts): every runner imports it, a process transport's, a node's (--agent-module). */
export const BENCH_MODULE = new URL('./module.js', import.meta.url)
