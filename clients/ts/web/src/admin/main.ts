// The admin page at /admin: the admin token, then the server's figures, rooms and players,
// refreshed every second, with live plots and the operator's actions (kick, broadcast, drain,
// and room lock/unlock/dispose where the server has them). Everything shown comes from
// `/api/admin/*`; player names and room labels come from the network, so they only ever go
// into the page as text.
import { AdminApi, ApiError, type Player, Refused, type ReplicationKind, type Room, type Stats } from "./api.js";
import { Series, drawPlot, formatNumber } from "./plot.js";

const TOKEN_KEY = "tickwire-admin-token";
const REFRESH_MS = 1000;
/** Shortest time between two readings a rate is taken from (the refresh's period, less jitter). */
const MIN_RATE_INTERVAL_MS = 900;

function $<T extends HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (element === null) {
    throw new Error(`#${id} is missing from admin/index.html`);
  }
  return element as T;
}

function cell(text: string, className?: string): HTMLTableCellElement {
  const td = document.createElement("td");
  td.textContent = text;
  if (className !== undefined) td.className = className;
  return td;
}

function button(label: string, action: string, className?: string): HTMLButtonElement {
  const element = document.createElement("button");
  element.textContent = label;
  element.dataset.action = action;
  if (className !== undefined) element.className = className;
  return element;
}

const ms = (value: number | null): string => (value === null ? "–" : value.toFixed(2));

/**
 * A room's byte rates, from its counters two readings at least a second apart: the shards
 * republish their views every 250 ms, so two readings closer than that (a refresh right after
 * an action) can see the same counters and would read as silence.
 */
class RoomTraffic {
  readonly bytesIn = new Series();
  readonly bytesOut = new Series();
  private last: { at: number; bytesIn: number; bytesOut: number } | null = null;
  private rates: { in: number; out: number } | null = null;

  /** Takes a reading; the rates as of the newest pair far enough apart, or null before one. */
  update(now: number, room: Room): { in: number; out: number } | null {
    const last = this.last;
    if (last !== null && now - last.at < MIN_RATE_INTERVAL_MS) return this.rates;
    this.last = { at: now, bytesIn: room.bytes_in, bytesOut: room.bytes_out };
    if (last === null) return null;
    const seconds = (now - last.at) / 1000;
    this.rates = { in: (room.bytes_in - last.bytesIn) / seconds, out: (room.bytes_out - last.bytesOut) / seconds };
    this.bytesIn.push(this.rates.in);
    this.bytesOut.push(this.rates.out);
    return this.rates;
  }
}

/** `mode=ranked region=eu`, the metadata as its tooltip. */
function labelCell(room: Room): HTMLTableCellElement {
  const pairs = Object.entries(room.label ?? {}).map(([key, value]) => `${key}=${value}`);
  const td = cell(pairs.join(" "), "label");
  if (room.metadata !== undefined && room.metadata !== "") td.title = room.metadata;
  return td;
}

class AdminPage {
  private api: AdminApi | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;
  private selectedRoom: number | null = null;
  private readonly tickP99 = new Series();
  private readonly bytesIn = new Series();
  private readonly bytesOut = new Series();
  private readonly playerCount = new Series();
  /** Each room's bytes/s in and out over the window, and its last counters; rooms gone are forgotten. */
  private readonly roomTraffic = new Map<number, RoomTraffic>();
  /** Each replicated field's last reading (kind/entity/field): its bytes and the rate taken from it. */
  private readonly replicationLast = new Map<string, { at: number; bytes: number; rate: number | null }>();

