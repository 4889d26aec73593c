// The HUD in the DOM: net stats, scoreboard, kill feed, vitals, chat, banners and toasts.
import type { ArenaStatus, ChatLine, LocalPlayer, Score } from "@tickwire/arena";
import type { StatsReport, TransportKind } from "@tickwire/client";

import { cssColor, playerColor } from "./render.js";

function $(id: string): HTMLElement {
  const element = document.getElementById(id);
  if (element === null) {
    throw new Error(`#${id} is missing from index.html`);
  }
  return element;
}

/** What a disconnect or refusal means to a player, in words. */
export function describeReason(reason: string): string {
  switch (reason) {
    case "server_shutdown":
      return "The server is shutting down";
    case "unavailable":
      return "The server is not taking players (it is draining or restarting)";
    case "kicked":
      return "You were removed from the game";
    case "connected_elsewhere":
      return "You joined from another tab or window, so this one was closed";
    case "timed_out":
    case "server_silent":
      return "The connection stalled";
    case "connection_lost":
    case "network":
      return "The connection was lost";
    case "server_full":
    case "room_full":
      return "The game is full";
    case "slow_client":
      return "This browser fell too far behind the game";
    case "rate_limited":
      return "Too many attempts from this address";
    case "bad_request":
      return "The server refused that name";
    case "requested":
      return "You left the game";
    case "bad_proof":
      return "The server refused this page's login (reload it: the server may be newer)";
    case "transport_unavailable":
      return "WebTransport is not available here (open the page without ?transport=wt)";
    default:
      return `Disconnected (${reason})`;
  }
}

export class Hud {
  private readonly root = $("hud");
  private readonly netstats = $("netstats");
  private readonly scores = $("scores");
  private readonly killfeed = $("killfeed");
  private readonly healthFill = $("health-fill");
  private readonly healthText = $("health-text");
  private readonly tally = $("tally");
  private readonly chatLog = $("chat-log");
  private readonly death = $("death");
  private readonly banner = $("banner");
  private readonly bannerText = $("banner-text");
  private readonly bannerAction = $("banner-action") as HTMLButtonElement;
  private readonly toasts = $("toasts");
  private readonly notice = $("notice");
  private lastScores = "";
  private transportLine = "transport –";

  show(): void {
    this.root.hidden = false;
  }

  /** Which transport carries the game (shown with the net stats); `fallback` says why WebTransport was not. */
  transport(kind: TransportKind, fallback: string | null): void {
    this.transportLine =
      kind === "webtransport"
        ? "transport WebTransport (datagrams)"
        : `transport WebSocket${fallback === null ? "" : " (WebTransport failed)"}`;
    this.netstats.dataset.transport = kind;
  }

  stats(report: StatsReport, snapshotBytes: number, fps: number, renderDelayMs: number | null): void {
    const kb = (bytes: number): string => (bytes / 1024).toFixed(1);
    const rtt = report.rttMs === null ? "–" : `${report.rttMs.toFixed(0)} ms`;
    this.netstats.textContent =
      `${this.transportLine}\n` +
      `ping      ${rtt}\n` +
      `packets/s ${report.packetsInPerSecond.toFixed(0)} in · ${report.packetsOutPerSecond.toFixed(0)} out\n` +
      `kB/s      ${kb(report.bytesInPerSecond)} in · ${kb(report.bytesOutPerSecond)} out\n` +
      `snapshot  ${snapshotBytes} B\n` +
      `fps       ${fps.toFixed(0)}` +
      (renderDelayMs === null || renderDelayMs < 0 ? "" : ` · drawn ${renderDelayMs.toFixed(0)} ms back`);
  }

  scoreboard(scores: readonly Score[], nameOf: (id: number) => string, you: number | null): void {
    const key = JSON.stringify(scores) + you;
    if (key === this.lastScores) {
      return;
    }
    this.lastScores = key;
    this.scores.replaceChildren(
      ...scores.map((score) => {
        const row = document.createElement("tr");
        row.className = score.id === you ? "me" : "";
        const name = document.createElement("td");
        const swatch = document.createElement("span");
        swatch.className = "swatch";
        swatch.style.background = cssColor(playerColor(score.id));
        name.append(swatch, nameOf(score.id));
        row.append(name);
        for (const value of [score.kills, score.deaths, score.score]) {
          const cell = document.createElement("td");
          cell.textContent = String(value);
          row.append(cell);
        }
        return row;
      }),
    );
  }

