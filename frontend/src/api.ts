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

async function post<T>(url: string, body: object): Promise<T> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error ?? response.statusText);
  return data as T;
}

export interface Views {
  views: ViewInfo[];
  can_add: boolean;
}

export async function views(): Promise<Views> {
  const response = await fetch("/api/views");
  return (await response.json()) as Views;
}

/** Captures a new view over the views.toml's table (seconds to minutes: a Spark job). */
export const addView = (name: string, group_by: string[], sum: string | null) =>
  post<ViewInfo>("/api/views", { name, group_by, sum });

export const brush = (view: string, groups: number[]) => post<BrushResult>("/api/brush", { view, groups });

export const rows = (view: string, groups: number[], offset: number, limit: number) =>
  post<RowsPage>("/api/rows", { view, groups, offset, limit });