  constructor() {
    $<HTMLFormElement>("login").addEventListener("submit", (event) => {
      event.preventDefault();
      void this.logIn($<HTMLInputElement>("token").value.trim());
    });
    $("logout").addEventListener("click", () => this.logOut(""));
    $<HTMLFormElement>("say").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = $<HTMLInputElement>("say-text");
      const text = input.value.trim();
      if (text !== "") {
        void this.act(`broadcast "${text}"`, (api) => api.say(text)).then((done) => {
          if (done) input.value = "";
        });
      }
    });
    $("drain").addEventListener("click", () => {
      if (confirm("Drain: stop taking new players? Rooms in progress finish.")) {
        void this.act("drain", (api) => api.drain());
      }
    });
    $("rooms").querySelector("tbody")!.addEventListener("click", (event) => this.onRoomClick(event));
    $("members").querySelector("tbody")!.addEventListener("click", (event) => this.onMemberClick(event));
    const saved = sessionStorage.getItem(TOKEN_KEY);
    if (saved !== null) {
      void this.logIn(saved);
    }
  }

  private async logIn(token: string): Promise<void> {
    const error = $("login-error");
    if (token === "") {
      error.textContent = "enter the admin token";
      return;
    }
    const api = new AdminApi(token);
    try {
      await api.stats();
    } catch (failure) {
      error.textContent = failure instanceof Refused ? `refused: ${failure.message}` : `cannot reach the server: ${String(failure)}`;
      sessionStorage.removeItem(TOKEN_KEY);
      return;
    }
    error.textContent = "";
    sessionStorage.setItem(TOKEN_KEY, token);
    this.api = api;
    $("login").hidden = true;
    $("console").hidden = false;
    $("logout").hidden = false;
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), REFRESH_MS);
  }

  private logOut(why: string): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.api = null;
    sessionStorage.removeItem(TOKEN_KEY);
    $("console").hidden = true;
    $("logout").hidden = true;
    $("phase").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = why;
  }

  private async refresh(): Promise<void> {
    const api = this.api;
    if (api === null) return;
    try {
      const [stats, rooms, players, replication] = await Promise.all([
        api.stats(),
        api.rooms(),
        api.players(),
        api.replication().catch(() => ({ kinds: [] })), // a server without replicated rooms' route
      ]);
      this.showStats(stats);
      this.showRooms(rooms);
      this.showMembers(players);
      this.showReplication(replication.kinds);
    } catch (failure) {
      this.onFailure(failure);
    }
  }

  private onFailure(failure: unknown): void {
    if (failure instanceof Refused) {
      this.logOut(`refused: ${failure.message}`);
    } else {
      this.notice(`the server did not answer: ${failure instanceof Error ? failure.message : String(failure)}`, true);
    }
  }

  /** Runs an operator action, says how it went, refreshes; true when it was done. */
  private async act(what: string, action: (api: AdminApi) => Promise<unknown>): Promise<boolean> {
    const api = this.api;
    if (api === null) return false;
    try {
      await action(api);
      this.notice(`done: ${what}`, false);
      await this.refresh();
      return true;
    } catch (failure) {
      if (failure instanceof ApiError && failure.message === "HTTP 404") {
        // No JSON error: the route itself is missing, not the room.
        this.notice(`${what}: this server has no such operation`, true);
      } else if (failure instanceof ApiError) {
        this.notice(`${what} failed: ${failure.message}`, true);
      } else {
        this.onFailure(failure);
      }
      return false;
    }
  }

  private notice(text: string, error: boolean): void {
    const notice = $("notice");
    notice.textContent = text;
    notice.classList.toggle("error", error);
  }

  private showStats(stats: Stats): void {
    const phase = $("phase");
    phase.hidden = false;
    phase.textContent = stats.phase;
    phase.classList.toggle("warn", stats.phase !== "running");
    const { udp, ws, webtransport } = stats.players;
    $("players-total").textContent = String(udp + ws + webtransport);
    $("players-split").textContent = `udp ${udp} · ws ${ws} · wt ${webtransport}`;
    $("rooms-total").textContent = String(stats.rooms);
    $("tick").textContent = `${stats.tick_p50_ms.toFixed(2)} / ${stats.tick_p99_ms.toFixed(2)}`;
    $("traffic").textContent = `${formatNumber(stats.bytes_in_per_second)} / ${formatNumber(stats.bytes_out_per_second)}`;
    $("packets").textContent = `packets/s ${formatNumber(stats.packets_in_per_second)} / ${formatNumber(stats.packets_out_per_second)}`;
    $("drops").textContent = String(stats.queue_drops);
    this.tickP99.push(stats.tick_p99_ms);
    this.bytesIn.push(stats.bytes_in_per_second);
    this.bytesOut.push(stats.bytes_out_per_second);
    this.playerCount.push(udp + ws + webtransport);
    drawPlot($<HTMLCanvasElement>("plot-tick"), [{ series: this.tickP99, color: "#4fd1c5" }]);
    drawPlot($<HTMLCanvasElement>("plot-bytes"), [
      { series: this.bytesIn, color: "#63b3ed" },
      { series: this.bytesOut, color: "#f6ad55" },
    ]);
    drawPlot($<HTMLCanvasElement>("plot-players"), [{ series: this.playerCount, color: "#b794f4" }]);
  }

  /** What each room kind's state costs: bytes/s by entity kind and field, from two readings. */
  private showReplication(kinds: ReplicationKind[]): void {
    const now = performance.now();
    const rows: HTMLTableRowElement[] = [];
    for (const { kind, rows: fields, bytes: total } of kinds) {
      for (const { entity, field, bytes } of fields) {
        const key = `${kind}/${entity}/${field}`;
        const last = this.replicationLast.get(key);
        if (last === undefined || now - last.at >= MIN_RATE_INTERVAL_MS) {
          const rate = last === undefined ? null : ((bytes - last.bytes) * 1000) / (now - last.at);
          this.replicationLast.set(key, { at: now, bytes, rate: rate ?? last?.rate ?? null });
        }
        const rate = this.replicationLast.get(key)?.rate ?? null;
        const row = document.createElement("tr");
        row.append(
          cell(kind),
          cell(entity),
          cell(field),
          cell(rate === null ? "–" : formatNumber(rate), "bytes"),
          cell(formatNumber(bytes), "bytes"),
          cell(total > 0 ? `${((100 * bytes) / total).toFixed(1)}%` : "–"),
        );
        rows.push(row);
      }
    }
    $("replication-section").hidden = rows.length === 0;
    $("replication").querySelector("tbody")!.replaceChildren(...rows);
  }

  private showRooms(rooms: Room[]): void {
    const body = $("rooms").querySelector("tbody")!;
    const rows: HTMLTableRowElement[] = [];
    const seen = new Set<number>();
    const now = performance.now();
    for (const room of rooms) {
      seen.add(room.id);
      let traffic = this.roomTraffic.get(room.id);
      if (traffic === undefined) {
        traffic = new RoomTraffic();
        this.roomTraffic.set(room.id, traffic);
      }
      const rates = traffic.update(now, room);
      const row = document.createElement("tr");
      row.dataset.room = String(room.id);
      row.classList.toggle("selected", room.id === this.selectedRoom);
      row.append(
        cell(String(room.id)),
        cell(room.kind),
        labelCell(room),
        cell(`${room.players} / ${room.capacity}${room.locked === true ? " 🔒" : ""}`, "players"),
        cell(`${ms(room.tick_p50_ms)} / ${ms(room.tick_p99_ms)}`, "ticks"),
        cell(rates === null ? "–" : `${formatNumber(rates.in)} / ${formatNumber(rates.out)}`, "bytes"),
      );
      const plot = document.createElement("canvas");
      plot.width = 120;
      plot.height = 24;
      drawPlot(plot, [
        { series: traffic.bytesIn, color: "#63b3ed" },
        { series: traffic.bytesOut, color: "#f6ad55" },
      ]);
      const plotCell = document.createElement("td");
      plotCell.append(plot);
      const actions = document.createElement("td");
      actions.className = "actions";
      actions.append(
        button("members", "members"),
        room.locked === true ? button("unlock", "unlock") : button("lock", "lock"),
        button("dispose", "dispose", "danger"),
      );
      row.append(plotCell, actions);
      rows.push(row);
    }
    for (const id of this.roomTraffic.keys()) {
      if (!seen.has(id)) this.roomTraffic.delete(id);
    }
    body.replaceChildren(...rows);
    if (this.selectedRoom !== null && !seen.has(this.selectedRoom)) {
      this.selectedRoom = null;
    }
  }

  private showMembers(players: Player[]): void {
    const section = $("members-section");
    if (this.selectedRoom === null) {
      section.hidden = true;
      return;
    }
    section.hidden = false;
    $("members-room").textContent = String(this.selectedRoom);
    const rows = players
      .filter((player) => player.room === this.selectedRoom)
      .map((player) => {
        const row = document.createElement("tr");
        row.dataset.player = String(player.id);
        const actions = document.createElement("td");
        actions.append(button("kick", "kick", "danger"));
        row.append(
          cell(String(player.id)),
          cell(player.name, "name"),
          cell(player.transport),
          cell(player.rtt_ms === null ? "–" : player.rtt_ms.toFixed(1)),
          cell(player.loss === null ? "–" : `${(player.loss * 100).toFixed(1)} %`),
          actions,
        );
        return row;
      });
    $("members").querySelector("tbody")!.replaceChildren(...rows);
  }

  private onRoomClick(event: Event): void {
    const target = event.target as HTMLElement;
    const action = target.dataset.action;
    const room = Number(target.closest("tr")?.dataset.room);
    if (action === undefined || !Number.isSafeInteger(room)) return;
    if (action === "members") {
      this.selectedRoom = room;
      void this.refresh();
    } else if (action === "lock" || action === "unlock" || action === "dispose") {
      if (action !== "dispose" || confirm(`Dispose room ${room}? Its players are sent away.`)) {
        void this.act(`room ${room}/${action}`, (api) => api.roomAction(room, action));
      }
    }
  }

  private onMemberClick(event: Event): void {
    const target = event.target as HTMLElement;
    const player = Number(target.closest("tr")?.dataset.player);
    if (target.dataset.action === "kick" && Number.isSafeInteger(player)) {
      void this.act(`kick player ${player}`, (api) => api.kick(player));
    }
  }
}

new AdminPage();
