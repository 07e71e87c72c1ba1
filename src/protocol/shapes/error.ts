/** Errors as plain data, so they cross any boundary with their name, message and code. */
import { closed, string, type Wire } from '../schema.js'
import { messageOf } from '../errors.js'

export const WireError = closed({ name: string, message: string, code: string }, ['code'])
export type WireError = Wire<typeof WireError>

export function toWireError(error: unknown): WireError {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code
    return typeof code === 'string' ? { name: error.name, message: error.message, code } : { name: error.name, message: error.message }
  }
  return { name: 'Error', message: messageOf(error) }
}

export function fromWireError(wire: WireError): Error {
  const error = new Error(wire.message)
  error.name = wire.name
  if (wire.code !== undefined) (error as Error & { code?: string }).code = wire.code
  return error
}
