/**
 * Encode and decode errors. Decoding network bytes fails only with a {@link DecodeError};
 * encoding a value outside its declared bounds only with an {@link EncodeError}. Passing a
 * layout that cannot exist (a 40-bit `readBits`, a grid with `min > max`) is a programming
 * error and throws a `RangeError`, as the Rust code refuses it at compile time.
 */

/** Why bytes were refused; the names are the golden vectors' (`docs/PROTOCOL.md`, "Decode errors"). */
export type DecodeErrorKind =
  | "truncated"
  | "out_of_range"
  | "too_long"
  | "invalid_utf8"
  | "invalid_varint"
  | "non_zero_padding"
  | "trailing_bytes";

/** Why a value could not be encoded. */
export type EncodeErrorKind =
  /** An integer outside its declared range (or not an integer at all). */
  | "out_of_range"
  /** A float outside its quantization range, or NaN or infinite. */
  | "float_out_of_range"
  /** A string, byte array or sequence longer than its declared maximum. */
  | "too_long"
  /** A writer given a byte limit ran past it. */
  | "buffer_full";

/** Bytes that are not a valid encoding; `kind` says which rule they broke. */
export class DecodeError extends Error {
  override readonly name = "DecodeError";
  /** Which rule the input broke. */
  readonly kind: DecodeErrorKind;

  constructor(kind: DecodeErrorKind, message: string) {
    super(message);
    this.kind = kind;
  }
}

/** A value that does not fit the layout it was written with. */
export class EncodeError extends Error {
  override readonly name = "EncodeError";
  /** Which bound the value broke. */
  readonly kind: EncodeErrorKind;

  constructor(kind: EncodeErrorKind, message: string) {
    super(message);
    this.kind = kind;
  }
}

/** Throws a `RangeError` for a layout parameter no message type can declare. */
export function checkLayout(ok: boolean, message: string): void {
  if (!ok) {
    throw new RangeError(message);
  }
}

/**
 * Throws a `RangeError` for an integer-like name (`"0"`, `"12"`): JavaScript enumerates such
 * keys first whatever their position, so a layout keyed by them would reorder the wire.
 */
export function checkKeyName(what: string, name: string): void {
  checkLayout(!/^(0|[1-9]\d*)$/.test(name), `${what} ${name} is integer-like`);
}
