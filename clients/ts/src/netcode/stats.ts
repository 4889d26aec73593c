/**
 * Connection statistics: round-trip time and packets and bytes per second each way.
 *
 * Over WebSocket the browser hides the server's pings, so RTT comes from input
 * acknowledgements: the time from sending an input to the first server state whose
 * `last_input_sequence` covers it ({@link ConnectionStats.handleRttSample}, fed by
 * {@link Prediction}). That includes up to a tick of waiting on the server and the snapshot
 * interval, so it reads slightly above the network round trip.
 */

/** A snapshot of the figures. */
export interface StatsReport {
  /** Smoothed round-trip time, ms (RFC 6298), or `null` before the first sample. */
  rttMs: number | null;
  /** RTT variation, ms. */
  rttVarianceMs: number | null;
  /** Smallest RTT seen, ms. */
  minRttMs: number | null;
  /** Messages per second received, over the last window. */
  packetsInPerSecond: number;
  /** Messages per second sent. */
  packetsOutPerSecond: number;
  /** Bytes per second received (WebSocket payloads, channel byte included). */
  bytesInPerSecond: number;
  /** Bytes per second sent. */
  bytesOutPerSecond: number;
  /** Totals since creation. */
  packetsIn: number;
  packetsOut: number;
  bytesIn: number;
  bytesOut: number;
}

/** Counts what a connection sends and receives; time comes in as an argument. */
export class ConnectionStats {
  private readonly windowMs: number;
  private readonly events: { at: number; incoming: boolean; bytes: number }[] = [];
  private srtt: number | null = null;
  private rttvar: number | null = null;
  private minRtt: number | null = null;
  private totals = { packetsIn: 0, packetsOut: 0, bytesIn: 0, bytesOut: 0 };

  /** Rates are averaged over the last `windowMs` milliseconds (default 1000). */
  constructor(windowMs = 1000) {
    this.windowMs = windowMs;
  }

  /** A message of `bytes` came in at `now` (ms). */
  handleReceived(now: number, bytes: number): void {
    this.totals.packetsIn += 1;
    this.totals.bytesIn += bytes;
    this.push(now, true, bytes);
  }

  /** A message of `bytes` went out at `now` (ms). */
  handleSent(now: number, bytes: number): void {
    this.totals.packetsOut += 1;
    this.totals.bytesOut += bytes;
    this.push(now, false, bytes);
  }

  /** One round-trip measurement, ms. */
  handleRttSample(rttMs: number): void {
    if (!(rttMs >= 0) || !Number.isFinite(rttMs)) {
      return;
    }
    this.minRtt = this.minRtt === null ? rttMs : Math.min(this.minRtt, rttMs);
    if (this.srtt === null || this.rttvar === null) {
      this.srtt = rttMs;
      this.rttvar = rttMs / 2;
      return;
    }
    this.rttvar = 0.75 * this.rttvar + 0.25 * Math.abs(this.srtt - rttMs);
    this.srtt = 0.875 * this.srtt + 0.125 * rttMs;
  }

  /** The figures as of `now` (ms). */
  report(now: number): StatsReport {
    this.expire(now);
    let packetsIn = 0;
    let packetsOut = 0;
    let bytesIn = 0;
    let bytesOut = 0;
    for (const event of this.events) {
      if (event.incoming) {
        packetsIn += 1;
        bytesIn += event.bytes;
      } else {
        packetsOut += 1;
        bytesOut += event.bytes;
      }
    }
    const perSecond = 1000 / this.windowMs;
    return {
      rttMs: this.srtt,
      rttVarianceMs: this.rttvar,
      minRttMs: this.minRtt,
      packetsInPerSecond: packetsIn * perSecond,
      packetsOutPerSecond: packetsOut * perSecond,
      bytesInPerSecond: bytesIn * perSecond,
      bytesOutPerSecond: bytesOut * perSecond,
      ...this.totals,
    };
  }

  private push(now: number, incoming: boolean, bytes: number): void {
    this.events.push({ at: now, incoming, bytes });
    // Bounded: anything older than the window goes on every push.
    if (this.events.length > 64) {
      this.expire(now);
    }
  }

  private expire(now: number): void {
    let drop = 0;
    while (drop < this.events.length && this.events[drop]!.at <= now - this.windowMs) {
      drop++;
    }
    if (drop > 0) {
      this.events.splice(0, drop);
    }
  }
}
