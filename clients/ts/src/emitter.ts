/** Typed listeners: `E` maps each event name to its listeners' arguments. */
export class Emitter<E extends { [K in keyof E]: unknown[] }> {
  private readonly listeners: { [K in keyof E]?: Set<(...args: E[K]) => void> } = {};

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof E>(event: K, listener: (...args: E[K]) => void): () => void {
    const set = (this.listeners[event] ??= new Set());
    set.add(listener);
    return () => set.delete(listener);
  }

  /** Calls every listener of `event`, in the order added. */
  emit<K extends keyof E>(event: K, ...args: E[K]): void {
    for (const listener of this.listeners[event] ?? []) {
      listener(...args);
    }
  }
}