  /** Forces the next scoreboard call to redraw (a name arrived). */
  namesChanged(): void {
    this.lastScores = "";
  }

  kill(killer: string, victim: string, involvesMe: boolean): void {
    const item = document.createElement("li");
    item.className = involvesMe ? "me" : "";
    item.textContent = `${killer} ✕ ${victim}`;
    this.killfeed.prepend(item);
    while (this.killfeed.children.length > 5) {
      this.killfeed.lastElementChild?.remove();
    }
    setTimeout(() => item.remove(), 6000);
  }

  vitals(me: LocalPlayer | null, maxHealth: number, tickRateHz: number, killer: string | null): void {
    if (me === null) {
      return;
    }
    const fraction = Math.max(0, Math.min(1, me.health / maxHealth));
    this.healthFill.style.width = `${fraction * 100}%`;
    this.healthText.textContent = `${me.health} / ${maxHealth}`;
    this.tally.textContent = `${me.kills} kills · ${me.deaths} deaths · ${me.score} points`;
    if (me.alive) {
      this.death.hidden = true;
    } else {
      this.death.hidden = false;
      const seconds = (me.respawnIn / tickRateHz).toFixed(1);
      this.death.innerHTML = "";
      this.death.append(killer === null ? "You died" : `Killed by ${killer}`);
      const small = document.createElement("small");
      small.textContent = `respawning in ${seconds} s`;
      this.death.append(small);
    }
  }

  chat(line: ChatLine): void {
    const item = document.createElement("li");
    const name = document.createElement("span");
    name.className = "name";
    name.style.color = cssColor(playerColor(line.from));
    name.textContent = `${line.name}:`;
    item.append(name, line.text);
    this.chatLog.append(item);
    while (this.chatLog.children.length > 12) {
      this.chatLog.firstElementChild?.remove();
    }
  }

  system(text: string): void {
    const item = document.createElement("li");
    item.className = "system";
    item.textContent = text;
    this.chatLog.append(item);
    while (this.chatLog.children.length > 12) {
      this.chatLog.firstElementChild?.remove();
    }
  }

  toast(text: string): void {
    const item = document.createElement("div");
    item.textContent = text;
    this.toasts.append(item);
    setTimeout(() => item.remove(), 5000);
  }

  /** A standing notice under the game (`null` hides it): news that does not stop play. */
  setNotice(text: string | null): void {
    this.notice.hidden = text === null;
    this.notice.textContent = text ?? "";
  }

  /** A banner over the game (`null` hides it); an action button when one is given. */
  setBanner(text: string | null, options: { error?: boolean; action?: { label: string; run: () => void } } = {}): void {
    if (text === null) {
      this.banner.hidden = true;
      return;
    }
    this.banner.hidden = false;
    this.banner.classList.toggle("error", options.error === true);
    this.bannerText.textContent = text;
    const action = options.action;
    this.bannerAction.hidden = action === undefined;
    if (action !== undefined) {
      this.bannerAction.textContent = action.label;
      this.bannerAction.onclick = action.run;
    }
  }

  /**
   * The banner for a status; `retryAt` is when the next attempt starts (ms, page clock).
   * `shutdown`: the server said it was shutting down, so failures to reach it since mean
   * a restart, not a broken network.
   */
  status(status: ArenaStatus, retryAt: number | null, now: number, rejoin: () => void, shutdown = false): void {
    switch (status.state) {
      case "playing":
        this.setBanner(null);
        return;
      case "connecting":
        this.setBanner(status.reconnect ? "Reconnecting… your seat is held" : "Joining the arena…");
        return;
      case "reconnecting": {
        const wait = retryAt === null ? 0 : Math.max(0, (retryAt - now) / 1000);
        const why = shutdown ? "The server shut down (a restart?)" : describeReason(status.reason);
        this.setBanner(`${why}. Reconnecting${wait > 0.05 ? ` in ${wait.toFixed(1)} s` : "…"}`);
        return;
      }
      case "ended":
        this.setBanner(`${shutdown ? "The server shut down" : describeReason(status.reason)}.`, {
          error: status.reason !== "requested",
          action: { label: "Rejoin", run: rejoin },
        });
        return;
    }
  }
}
