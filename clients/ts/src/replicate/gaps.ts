/**
 * Entity ids on the wire (`docs/REPLICATION.md`, "Snapshot"): each list's ids ascend and are
 * written as gaps from the one before (from 0 for the first): `0` + 4 bits below 16, `1 0` +
 * 8 bits (gap − 16) below 272, `1 1` + 16 bits otherwise, least significant bit first.
 */

import { DecodeError } from "../wire/errors.js";
import type { BitReader } from "../wire/reader.js";

/** The highest entity id; one past it is malformed. */
export const MAX_ENTITY_ID = 65_534;

/** Reads one list's ids, refusing one past the id space. */
export class GapReader {
  /** The smallest id the next one may be: one past the previous. */
  private next = 0;

  read(reader: BitReader): number {
    let gap: number;
    if (!reader.readBool()) {
      gap = reader.readBits(4);
    } else if (!reader.readBool()) {
      gap = reader.readBits(8) + 16;
    } else {
      gap = reader.readBits(16);
    }
    const id = this.next + gap;
    if (id > MAX_ENTITY_ID) {
      throw new DecodeError("out_of_range", `value ${id} outside range 0..=${MAX_ENTITY_ID}`);
    }
    this.next = id + 1;
    return id;
  }
}
