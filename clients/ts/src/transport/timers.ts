/** Where the SDK gets time and timers, so tests can drive it with a virtual clock. */
export interface Clock {
  /** Milliseconds on a monotonic clock (`performance.now()`). */
  now(): number;
  /** Calls `callback` after `ms` milliseconds; returns a handle for {@link cancel}. */
  schedule(callback: () => void, ms: number): unknown;
  /** Cancels a scheduled callback that has not run. */
  cancel(handle: unknown): void;
}

/** The browser's (or Node's) real clock. */
export const systemClock: Clock = {
  now: () => globalThis.performance.now(),
  schedule: (callback, ms) => globalThis.setTimeout(callback, ms),
  cancel: (handle) => globalThis.clearTimeout(handle as ReturnType<typeof setTimeout>),
};
