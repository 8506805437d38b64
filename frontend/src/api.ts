// The server's JSON endpoints (docs/ui.md): views, brush tallies, details pages.

export type Label = string | number | boolean | null;

export interface ViewInfo {
  id: string;
  name: string;
  source: string;
  keys: string[];
  kind: "bar" | "heat";
  labels: Label[][];
  count: number[];
  measure: string | null;
  sum?: number[];
  entry: string | null; // views of one entry (a group-by over a join) share their groups
}

export interface Tally {
  count: number[];
  sum?: number[];
}

export interface BrushResult {
  view: string;
  groups: number[];
  rows: number;
  views: Record<string, Tally>;
  server_ms: number;
}

export interface RowsPage {
  total: number;
  offset: number;
  columns: string[];
  rows: Label[][];
}

const TOKEN = "ember-token";

/** The API's token: `ember ui` prints the page's address with `?token=...`; the page
 * keeps it for the tab (sessionStorage, so a reload works) and drops it from the
 * address bar (and so from the history). Null when the server runs with --no-token. */
function readToken(): string | null {
  const url = new URL(window.location.href);
  const given = url.searchParams.get("token");
  if (given !== null) {
    sessionStorage.setItem(TOKEN, given);
    url.searchParams.delete("token");
    window.history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem(TOKEN);
}

const token = readToken();

/** An error answer of the API, with its status (401: no or a wrong token). */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

async function call<T>(url: string, body?: object): Promise<T> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(url, {
    method: body === undefined ? "GET" : "POST",
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(data.error ?? response.statusText, response.status);
  return data as T;
}

const post = <T>(url: string, body: object) => call<T>(url, body);

/** An entry, or one source of it, the page does not show, and why. */
export interface LeftOut {
  name: string;
  why: string;
}

export interface Views {
  views: ViewInfo[];
  left_out: LeftOut[];
  can_add: boolean;
}

export const views = () => call<Views>("/api/views");

/** Captures a new view over the views.toml's table (seconds to minutes: a Spark job). */
export const addView = (name: string, group_by: string[], sum: string | null) =>
  post<ViewInfo>("/api/views", { name, group_by, sum });

export const brush = (view: string, groups: number[]) => post<BrushResult>("/api/brush", { view, groups });

export const rows = (view: string, groups: number[], offset: number, limit: number) =>
  post<RowsPage>("/api/rows", { view, groups, offset, limit });
