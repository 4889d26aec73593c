/** Why a snapshot was refused: `Mirror.apply` throws this and nothing else for any bytes. */
export type MirrorErrorKind =
  /** The bytes are not a snapshot of this world's types. */
  | "malformed"
  /**
   * The snapshot is not newer than the newest applied (sequenced channels drop these; other
   * channels may deliver them late).
   */
  | "stale"
  /** It is a delta against a view the mirror does not hold: not acknowledged, drop it. */
  | "missingBaseline"
  /** It breaks the format's rules; the message names which. */
  | "invalid";

/** A snapshot the mirror did not apply; the mirror is as it was before. */
export class MirrorError extends Error {
  override readonly name = "MirrorError";
  /** Which rule the snapshot broke. */
  readonly kind: MirrorErrorKind;

  constructor(kind: MirrorErrorKind, message: string, options?: ErrorOptions) {
    super(message, options);
    this.kind = kind;
  }
}

/** A snapshot that breaks the format's rules: `what` it does. */
export function invalid(what: string): MirrorError {
  return new MirrorError("invalid", `invalid snapshot: ${what}`);
}
