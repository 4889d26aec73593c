/**
 * The tickwire wire format (`crates/wire`, `docs/PROTOCOL.md` "Wire encoding"): bit-packed,
 * bounded fields with no tags or padding, held byte for byte to the Rust golden vectors.
 *
 * | export | role |
 * |---|---|
 * | {@link BitWriter}, {@link BitReader} | write and read primitives bit by bit |
 * | {@link Quantize} | a float grid: `min`, `max`, `resolution` |
 * | {@link Codec} and its combinators | a message's layout, like `#[derive(Encode, Decode)]` |
 * | {@link DecodeError}, {@link EncodeError} | what went wrong, with a `kind` |
 */
export * from "./codec.js";
export { DecodeError, EncodeError, type DecodeErrorKind, type EncodeErrorKind } from "./errors.js";
export { Quantize } from "./quantize.js";
export { BitReader } from "./reader.js";
export { bitsForSpan } from "./span.js";
export { BitWriter, type BitWriterOptions } from "./writer.js";
