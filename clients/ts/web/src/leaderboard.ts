// The leaderboard page: GET /api/leaderboard from the persistence API, when the server has it.

interface Entry {
  rank: number;
  name: string;
  stats: { kills: number; deaths: number; score: number; matches: number };
}

function isEntry(value: unknown): value is Entry {
  if (typeof value !== "object" || value === null) return false;
  const entry = value as Record<string, unknown>;
  const stats = entry.stats as Record<string, unknown> | undefined;
  return (
    typeof entry.rank === "number" &&
    typeof entry.name === "string" &&
    typeof stats === "object" &&
    stats !== null &&
    ["kills", "deaths", "score", "matches"].every((k) => typeof stats[k] === "number")
  );
}

/** Fills `host` with the top players, or a sentence saying why there are none. */
export async function showLeaderboard(host: HTMLElement): Promise<void> {
  host.textContent = "Loading…";
  let response: Response;
  try {
    response = await fetch("/api/leaderboard?limit=20");
  } catch {
    host.textContent = "The server cannot be reached.";
    return;
  }
  if (response.status === 404) {
    host.textContent = "This server keeps no leaderboard (persistence is off).";
    return;
  }
  if (!response.ok) {
    host.textContent = `The leaderboard is unavailable (${response.status}).`;
    return;
  }
  const body: unknown = await response.json().catch(() => null);
  if (!Array.isArray(body)) {
    host.textContent = "The leaderboard answer was not understood.";
    return;
  }
  const entries = body.filter(isEntry);
  if (entries.length === 0) {
    host.textContent = "No games finished yet: play one!";
    return;
  }
  const table = document.createElement("table");
  const head = document.createElement("tr");
  for (const title of ["#", "player", "score", "kills", "deaths", "games"]) {
    const th = document.createElement("th");
    th.textContent = title;
    head.append(th);
  }
  table.append(head);
  for (const entry of entries) {
    const row = document.createElement("tr");
    for (const value of [entry.rank, entry.name || "?", entry.stats.score, entry.stats.kills, entry.stats.deaths, entry.stats.matches]) {
      const td = document.createElement("td");
      td.textContent = String(value);
      row.append(td);
    }
    table.append(row);
  }
  host.replaceChildren(table);
}
