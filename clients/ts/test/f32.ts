const view = new DataView(new ArrayBuffer(4));

/** The `f32` whose IEEE 754 pattern is `bits`. */
export function f32FromBits(bits: number): number {
  view.setUint32(0, bits);
  return view.getFloat32(0);
}

/** The IEEE 754 pattern of `value` rounded to `f32`. */
export function f32Bits(value: number): number {
  view.setFloat32(0, value);
  return view.getUint32(0);
}
