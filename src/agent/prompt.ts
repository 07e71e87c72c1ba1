/**
 * System prompt sections, rendered in ascending order. Registering a section under an id that is
 * already present shadows it for this agent (a child persona over the deployment persona).
 */
export interface PromptSection {
  id: string
  order: number
  text: string
}

/** Well-known orders: identity first, then scope, then the tool-guidance band (100-190). */
export const SECTION_ORDER = { persona: 10, delegationScope: 20, toolGuidance: 100, toolGuidanceEnd: 190 } as const

export class PromptSections {
  readonly #sections = new Map<string, PromptSection>()

  set(section: PromptSection): () => void {
    this.#sections.set(section.id, section)
    return () => {
      if (this.#sections.get(section.id) === section) this.#sections.delete(section.id)
    }
  }

  /** `extra`: sections of this request alone (the guidance of the tools it lists), after this agent's own of the same order. */
  render(extra: readonly PromptSection[] = []): string | undefined {
    if (this.#sections.size === 0 && extra.length === 0) return undefined
    return [...this.#sections.values(), ...extra.filter((section) => !this.#sections.has(section.id))]
      .sort((a, b) => a.order - b.order)
      .map((s) => s.text)
      .join('\n\n')
  }
}
