/** Where an {@link Emitter} reports a listener that threw: the event, and what it threw. */
export type ListenerErrorReport = (event: string, error: unknown) => void;

/**
 * Typed listeners: `E` maps each event name to its listeners' arguments.
 *
 * A listener that throws (a game's decoder meeting bytes it does not expect, say) never
 * reaches the caller of {@link emit}, which is the SDK's socket or timer code: the error is
 * counted, handed to `report` and the other listeners still run. Without a `report` it is
 * written to `console.error`, so it is never silent.
 */
export class Emitter<E extends { [K in keyof E]: unknown[] }> {
  private readonly listeners: { [K in keyof E]?: Set<(...args: E[K]) => void> } = {};
  private readonly report: ListenerErrorReport;
  private errors = 0;

  constructor(report?: ListenerErrorReport) {
    this.report = report ?? ((event, error) => console.error(`tickwire: a "${event}" listener threw`, error));
  }

  /** Listeners that threw, since the emitter was made. */
  get listenerErrors(): number {
    return this.errors;
  }

  /** How many listeners `event` has. */
  listenerCount<K extends keyof E>(event: K): number {
    return this.listeners[event]?.size ?? 0;
  }

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof E>(event: K, listener: (...args: E[K]) => void): () => void {
    const set = (this.listeners[event] ??= new Set());
    set.add(listener);
    return () => set.delete(listener);
  }

  /** Calls every listener of `event`, in the order added; none of them can throw through it. */
  emit<K extends keyof E>(event: K, ...args: E[K]): void {
    for (const listener of this.listeners[event] ?? []) {
      try {
        listener(...args);
      } catch (error) {
        this.errors += 1;
        try {
          this.report(String(event), error);
        } catch {
          // A report that throws too has nowhere left to go; the count keeps it.
        }
      }
    }
  }
}
