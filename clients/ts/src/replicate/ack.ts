import { BitWriter } from "../wire/writer.js";

/**
 * The acknowledgement of the snapshot of `tick` (`docs/REPLICATION.md`, "Acknowledgement"):
 * `uint(32)`, 4 bytes, to send on the channel the room chooses after `Mirror.apply`.
 */
export function ackMessage(tick: number): Uint8Array {
  const writer = new BitWriter({ initialCapacity: 4 });
  writer.writeUint(tick, 32);
  return writer.finish();
}
